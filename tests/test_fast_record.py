"""The fast path reads :func:`analysis.topic_observables` through its seeds-last form.

``record.seeds_last`` computes every observable of the topic task from the fast state's
per-word view (:class:`dynamics.fast_lu.WordRows`), for all of a tile's seeds at once,
instead of converting the state to ordinary parameters and calling ``record`` per seed.
It is a second form of the same mathematics, so each test trains the same seeds on the
fast path twice, reading the record one way and the other, and compares every recorded
observable: in float64 the two agree to summation order (1e-9; they evaluate the same
formulas on the same states).
"""
import functools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import tasks

TASK = tasks.TopicTaskConfig(n_topics=3, words_per_topic=2, vocab_size=60, n_nontopic=5,
                             n_train=90, n_test=20)


@pytest.fixture(scope="module")
def data():
  return jax.jit(tasks.make_topic_dataset, static_argnums=1)(jax.random.PRNGKey(0), TASK)


def _padded(data):
  """Half the training sentences lose their last two words (masked)."""
  rng = np.random.default_rng(0)
  mask = np.ones(data.train.mask.shape, bool)
  mask[rng.random(mask.shape[0]) < 0.5, -2:] = False
  tokens = np.where(mask, np.asarray(data.train.tokens), 0)
  return data._replace(train=data.train._replace(tokens=jnp.asarray(tokens),
                                                  mask=jnp.asarray(mask)))


def _both(data, classifier, *, steps=120, record_every=20, seed_tile=2, **kw):
  """Trajectories of 3 seeds on the fast path, recorded through ``seeds_last`` and per seed."""
  cfg_model = models.LuModelConfig(n_words=TASK.n_words, n_classes=TASK.n_topics, embed_dim=6,
                                   key_dim=5, classifier=classifier, hidden_dim=4,
                                   embed_std=0.3, **kw)
  record = analysis.topic_observables(models.lu.apply_for(cfg_model), data)
  assert record.seeds_last is not None
  per_seed = lambda params, params0: record(params, params0)   # no seeds_last: vmapped record
  cfg = dynamics.TrainConfig(lr=0.5, steps=steps, record_every=record_every)
  params0 = jax.vmap(lambda k: models.lu.init(k, cfg_model, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(1), 3))
  lr = jnp.asarray([0.5, 0.3, 0.8])
  out = []
  for r in (record, per_seed):
    train = dynamics.fast_lu.make_fast_sweep_train(cfg_model, data.train, r, cfg,
                                                   seed_tile=seed_tile)
    out.append(jax.jit(train)(params0, lr))
  return out


def _assert_same_observables(a, b):
  assert set(a.observables) == set(b.observables)
  for k in a.observables:
    x, y = np.asarray(a.observables[k]), np.asarray(b.observables[k])
    assert x.shape == y.shape and x.dtype == y.dtype, k
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12, err_msg=k)
  np.testing.assert_array_equal(a.failed_at, b.failed_at)


@pytest.mark.parametrize("classifier,kw,padded", [
    ("tc", {}, False), ("fc", {}, True), ("tl", {}, True),
    ("tc", {"freeze": ("keys",)}, False), ("tl", {"freeze": ("embeddings",)}, False),
    ("fc", {"fc_init": "randn_unit_diag"}, False), ("tc", {"train_query": True}, True),
    ("tc", {"normaliser": "sparsemax", "key_std": 1.0}, True),
    ("tl", {"normaliser": "sparsemax", "key_std": 1.0}, False)])
def test_seeds_last_record_equals_the_per_seed_record(data, classifier, kw, padded):
  """FC (its state in ``U``'s coordinates), TC and TL; frozen keys or embeddings; masked
  positions; a trainable query (which also scales the scores of words absent from the
  training set); sparsemax attention (dynamics.fast_lu.sparse: the record's attention is
  sparsemax's); 3 seeds in tiles of 2 (a padded tile)."""
  fast, slow = _both(_padded(data) if padded else data, classifier, **kw)
  _assert_same_observables(fast, slow)
  obs, frozen = fast.observables, kw.get("freeze", ())
  if "keys" not in frozen:                                                 # the scores moved
    assert float(jnp.max(jnp.abs(obs["score"]))) > 0.5
  if "embeddings" not in frozen:                              # so did non-topic embeddings
    assert float(jnp.max(obs["nontopic_max_abs_norm_change"])) > 0.0


def test_only_the_lu_models_own_forward_pass_has_a_seeds_last_record(data):
  """``models.lu.apply`` and ``apply_for``'s partial of it (sparsemax, 1.5-entmax) have a
  seeds-last record; any other ``apply`` (a wrapper of it, a structured normaliser, a
  partial with more arguments) keeps the per-seed record only."""
  config = lambda normaliser: models.LuModelConfig(n_words=TASK.n_words, n_classes=TASK.n_topics,
                                                   normaliser=normaliser)
  for normaliser in ("softmax", "sparsemax", "entmax15"):
    record = analysis.topic_observables(models.lu.apply_for(config(normaliser)), data)
    assert record.seeds_last.keywords == {"normaliser": normaliser}
  others = (lambda p, b: models.lu.apply(p, b), models.lu.apply_for(config("fusedmax")),
            functools.partial(models.lu.apply, normaliser="sparsemax", extra=1))
  for other in others:
    assert not hasattr(analysis.topic_observables(other, data), "seeds_last")


@pytest.mark.parametrize("classifier,extended", [("tc", False), ("tl", False), ("fc", True)])
def test_reduced_ode_sweep_records_seeds_last_as_per_seed(data, classifier, extended):
  """Lemma 2's reduced ODE over seeds (``dynamics.reduced_sen_ode_sweep``) reads the same
  record through ``seeds_last`` at every saved time: the topic words' rows from the state,
  the non-topic words' from the start (moved by the push in the extended dynamics)."""
  cfg_model = models.LuModelConfig(n_words=TASK.n_words, n_classes=TASK.n_topics, embed_dim=6,
                                   key_dim=5, classifier=classifier, hidden_dim=4,
                                   embed_std=0.3)
  params0 = jax.vmap(lambda k: models.lu.init(k, cfg_model, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(2), 3))
  record = analysis.topic_observables(models.lu.apply, data)
  per_seed = lambda params, params0: record(params, params0)
  out = [jax.jit(lambda p, r=r: dynamics.reduced_sen_ode_sweep(
      p, data.train, data.train_topic_word, np.arange(TASK.n_topic_words), r,
      lr=jnp.asarray([0.5, 1.0, 1.5]), ts=jnp.linspace(0.0, 60.0, 7),
      trainable=cfg_model.trainable(), stepsize_controller=diffrax.ConstantStepSize(),
      dt0=0.5, extended=extended))(params0)
      for r in (record, per_seed)]
  # The same solve twice, only the record differs; fixed steps, so that the two programs'
  # rounding (XLA fuses each differently) cannot move an adaptive controller's steps.
  _assert_same_observables(*out)
  assert float(jnp.max(jnp.abs(out[0].observables["score"]))) > 0.5
  if extended:                                                 # the non-topic words moved
    assert float(jnp.max(out[0].observables["nontopic_max_abs_norm_change"])) > 0.0
