"""Lemma 2 / Corollary 1 with sparsemax and 1.5-entmax (docs/sparsemax_sen.md)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.analysis import sparse_sen as ss
from attndyn.dynamics.sparsemax_ode import sen_factor, sparse_sen_ode, topic_weight
from attndyn.models.normalisers import normalise
from attndyn.tasks.errors import ConfigError

M = 5
SCORES = jnp.array([-0.5, -0.19, -0.05, 0.0, 0.3, 0.7, 0.99, 1.3, 1.9, 2.5], jnp.float64)


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "entmax15"])
def test_topic_weight_and_score_speed_match_the_normaliser_jacobian(name):
  z = jnp.zeros((SCORES.size, M + 1), jnp.float64).at[:, 0].set(SCORES)
  a = jax.jit(jax.vmap(lambda v: normalise(name, v)))(z)
  jac = jax.jit(jax.vmap(jax.jacrev(lambda v: normalise(name, v))))(z)[:, 0, 0]     # ∂a_t/∂s_t
  np.testing.assert_allclose(topic_weight(SCORES, M, name), a[:, 0], atol=1e-12)
  # ṡ_t ∝ J_tt (ν_t − ν̄∖t)ᵀh and ν̇_t ∝ a_t h, so 1/F = J_tt / a_t (0 off the support).
  expected = jnp.where(a[:, 0] > 0, jac / jnp.where(a[:, 0] > 0, a[:, 0], 1.0), 0.0)
  np.testing.assert_allclose(sen_factor(SCORES, M, name), expected, atol=1e-10)
  if name == "sparsemax":   # the support rule of the derivation: all words for −1/m < s < 1
    np.testing.assert_array_equal(np.sum(np.asarray(a) > 0, axis=1) == M + 1,
                                  (SCORES > -1 / M) & (SCORES < 1))
    assert float(sen_factor(1.3, M, name)) == 0.0 and float(topic_weight(1.3, M, name)) == 1.0


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "entmax15"])
def test_sen_potential_integrates_F(name):
  s = jnp.array([0.05, 0.3, 0.7, 0.95], jnp.float64)
  dphi = jax.jit(jax.vmap(jax.grad(lambda x: ss.sen_potential(x, M, name))))(s)
  np.testing.assert_allclose(dphi * sen_factor(s, M, name), 1.0, atol=1e-9)
  assert float(ss.sen_potential(0.0, M, name)) == 0.0


def test_closed_forms_at_the_end_of_the_support_phase():
  np.testing.assert_allclose(ss.sen_norm_flavour(1.0, 20, "sparsemax"), np.sqrt(1 + 2 / 20))
  np.testing.assert_allclose(ss.sen_norm_flavour(3.0, 20, "sparsemax"), np.sqrt(1 + 2 / 20))
  np.testing.assert_allclose(ss.sen_norm_flavour(0.4, 20, "softmax"),
                             np.sqrt(2 * (0.4 + np.expm1(0.4) / 20)))
  phi = ss.sen_potential(jnp.array([1.9, 1.99, 1.9999]), 20, "entmax15")
  assert bool(jnp.all(jnp.diff(phi) > 0.1))          # diverges (logarithmically) as s → 2
  assert float(ss.sen_potential(2.0, 20, "entmax15")) == np.inf


TASK = tasks.TopicTaskConfig(n_topics=2, words_per_topic=1, vocab_size=300, n_nontopic=3,
                             n_train=40, n_test=8)


@pytest.fixture(scope="module")
def sen_runs():
  """GD and the derived ODE (form 'sen') of a tiny sparsemax Attn-TC run."""
  data = tasks.make_topic_dataset(jax.random.PRNGKey(0), TASK)
  cfg = models.LuModelConfig(n_words=TASK.n_words, n_classes=2, embed_dim=3, key_dim=3,
                             embed_std=1e-3, key_std=0.0, query_norm=1.0, normaliser="sparsemax")
  apply = models.lu.apply_for(cfg)
  record = ss.flavour_observables(apply, data, "sparsemax")
  train_cfg = dynamics.TrainConfig(lr=0.15, steps=600, record_every=20)
  params0 = models.lu.init(jax.random.PRNGKey(1), cfg, jnp.float64)
  gd = jax.jit(dynamics.make_train(models.make_loss(apply), data.train, record, train_cfg,
                                   cfg.trainable()))(params0, jax.random.PRNGKey(2))
  ode = jax.jit(lambda p: sparse_sen_ode(
      p, data.train, data.train_topic_word, jnp.arange(TASK.n_topic_words), record, lr=0.15,
      ts=train_cfg.record_steps(), trainable=cfg.trainable(), normaliser="sparsemax"))(params0)
  return cfg, gd, ode, data


def test_sparsemax_ode_conserves_Q_follows_gd_and_the_score_freezes_at_one(sen_runs):
  cfg, gd, ode, _ = sen_runs
  assert float(ode.failed_at) == -1.0
  s_gd, s_ode = np.asarray(gd.observables["score"]), np.asarray(ode.observables["score"])
  drift = ss.phase_invariant_drift(ode.observables["invariant"], s_ode, "sparsemax")
  assert float(drift.max()) < 1e-6
  assert float(np.abs(s_gd - s_ode).max()) < 0.05
  # Once the topic word holds the whole support its score is frozen: exactly at 1 for the ODE
  # (non-topic scores frozen at 0); near 1 for GD (its non-topic scores move a little).
  np.testing.assert_allclose(s_ode[-10:], 1.0, atol=1e-3)
  assert float(np.ptp(s_ode[-10:], axis=0).max()) < 1e-9
  assert float(np.ptp(s_gd[-10:], axis=0).max()) < 1e-9
  np.testing.assert_allclose(s_gd[-1], 1.0, atol=0.03)
  v = np.asarray(gd.observables["emb_norm"])
  assert v[-1].min() > float(ss.sen_norm_flavour(1.0, TASK.n_nontopic, "sparsemax"))
  # The derived SEN relation on GD while the word shares the attention.
  err = ss.sen_phase_error(s_gd[None], v[None], TASK.n_nontopic, "sparsemax")
  assert float(np.nanmax(err)) < 0.05


def test_exact_zero_score_gradient_when_the_topic_word_holds_the_whole_support(sen_runs):
  cfg, gd, _, data = sen_runs
  loss = models.make_loss(models.lu.apply_for(cfg))
  (_, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(gd.final_params, data.train)
  is_topic = data.train.tokens == data.train_topic_word[:, None]
  np.testing.assert_array_equal(jnp.where(is_topic, out.attention, 0.0).sum(1), 1.0)  # support {t}
  q = gd.final_params["query"]
  np.testing.assert_array_equal(grads["keys"] @ q, 0.0)     # every score gradient exactly 0
  assert float(jnp.abs(grads["embeddings"][:TASK.n_topic_words]).max()) > 0


def test_bad_settings_raise_config_errors(sen_runs):
  cfg = sen_runs[0]
  with pytest.raises(ConfigError, match="form = 'lemma2'"):
    sparse_sen_ode({}, None, None, None, None, lr=0.1, ts=[0, 1], trainable=cfg.trainable(),
                   form="lemma2")
  with pytest.raises(ConfigError, match="normaliser = 'hard'"):
    sparse_sen_ode({}, None, None, None, None, lr=0.1, ts=[0, 1], trainable=cfg.trainable(),
                   normaliser="hard")
  with pytest.raises(ConfigError, match="fixed query"):
    sparse_sen_ode({}, None, None, None, None, lr=0.1, ts=[0, 1],
                   trainable={**cfg.trainable(), "query": True})
