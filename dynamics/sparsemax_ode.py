"""Lemma 2 of Lu et al. (2021) with sparsemax or 1.5-entmax attention, solved by diffrax.

Derivation in ``docs/sparsemax_sen.md``. Under Assumption 1 only the topic
words move. For α-entmax (softmax α → 1, sparsemax α = 2) the Jacobian is
``∂a/∂s = diag(g) − g gᵀ/Σg`` with ``g_w = a_w^{2−α}`` on the support, so the
score gradient of the topic word in sentence ``χ`` is

.. math:: \\frac{∂ \\bar ν(χ)}{∂ s_t} = g_t\\,(ν_t − \\bar ν_g(χ)), \\qquad
   \\bar ν_g(χ) = \\frac{\\sum_w g_w ν_w}{\\sum_w g_w}

(softmax: ``g = a``, giving eq (6); sparsemax: ``g = 1_S``, the *unweighted*
mean over the support). With the non-topic scores equal (keys 0 at init, the
paper's start) the topic word's weight ``a_t`` depends on ``s_t`` and ``m``
only, the non-topic part of ``ν̄`` is the plain mean ``ν̄(χ∖t)``, and the
eqs (7)-(8) analogue is

.. math::
   \\dot ν_t = -\\mathrm{lr} \\sum_{i∈Ψ_t} a_t\\, h_i, \\qquad
   \\dot s_t = \\frac{\\|q\\|^2}{F(s_t)} (ν_t − ⟨\\bar ν(χ∖t)⟩_{Ψ_t})^T \\dot ν_t, \\qquad
   F = \\frac{a_t \\sum_w g_w}{g_t \\sum_{w≠t} g_w}

(softmax: ``F = 1 + e^{s}/m``, eq 8; sparsemax: ``F = (m+1)a_t/m = s + 1/m``
while ``−1/m < s < 1``, and ``1/F = 0`` outside, where the support is
``{t}`` or excludes ``t``). Hence ``Q = ∫F ds − ½‖q‖²‖ν_t − ⟨ν̄∖t⟩‖²`` is
conserved; :func:`sen_factor` gives ``1/F``.

``form="exact"`` is instead the exact gradient flow of the model with the
non-topic words frozen (autodiff through the normaliser; any non-topic scores).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Lemma 2 and Corollary 1. https://arxiv.org/abs/2011.10036
  Peters, Niculae & Martins, ACL 2019 (entmax Jacobian). https://arxiv.org/abs/1905.05702
"""
from typing import Callable, Mapping, NamedTuple, Optional

import diffrax
import jax
import jax.numpy as jnp
import optax

from attndyn.dynamics.ode import make_solver, time_grid
from attndyn.dynamics.reduced_ode import ReducedState, reduced_trajectory, save_at
from attndyn.dynamics.trajectory import Trajectory
from attndyn.models.classifiers import apply_classifier
from attndyn.models.lu import word_scores
from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["SPARSE_FORMS", "topic_weight", "sen_factor", "SentenceFrame", "sentence_frame",
           "sparse_velocity", "sparse_sen_ode"]

SPARSE_FORMS = ("sen", "exact")


def topic_weight(s: jax.Array, m, normaliser: str) -> jax.Array:
  """Attention ``a_t`` of a word of score ``s`` among ``m`` words of score 0.

  softmax ``e^s/(m + e^s)``; sparsemax ``clip((ms + 1)/(m + 1), 0, 1)``;
  1.5-entmax ``[s/2 − τ]_+²`` with ``τ = (x − √(m+1−mx²))/(m+1)``, ``x = s/2``
  (while ``−1/√m < x < 1``; 0 below, 1 above).
  """
  check(normaliser in NAMED_NORMALISERS, "normaliser", normaliser,
        f"one of {', '.join(NAMED_NORMALISERS)}")
  if normaliser == "softmax":
    return jax.nn.sigmoid(s - jnp.log(m))
  if normaliser == "sparsemax":
    return jnp.clip((m * s + 1.0) / (m + 1.0), 0.0, 1.0)
  x = s / 2.0
  r = jnp.sqrt(jnp.maximum(m + 1.0 - m * x**2, 0.0))
  g_t = (m * x + r) / (m + 1.0)
  return jnp.where(x >= 1.0, 1.0, jnp.where(g_t > 0, g_t, 0.0) ** 2)


