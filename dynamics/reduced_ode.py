"""The reduced score–embedding (SEN) dynamics of Lu et al. (2021), Lemma 2, solved by diffrax.

Under Assumption 1 the non-topic words keep their initial scores and embeddings,
so only the topic words move: embeddings ``ν_t`` (``[T, d]``), scores
``s_t = qᵀκ_t`` (``[T]``, the query ``q`` is fixed) and, when it trains, the
classifier. Each training sentence ``χ_i`` holds one topic word ``t_i`` and the
rest enters only through two constants fixed at initialisation,

.. math::
   Z(χ∖t) = \\sum_{w∈χ∖t} e^{s_w}, \\qquad
   \\bar ν(χ∖t) = \\sum_{w∈χ∖t} ν_w e^{s_w} / Z(χ∖t),

so the context vector is ``ν̄(χ) = a ν_t + (1 - a) ν̄(χ∖t)`` with the topic
word's attention ``a = e^{s_t}/Z(χ) = sigmoid(s_t - log Z(χ∖t))``.

The paper writes the dynamics in ``v = ‖q‖ν`` with ``η = lr‖q‖``; the state here
is ``ν`` (so ``final_params`` are model parameters), which turns eqs (5)-(8) into

.. math::
   \\dot ν_t = -\\frac{\\mathrm{lr}}{|Ψ|} \\sum_{i∈Ψ_t} h_i\\, a_t(i)
   \\qquad \\text{(eqs 5, 7)}

   \\dot s_t = -\\frac{\\mathrm{lr}\\,\\|q\\|^2}{|Ψ|} \\sum_{i∈Ψ_t}
       a_t(i)\\, (ν_t - \\bar ν(χ_i))^T h_i
   \\qquad \\text{(eq 6, form="exact")}

   \\dot s_t = \\|q\\|^2 \\frac{(ν_t - ⟨\\bar ν(χ∖t)⟩_{Ψ_t})^T \\dot ν_t}
       {1 + e^{s_t} ⟨1/Z(χ∖t)⟩_{Ψ_t}}
   \\qquad \\text{(eq 8, form="lemma2")}

with ``h_i = ∇_{ν̄} l(χ_i, y_i)`` from the actual classifier (FC, TC or TL): in
closed form ``U δ_i`` for the linear ones (:func:`linear_velocity`) and in hidden
space for TL (:func:`relu_velocity`), both equal to autodiff of the classifier
(:func:`autodiff_velocity`), and the descent sign (the paper's eqs 1-8
omit it). A trainable
classifier follows ``dθ_c/dt = -lr ∇_{θ_c} L`` of the reduced model. Along
``form="lemma2"`` Theorem 1's

.. math:: Q_t = s_t + e^{s_t}⟨1/Z(χ∖t)⟩_{Ψ_t} - \\tfrac12 \\|q\\|^2 \\|ν_t - ⟨\\bar ν(χ∖t)⟩_{Ψ_t}\\|^2

is exactly conserved (eq 9: ``dQ_t/dt = \\dot s_t (1 + e^{s_t}⟨1/Z⟩) - ‖q‖²(ν_t - ⟨ν̄∖t⟩)ᵀ\\dot ν_t = 0``).
``form="exact"`` is the exact gradient flow of the model with the non-topic
words frozen; it honours frozen embeddings or keys.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
from typing import Any, Callable, Mapping, NamedTuple, Optional

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.ode import (ATOL, RTOL, check_adjoint, controller_for, failure_time,
                          make_solver, ode_stats, saved_times, stopped_lr)
from attndyn.dynamics.optimizers import group_flags
from attndyn.dynamics.trajectory import Trajectory, checked_record
from attndyn.models.channel_major import apply_classifier_channels, channel_mix, cross_entropy_channels
from attndyn.models.lu import word_scores
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["FORMS", "COMPILER_OPTIONS", "LINEAR_COMPILER_OPTIONS", "NonTopic", "ReducedState",
           "nontopic_constants", "reduced_velocity", "autodiff_velocity", "linear_velocity",
           "relu_velocity", "lemma2_score_velocity", "seed_velocity", "is_leading_ids",
           "full_params", "save_at", "reduced_trajectory", "check_reduced_config",
           "check_solve_inputs", "reduced_sen_ode"]

FORMS = ("lemma2", "exact")

# XLA options for compiling a sweep of reduced-ODE solves (pass to jax.jit or
# dynamics.run_sweep): LLVM at -O1. The program is a small vector field stepped a
# few hundred times, so full backend optimisation buys no run time and costs compile
# time (`python -m benchmarks.xla_options` times both ways).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}
# With a linear classifier (FC/TC: linear_velocity), also XLA:CPU's loop emitters instead of
# its MLIR fusion emitters (dynamics.xla_options drops the option where XLA lacks it): the
# program is mostly diffrax's step, controller and save logic, a few hundred small kernels,
# and the MLIR pipeline is most of their compile. Not for TL, whose long solves run slower
# with the loop emitters than the compile they save.
LINEAR_COMPILER_OPTIONS = {**COMPILER_OPTIONS, "xla_cpu_use_fusion_emitters": False}


class NonTopic(NamedTuple):
  """What the frozen rest of each sentence contributes (Assumption 1).

  Attributes:
    member: ``[n, T]`` one-hot: sentence ``i`` is in Ψ_t (dense, so gathers and
      sums over Ψ_t are small matmuls rather than scatters).
    log_z: ``[n]`` ``log Z(χ_i∖t_i)``.
    nubar: ``[d, n]`` ``ν̄(χ_i∖t_i)``, channel-major (sentence ``i`` is column ``i``).
    labels: ``[n]`` int class of each sentence.
    count: ``[T]`` ``|Ψ_t|``.
    mean_nubar: ``[T, d]`` ``⟨ν̄(χ∖t)⟩_{Ψ_t}`` (0 where Ψ_t is empty).
    mean_inv_z: ``[T]`` ``⟨1/Z(χ∖t)⟩_{Ψ_t}`` (0 where Ψ_t is empty).
    collective: the extended dynamics' co-occurrence constants (:class:`Collective`), or
      ``None`` for Lemma 2.
  """
  member: jax.Array
  log_z: jax.Array
  nubar: jax.Array
  labels: jax.Array
  count: jax.Array
  mean_nubar: jax.Array
  mean_inv_z: jax.Array
  collective: Optional["Collective"] = None


class Collective(NamedTuple):
  """How the non-topic words' common push reaches each sentence (the extended dynamics,
  docs/extended_reduced_dynamics.md), from the initial (frozen) non-topic scores.

  With ``W_iw = c_iw e^{s_w}/Z(χ_i∖t_i)`` (``c_iw`` the count of non-topic word ``w`` in
  sentence ``i``) the weight of ``w`` in ``ν̄(χ_i∖t_i)``:

  Attributes:
    share: ``[n, T]`` ``B_it = Σ_w W_iw C_wt``: how much of the push ``E_t`` that the
      sentences of Ψ_t give their words returns to sentence ``i``'s ``ν̄(χ_i∖t_i)``
      (its own words when ``i ∈ Ψ_t``, and the words it shares with Ψ_t's sentences).
    group_share: ``[T, T]`` ``A_tu = ⟨B_iu⟩_{i∈Ψ_t}`` (0 where Ψ_t is empty), so that
      ``⟨ν̄(χ∖t)⟩_{Ψ_t}`` moves by ``Σ_u A_tu E_u``.
    word_share: ``[V, T]`` ``C_wt = Σ_{i∈Ψ_t} W_iw``: non-topic word ``w``'s displacement is
      ``Δν_w = Σ_t C_wt E_t`` (zero rows for the topic words and for unused words).
  """
  share: jax.Array
  group_share: jax.Array
  word_share: jax.Array


class ReducedState(NamedTuple):
  """The ODE state.

  Attributes:
    nu: ``[T, d]`` topic-word embeddings ``ν_t``.
    s: ``[T]`` topic-word scores ``s_t = qᵀκ_t``.
    classifier: classifier parameters if they train, else ``None``.
    push: ``[T, d]`` the extended dynamics' collective variables ``E_t``, the push each
      sentence of Ψ_t has given its non-topic words so far (their ``Ψ_t`` mean); ``None``
      under Lemma 2 (non-topic words frozen).
  """
  nu: jax.Array
  s: jax.Array
  classifier: Optional[dict]
  push: Optional[jax.Array] = None


def nontopic_constants(params0: dict, batch: Batch, topic_word: jax.Array,
                       topic_words: jax.Array, *, extended: bool = False) -> NonTopic:
  """The Assumption-1 constants of every sentence and topic word, from ``params0``.

  Args:
    params0: initial model parameters.
    batch: training sentences ``[n, L]``; each holds its topic word once.
    topic_word: ``[n]`` the topic word (vocabulary id) of each sentence.
    topic_words: ``[T]`` vocabulary ids of the topic words.
    extended: also the extended dynamics' :class:`Collective` constants.
  """
  member = (topic_word[:, None] == topic_words[None, :]).astype(params0["embeddings"].dtype)
  rest = batch.mask & (batch.tokens != topic_word[:, None])
  scores = jnp.where(rest, word_scores(params0)[batch.tokens], -jnp.inf)
  log_z = jax.nn.logsumexp(scores, axis=1)
  weights = jnp.where(rest, jnp.exp(scores - log_z[:, None]), 0.0)
  nubar = jnp.einsum("nl,nld->dn", weights, params0["embeddings"][batch.tokens])
  count = member.sum(0)
  per = jnp.maximum(count, 1.0)
  collective = None
  if extended:
    # C_wt = Σ_{i∈Ψ_t} W_iw by scatter-add over the tokens (no [n, V] matrix), B_it = Σ_w W_iw C_wt
    # by gathering C's rows at each sentence's tokens.
    vocab = params0["embeddings"].shape[0]
    word_share = jnp.zeros((vocab, member.shape[1]), member.dtype).at[batch.tokens].add(
        weights[..., None] * member[:, None, :])
    share = jnp.einsum("nl,nlt->nt", weights, word_share[batch.tokens])
    collective = Collective(share=share, group_share=(member.T @ share) / per[:, None],
                            word_share=word_share)
  return NonTopic(
      member=member, log_z=log_z, nubar=nubar, labels=batch.labels, count=count,
      mean_nubar=(nubar @ member).T / per[:, None],
      mean_inv_z=(member.T @ jnp.exp(-log_z)) / per, collective=collective)


def reduced_velocity(state: ReducedState, c: NonTopic, classifier0: dict, lr, q_sq, *,
                     form: str, trainable: Mapping[str, bool]) -> ReducedState:
  """``d(state)/dt`` of eqs (5)-(8) (``form="exact"``: 5-6; ``"lemma2"``: 7-8).

  Args:
    state: current topic-word embeddings, scores and (trainable) classifier.
    c: the frozen non-topic constants.
    classifier0: the classifier parameters used when the classifier is fixed.
    lr: learning rate.
    q_sq: ``‖q‖²`` of the fixed query.
    form: ``"exact"`` or ``"lemma2"``.
    trainable: parameter group -> trains.

  FC/TC use :func:`linear_velocity` (class space), TL :func:`relu_velocity` (hidden
  space); each equals :func:`autodiff_velocity` to float rounding (tested).
  """
  classifier = classifier0 if state.classifier is None else state.classifier
  velocity = (linear_velocity if "U" in classifier else
              relu_velocity if "U1" in classifier else autodiff_velocity)
  return velocity(state, c, classifier, lr, q_sq, form=form, trainable=trainable)


def autodiff_velocity(state: ReducedState, c: NonTopic, classifier: dict, lr, q_sq, *,
                      form: str, trainable: Mapping[str, bool]) -> ReducedState:
  """:func:`reduced_velocity` for any classifier: ``h_i`` by autodiff of its channel-major form.

  ``classifier`` is the one in use (``state.classifier`` when it trains).
  """
  # Channel-major ([d, n]: the sentence axis last) so that, vmapped over seeds,
  # no small per-seed matrix product remains (models.channel_major).
  member_t = c.member.T                                               # [T, n]
  a = jax.nn.sigmoid(state.s @ member_t - c.log_z)                    # [n] e^{s_t}/Z(χ)
  nu_t = state.nu.T @ member_t                                        # [d, n]
  rest = c.nubar                                                      # [d, n] ν̄(χ∖t)
  if state.push is not None:                                          # + Σ_t B_it E_t
    rest = rest + state.push.T @ c.collective.share.T
  context = a * nu_t + (1.0 - a) * rest                               # [d, n] ν̄(χ)

  def loss(context, classifier):
    return cross_entropy_channels(apply_classifier_channels(classifier, context), c.labels)

  g_context, g_classifier = jax.grad(loss, argnums=(0, 1))(context, classifier)  # h_i / |Ψ|
  d_nu = -lr * ((a * g_context) @ c.member).T                                    # eq (5) / (7)
  d_push = _push_velocity(state, c, None, a, g_context, lr, trainable)
  if form == "lemma2":
    d_s = lemma2_score_velocity(state, c, d_nu, q_sq)                            # eq (8)
  else:
    d_s = -lr * q_sq * (
        (a * jnp.sum((nu_t - context) * g_context, axis=0)) @ c.member)           # eq (6)
    d_nu, d_s = _frozen_to_zero(d_nu, d_s, trainable)
  d_classifier = None
  if state.classifier is not None:
    d_classifier = jax.tree.map(lambda g: -lr * g, g_classifier)
  return ReducedState(d_nu, d_s, d_classifier, d_push)


def linear_velocity(state: ReducedState, c: NonTopic, classifier: dict, lr, q_sq, *,
                    form: str, trainable: Mapping[str, bool]) -> ReducedState:
  """:func:`reduced_velocity` for a linear classifier (FC/TC, logits ``Uᵀν̄``), in class space.

  With ``δ_i = (p_i − y_i)/n`` the gradient is ``h_i = U δ_i``, and
  ``ν̄(χ_i) = a_i ν_t + (1 − a_i) ν̄(χ_i∖t)``, so every per-sentence quantity is a
  ``J``-vector: ``logits_i = a_i Uᵀν_t + (1 − a_i) Uᵀν̄(χ_i∖t)``; eq (5)
  ``ν̇_t = −lr U Σ_{i∈Ψ_t} a_i δ_i``; eq (6)'s ``(ν_t − ν̄(χ_i))ᵀh_i =
  (1 − a_i)(Uᵀν_t − Uᵀν̄(χ_i∖t))ᵀδ_i``; ``∂L/∂U = Σ_t ν_t (Σ_{i∈Ψ_t} a_i δ_i)ᵀ +
  Σ_i (1 − a_i) ν̄(χ_i∖t) δ_iᵀ``. The ``[d, n]`` constants are read twice per
  evaluation and no ``[d, n]`` array is formed (the autodiff form builds
  several), which is most of a reduced solve's run time.
  """
  u = classifier["U"]                                                 # [d, J]
  a, topic_logits, rest_logits = _projected(state, c, u)              # Uᵀν_t, Uᵀν̄(χ∖t)
  delta = _residual(a * topic_logits + (1.0 - a) * rest_logits, c.labels)
  per_topic = (a * delta) @ c.member                                  # [J, T] Σ_{Ψ_t} a δ
  d_nu = -lr * (u @ per_topic).T                                      # eq (5) / (7)
  gap = jnp.sum((topic_logits - rest_logits) * delta, axis=0)         # [n]
  d_nu, d_s = _closed_form_scores(state, c, d_nu, a, gap, lr, q_sq, form=form,
                                  trainable=trainable)
  d_push = _push_velocity(state, c, u, a, delta, lr, trainable)
  d_classifier = None
  if state.classifier is not None:
    grad_u = state.nu.T @ per_topic.T + _rest_outer(state, c, (1.0 - a) * delta)
    d_classifier = {"U": -lr * grad_u}
  return ReducedState(d_nu, d_s, d_classifier, d_push)


def relu_velocity(state: ReducedState, c: NonTopic, classifier: dict, lr, q_sq, *,
                  form: str, trainable: Mapping[str, bool]) -> ReducedState:
  """:func:`reduced_velocity` for TL (logits ``U₂ᵀ ReLU(U₁ᵀν̄ + b₁) + b₂``), in hidden space.

  The same map as :func:`autodiff_velocity`, written out so that no ``[d, n]`` array is
  formed. A second copy because TL's solves are the long ones (its ReLU kinks floor the
  solver's steps, so a float64 solve at a tight tolerance takes tens of thousands of
  steps) and autodiff builds the contexts ``ν̄(χ_i)`` and their gradients, ``[d, n]``
  each, at every evaluation (``python -m benchmarks.tl_velocity`` times both; the tests
  hold them equal). With ``ν̄(χ_i) = a_i ν_t + (1 − a_i) ν̄(χ_i∖t)`` the pre-activations are
  ``p_i = a_i U₁ᵀν_t + (1 − a_i) U₁ᵀν̄(χ_i∖t) + b₁``; with the class probabilities ``π_i``,
  ``δ_i = (π_i − y_i)/n`` and
  ``g_i = 1[p_i > 0] ⊙ U₂δ_i`` the gradient is ``h_i = U₁ g_i``, so eq (5) is
  ``ν̇_t = −lr U₁ Σ_{i∈Ψ_t} a_i g_i``, eq (6)'s ``(ν_t − ν̄(χ_i))ᵀh_i =
  (1 − a_i)(U₁ᵀν_t − U₁ᵀν̄(χ_i∖t))ᵀg_i``, and ``∂L/∂U₁ = Σ_t ν_t (Σ_{i∈Ψ_t} a_i g_i)ᵀ +
  Σ_i (1 − a_i) ν̄(χ_i∖t) g_iᵀ``. At ``p_i = 0`` the ReLU's derivative is 0, as
  ``jax.nn.relu``'s is.
  """
  u1, b1, u2, b2 = (classifier[k] for k in ("U1", "b1", "U2", "b2"))
  a, topic_pre, rest_pre = _projected(state, c, u1)                   # U₁ᵀν_t, U₁ᵀν̄(χ∖t)
  pre = a * topic_pre + (1.0 - a) * rest_pre + b1[:, None]
  on = pre > 0
  hidden = jnp.where(on, pre, 0.0)
  delta = _residual(channel_mix(u2, hidden) + b2[:, None], c.labels)  # [J, n]
  g = jnp.where(on, channel_mix(u2.T, delta), 0.0)                    # [H, n]
  per_topic = (a * g) @ c.member                                      # [H, T] Σ_{Ψ_t} a g
  d_nu = -lr * (u1 @ per_topic).T                                     # eq (5) / (7)
  gap = jnp.sum((topic_pre - rest_pre) * g, axis=0)                   # [n]
  d_nu, d_s = _closed_form_scores(state, c, d_nu, a, gap, lr, q_sq, form=form,
                                  trainable=trainable)
  d_push = _push_velocity(state, c, u1, a, g, lr, trainable)
  d_classifier = None
  if state.classifier is not None:
    grad_u1 = state.nu.T @ per_topic.T + _rest_outer(state, c, (1.0 - a) * g)
    d_classifier = {"U1": -lr * grad_u1, "b1": -lr * jnp.sum(g, axis=1),
                    "U2": -lr * jnp.einsum("hn,jn->hj", hidden, delta),
                    "b2": -lr * jnp.sum(delta, axis=1)}
  return ReducedState(d_nu, d_s, d_classifier, d_push)


def _projected(state: ReducedState, c: NonTopic, w: jax.Array):
  """``(a, Wᵀν_t, Wᵀν̄(χ∖t))`` per sentence (``[n]``, ``[K, n]``, ``[K, n]`` for ``w [d, K]``):
  the topic word's attention and the two parts of ``Wᵀν̄(χ_i) = a_i Wᵀν_t + (1 − a_i)
  Wᵀν̄(χ_i∖t)``, the closed-form velocities' first layer."""
  member_t = c.member.T                                               # [T, n]
  a = jax.nn.sigmoid(state.s @ member_t - c.log_z)                    # [n] e^{s_t}/Z(χ)
  rest = channel_mix(w, c.nubar)
  if state.push is not None:            # the extended dynamics: ν̄(χ_i∖t) + Σ_t B_it E_t
    rest = rest + (state.push @ w).T @ c.collective.share.T
  return a, (state.nu @ w).T @ member_t, rest


