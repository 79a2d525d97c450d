"""The extended reduced dynamics (docs/extended_reduced_dynamics.md): Lemma 2 plus the
non-topic words' collective push ``E_t``.

What is checked, in float64: on the closure (the non-topic words displaced by
``Δν_w = Σ_t C_wt E_t``) the extended velocity is the full model's gradient, its push
``Ė_t`` included (a linear functional of the non-topic words' gradients, found here by
least squares from a sentence-word matrix built with NumPy loops); the closed-form
velocities equal autodiff of the reduced loss; with the push frozen at zero the velocity is
Lemma 2's; along a solve, Theorem 1's ``Q_t`` drifts by ``∫ (v_t − ⟨v̄(χ∖t)⟩)ᵀ d⟨v̄(χ∖t)⟩``,
read from the recorded full parameters.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax.config.update("jax_enable_x64", True)

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.analysis.theorem1 import invariant, nontopic_context  # noqa: E402
from attndyn.dynamics.reduced_ode import (ReducedState, autodiff_velocity, full_params,  # noqa: E402
                                  linear_velocity, nontopic_constants, relu_velocity)
from attndyn.models import lu  # noqa: E402

LOSS = models.make_loss(lu.apply)
LR = 0.3
FEW = settings(settings.default, max_examples=max(3, settings.default.max_examples // 8))


def _setup(classifier, *, vocab_size=80, n_train=30, n_nontopic=4, dim=3, embed_std=0.2,
           data_seed=0, init_seed=1, freeze=()):
  """A small topic task with fewer sentences than non-topic words, so that any per-sentence
  shift of ``ν̄(χ_i∖t)`` is some displacement of the non-topic words."""
  task = tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=vocab_size,
                               n_nontopic=n_nontopic, n_train=n_train, n_test=10)
  data = tasks.make_topic_dataset(jax.random.PRNGKey(data_seed), task)
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=2, embed_dim=dim, key_dim=dim,
                             classifier=classifier, query_norm=1.0, embed_std=embed_std,
                             freeze=freeze)
  params0 = lu.init(jax.random.PRNGKey(init_seed), cfg, jnp.float64)
  # Non-zero non-topic scores, so the weights e^{s_w}/Z(χ∖t) are not all 1/m.
  keys = params0["keys"] + 0.5 * jax.random.normal(jax.random.PRNGKey(9), params0["keys"].shape)
  return task, data, cfg, {**params0, "keys": keys}


def _state(task, cfg, params0, seed=7):
  """A state away from the start: moved topic words and scores, a non-zero push."""
  n_topic = task.n_topic_words
  rng = np.random.default_rng(seed)
  classifier = params0["classifier"] if cfg.trainable()["classifier"] else None
  return ReducedState(
      nu=params0["embeddings"][:n_topic] + 0.3 * rng.normal(size=(n_topic, cfg.embed_dim)),
      s=jnp.asarray(rng.normal(size=n_topic)), classifier=classifier,
      push=jnp.asarray(0.5 * rng.normal(size=(n_topic, cfg.embed_dim))))


def _sentence_word_weights(params0, data) -> np.ndarray:
  """``W [n, V]``: the weight ``c_iw e^{s_w}/Z(χ_i∖t)`` of word ``w`` in ``ν̄(χ_i∖t)``, by loops."""
  scores = np.asarray(models.word_scores(params0))
  tokens, topic = np.asarray(data.train.tokens), np.asarray(data.train_topic_word)
  w = np.zeros((tokens.shape[0], scores.shape[0]))
  for i, (sentence, t) in enumerate(zip(tokens, topic)):
    others = sentence[sentence != t]
    e = np.exp(scores[others])
    for word, weight in zip(others, e / e.sum()):
      w[i, word] += weight
  return w


@pytest.mark.parametrize("freeze", [(), ("keys",), ("embeddings",)])
@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_extended_velocity_is_the_full_model_gradient_on_the_closure(classifier, freeze):
  """With every non-topic word displaced by ``Σ_t C_wt E_t`` (``full_params``), eqs (5)-(6) of
  the extended dynamics are the full model's gradient flow: ``ν̇_t``, ``ṡ_t = qᵀκ̇_t`` and the
  classifier's; and ``Ė_t = −lr⟨(1 − a_i)h_i⟩_{Ψ_t}`` is ``Σ_w X_wt ν̇_w`` for any ``X`` with
  ``W X = [i ∈ Ψ_t]/|Ψ_t|`` (the non-topic words' own flow,
  ``ν̇_w = −lr Σ_i W_iw (1 − a_i) h_i``)."""
  task, data, cfg, params0 = _setup(classifier, freeze=freeze)
  trainable = cfg.trainable()
  n_topic = task.n_topic_words
  ids = jnp.arange(n_topic)
  consts = nontopic_constants(params0, data.train, data.train_topic_word, ids, extended=True)
  state = _state(task, cfg, params0)
  q = params0["query"]
  velocity = relu_velocity if classifier == "tl" else linear_velocity
  vel = jax.jit(lambda st: velocity(st, consts, params0["classifier"], LR, q @ q, form="exact",
                                    trainable=trainable))(state)
  full = full_params(state, params0, ids, consts.collective.word_share)
  grads = jax.jit(jax.grad(lambda p: LOSS(p, data.train)[0]))(full)
  np.testing.assert_allclose(vel.nu, -LR * grads["embeddings"][:n_topic] * trainable["embeddings"],
                             rtol=1e-10, atol=1e-14)
  np.testing.assert_allclose(vel.s, -LR * (grads["keys"][:n_topic] @ q) * trainable["keys"],
                             rtol=1e-10, atol=1e-14)
  for got, want in zip(jax.tree.leaves(vel.classifier), jax.tree.leaves(grads["classifier"])):
    np.testing.assert_allclose(got, -LR * want, rtol=1e-10, atol=1e-14)
  weights = _sentence_word_weights(params0, data)
  member = np.asarray(data.train_topic_word)[:, None] == np.arange(n_topic)[None, :]
  target = member / member.sum(0)
  x = np.linalg.lstsq(weights, target, rcond=None)[0]                  # [V, T]
  np.testing.assert_allclose(weights @ x, target, atol=1e-10)          # the closure is exact here
  want_push = -LR * x.T @ np.asarray(grads["embeddings"]) * trainable["embeddings"]
  np.testing.assert_allclose(vel.push, want_push, rtol=1e-8, atol=1e-12)
  assert np.abs(vel.push).max() > 1e-4 or not trainable["embeddings"]


@pytest.mark.parametrize("form,freeze", [("lemma2", ()), ("exact", ()), ("exact", ("keys",)),
                                         ("exact", ("embeddings",))])
@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_extended_closed_form_velocity_equals_autodiff_of_the_reduced_loss(classifier, form,
                                                                          freeze):
  """FC/TC's class-space and TL's hidden-space velocities equal autodiff of the reduced loss
  (contexts ``a_i ν_t + (1 − a_i)(ν̄(χ_i∖t) + Σ_t B_it E_t)``), every component, the push's
  included."""
  task, data, cfg, params0 = _setup(classifier, freeze=freeze)
  trainable = cfg.trainable()
  consts = nontopic_constants(params0, data.train, data.train_topic_word,
                              jnp.arange(task.n_topic_words), extended=True)
  state = _state(task, cfg, params0, seed=3)
  q = params0["query"]
  kw = dict(form=form, trainable=trainable)
  closed_form = relu_velocity if classifier == "tl" else linear_velocity
  got = jax.jit(lambda st: closed_form(st, consts, params0["classifier"], LR, q @ q, **kw))(state)
  want = jax.jit(lambda st: autodiff_velocity(st, consts, params0["classifier"], LR, q @ q,
                                              **kw))(state)
  assert got.push is not None and (got.classifier is None) == (state.classifier is None)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("form", ["lemma2", "exact"])
@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
@FEW
@given(seed=st.integers(0, 2**16))
def test_with_the_push_frozen_at_zero_the_extended_velocity_is_lemma2(classifier, form, seed):
  """``E ≡ 0``: the topic words' and the classifier's velocity are Lemma 2's (eqs 5-8), and the
  extended constants leave Lemma 2's own unchanged."""
  task, data, cfg, params0 = _setup(classifier, data_seed=seed, init_seed=seed + 1)
  trainable = cfg.trainable()
  ids = jnp.arange(task.n_topic_words)
  lemma2 = nontopic_constants(params0, data.train, data.train_topic_word, ids)
  extended = nontopic_constants(params0, data.train, data.train_topic_word, ids, extended=True)
  for a, b in zip(jax.tree.leaves(lemma2), jax.tree.leaves(extended._replace(collective=None))):
    np.testing.assert_array_equal(a, b)
  state = _state(task, cfg, params0, seed=seed)
  q = params0["query"]
  velocity = relu_velocity if classifier == "tl" else linear_velocity
  run = jax.jit(lambda st, c: velocity(st, c, params0["classifier"], LR, q @ q, form=form,
                                       trainable=trainable))
  frozen = run(state._replace(push=jnp.zeros_like(state.push)), extended)
  plain = run(state._replace(push=None), lemma2)
  assert plain.push is None
  for g, w in zip(jax.tree.leaves(frozen._replace(push=None)), jax.tree.leaves(plain)):
    np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-16)


