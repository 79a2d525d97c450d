"""Theorem 2: with a fixed linear classifier whose columns are linearly independent, GD drives
the training loss to 0 and the attention onto the topic word of every sentence."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import analysis
from attndyn import dynamics
from attndyn import models

CFG = dynamics.TrainConfig(optimizer="gd", lr=1.0, steps=1600, record_every=200)


@pytest.fixture(scope="module")
def fc_train(tiny_data):
  """One compiled GD run of Attn-FC (shared by both choices of U: same shapes)."""
  task, data = tiny_data
  def model(fc_init):
    cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                               key_dim=3, classifier="fc", fc_init=fc_init, embed_std=1e-3)
    return models.lu_attention(cfg, jnp.float64)
  any_model = model("orthonormal")
  train = jax.jit(dynamics.make_train(
      models.make_loss(any_model.apply), data.train,
      analysis.topic_observables(any_model.apply, data), CFG, any_model.config.trainable()))
  return model, train, data


@pytest.mark.parametrize("fc_init", ["orthonormal", "randn_unit_diag"])
def test_loss_to_zero_and_attention_to_topic_word(fc_train, fc_init):
  model, train, data = fc_train
  m = model(fc_init)
  params0 = m.init(jax.random.PRNGKey(7))
  u = np.asarray(params0["classifier"]["U"])
  if fc_init == "orthonormal":
    np.testing.assert_allclose(u.T @ u, np.eye(u.shape[1]), atol=1e-12)
  assert np.linalg.matrix_rank(u) == u.shape[1]          # the theorem's hypothesis
  traj = train(params0, jax.random.PRNGKey(0))
  assert int(traj.failed_at) == -1
  loss = np.asarray(traj.observables["loss"])
  attention = np.asarray(traj.observables["topic_attention"])
  score = np.asarray(traj.observables["score"])          # [checkpoints, topic words]
  # Loss strictly decreases across checkpoints, from log J towards 0.
  np.testing.assert_allclose(loss[0], np.log(2.0), atol=1e-3)
  assert np.all(np.diff(loss) < 0), loss
  assert loss[-1] < 0.02 * loss[0], loss
  # The attention on the topic word grows at every checkpoint, from 1/(m+1) towards 1.
  np.testing.assert_allclose(attention[0], 0.25, atol=1e-12)
  assert np.all(np.diff(attention) > 0), attention
  assert attention[-1] > 0.9, attention
  # Every topic word's score keeps growing; every training sentence attends to its topic word.
  assert np.all(np.diff(score, axis=0) > 0)
  out = models.lu.apply(traj.final_params, data.train)
  on_topic = np.where(np.asarray(data.train.tokens == data.train_topic_word[:, None]),
                      np.asarray(out.attention), 0.0).sum(axis=1)
  assert on_topic.min() > 0.5, on_topic.min()
  assert float(traj.observables["train_acc"][-1]) == 1.0