def _rest_outer(state: ReducedState, c: NonTopic, g: jax.Array) -> jax.Array:
  """``Σ_i ν̄(χ_i∖t) g_iᵀ`` (``[d, K]`` for ``g [K, n]``), with the extended dynamics'
  shift ``Σ_t B_it E_t`` in ``ν̄(χ_i∖t)`` when ``state.push`` is set."""
  out = jnp.einsum("dn,kn->dk", c.nubar, g)
  if state.push is not None:
    out = out + state.push.T @ (c.collective.share.T @ g.T)
  return out


def _push_velocity(state: ReducedState, c: NonTopic, w, a, g, lr,
                   trainable: Mapping[str, bool]):
  """``Ė_t = −lr ⟨(1 − a_i) h_i⟩_{Ψ_t}`` with ``h_i = W g_i`` (``w`` ``[d, K]``, ``g`` ``[K, n]``;
  ``w=None``: ``g`` is ``h`` itself); ``None`` under Lemma 2, zero with frozen embeddings."""
  if state.push is None:
    return None
  per_topic = ((1.0 - a) * g) @ c.member                              # [K, T]
  if w is not None:
    per_topic = w @ per_topic
  d_push = -lr * per_topic.T / jnp.maximum(c.count, 1.0)[:, None]
  return d_push if trainable["embeddings"] else jnp.zeros_like(d_push)