@functools.lru_cache(maxsize=None)
def _solve(classifier):
  task, data, cfg, params0 = _setup(classifier, vocab_size=20, n_train=40, n_nontopic=3, dim=3)

  def record(params, _):
    ctx = nontopic_context(params, data)
    return {"q": invariant(params, data), "s": models.word_scores(params)[:task.n_topic_words],
            "v": jnp.linalg.norm(params["query"]) * params["embeddings"][:task.n_topic_words],
            "vbar": ctx.vbar}

  ts = jnp.linspace(0.0, 60.0, 601)
  return jax.jit(lambda p, extended: dynamics.reduced_sen_ode(
      p, data.train, data.train_topic_word, np.arange(task.n_topic_words), record, lr=1.0,
      ts=ts, trainable=cfg.trainable(), rtol=1e-10, atol=1e-12, extended=extended,
      dtmin=0.01 if classifier == "tl" else None, max_steps=50_000),
      static_argnums=1)(params0, True)


@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_theorem1_q_drifts_as_the_nontopic_mean_moves(classifier):
  """Along eqs 7-8 of the extended dynamics ``dQ_t = (v_t − ⟨v̄(χ∖t)⟩)ᵀ d⟨v̄(χ∖t)⟩`` (Theorem 1's
  proof with the non-topic mean moving): the recorded ``Q_t`` (from the full parameters) changes
  by the trapezoid sum of that integral over the recorded ``v_t``, ``⟨v̄(χ∖t)⟩``, to 1e-4 of its
  drift, and the drift is no rounding (the non-topic mean moved)."""
  traj = _solve(classifier)
  assert int(traj.failed_at) == -1
  o = {k: np.asarray(v) for k, v in traj.observables.items()}
  gap = o["v"] - o["vbar"]                                             # [K, T, d]
  step = np.diff(o["vbar"], axis=0)
  predicted = np.concatenate([np.zeros((1, gap.shape[1])), np.cumsum(
      np.sum(0.5 * (gap[1:] + gap[:-1]) * step, axis=-1), axis=0)])
  drift = o["q"] - o["q"][0]
  scale = np.abs(drift).max()
  assert scale > 1e-3 * np.abs(o["s"][-1] - o["s"][0]).max(), scale
  np.testing.assert_allclose(drift, predicted, atol=1e-4 * scale)
