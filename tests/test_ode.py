"""ODE solvers: the full gradient flow and the reduced SEN ODE of Lu et al. (2021), Lemma 2.

Invariants, not stored values: Theorem 1's ``Q_t`` is conserved along eq (8);
GD approaches the gradient flow linearly in the learning rate; the reduced ODE's
exact form is the model's gradient restricted to the topic words; vmap equals a
loop; failures are reported, not raised.
"""
import functools
import inspect

import diffrax
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
from attndyn.dynamics import xla_options  # noqa: E402
from attndyn.dynamics.ode import failure_time  # noqa: E402
from attndyn.dynamics.reduced_ode import (ReducedState, autodiff_velocity, linear_velocity,  # noqa: E402
                                  nontopic_constants, reduced_velocity, relu_velocity)
from attndyn.models import lu  # noqa: E402

# Each example of the Theorem-1 test below is a full adaptive ODE solve per classifier (seconds
# on CI's 2 cores), so it runs a sixth of the profile's examples: 4 in "ci", 41 in "deep".
FEW = settings(settings.default, max_examples=max(4, settings.default.max_examples // 6))
LOSS = models.make_loss(lu.apply)


def _setup(classifier="tc", *, n_topics=2, words_per_topic=2, vocab_size=30, n_nontopic=4,
           n_train=40, dim=3, embed_std=0.1, data_seed=0, init_seed=1, freeze=()):
  task = tasks.TopicTaskConfig(n_topics=n_topics, words_per_topic=words_per_topic,
                               vocab_size=vocab_size, n_nontopic=n_nontopic, n_train=n_train,
                               n_test=10)
  data = tasks.make_topic_dataset(jax.random.PRNGKey(data_seed), task)
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=n_topics, embed_dim=dim, key_dim=dim,
                             classifier=classifier, query_norm=1.0, embed_std=embed_std,
                             freeze=freeze)
  params0 = lu.init(jax.random.PRNGKey(init_seed), cfg, jnp.float64)
  return task, data, cfg, params0


def _topic_record(n_topic):
  """Scores and embeddings of the topic words (ids 0..T-1)."""
  def record(params, params0):
    del params0
    return {"s": models.word_scores(params)[:n_topic], "nu": params["embeddings"][:n_topic]}
  return record


def _theorem1_q(s, nu, params0, data):
  """Theorem 1's ``Q_t`` (eq 9), written out independently with NumPy loops.

  ``Q_t = s_t + e^{s_t}⟨1/Z(χ∖t)⟩ − ½‖q‖²‖ν_t − ⟨ν̄(χ∖t)⟩‖²`` with the non-topic
  words at their initial values; ``s [K, T]``, ``nu [K, T, d]`` → ``[K, T]``.
  """
  scores = np.asarray(models.word_scores(params0))
  emb = np.asarray(params0["embeddings"])
  q = np.asarray(params0["query"])
  tokens = np.asarray(data.train.tokens)
  topic = np.asarray(data.train_topic_word)
  n_topic = s.shape[-1]
  inv_z, nubar, count = np.zeros(n_topic), np.zeros((n_topic, emb.shape[1])), np.zeros(n_topic)
  for sentence, t in zip(tokens, topic):
    others = sentence[sentence != t]
    e = np.exp(scores[others])
    inv_z[t] += 1.0 / e.sum()
    nubar[t] += (e[:, None] * emb[others]).sum(0) / e.sum()
    count[t] += 1
  inv_z, nubar = inv_z / count, nubar / count[:, None]
  return s + np.exp(s) * inv_z - 0.5 * (q @ q) * ((nu - nubar) ** 2).sum(-1)


N_REC = 11          # recorded times of the shared tiny-TC solves
SHARED_STEPS = 2000  # enough for every healthy tiny solve (they take < 100 steps)


@functools.lru_cache(maxsize=None)
def _tc_flow():
  """Compiled ``(params0, lr, ts) -> Trajectory`` of the gradient flow on ``_setup("tc")``."""
  task, data, cfg, _ = _setup("tc")
  return jax.jit(lambda params0, lr, ts: dynamics.gradient_flow(
      LOSS, params0, data.train, _topic_record(task.n_topic_words), lr=lr, ts=ts,
      trainable=cfg.trainable(), max_steps=SHARED_STEPS))


@functools.lru_cache(maxsize=None)
def _tc_reduced():
  """Compiled ``(params0, lr, ts) -> Trajectory`` of the reduced ODE on ``_setup("tc")``, at
  tolerances tight enough for :func:`test_reduced_sweep_isolates_a_diverged_seed` to compare
  it with a joint solve (whose steps differ) at 1e-6."""
  task, data, cfg, _ = _setup("tc")
  return jax.jit(lambda params0, lr, ts: dynamics.reduced_sen_ode(
      params0, data.train, data.train_topic_word, np.arange(task.n_topic_words),
      _topic_record(task.n_topic_words), lr=lr, ts=ts, trainable=cfg.trainable(),
      max_steps=SHARED_STEPS, rtol=1e-8, atol=1e-10))


@functools.lru_cache(maxsize=None)
def _jitted_reduced(n_topic, trainable_items, form, dtmin):
  """One compiled solve per configuration, reused across hypothesis examples; tolerances
  tighter than the defaults, to resolve a conserved quantity to 1e-6."""
  trainable = dict(trainable_items)

  def solve(params0, data, lr, ts):
    return dynamics.reduced_sen_ode(params0, data.train, data.train_topic_word,
                                    np.arange(n_topic), _topic_record(n_topic), lr=lr, ts=ts,
                                    trainable=trainable, form=form, dtmin=dtmin, max_steps=50_000,
                                    rtol=1e-8, atol=1e-10)
  return jax.jit(solve)


@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
@FEW
@given(seed=st.integers(0, 2**16), embed_std=st.floats(0.05, 0.3))
def test_theorem1_q_conserved_along_lemma2(classifier, seed, embed_std):
  """Q_t (eq 9) is conserved by eqs (7)-(8) while s_t grows by O(1).

  Criterion per topic word: max_t |Q_t(t) − Q_t(0)| / max(1, |s_t(t1) − s_t(0)|) ≤ 1e-6.
  TL's ReLU makes the vector field discontinuous (Filippov sliding modes stall
  the adaptive controller), so its steps are floored at 0.01 optimiser steps
  (forced steps across kinks cost ~3e-7 of Q over this horizon; 0.02 costs ~1.5e-6).
  """
  task, data, cfg, params0 = _setup(classifier, n_topics=3, words_per_topic=1, vocab_size=20,
                                    n_nontopic=3, n_train=40, dim=4, embed_std=embed_std,
                                    data_seed=seed, init_seed=seed + 1)
  ts = jnp.linspace(0.0, 100.0, 21)
  solve = _jitted_reduced(task.n_topic_words, tuple(cfg.trainable().items()), "lemma2",
                          0.01 if classifier == "tl" else None)
  traj = solve(params0, data, 1.0, ts)
  assert int(traj.failed_at) == -1
  s, nu = np.asarray(traj.observables["s"]), np.asarray(traj.observables["nu"])
  growth = np.abs(s[-1] - s[0])
  assert growth.max() > 0.5, f"scores barely moved ({growth}); the test would be vacuous"
  q = _theorem1_q(s, nu, params0, data)
  drift = np.abs(q - q[0]).max(0) / np.maximum(1.0, growth)
  assert drift.max() <= 1e-6, drift


def test_gd_converges_to_gradient_flow_linearly_in_lr():
  """Max |s_GD − s_flow| over a fixed physical horizon halves as lr halves (GD is Euler)."""
  task, data, cfg, params0 = _setup("tc")
  horizon = 200.0
  # The flow for lr is the lr=1 flow at time lr·t: one solve serves every lr.
  flow = _tc_flow()(params0, 1.0, jnp.linspace(0.0, horizon, N_REC))
  assert int(flow.failed_at) == -1
  s_flow = flow.observables["s"]
  assert np.abs(np.asarray(s_flow[-1] - s_flow[0])).max() > 0.5
  deviations = []
  for lr in (0.4, 0.2, 0.1):
    steps = int(round(horizon / lr))
    train_cfg = dynamics.TrainConfig(lr=lr, steps=steps, record_every=steps // (N_REC - 1))
    gd = jax.jit(dynamics.make_train(LOSS, data.train, _topic_record(task.n_topic_words),
                                     train_cfg, cfg.trainable()))(params0, jax.random.PRNGKey(0))
    deviations.append(float(jnp.max(jnp.abs(gd.observables["s"] - s_flow))))
  ratios = np.asarray(deviations[:-1]) / np.asarray(deviations[1:])
  assert np.all((ratios >= 1.6) & (ratios <= 2.5)), (deviations, ratios)


def test_reduced_exact_tracks_gd_with_large_vocabulary():
  """Assumption 1 holds when M ≫ n·m: the exact reduced ODE follows GD's topic scores."""
  task, data, cfg, params0 = _setup("tc", vocab_size=2000, n_nontopic=4, n_train=80, dim=4,
                                    embed_std=0.1)
  n_topic = task.n_topic_words
  record = _topic_record(n_topic)
  lr, steps = 0.5, 1000
  train_cfg = dynamics.TrainConfig(lr=lr, steps=steps, record_every=100)
  gd = jax.jit(dynamics.make_train(LOSS, data.train, record, train_cfg, cfg.trainable()))(
      params0, jax.random.PRNGKey(0))
  red = dynamics.reduced_sen_ode(params0, data.train, data.train_topic_word, jnp.arange(n_topic),
                                 record, lr=lr, ts=train_cfg.record_steps(),
                                 trainable=cfg.trainable(), form="exact")
  s_gd, s_red = np.asarray(gd.observables["s"]), np.asarray(red.observables["s"])
  growth = np.abs(s_gd[-1] - s_gd[0])
  assert growth.min() > 0.5
  assert np.all(np.abs(s_red[-1] - s_gd[-1]) < 0.1 * growth), (s_red[-1], s_gd[-1])


@pytest.mark.parametrize("freeze", [(), ("keys",), ("embeddings",)])
@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_reduced_exact_velocity_is_the_model_gradient(classifier, freeze):
  """Eqs (5)-(6) equal autodiff of the full loss w.r.t. the topic rows (ds = qᵀdκ).

  FC/TC go through the class-space form (``linear_velocity``), TL through autodiff
  of the channel-major classifier.
  """
  task, data, cfg, params0 = _setup(classifier, freeze=freeze)
  trainable = cfg.trainable()
  topic_words = jnp.arange(task.n_topic_words)
  consts = nontopic_constants(params0, data.train, data.train_topic_word, topic_words)
  state = ReducedState(params0["embeddings"][:task.n_topic_words],
                       models.word_scores(params0)[:task.n_topic_words], params0["classifier"])
  q = params0["query"]
  vel = jax.jit(lambda st: reduced_velocity(st, consts, params0["classifier"], 0.3, q @ q,
                                            form="exact", trainable=trainable))(state)
  grads = jax.jit(jax.grad(lambda p: LOSS(p, data.train)[0]))(params0)
  want_nu = -0.3 * grads["embeddings"][:task.n_topic_words] * trainable["embeddings"]
  want_s = -0.3 * (grads["keys"][:task.n_topic_words] @ q) * trainable["keys"]
  np.testing.assert_allclose(vel.nu, want_nu, rtol=1e-10, atol=1e-14)
  np.testing.assert_allclose(vel.s, want_s, rtol=1e-10, atol=1e-14)
  for got, want in zip(jax.tree.leaves(vel.classifier), jax.tree.leaves(grads["classifier"])):
    np.testing.assert_allclose(got, -0.3 * want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("form,freeze", [("lemma2", ()), ("exact", ()), ("exact", ("keys",)),
                                         ("exact", ("embeddings",))])
@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_closed_form_velocity_equals_autodiff_velocity(classifier, form, freeze):
  """The class-space velocity of FC/TC and the hidden-space one of TL are the autodiff one
  (eqs 5-8), away from the start (TL: some hidden units on and some off)."""
  task, data, cfg, params0 = _setup(classifier, freeze=freeze)
  trainable = cfg.trainable()
  n_topic = task.n_topic_words
  consts = nontopic_constants(params0, data.train, data.train_topic_word, jnp.arange(n_topic))
  rng = np.random.default_rng(7)
  closed_form = relu_velocity if classifier == "tl" else linear_velocity
  classifier = params0["classifier"]
  nu = params0["embeddings"][:n_topic] + 0.3 * rng.normal(size=(n_topic, cfg.embed_dim))
  state = ReducedState(nu, jnp.asarray(rng.normal(size=n_topic)),
                       classifier if trainable["classifier"] else None)
  if closed_form is relu_velocity:   # the ReLU's both sides are exercised
    full = dynamics.reduced_ode.full_params(state, params0, jnp.arange(n_topic))
    context = models.lu.apply(full, data.train).context
    on = np.asarray(context @ classifier["U1"] + classifier["b1"]) > 0
    assert 0.1 < on.mean() < 0.9, on.mean()
  q = params0["query"]
  kw = dict(form=form, trainable=trainable)
  got = jax.jit(lambda st: closed_form(st, consts, classifier, 0.3, q @ q, **kw))(state)
  want = jax.jit(lambda st: autodiff_velocity(st, consts, classifier, 0.3, q @ q, **kw))(state)
  assert (got.classifier is None) == (state.classifier is None)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-14)


def test_solvers_start_at_params0_and_end_at_final_params():
  """Observables at t0 are record(params0); at t1 they are record(final_params)."""
  task, data, cfg, params0 = _setup("tc")
  record = _topic_record(task.n_topic_words)
  ts = jnp.linspace(0.0, 50.0, N_REC)
  for solve in (_tc_flow(), _tc_reduced()):
    traj = solve(params0, 1.0, ts)
    assert int(traj.failed_at) == -1
    np.testing.assert_allclose(traj.t, ts)
    assert traj.params is None
    for got, want in zip(jax.tree.leaves(traj.observables), jax.tree.leaves(record(params0, params0))):
      np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-15)
    final = record(traj.final_params, params0)
    for got, want in zip(jax.tree.leaves(traj.observables), jax.tree.leaves(final)):
      np.testing.assert_allclose(got[-1], want, rtol=1e-12, atol=1e-15)


def test_gradient_flow_vmap_over_seeds_equals_separate_solves():
  task, data, cfg, _ = _setup("tc")
  ts = jnp.linspace(0.0, 100.0, N_REC)
  params0 = jax.vmap(lambda k: lu.init(k, cfg, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(3), 2))
  solve = _tc_flow()
  batched = jax.jit(jax.vmap(solve, in_axes=(0, None, None)))(params0, 1.0, ts)
  np.testing.assert_array_equal(batched.failed_at, [-1, -1])
  assert batched.t.shape == (2, N_REC)
  for i in range(2):
    single = solve(jax.tree.map(lambda x: x[i], params0), 1.0, ts)
    for got, want in zip(jax.tree.leaves(batched.observables), jax.tree.leaves(single.observables)):
      np.testing.assert_allclose(got[i], want, rtol=1e-8, atol=1e-10)


def test_full_params_same_whether_topic_ids_are_known_or_traced():
  """Known leading ids (concatenated rows) and traced ids (scattered rows) give the same
  parameters, and the topic scores equal the state's."""
  task, data, cfg, params0 = _setup("tc")
  n_topic = task.n_topic_words
  state = ReducedState(nu=jnp.full((n_topic, 3), 0.25), s=jnp.linspace(-1.0, 2.0, n_topic),
                       classifier=None)
  known = dynamics.reduced_ode.full_params(state, params0, np.arange(n_topic))
  traced = jax.jit(lambda ids: dynamics.reduced_ode.full_params(state, params0, ids))(
      jnp.arange(n_topic))
  assert dynamics.reduced_ode.is_leading_ids(np.arange(n_topic))
  assert not dynamics.reduced_ode.is_leading_ids(np.array([1, 0]))
  for got, want in zip(jax.tree.leaves(known), jax.tree.leaves(traced)):
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
  np.testing.assert_allclose(models.word_scores(known)[:n_topic], state.s, rtol=1e-12)


def _sweep_setup(classifier):
  task, data, cfg, _ = _setup(classifier)
  params0 = jax.vmap(lambda k: lu.init(k, cfg, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(5), 3))
  return task, data, cfg, params0, jnp.linspace(0.0, 100.0, N_REC), jnp.array([1.0, 0.5, 2.0])


@pytest.mark.parametrize("classifier", ["fc", "tc"])
def test_reduced_sweep_equals_separate_solves(classifier):
  """Seeds solved together (one shared step, each seed's error within tolerance) equal
  separate solves to the tolerance; per-seed learning rates; a trainable classifier rides along.

  (TL's ReLU makes the field discontinuous: where steps are forced at ``dtmin`` the result
  depends on the step sequence, so TL is checked against Theorem 1 instead, below.)
  """
  task, data, cfg, params0, ts, lr = _sweep_setup(classifier)
  n_topic, record = task.n_topic_words, _topic_record(task.n_topic_words)
  kw = dict(ts=ts, trainable=cfg.trainable(), rtol=1e-10, atol=1e-12)
  # Compiled with the options attndyn run uses for FC/TC; the separate solves with XLA's defaults.
  options = xla_options.supported(dynamics._REDUCED_ODE_LINEAR_COMPILER_OPTIONS)
  together = jax.jit(lambda p, lr: dynamics.reduced_sen_ode_sweep(
      p, data.train, data.train_topic_word, np.arange(n_topic), record, lr=lr, **kw),
      compiler_options=options)(params0, lr)
  np.testing.assert_array_equal(together.failed_at, [-1, -1, -1])
  assert together.t.shape == (3, N_REC) and together.observables["s"].shape == (3, N_REC, n_topic)
  moved = np.abs(np.asarray(together.observables["s"])[:, -1]).max()
  assert moved > 0.5, f"scores barely moved ({moved}); the comparison would be vacuous"
  for i in range(3):
    one = dynamics.reduced_sen_ode(jax.tree.map(lambda x: x[i], params0), data.train,
                                   data.train_topic_word, jnp.arange(n_topic), record,
                                   lr=lr[i], **kw)
    for got, want in zip(jax.tree.leaves((together.observables, together.final_params)),
                         jax.tree.leaves((one.observables, one.final_params))):
      np.testing.assert_allclose(got[i], want, rtol=1e-7, atol=1e-9)


def test_reduced_sweep_conserves_theorem1_q_for_tl():
  """Along the joint solve, every seed's Q_t (eq 9) is conserved (TL: steps floored at 0.01,
  as in the single-solve Theorem-1 test)."""
  task, data, cfg, _ = _setup("tl", n_topics=3, words_per_topic=1, vocab_size=20, n_nontopic=3,
                               n_train=40, dim=4, embed_std=0.2)
  params0 = jax.vmap(lambda k: lu.init(k, cfg, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(5), 3))
  ts, lr = jnp.linspace(0.0, 100.0, 21), jnp.array([1.0, 1.5, 2.0])
  n_topic = task.n_topic_words
  together = dynamics.reduced_sen_ode_sweep(
      params0, data.train, data.train_topic_word, jnp.arange(n_topic), _topic_record(n_topic),
      lr=lr, ts=ts, trainable=cfg.trainable(), dtmin=0.01, max_steps=50_000, rtol=1e-8,
      atol=1e-10)
  np.testing.assert_array_equal(together.failed_at, [-1, -1, -1])
  for i in range(3):
    s = np.asarray(together.observables["s"][i])
    nu = np.asarray(together.observables["nu"][i])
    growth = np.abs(s[-1] - s[0])
    assert growth.max() > 0.5, f"seed {i}: scores barely moved ({growth})"
    q = _theorem1_q(s, nu, jax.tree.map(lambda x: x[i], params0), data)
    drift = np.abs(q - q[0]).max(0) / np.maximum(1.0, growth)
    assert drift.max() <= 1e-6, (i, drift)


def test_reduced_sweep_isolates_a_diverged_seed():
  """A seed whose velocity is not finite is reported failed; the others finish as if alone."""
  task, data, cfg, _ = _setup("tc")
  n_topic = task.n_topic_words
  ts = jnp.linspace(0.0, 100.0, N_REC)
  params0 = jax.vmap(lambda k: lu.init(k, cfg, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(5), 2))
  record = _topic_record(n_topic)
  together = dynamics.reduced_sen_ode_sweep(
      params0, data.train, data.train_topic_word, jnp.arange(n_topic), record,
      lr=jnp.array([1.0, jnp.nan]), ts=ts, trainable=cfg.trainable(), max_steps=SHARED_STEPS,
      rtol=1e-8, atol=1e-10)
  np.testing.assert_array_equal(together.failed_at, [-1.0, 0.0])
  alone = _tc_reduced()(jax.tree.map(lambda x: x[0], params0), 1.0, ts)
  np.testing.assert_allclose(together.observables["s"][0], alone.observables["s"],
                             rtol=1e-6, atol=1e-8)


def test_failures_are_reported_not_raised():
  """Solver failures give failed_at >= 0 (a recorded time), never an exception.

  A NaN in the initial parameters makes every observable non-finite from t0 on
  (and every step is rejected until the budget runs out); a step budget too
  small for the horizon leaves the later recorded times unreached.
  """
  task, data, cfg, params0 = _setup("tc")
  ts = jnp.linspace(0.0, 200.0, N_REC)
  nan_params0 = {**params0, "embeddings": params0["embeddings"].at[0, 0].set(jnp.nan)}
  for solve in (_tc_flow(), _tc_reduced()):
    assert float(solve(nan_params0, 1.0, ts).failed_at) == 0.0
  starved = dynamics.reduced_sen_ode(
      params0, data.train, data.train_topic_word, jnp.arange(task.n_topic_words),
      _topic_record(task.n_topic_words), lr=1.0, ts=ts, trainable=cfg.trainable(), max_steps=16)
  failed_at = float(starved.failed_at)
  assert 0 < failed_at <= float(ts[-1]) and failed_at in set(np.asarray(ts).tolist())
  reached = np.asarray(ts) < failed_at
  assert np.all(np.isfinite(np.asarray(starved.observables["s"])[reached]))


def test_failure_time_rules():
  """-1 when fine; first non-finite recorded time; t1 when only the result flag failed."""
  ts = jnp.array([0.0, 1.0, 2.0, 3.0])
  ok = {"a": jnp.zeros((4, 2))}
  bad = {"a": jnp.zeros((4, 2)).at[2, 1].set(jnp.inf)}
  assert float(failure_time(ts, ok, diffrax.RESULTS.successful)) == -1.0
  assert float(failure_time(ts, bad, diffrax.RESULTS.successful)) == 2.0
  assert float(failure_time(ts, bad, diffrax.RESULTS.max_steps_reached)) == 2.0
  assert float(failure_time(ts, ok, diffrax.RESULTS.max_steps_reached)) == 3.0


@pytest.mark.parametrize("freeze", [("keys",), ("embeddings",)])
def test_lemma2_with_frozen_group_is_a_config_error(freeze):
  task, data, cfg, params0 = _setup("tc", freeze=freeze)
  with pytest.raises(tasks.ConfigError, match="form='exact'"):
    dynamics.reduced_sen_ode(params0, data.train, data.train_topic_word,
                             jnp.arange(task.n_topic_words), _topic_record(task.n_topic_words),
                             lr=1.0, ts=jnp.linspace(0.0, 10.0, 3), trainable=cfg.trainable())


def test_trainable_query_is_a_config_error():
  task, data, cfg, params0 = _setup("tc")
  trainable = {**cfg.trainable(), "query": True}
  for form in ("lemma2", "exact"):
    with pytest.raises(tasks.ConfigError, match="fixed query"):
      dynamics.reduced_sen_ode(params0, data.train, data.train_topic_word,
                               jnp.arange(task.n_topic_words), _topic_record(task.n_topic_words),
                               lr=1.0, ts=jnp.linspace(0.0, 10.0, 3), trainable=trainable,
                               form=form)


def test_traced_topic_words_are_refused_and_concrete_jnp_ids_act_as_numpy():
  """A jnp ``topic_words`` made outside jit takes the NumPy path (the topic rows seen as the
  leading ids); a traced one (here jnp.arange inside jit) is refused by name, not solved on
  another code path."""
  task, data, cfg, params0 = _setup("tc")
  n_topic = task.n_topic_words
  kw = dict(lr=1.0, ts=jnp.linspace(0.0, 10.0, 3), trainable=cfg.trainable())
  _, _, _, ids, _ = dynamics.reduced_ode.check_solve_inputs("lemma2", cfg.trainable(), kw["ts"],
                                                   data.train, data.train_topic_word,
                                                   jnp.arange(n_topic))
  assert isinstance(ids, np.ndarray) and dynamics.reduced_ode.is_leading_ids(ids)
  solve = lambda p: dynamics.reduced_sen_ode(p, data.train, data.train_topic_word,
                                             jnp.arange(n_topic), _topic_record(n_topic), **kw)
  with pytest.raises(tasks.ConfigError, match="np.arange"):
    jax.eval_shape(solve, params0)


def test_ode_tolerance_defaults_are_the_cli_defaults():
  """One default rtol/atol for the reduced ODE (single and swept), the gradient flow and the
  CLI's [ode] section."""
  from attndyn.config import ODEConfig
  want = (ODEConfig().rtol, ODEConfig().atol)
  for fn in (dynamics.reduced_sen_ode, dynamics.reduced_sen_ode_sweep, dynamics.gradient_flow):
    sig = inspect.signature(fn).parameters
    # unset (None) so that a stepsize_controller given instead can be told from them
    assert (sig["rtol"].default, sig["atol"].default) == (None, None), fn.__name__
  controller = dynamics.ode.controller_for(None, rtol=None, atol=None, dtmin=None)
  assert (controller.rtol, controller.atol) == want