def _residual(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """``δ_i = (π_i − y_i)/n``, ``[J, n]``: the gradient of the mean cross-entropy with
  respect to logits ``[J, n]``."""
  onehot = jax.nn.one_hot(labels, logits.shape[0], axis=0, dtype=logits.dtype)
  return (jax.nn.softmax(logits, axis=0) - onehot) / logits.shape[1]


def _closed_form_scores(state: ReducedState, c: NonTopic, d_nu, a, gap, lr, q_sq, *,
                        form: str, trainable: Mapping[str, bool]):
  """``(ν̇_t, ṡ_t)`` of a closed-form velocity from ``ν̇_t``: eq (8) for ``form="lemma2"``;
  for ``"exact"`` eq (6) from each sentence's ``gap_i = (ν_t − ν̄(χ_i))ᵀh_i / (1 − a_i)``,
  with frozen groups' velocities zero. (``gap`` is unused under lemma2; jit drops it.)"""
  if form == "lemma2":
    return d_nu, lemma2_score_velocity(state, c, d_nu, q_sq)          # eq (8)
  d_s = -lr * q_sq * ((a * (1.0 - a) * gap) @ c.member)               # eq (6)
  return _frozen_to_zero(d_nu, d_s, trainable)


def lemma2_score_velocity(state: ReducedState, c: NonTopic, d_nu, q_sq):
  """Eq (8): ``ṡ_t = ‖q‖² (ν_t − ⟨ν̄(χ∖t)⟩)ᵀν̇_t / (1 + e^{s_t}⟨1/Z(χ∖t)⟩)``; in the extended
  dynamics ``⟨ν̄(χ∖t)⟩_{Ψ_t}`` has moved by ``Σ_u A_tu E_u``."""
  mean_rest = c.mean_nubar
  if state.push is not None:
    mean_rest = mean_rest + c.collective.group_share @ state.push
  return q_sq * jnp.sum((state.nu - mean_rest) * d_nu, axis=1) / (
      1.0 + jnp.exp(state.s) * c.mean_inv_z)


def _frozen_to_zero(d_nu, d_s, trainable: Mapping[str, bool]):
  """Eqs (5)-(6) with frozen embeddings or keys: their velocity is zero."""
  d_nu = d_nu if trainable["embeddings"] else jnp.zeros_like(d_nu)
  d_s = d_s if trainable["keys"] else jnp.zeros_like(d_s)
  return d_nu, d_s


def seed_velocity(state: ReducedState, c: NonTopic, params0: dict, lr, *, form: str,
                  trainable: Mapping[str, bool]) -> ReducedState:
  """:func:`reduced_velocity` of one seed with its fixed query and classifier from
  ``params0``, cast to the state's dtypes (what a diffrax vector field returns)."""
  q = params0["query"]
  velocity = reduced_velocity(state, c, params0["classifier"], lr, jnp.dot(q, q), form=form,
                              trainable=trainable)
  return jax.tree.map(lambda v, x: v.astype(x.dtype), velocity, state)


def is_leading_ids(topic_words) -> bool:
  """Whether ``topic_words`` is known at trace time to be ``0, 1, ..., T-1`` (the topic
  task's layout: :class:`tasks.TopicDataset` numbers the topic words first)."""
  if isinstance(topic_words, jax.core.Tracer):
    return False
  ids = np.asarray(topic_words)
  return ids.ndim == 1 and np.array_equal(ids, np.arange(ids.shape[0]))


def full_params(state: ReducedState, params0: dict, topic_words: jax.Array,
                word_share: Optional[jax.Array] = None) -> dict:
  """Model parameters with the topic words (and classifier) taken from ``state``.

  Embedding rows ``ν_t`` replace ``params0``'s; the topic keys move along the
  query, ``κ_t = κ_t(0) + (s_t - s_t(0)) q/‖q‖²``, so ``qᵀκ_t = s_t``. In the extended
  dynamics (``state.push`` set, ``word_share`` its :class:`Collective` ``word_share``)
  every non-topic word moves by ``Δν_w = Σ_t C_wt E_t``, which puts each training
  sentence's ``ν̄(χ_i∖t)`` where the ODE has it (``B = W C``). When the topic words are
  known to be the leading ids (:func:`is_leading_ids`) the rows
  are concatenated instead of scattered (the same values): XLA then sees which
  rows came from ``state``, so a ``record`` that reads only the topic rows never
  copies the ``[V, d]`` tables, which otherwise happens at every saved time of
  every seed.
  """
  q = params0["query"]
  s0 = word_scores(params0)[topic_words]
  shift = (state.s - s0)[:, None] * q / jnp.dot(q, q)
  embeddings, keys = params0["embeddings"], params0["keys"]
  moved = None
  if state.push is not None:
    moved = (word_share @ state.push).astype(embeddings.dtype)        # [V, d] Δν_w
  if is_leading_ids(topic_words):
    n = topic_words.shape[0]
    rest = embeddings[n:] if moved is None else embeddings[n:] + moved[n:]
    embeddings = jnp.concatenate([state.nu.astype(embeddings.dtype), rest])
    keys = jnp.concatenate([keys[:n] + shift, keys[n:]])
  else:
    if moved is not None:
      embeddings = embeddings + moved
    embeddings = embeddings.at[topic_words].set(state.nu)
    keys = keys.at[topic_words].add(shift)
  return {
      **params0,
      "embeddings": embeddings,
      "keys": keys,
      "classifier": params0["classifier"] if state.classifier is None else state.classifier,
  }


def save_at(ts: jax.Array) -> diffrax.SaveAt:
  """Save the (tiny) reduced state at ``ts`` and at the end; observables are computed afterwards."""
  return diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)])


