"""The training loop: freezing by optax masks, minibatches, divergence, chunked sweeps."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import tasks

TASK = tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=30, n_nontopic=4,
                             n_train=24, n_test=8)


def _setup(classifier="tc", freeze=(), train_query=False, **train_kwargs):
  ds = tasks.make_topic_dataset(jax.random.PRNGKey(0), TASK)
  mc = models.LuModelConfig(n_words=TASK.n_words, n_classes=TASK.n_topics, embed_dim=3, key_dim=3,
                            classifier=classifier, embed_std=0.1, query_norm=1.0,
                            freeze=tuple(freeze), train_query=train_query)
  model = models.lu_attention(mc, dtype=jnp.float64)
  cfg = dynamics.TrainConfig(**{"steps": 20, "record_every": 5, "lr": 0.5, **train_kwargs})
  train = dynamics.make_train(models.make_loss(model.apply), ds.train,
                              analysis.topic_observables(model.apply, ds), cfg, mc.trainable(),
                              record_params=True)
  return model, train


@pytest.mark.parametrize("classifier,freeze,train_query,frozen", [
    ("tc", ("keys",), False, ("keys", "query")),                 # Attn-TC-KF
    ("tc", ("embeddings",), False, ("embeddings", "query")),     # Attn-TC-EF
    ("fc", (), False, ("classifier", "query")),                  # FC: U fixed
    ("tl", ("classifier",), True, ("classifier",)),              # trainable query, frozen MLP
])
def test_frozen_groups_never_move_and_the_rest_do(classifier, freeze, train_query, frozen):
  model, train = _setup(classifier, freeze, train_query)
  params0 = model.init(jax.random.PRNGKey(1))
  traj = jax.jit(train)(params0, jax.random.PRNGKey(2))
  for group in models.PARAM_GROUPS:
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                zip(jax.tree.leaves(traj.final_params[group]), jax.tree.leaves(params0[group])))
    if group in frozen:
      assert moved == 0.0, group
    else:
      assert moved > 0.0, group


def test_recorded_times_and_first_record_is_the_initial_state():
  model, train = _setup()
  params0 = model.init(jax.random.PRNGKey(1))
  traj = jax.jit(train)(params0, jax.random.PRNGKey(2))
  np.testing.assert_array_equal(traj.t, [0, 5, 10, 15, 20])
  assert traj.observables["loss"].shape == (5,)
  for a, b in zip(jax.tree.leaves(jax.tree.map(lambda x: x[0], traj.params)), jax.tree.leaves(params0)):
    np.testing.assert_array_equal(a, b)
  assert float(traj.failed_at) == -1


def test_shuffled_minibatches_visit_every_sample_once_per_epoch():
  batch = tasks.Batch(jnp.arange(12)[:, None], jnp.ones((12, 1), bool), jnp.arange(12))
  key = jax.random.PRNGKey(3)
  for epoch in range(3):
    seen = np.concatenate([np.asarray(dynamics.minibatch(batch, key, jnp.asarray(epoch * 4 + i), 3,
                                                         "shuffle").labels) for i in range(4)])
    np.testing.assert_array_equal(np.sort(seen), np.arange(12))
  first = [np.asarray(dynamics.minibatch(batch, key, jnp.asarray(i), 3, "shuffle").labels)
           for i in (0, 4)]
  assert not np.array_equal(first[0], first[1]), "each epoch should draw a new permutation"


def _epoch_counts(n, b, sampling, key, steps):
  """Per step: how often each sample enters the step's loss, weighted by 1/(its batch's size)."""
  batch = tasks.Batch(jnp.arange(n)[:, None], jnp.ones((n, 1), bool), jnp.arange(n))
  weights = lambda p, bt: (jnp.asarray(bt.labels.shape[0], jnp.float64),
                           jnp.zeros(n).at[bt.labels].add(1.0) / bt.labels.shape[0])
  step = jax.jit(lambda s: dynamics.minibatch_value_and_grad(weights, None, batch, key, s, b,
                                                              sampling))
  out = [step(jnp.asarray(s, jnp.int32)) for s in range(steps)]
  return np.array([o[0] for o in out]), np.stack([np.asarray(o[1]) for o in out])


def test_final_short_batch_sees_every_sample_once_per_epoch():
  n, b, key = 14, 4, jax.random.PRNGKey(7)    # 3 full batches and one of r = 2
  epoch = dynamics.steps_per_epoch(n, b, "shuffle_keep_last")
  assert epoch == 4 and dynamics.steps_per_epoch(n, b, "shuffle") == 3
  sizes, w = _epoch_counts(n, b, "shuffle_keep_last", key, 3 * epoch)
  np.testing.assert_array_equal(sizes, [4, 4, 4, 2] * 3)
  for e in range(3):   # every sample in exactly one step of the epoch; the short step's mean is over its 2
    counts = (w[e * epoch:(e + 1) * epoch] * sizes[e * epoch:(e + 1) * epoch, None]).sum(0)
    np.testing.assert_array_equal(counts, np.ones(n))
  assert not np.array_equal(w[:epoch], w[epoch:2 * epoch]), "each epoch should draw a new permutation"
  # drop-last: 3 steps of 4 per epoch, 2 samples unseen in each epoch
  sizes, w = _epoch_counts(n, b, "shuffle", key, 6)
  np.testing.assert_array_equal(sizes, [4] * 6)
  for e in range(2):
    counts = (w[3 * e:3 * e + 3] * 4).sum(0)
    assert sorted(counts) == [0.0] * 2 + [1.0] * (n - 2)


def test_final_short_batch_equals_drop_last_when_batch_size_divides_n():
  # n = 24, B = 6: nothing is left over, so keeping the last batch changes nothing, bit for bit
  model, keep = _setup(optimizer="sgd", batch_size=6, sampling="shuffle_keep_last")
  _, drop = _setup(optimizer="sgd", batch_size=6, sampling="shuffle")
  params0 = model.init(jax.random.PRNGKey(1))
  a, b = (jax.jit(t)(params0, jax.random.PRNGKey(4)) for t in (keep, drop))
  for x, y in zip(jax.tree.leaves((a.observables, a.final_params)),
                  jax.tree.leaves((b.observables, b.final_params))):
    np.testing.assert_array_equal(x, y)
  # B = 5 leaves 4: the two samplings then train differently
  _, keep5 = _setup(optimizer="sgd", batch_size=5, sampling="shuffle_keep_last")
  _, drop5 = _setup(optimizer="sgd", batch_size=5, sampling="shuffle")
  a, b = (jax.jit(t)(params0, jax.random.PRNGKey(4)).observables["loss"] for t in (keep5, drop5))
  assert np.all(np.isfinite(a)) and not np.array_equal(a, b)


def test_minibatch_order_depends_only_on_the_key():
  model, train = _setup(optimizer="sgd", batch_size=6, sampling="replacement")
  params0 = model.init(jax.random.PRNGKey(1))
  a = jax.jit(train)(params0, jax.random.PRNGKey(5)).observables["loss"]
  b = jax.jit(train)(params0, jax.random.PRNGKey(5)).observables["loss"]
  c = jax.jit(train)(params0, jax.random.PRNGKey(6)).observables["loss"]
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)


def test_a_diverging_run_is_frozen_and_flagged_while_others_finish():
  model, train = _setup(steps=40)
  params0 = model.init(jax.random.PRNGKey(1))
  lrs = jnp.array([0.5, 1e30])
  traj = jax.jit(jax.vmap(lambda lr: train(params0, jax.random.PRNGKey(0), lr)))(lrs)
  assert float(traj.failed_at[0]) == -1
  assert float(traj.failed_at[1]) >= 0
  assert np.all(np.isfinite(np.asarray(traj.observables["score"][1])))
  assert np.all(np.isfinite(jax.tree.leaves(traj.final_params)[0][1]))


@pytest.mark.parametrize("chunk_size", [None, 1, 2, 5])
def test_run_sweep_chunks_give_the_same_result(chunk_size):
  fn = lambda x: {"y": jnp.sin(x) * 2, "z": jnp.stack([x, x ** 2])}
  xs = jnp.linspace(0.0, 1.0, 5)
  out = dynamics.run_sweep(fn, xs, chunk_size=chunk_size)
  np.testing.assert_allclose(out["y"], 2 * np.sin(np.asarray(xs)))
  assert out["z"].shape == (5, 2)


def test_config_errors_name_the_field():
  with pytest.raises(tasks.ConfigError, match="^lr = "):
    dynamics.TrainConfig(lr=-1.0)
  with pytest.raises(tasks.ConfigError, match="^batch_size = "):
    dynamics.TrainConfig(optimizer="gd", batch_size=4)
  with pytest.raises(tasks.ConfigError, match="^freeze = "):
    models.LuModelConfig(n_words=10, n_classes=2, freeze=("everything",))


def test_a_parameter_group_without_a_trainable_flag_is_named():
  """A group missing from ``trainable`` is a ValueError naming it (optax's masking alone
  raises a bare KeyError), at init and when a trainer is traced."""
  params = {"w": jnp.ones(2), "bias": jnp.zeros(())}
  opt = dynamics.masked_optimizer(dynamics.base_optimizer("gd", 0.1), {"w": True})
  with pytest.raises(ValueError, match=r"\['bias'\]"):
    opt.init(params)
  batch = tasks.Batch(jnp.zeros((3, 1), jnp.int32), jnp.ones((3, 1), bool), jnp.zeros(3, jnp.int32))
  loss = lambda p, b: (jnp.sum(p["w"] ** 2) + p["bias"], None)
  train = dynamics.make_train(loss, batch, lambda p, p0: {}, dynamics.TrainConfig(steps=2,
                              record_every=1), {"w": True})
  with pytest.raises(tasks.ConfigError, match="bias"):
    jax.eval_shape(train, params, jax.random.PRNGKey(0))
  both = dynamics.masked_optimizer(dynamics.base_optimizer("gd", 0.1), {"w": True, "bias": False})
  updates, _ = both.update(params, both.init(params), params)
  np.testing.assert_array_equal(updates["bias"], 0.0)
  np.testing.assert_allclose(updates["w"], -0.1 * np.ones(2))


def test_the_guarded_update_freezes_a_run_at_its_first_non_finite_step_and_only_while_running():
  """The one guarded step of make_train, make_train_early_stopping and make_epoch_train."""
  from attndyn.dynamics.train import guarded_update

  opt = optax.sgd(1.0)
  params = {"w": jnp.array([1.0, 2.0])}
  state = opt.init(params)
  fine = {"w": jnp.array([0.5, 0.5])}
  moved, _, failed, ok = guarded_update(opt, fine, jnp.array(1.0), params, state,
                                        jnp.array(-1), jnp.array(3))
  np.testing.assert_array_equal(moved["w"], [0.5, 1.5])
  assert int(failed) == -1 and bool(ok)
  for bad_grads, bad_loss in (({"w": jnp.array([jnp.inf, 0.0])}, jnp.array(1.0)),
                              (fine, jnp.array(jnp.nan))):
    kept, _, failed, ok = guarded_update(opt, bad_grads, bad_loss, params, state,
                                         jnp.array(-1), jnp.array(3))
    np.testing.assert_array_equal(kept["w"], params["w"])      # frozen where it was
    assert int(failed) == 3 and not bool(ok)
  # A run that failed stays frozen, keeping its first failure step.
  kept, _, failed, _ = guarded_update(opt, fine, jnp.array(1.0), params, state,
                                      jnp.array(2), jnp.array(5))
  np.testing.assert_array_equal(kept["w"], params["w"])
  assert int(failed) == 2
  # A stopped run (early stopping: running = False) neither moves nor records a failure.
  kept, _, failed, ok = guarded_update(opt, {"w": jnp.array([jnp.inf, 0.0])}, jnp.array(1.0),
                                       params, state, jnp.array(-1), jnp.array(4), running=False)
  np.testing.assert_array_equal(kept["w"], params["w"])
  assert int(failed) == -1 and not bool(ok)