def sen_factor(s: jax.Array, m, normaliser: str) -> jax.Array:
  """``1/F(s)``: ``ṡ_t = ‖q‖² (1/F) (ν_t − ⟨ν̄∖t⟩)ᵀ ν̇_t`` (the eq (8) analogue).

  softmax ``1 − a_t`` (eq 8 with ``⟨1/Z(χ∖t)⟩ = 1/m``); sparsemax
  ``m/((m+1) a_t)`` on ``−1/m < s < 1`` and 0 outside; 1.5-entmax
  ``m (r − x)/((mx + r) r)``, ``x = s/2``, ``r = √(m+1−mx²)``, on
  ``−1/√m < x < 1`` and 0 outside.
  """
  if normaliser == "softmax":
    return 1.0 - topic_weight(s, m, normaliser)
  if normaliser == "sparsemax":
    inside = (s > -1.0 / m) & (s < 1.0)
    a = topic_weight(s, m, normaliser)
    return jnp.where(inside, m / ((m + 1.0) * jnp.where(inside, a, 1.0)), 0.0)
  check(normaliser == "entmax15", "normaliser", normaliser, f"one of {', '.join(NAMED_NORMALISERS)}")
  x = s / 2.0
  inside = (x > -1.0 / jnp.sqrt(m)) & (x < 1.0)
  xs = jnp.where(inside, x, 0.0)
  r = jnp.sqrt(m + 1.0 - m * xs**2)
  return jnp.where(inside, m * (r - xs) / ((m * xs + r) * r), 0.0)


class SentenceFrame(NamedTuple):
  """The frozen non-topic part of every training sentence (Assumption 1).

  Attributes:
    member: ``[n, T]`` one-hot: sentence ``i`` is in Ψ_t.
    is_topic: ``[n, L]`` the position of the sentence's topic word.
    scores: ``[n, L]`` initial scores of every position (non-topic ones stay).
    embeddings: ``[n, L, d]`` initial embeddings of every position.
    mask: ``[n, L]`` real words.
    labels: ``[n]``.
    mean_rest: ``[T, d]`` ``⟨ν̄(χ∖t)⟩_{Ψ_t}``, the plain mean of the non-topic embeddings.
    m: ``[n]`` non-topic words per sentence.
  """
  member: jax.Array
  is_topic: jax.Array
  scores: jax.Array
  embeddings: jax.Array
  mask: jax.Array
  labels: jax.Array
  mean_rest: jax.Array
  m: jax.Array


def sentence_frame(params0: dict, batch: Batch, topic_word: jax.Array,
                   topic_words: jax.Array) -> SentenceFrame:
  """The Assumption-1 constants of every sentence from ``params0``."""
  dtype = params0["embeddings"].dtype
  member = (topic_word[:, None] == topic_words[None, :]).astype(dtype)
  is_topic = batch.mask & (batch.tokens == topic_word[:, None])
  rest = batch.mask & ~is_topic
  emb = params0["embeddings"][batch.tokens]
  m = rest.sum(-1).astype(dtype)
  nubar_rest = jnp.einsum("nl,nld->nd", rest.astype(dtype), emb) / jnp.maximum(m, 1.0)[:, None]
  per = jnp.maximum(member.sum(0), 1.0)
  return SentenceFrame(member=member, is_topic=is_topic, scores=word_scores(params0)[batch.tokens],
                       embeddings=emb, mask=batch.mask, labels=batch.labels,
                       mean_rest=(member.T @ nubar_rest) / per[:, None], m=m)


def _sentence_inputs(state: ReducedState, f: SentenceFrame):
  scores = jnp.where(f.is_topic, (f.member @ state.s)[:, None], f.scores)
  emb = jnp.where(f.is_topic[..., None], (f.member @ state.nu)[:, None, :], f.embeddings)
  return scores, emb