def reduced_trajectory(sol: diffrax.Solution, ts: jax.Array, params0: dict, topic_words: jax.Array,
                       record: Callable, word_share: Optional[jax.Array] = None) -> Trajectory:
  """The :class:`Trajectory` of a reduced solve saved with :func:`save_at`: ``record`` applied to the
  full parameters at every saved time (after the solve, so it never runs inside the step loop);
  ``word_share``: see :func:`full_params`."""
  states, final = sol.ys
  record = checked_record(record)
  observables = jax.lax.map(
      lambda y: record(full_params(y, params0, topic_words, word_share), params0), states)
  final_state = jax.tree.map(lambda x: x[-1], final)
  return Trajectory(t=ts, observables=observables,
                    final_params=full_params(final_state, params0, topic_words, word_share),
                    failed_at=failure_time(ts, observables, sol.result), params=None,
                    ode=ode_stats(sol, ts, observables, final))


def check_reduced_config(form: str, trainable: Mapping[str, bool]) -> None:
  """Raise :class:`ConfigError` if the reduced ODE cannot describe this training setup."""
  check(form in FORMS, "form", form, f"one of {', '.join(FORMS)}")
  missing = [g for g in ("embeddings", "keys", "query", "classifier") if g not in trainable]
  if missing:
    raise ConfigError(f"trainable = {dict(trainable)!r} lacks flags for {missing}.")
  if trainable["query"]:
    raise ConfigError("The reduced SEN ODE needs a fixed query (Lemma 1; every score moves when "
                      "q trains): trainable['query'] must be False; or use dynamics.gradient_flow.")
  if form == "lemma2" and not (trainable["embeddings"] and trainable["keys"]):
    frozen = [g for g in ("embeddings", "keys") if not trainable[g]]
    raise ConfigError(f"form='lemma2' (eqs 7-8) assumes trainable embeddings and keys, but "
                      f"{frozen} are frozen: use form='exact' (eqs 5-6), which honours frozen "
                      f"groups.")


