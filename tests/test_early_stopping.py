"""Early stopping inside a vmapped sweep: per-seed stops, frozen best params, inf patience = make_train."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn import models
from attndyn import tasks

LRS = jnp.array([0.3, 1.0, 3.0])
TRAIN_CFG = dynamics.TrainConfig(optimizer="gd", lr=0.5, steps=100, record_every=2)
PATIENCE, EVAL_EVERY = 5, 2


@pytest.fixture(scope="module")
def setup(tiny_data):
  """The tiny topic task; the dev set is the test set with 30% of its labels flipped, so the
  dev loss falls, then rises as the model grows confident: faster runs turn earlier."""
  task, data = tiny_data
  flip = jax.random.bernoulli(jax.random.PRNGKey(9), 0.3, data.test.labels.shape)
  dev = data.test._replace(labels=jnp.where(flip, 1 - data.test.labels, data.test.labels))
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3, key_dim=2,
                             embed_std=0.1, key_std=0.1)
  model = models.lu_attention(cfg, jnp.float64)
  loss = models.make_loss(model.apply)
  record = lambda p, p0: {"dev_loss": loss(p, dev)[0]}
  keys = jax.random.split(jax.random.PRNGKey(3), len(LRS))
  return data.train, dev, model, loss, record, cfg, keys


@pytest.fixture(scope="module")
def stopped(setup):
  train_batch, dev, model, loss, record, cfg, keys = setup
  train = dynamics.make_train_early_stopping(loss, train_batch, dev, record, TRAIN_CFG,
                                             cfg.trainable(), patience=PATIENCE,
                                             eval_every=EVAL_EVERY, record_params=True)
  return jax.jit(jax.vmap(lambda k, lr: train(model.init(k), k, lr=lr)))(keys, LRS)


def test_seeds_stop_at_different_steps_patience_after_their_best(stopped):
  stop, best = np.asarray(stopped.stopped_at), np.asarray(stopped.best_step)
  assert np.all(stop > 0) and len(set(stop.tolist())) == len(LRS), stop
  np.testing.assert_array_equal(stop - best, PATIENCE * EVAL_EVERY)
  assert np.all(best % EVAL_EVERY == 0)
  assert stop[0] > stop[-1], "the largest learning rate overfits the noisy dev set first"


def test_a_stopped_seed_keeps_its_best_dev_loss_params(stopped):
  t = np.asarray(stopped.trajectory.t)[0]
  dev_loss = np.asarray(stopped.trajectory.observables["dev_loss"])
  for s in range(len(LRS)):
    best_idx = int(np.searchsorted(t, int(stopped.best_step[s])))
    stop_idx = int(np.searchsorted(t, int(stopped.stopped_at[s])))
    np.testing.assert_allclose(dev_loss[s, best_idx], stopped.best_value[s], rtol=1e-12)
    np.testing.assert_allclose(dev_loss[s, : stop_idx].min(), stopped.best_value[s], rtol=1e-12)
    for leaf, best, final in zip(jax.tree.leaves(stopped.trajectory.params),
                                 jax.tree.leaves(stopped.best_params),
                                 jax.tree.leaves(stopped.trajectory.final_params)):
      np.testing.assert_array_equal(leaf[s, best_idx], best[s])
      np.testing.assert_array_equal(final[s], best[s])
      for i in range(stop_idx, len(t)):   # frozen from the stop on
        np.testing.assert_array_equal(leaf[s, i], best[s])
    assert np.all(dev_loss[s, stop_idx:] == stopped.best_value[s])


def test_infinite_patience_equals_make_train(tiny_data, tiny_run):
  """conftest's compiled make_train sweep, rerun with early stopping that never stops."""
  _, data = tiny_data
  train = dynamics.make_train_early_stopping(
      models.make_loss(tiny_run.model.apply), data.train, data.test, tiny_run.record,
      tiny_run.train_cfg, tiny_run.model.config.trainable(), patience=math.inf, eval_every=3)
  never = dynamics.run_sweep(lambda point: train(tiny_run.model.init(point["key"]), point["key"],
                                                 lr=point["lr"]), tiny_run.points)
  plain = tiny_run.sweep
  np.testing.assert_array_equal(never.stopped_at, -1)
  np.testing.assert_array_equal(never.trajectory.t, plain.t)
  for a, b in zip(jax.tree.leaves((plain.observables, plain.final_params, plain.failed_at)),
                  jax.tree.leaves((never.trajectory.observables, never.trajectory.final_params,
                                   never.trajectory.failed_at))):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
  assert np.all(np.asarray(never.best_step) % 3 == 0), "the best step is on the evaluation grid"


@pytest.mark.parametrize("kwargs,field", [
    ({"patience": 0}, "^patience = "),
    ({"patience": 2.5}, "^patience = "),
    ({"patience": 3, "eval_every": 0}, "^eval_every = "),
    ({"patience": 3, "monitor": "train_loss"}, "^monitor = "),
])
def test_bad_options_are_one_clear_error(setup, kwargs, field):
  train_batch, dev, model, loss, record, cfg, keys = setup
  with pytest.raises(tasks.ConfigError, match=field):
    dynamics.make_train_early_stopping(loss, train_batch, dev, record, TRAIN_CFG, cfg.trainable(),
                                       **kwargs)