def sparse_velocity(state: ReducedState, f: SentenceFrame, classifier0: dict, lr, q_sq, *,
                    normaliser: str, form: str, trainable: Mapping[str, bool]) -> ReducedState:
  """``d(state)/dt``: the exact frozen-rest gradient flow, or the eqs (7)-(8) analogue."""
  classifier = classifier0 if state.classifier is None else state.classifier

  def loss(state_nu, state_s, classifier):
    scores, emb = _sentence_inputs(ReducedState(state_nu, state_s, None), f)
    a = normalise(normaliser, scores, f.mask)
    context = jnp.einsum("nl,nld->nd", a, emb)
    logits = apply_classifier(classifier, context)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, f.labels))

  g_nu, g_s, g_cls = jax.grad(loss, argnums=(0, 1, 2))(state.nu, state.s, classifier)
  d_nu = -lr * g_nu                                          # eq (5)/(7): Σ a_t h_i exactly
  if form == "sen":
    m = jnp.sum(f.m * f.member.T, axis=1) / jnp.maximum(f.member.sum(0), 1.0)   # [T]
    d_s = q_sq * sen_factor(state.s, m, normaliser) * jnp.sum(
        (state.nu - f.mean_rest) * d_nu, axis=1)
  else:
    d_s = -lr * q_sq * g_s
    d_nu = d_nu if trainable["embeddings"] else jnp.zeros_like(d_nu)
    d_s = d_s if trainable["keys"] else jnp.zeros_like(d_s)
  d_cls = None if state.classifier is None else jax.tree.map(lambda g: -lr * g, g_cls)
  return ReducedState(d_nu, d_s, d_cls)


def sparse_sen_ode(params0: dict, batch: Batch, topic_word: jax.Array, topic_words: jax.Array,
                   record: Callable, *, lr, ts, trainable: Mapping[str, bool],
                   normaliser: str = "sparsemax", form: str = "sen", solver="tsit5",
                   rtol: float = 1e-7, atol: float = 1e-9, max_steps: int = 100_000,
                   dt0: Optional[float] = None, dtmin: Optional[float] = 0.05) -> Trajectory:
  """Solve the reduced topic-word dynamics with a sparse normaliser; record full-model observables.

  Same contract as :func:`dynamics.reduced_sen_ode` (time in steps, lr folded
  in). The sparsemax vector field jumps where the support changes (``ṡ_t``
  drops to 0 at ``s_t = 1``), so ``dtmin`` (in steps) lets the adaptive solver
  step over the jump instead of stalling.

  Args:
    params0: initial Lu-model parameters.
    batch: training sentences, each holding its topic word once.
    topic_word: ``[n]`` each sentence's topic word id.
    topic_words: ``[T]`` the topic word ids.
    record: ``record(params, params0) -> pytree`` on the reconstructed parameters.
    lr: learning rate.
    ts: ``[K]`` recorded times in steps.
    trainable: group -> trains.
    normaliser: ``softmax``, ``sparsemax`` or ``entmax15``.
    form: ``"sen"`` (eqs 7-8 analogue, conserves ``Q``; assumes equal non-topic
      scores) or ``"exact"`` (frozen-rest gradient flow).
    solver, rtol, atol, max_steps, dt0, dtmin: diffrax settings.

  Raises:
    ConfigError: a trainable query, an unknown form or normaliser, or
      ``form="sen"`` with frozen embeddings/keys.
  """
  check(form in SPARSE_FORMS, "form", form, f"one of {', '.join(SPARSE_FORMS)}")
  check(normaliser in NAMED_NORMALISERS, "normaliser", normaliser,
        f"one of {', '.join(NAMED_NORMALISERS)}")
  if trainable.get("query", False):
    raise ConfigError("The reduced ODE needs a fixed query: trainable['query'] must be False.")
  if form == "sen" and not (trainable["embeddings"] and trainable["keys"]):
    raise ConfigError("form='sen' assumes trainable embeddings and keys; use form='exact'.")
  ts = time_grid(ts)
  topic_words = jnp.asarray(topic_words)
  frame = sentence_frame(params0, batch, topic_word, topic_words)
  state0 = ReducedState(nu=params0["embeddings"][topic_words], s=word_scores(params0)[topic_words],
                        classifier=params0["classifier"] if trainable["classifier"] else None)

  def vector_field(t, y, args):
    del t
    lr_, frame_, params0_ = args
    q = params0_["query"]
    v = sparse_velocity(y, frame_, params0_["classifier"], lr_, jnp.dot(q, q),
                        normaliser=normaliser, form=form, trainable=trainable)
    return jax.tree.map(lambda dv, x: dv.astype(x.dtype), v, y)

  sol = diffrax.diffeqsolve(
      diffrax.ODETerm(vector_field), make_solver(solver), ts[0], ts[-1], dt0, state0,
      args=(lr, frame, params0), saveat=save_at(ts),
      stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, dtmin=dtmin),
      max_steps=max_steps, throw=False)
  return reduced_trajectory(sol, ts, params0, topic_words, record)