def check_solve_inputs(form: str, trainable: Mapping[str, bool], ts, batch: Batch,
                       topic_word: jax.Array, topic_words, *, saveat=None,
                       params0=None) -> tuple:
  """Check a reduced solve's configuration and inputs; return ``(ts, t0, t1, topic_words,
  trainable)`` as used (``ts`` the recorded times, ``t0``/``t1`` the span: see
  :func:`dynamics.ode.saved_times`; ``trainable`` as a dict group -> bool).

  Raises:
    ConfigError: see :func:`check_reduced_config`; ``topic_words`` traced (see
      below), not 1-D, or ``topic_word`` not one id per sentence.
  """
  flags = group_flags(trainable, params0)
  check(flags is not None, "trainable", "a mask of part of a group",
        "whole groups (a dict group -> bool): the reduced ODE moves topic words' rows of "
        "whole groups")
  trainable = flags
  check_reduced_config(form, trainable)
  ts, t0, t1 = saved_times(ts, saveat)
  # A traced topic_words (a jit argument, or jnp.arange built inside jit) cannot be checked
  # for the topic task's layout, so full_params would take another code path than for the
  # same ids given concretely; refuse it instead of switching silently.
  check(not isinstance(topic_words, jax.core.Tracer), "topic_words", topic_words,
        "concrete ids known when the solve is traced: NumPy (np.arange(T)) or a jnp array "
        "built outside jax.jit, not a jit argument or jnp.arange inside a jitted function")
  topic_words = np.asarray(topic_words)
  n = batch.tokens.shape[0]
  check(topic_words.ndim == 1, "topic_words", topic_words.shape, "a 1-D array of word ids [T]")
  check(jnp.shape(topic_word) == (n,), "topic_word", jnp.shape(topic_word),
        f"one topic word id per sentence, shape ({n},)")
  return ts, t0, t1, topic_words, trainable


