"""The stochastic modified equation of SGD (dynamics.sde) and the SGD-noise statistics.

Time convention under test: step time, per-step noise covariance lr²·c_s·Σ/B.
The toy is 1-D linear regression, l_i(θ) = ½(x_i θ − y_i)², whose SGD (with
replacement) first two moments obey an exact linear recursion and whose SDE
moments obey an exact linear ODE (multiplicative noise: Var_i(g_i) is
quadratic in θ), so both variances are known in closed form.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn import models
from attndyn.analysis import sgd_noise
from attndyn.dynamics import sde
from attndyn.dynamics.reduced_ode import nontopic_constants, reduced_velocity, ReducedState
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError
from attndyn import tasks

X = np.array([0.6, 1.3, -0.8, 1.1, 0.4, -1.5, 0.9, 0.7])
Y = np.array([1.0, 0.2, -0.5, 2.0, 0.3, -1.0, 0.1, 1.4])
N = X.size
BATCH = Batch(jnp.arange(N, dtype=jnp.int32)[:, None], jnp.ones((N, 1), bool),
              jnp.zeros(N, jnp.int32))


def _losses(params, batch):
  i = batch.tokens[:, 0]
  return 0.5 * (jnp.asarray(X)[i] * params["theta"] - jnp.asarray(Y)[i]) ** 2


def _moments():
  a, c = np.mean(X ** 2), np.mean(X * Y)
  return a, c, np.var(X ** 2), np.mean((X ** 2 - a) * (X * Y - c)), np.var(X * Y)


def sgd_variance(lr, b, steps, theta0):
  """Exact Var[θ_k] of SGD with replacement on the toy (moment recursion)."""
  a, c, vaa, vac, vcc = _moments()
  m, s = theta0, theta0 ** 2
  for _ in range(steps):
    eaa, eac, ecc = a * a + vaa / b, a * c + vac / b, c * c + vcc / b
    m, s = (1 - lr * a) * m + lr * c, (1 - 2 * lr * a + lr ** 2 * eaa) * s + 2 * (
        lr * c - lr ** 2 * eac) * m + lr ** 2 * ecc
  return s - m * m


def sde_variance(lr, b, t, theta0, substeps=20000):
  """Var[θ(t)] of the Itô SME dθ = -lr(aθ - c)dt + lr sqrt(Var_i g_i(θ)/B) dW (moment ODE, RK4)."""
  a, c, vaa, vac, vcc = _moments()

  def f(u):
    m, s = u
    return np.array([-lr * (a * m - c),
                     -2 * lr * (a * s - c * m) + lr ** 2 / b * (vaa * s - 2 * vac * m + vcc)])
  u, h = np.array([theta0, theta0 ** 2]), t / substeps
  for _ in range(substeps):
    k1 = f(u); k2 = f(u + h / 2 * k1); k3 = f(u + h / 2 * k2); k4 = f(u + h * k3)
    u = u + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
  return u[1] - u[0] ** 2


def test_sde_moments_match_exact_sgd_variance_at_small_lr():
  # The convention lr²Σ/B: at small lr the SDE's variance is SGD's up to O(lr).
  for lr, tol in ((0.01, 0.02), (0.05, 0.08)):
    v_sgd, v_sde = sgd_variance(lr, 2, 300, 0.0), sde_variance(lr, 2, 300.0, 0.0, 3000)
    assert abs(v_sde / v_sgd - 1) < tol, (lr, v_sde, v_sgd)
  # ... and not at large lr (the SME is a small-lr approximation).
  v_sgd, v_sde = sgd_variance(0.6, 2, 300, 0.0), sde_variance(0.6, 2, 300.0, 0.0, 3000)
  assert abs(v_sde / v_sgd - 1) > 0.2


def test_simulated_sde_variance_matches_closed_form():
  lr, b, t, seeds = 0.05, 2, 40.0, 3000
  ts = np.array([0.0, t])
  run = jax.jit(jax.vmap(lambda k: sde.sgd_sde(
      _losses, {"theta": jnp.asarray(0.0)}, BATCH, lambda p, p0: p["theta"], lr=lr, batch_size=b,
      ts=ts, trainable={"theta": True}, key=k, dt=0.5).observables))
  theta = np.asarray(run(jax.random.split(jax.random.PRNGKey(1), seeds)))[:, -1]
  expected = sde_variance(lr, b, t, 0.0, 2000)
  # sampling error of a variance over 3000 seeds: sd ≈ sqrt(2/3000) ≈ 2.6%; EM bias ~ lr·a·dt.
  assert abs(theta.var(ddof=1) / expected - 1) < 0.1, (theta.var(), expected)
  a, c = np.mean(X ** 2), np.mean(X * Y)
  mean = c / a * (1 - np.exp(-lr * a * t))
  assert abs(theta.mean() - mean) < 4 * np.sqrt(expected / seeds)


def test_minibatch_sgd_variance_matches_exact_recursion():
  lr, b, steps, seeds = 0.2, 2, 40, 3000
  loss = lambda p, batch: (jnp.mean(_losses(p, batch)), None)
  cfg = dynamics.TrainConfig(optimizer="sgd", lr=lr, steps=steps, record_every=steps,
                             batch_size=b, sampling="replacement")
  train = dynamics.make_train(loss, BATCH, lambda p, p0: p["theta"], cfg, {"theta": True})
  theta = np.asarray(jax.jit(jax.vmap(lambda k: train({"theta": jnp.asarray(0.0)}, k)
                                      .observables))(jax.random.split(jax.random.PRNGKey(2), seeds)))
  assert abs(theta[:, -1].var(ddof=1) / sgd_variance(lr, b, steps, 0.0) - 1) < 0.1
  # the key drives the batch order: another key, another final parameter
  final = jax.jit(lambda k: train({"theta": jnp.asarray(0.3)}, k).final_params["theta"])
  assert final(jax.random.PRNGKey(5)) != final(jax.random.PRNGKey(6))


@pytest.mark.parametrize("n,b,sampling", [(10, 4, "shuffle"), (10, 4, "shuffle_keep_last"),
                                           (10, 3, "shuffle_keep_last"), (10, 5, "shuffle")])
def test_shuffled_epoch_noise_is_the_boundary_samples(n, b, sampling):
  # Constant per-sample gradients (l_i = −a_i θ): at every epoch's end shuffled SGD's variance is
  # the epoch-boundary noise alone, so Var_SME / Var_SGD is epoch_boundary_ratio exactly (inf: 0).
  a = np.random.default_rng(1).normal(size=n)
  batch = Batch(jnp.arange(n, dtype=jnp.int32)[:, None], jnp.ones((n, 1), bool),
                jnp.zeros(n, jnp.int32))
  loss = lambda p, bt: (-jnp.mean(jnp.asarray(a)[bt.tokens[:, 0]]) * p["theta"], None)
  lr, epochs, seeds = 0.1, 5, 4000
  epoch = dynamics.steps_per_epoch(n, b, sampling)
  cfg = dynamics.TrainConfig(optimizer="sgd", lr=lr, steps=epochs * epoch, record_every=epoch,
                             batch_size=b, sampling=sampling)
  train = dynamics.make_train(loss, batch, lambda p, p0: p["theta"], cfg, {"theta": True})
  theta = np.asarray(jax.jit(jax.vmap(lambda k: train({"theta": jnp.asarray(0.0)}, k)
                                      .observables))(jax.random.split(jax.random.PRNGKey(3), seeds)))
  # an epoch's mean move is E steps of the full gradient whichever r samples are left over
  np.testing.assert_allclose(theta.mean(0), lr * a.mean() * epoch * np.arange(epochs + 1),
                             atol=5 * np.sqrt(theta[:, -1].var() / seeds) + 1e-12)
  # the SME over the same steps, exact for constant gradients: steps · lr² c_s Σ / B
  sme = epochs * epoch * lr ** 2 * sde.finite_population_factor(n, b, sampling) * a.var() / b
  ratio = sgd_noise.epoch_boundary_ratio(n, b, sampling)
  var = theta[:, -1].var(ddof=1)
  if np.isinf(ratio):
    assert var < 1e-24 * sme
  else:
    # sampling error of a variance over 4000 seeds: sd ≈ sqrt(2/4000) ≈ 2.2% (a bit more for a
    # sum of few discrete draws); 0.12 is five of those
    assert abs(sme / var / ratio - 1) < 0.12, (sme / var, ratio)
    # the variance grows by one epoch's boundary noise per epoch
    np.testing.assert_allclose(theta.var(0, ddof=1)[1:] / np.arange(1, epochs + 1),
                               var / epochs, rtol=0.2)


def _tiny_lu(classifier="tc"):
  task = tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=12, n_nontopic=3,
                               n_train=10, n_test=4)
  data = tasks.make_topic_dataset(jax.random.PRNGKey(0), task)
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=2, embed_dim=3, key_dim=3,
                             classifier=classifier, hidden_dim=3, embed_std=0.3, key_std=0.3)
  params = models.lu.init(jax.random.PRNGKey(1), cfg, jnp.float64)
  return task, data, cfg, params


def test_low_rank_operator_is_lr_squared_sigma_over_b():
  _, data, cfg, params = _tiny_lu()
  losses = sde.per_sample_cross_entropy(models.lu.apply)
  moving = {k: v for k, v in params.items() if cfg.trainable()[k]}
  fixed = {k: v for k, v in params.items() if not cfg.trainable()[k]}
  merged = lambda m, f: {k: (m[k] if k in m else f[k]) for k in params}
  per = lambda m, f, b: losses(merged(m, f), b)
  n, lr, b = data.train.tokens.shape[0], 0.3, 4
  coef = sde.noise_coefficient(n, b, "shuffle")
  assert coef == pytest.approx(np.sqrt((n - b) / (n - 1) / (n * b)))
  flat = lambda tree: jnp.concatenate([x.ravel() for x in jax.tree.leaves(tree)])

  @jax.jit
  def compute():
    op = sde.sme_field(per, n, coef, jnp.float64)(0.0, moving, (lr, fixed, data.train))
    cols = jax.vmap(lambda e: flat(op.mv((jnp.zeros(()), e))), out_axes=1)(jnp.eye(n))  # [P, n]
    g = jax.jacrev(lambda m: per(m, fixed, data.train))(moving)
    g = jnp.concatenate([x.reshape(n, -1) for x in jax.tree.leaves(g)], 1)              # [n, P]
    return cols, g, flat(op.mv((jnp.ones(()), jnp.zeros(n))))

  cols, g, drift = compute()
  sigma = jnp.cov(g.T, bias=True)
  np.testing.assert_allclose(cols @ cols.T, lr ** 2 * (n - b) / (n - 1) * sigma / b, atol=1e-12)
  np.testing.assert_allclose(drift, -lr * g.mean(0), atol=1e-12)


def test_zero_noise_sde_with_unit_step_is_gradient_descent():
  _, data, cfg, params = _tiny_lu()
  losses = sde.per_sample_cross_entropy(models.lu.apply)
  n = data.train.tokens.shape[0]
  record = lambda p, p0: p["embeddings"][:4]
  traj = jax.jit(lambda p: sde.sgd_sde(
      losses, p, data.train, record, lr=0.5, batch_size=n, sampling="shuffle",
      ts=np.arange(0.0, 21.0, 5.0), trainable=cfg.trainable(), key=jax.random.PRNGKey(0),
      dt=1.0, brownian="unsafe"))(params)
  gd = dynamics.make_train(models.make_loss(models.lu.apply), data.train, record,
                           dynamics.TrainConfig(lr=0.5, steps=20, record_every=5), cfg.trainable())
  np.testing.assert_allclose(traj.observables,
                             jax.jit(gd)(params, jax.random.PRNGKey(0)).observables, atol=1e-10)


def test_reduced_per_sample_velocities_and_noise():
  task, data, cfg, params = _tiny_lu()
  params = {**params, "keys": params["keys"] * 0}   # scores 0: every word enters Z equally
  topic = jnp.arange(task.n_topic_words)
  c = nontopic_constants(params, data.train, data.train_topic_word, topic)
  state = ReducedState(params["embeddings"][topic], jnp.zeros(task.n_topic_words) + 0.2,
                       params["classifier"])
  q_sq = jnp.dot(params["query"], params["query"])
  velocities = lambda st: sde.per_sample_reduced_velocities(st, c, params["classifier"], 0.4, q_sq,
                                                            trainable=cfg.trainable())
  state0 = state._replace(s=jnp.zeros(task.n_topic_words))
  per, full, vel = jax.jit(lambda st: (
      velocities(st), reduced_velocity(st, c, params["classifier"], 0.4, q_sq, form="exact",
                                       trainable=cfg.trainable()), velocities(state0).s))(state)
  for a, b in zip(jax.tree.leaves(per), jax.tree.leaves(full)):
    np.testing.assert_allclose(a.mean(0), b, atol=1e-12)
  # One Euler–Maruyama step's spread is dt·c_s/(nB)·(V − v̄)ᵀ(V − v̄) (its diagonal, s_t).
  n, b, dt, seeds = data.train.tokens.shape[0], 2, 0.5, 2000   # vel: [n, T] at s = 0
  run = jax.jit(jax.vmap(lambda k: sde.reduced_sgd_sde(
      params, data.train, data.train_topic_word, topic, lambda p, p0: models.word_scores(p)[topic],
      lr=0.4, batch_size=b, ts=np.array([0.0, dt]), trainable=cfg.trainable(), key=k, dt=dt,
      brownian="unsafe").observables))
  s1 = np.asarray(run(jax.random.split(jax.random.PRNGKey(3), seeds)))[:, -1]
  expected = dt / (n * b) * np.sum((vel - vel.mean(0)) ** 2, axis=0)
  np.testing.assert_allclose(s1.var(0, ddof=1), expected, rtol=0.12)


def test_bad_inputs():
  with pytest.raises(ConfigError, match="sampling"):
    sde.finite_population_factor(10, 2, "bootstrap")
  with pytest.raises(ConfigError, match="batch_size"):
    sde.finite_population_factor(10, 11, "replacement")
  with pytest.raises(ConfigError, match="brownian"):
    sde.brownian_motion(0.0, 1.0, 3, jax.random.PRNGKey(0), 0.1, "pink")
  with pytest.raises(ConfigError, match="dt"):
    sde.sgd_sde(_losses, {"theta": jnp.asarray(0.0)}, BATCH, lambda p, p0: p["theta"], lr=0.1,
                batch_size=2, ts=np.array([0.0, 1.0]), trainable={"theta": True},
                key=jax.random.PRNGKey(0), dt=0.0)


def test_noise_statistics():
  rng = np.random.default_rng(0)
  ratios = np.array([0.01, 0.02, 0.04, 0.08])
  samples = [rng.normal(size=(400, 3)) * np.sqrt(r) for r in ratios]
  fit = sgd_noise.loglog_slope(ratios, samples, n_boot=200)
  assert fit.lo < 1.0 < fit.hi and abs(fit.slope - 1) < 0.15
  samples = [rng.normal(size=(400, 3)) * r for r in ratios]   # variance ∝ ratio²
  assert abs(sgd_noise.loglog_slope(ratios, samples, n_boot=50).slope - 2) < 0.2
  t = np.arange(5.0)
  np.testing.assert_allclose(sgd_noise.takeoff_times(t, [[0, 0.5, 1.5, 2, 3], [0, 0, 0, 0, 0.1]],
                                                     1.0), [1.5, np.nan])
  ratio, lo, hi, _ = sgd_noise.variance_ratio(2 * samples[0], samples[0], n_boot=100)
  assert ratio == pytest.approx(4.0) and lo <= 4.0 <= hi


def test_tau_grid_records_every_lr_on_the_same_times():
  """On the grid, every lr's record nearest each τ sits exactly on it (lr · step = τ), and a
  grid that some lr cannot hit in whole steps is refused."""
  lrs = (0.5, 1.0)
  tau, every, steps = sgd_noise.tau_grid(lrs, 10, 40)
  np.testing.assert_array_equal(tau, [0.0, 10.0, 20.0, 30.0, 40.0])
  t_steps = np.arange(0, steps + 1, every)
  for lr in lrs:
    obs = {"x": (lr * t_steps)[None]}                         # [S = 1, K]: the run's own τ
    np.testing.assert_array_equal(sgd_noise.on_grid(obs, t_steps, lr, tau)["x"][0], tau)
  assert sgd_noise.tau_grid((0.3, 1.0), 10, 40) is None       # 10 / 0.3 is no whole step count
  assert sgd_noise.tau_grid((2.0,), 1, 40) is None            # less than one step between records


def test_variance_ratio_at_and_epoch_ends():
  rng = np.random.default_rng(1)
  ref = rng.normal(size=(300, 4, 3))
  ratio, lo, hi = sgd_noise.variance_ratio_at(3 * ref, ref, 2, n_boot=50)
  assert ratio == pytest.approx(9.0) and lo <= 9.0 <= hi
  assert sgd_noise.variance_ratio_at(3 * ref, ref, 2, word_mean=True, n_boot=50)[0] == \
      pytest.approx(9.0)
  tau = np.arange(0.0, 50.0, 10.0)                            # steps 0, 10, 20, 30, 40 at lr 1
  assert sgd_noise.last_epoch_end(tau, 4, 1.0, 20) == 4
  assert sgd_noise.last_epoch_end(tau, 3, 1.0, 20) == 2
  assert sgd_noise.last_epoch_end(tau, 1, 1.0, 20) is None    # record 0 is no epoch's end


def test_invariant_drift_and_sen_errors_per_seed():
  """A conserved Q_t has no drift, a Q_t that moves by as much as the score grows has drift 1;
  ‖v‖ on Eq (10) has no Corollary-1 error, whatever happens before the window."""
  from attndyn.analysis.sen import sen_norm
  tau = np.linspace(0.0, 10.0, 11)
  score = np.stack([np.outer(tau, [1.0, 2.0])] * 2)          # [S = 2, K, W = 2]
  q = np.stack([np.ones_like(score[0]), score[0]])           # seed 0 conserved, seed 1 moves
  np.testing.assert_allclose(sgd_noise.mean_invariant_drift({"invariant": q, "score": score}),
                             [0.0, 1.0])
  norm = np.array(sen_norm(score, 5))
  norm[:, :3] *= 2                                           # off the curve before τ = 5 only
  err = sgd_noise.sen_errors({"score": score, "emb_norm": norm}, tau, 5, 5.0)
  np.testing.assert_allclose(err, 0.0, atol=1e-12)
  assert np.all(sgd_noise.sen_errors({"score": score, "emb_norm": norm}, tau, 5, 0.0) > 0.5)