def reduced_sen_ode(params0: dict, batch: Batch, topic_word: jax.Array, topic_words: jax.Array,
                    record: Callable, *, lr, ts=None, trainable: Any,
                    form: str = "lemma2", solver="tsit5", rtol: Optional[float] = None,
                    atol: Optional[float] = None, max_steps: int = 100_000,
                    dt0: Optional[float] = None, dtmin: Optional[float] = None,
                    t_end=None, extended: bool = False, saveat: Optional[diffrax.SaveAt] = None,
                    stepsize_controller: Optional[diffrax.AbstractStepSizeController] = None,
                    adjoint: Optional[diffrax.AbstractAdjoint] = None) -> Trajectory:
  """Solve the reduced SEN dynamics (Lemma 2) and record observables of the full model.

  Only the topic words (and a trainable classifier) move; every other word
  keeps its initial embedding and score (Assumption 1). Time is in steps with
  the learning rate folded in, as for :func:`dynamics.gradient_flow`, so the
  result lines up with full-batch GD at ``t = step``. Pure: jit it, vmap it over
  seeds (``params0`` batched) or learning rates.

  Args:
    params0: initial Lu-model parameters (``embeddings [V, d]``, ``keys [V, d']``,
      ``query [d']``, ``classifier``).
    batch: training sentences ``[n, L]``; each must contain exactly one word of
      ``topic_words``, once (the topic task: ``dataset.train``).
    topic_word: ``[n]`` vocabulary id of each sentence's topic word
      (``dataset.train_topic_word``).
    topic_words: ``[T]`` vocabulary ids of the topic words, concrete (NumPy, e.g.
      ``np.arange(dataset.n_topic_words)``, or a jnp array made outside ``jax.jit``);
      a traced array is refused.
    record: ``record(params, params0) -> pytree`` of float observables,
      evaluated on the reconstructed full parameters (:func:`full_params`).
    lr: learning rate (float or traced scalar).
    ts: ``[K]`` increasing recorded times in steps, from ``ts[0]`` to ``ts[-1]``.
    trainable: group -> trains (``LuModelConfig.trainable()``).
    form: ``"lemma2"`` (eqs 7-8; conserves Theorem 1's ``Q_t`` exactly) or
      ``"exact"`` (eqs 5-6; the exact gradient flow with non-topic words frozen).
    solver: a name from :data:`dynamics.ode.SOLVERS` or a diffrax solver.
    rtol: relative tolerance of the PID step-size controller (default
      :data:`dynamics.ode.RTOL`).
    atol: absolute tolerance of the PID step-size controller (default
      :data:`dynamics.ode.ATOL`).
    max_steps: most solver steps before giving up (reported via ``failed_at``).
    dt0: initial step (``None``: chosen by diffrax).
    dtmin: smallest step, accepted whatever its error estimate; ``None`` for
      FC/TC. TL's ReLU makes the vector field discontinuous and the reduced
      flow can slide along a kink (Filippov), which stalls adaptive step
      control: pass e.g. ``0.1`` (a tenth of an optimiser step) for TL (see
      :func:`dynamics.ode.gradient_flow`).
    t_end: if set, the time (in steps) at which the run stops: the learning rate is 0
      from there (its state stays put, as GD's does with ``train.flow_time``).
    extended: solve the extended reduced dynamics instead (docs/extended_reduced_dynamics.md):
      Lemma 2's variables plus the non-topic words' collective push ``E_t`` (``[T, d]``),
      which moves every sentence's ``ν̄(χ∖t)`` by ``Σ_t B_it E_t`` (:class:`Collective`);
      the recorded parameters carry the non-topic words' displacement ``Σ_t C_wt E_t``.
      ``E ≡ 0`` is Lemma 2.
    saveat, stepsize_controller, adjoint: diffrax's own, as for
      :func:`dynamics.gradient_flow` (``saveat`` instead of ``ts``; a controller instead of
      ``rtol``/``atol``/``dtmin``).

  Returns:
    A :class:`Trajectory`: ``t`` the recorded times, observables ``[K, ...]``, the
    reconstructed ``final_params``, ``failed_at`` (``-1`` if fine),
    ``params=None`` and ``ode`` (:class:`dynamics.trajectory.ODEStats`).

  Raises:
    ConfigError: a trainable query; ``form="lemma2"`` with frozen embeddings
      or keys; an unknown form or solver; traced ``topic_words``.

  References:
    https://arxiv.org/abs/2011.10036
  """
  ts, t0, t1, topic_words, trainable = check_solve_inputs(
      form, trainable, ts, batch, topic_word, topic_words, saveat=saveat, params0=params0)
  controller = controller_for(stepsize_controller, rtol=rtol, atol=atol, dtmin=dtmin, dt0=dt0,
                              t_end=t_end)
  consts = nontopic_constants(params0, batch, topic_word, topic_words, extended=extended)
  nu0 = params0["embeddings"][topic_words]
  state0 = ReducedState(
      nu=nu0, s=word_scores(params0)[topic_words],
      classifier=params0["classifier"] if trainable["classifier"] else None,
      push=jnp.zeros_like(nu0) if extended else None)

  def vector_field(t, y, args):
    lr_, consts_, params0_ = args
    return seed_velocity(y, consts_, params0_, stopped_lr(lr_, t, t_end), form=form,
                         trainable=trainable)

  # The reduced state is tiny ([T, d] + [T] + classifier), so it is saved at
  # ``ts`` and the observables are computed afterwards: reconstructing the full
  # parameters inside the step loop would run on every step under vmap.
  sol = diffrax.diffeqsolve(
      diffrax.ODETerm(vector_field), make_solver(solver), t0, t1, dt0, state0,
      args=(lr, consts, params0), saveat=save_at(ts), stepsize_controller=controller,
      adjoint=check_adjoint(adjoint), max_steps=max_steps, throw=False)
  return reduced_trajectory(sol, ts, params0, topic_words, record,
                            consts.collective.word_share if extended else None)
