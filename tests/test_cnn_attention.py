"""Attn-TC-CNN (Appendix A): shapes, the width-2 convolution, attention over pairs, a short training run."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.models.cnn import pair_conv

CFG = models.CNNAttentionConfig(n_words=16, n_classes=2, embed_dim=4, key_dim=3, embed_std=0.1,
                                key_std=0.1)
N, L = 32, 6


@pytest.fixture(scope="module")
def setup():
  """Random sentences of 6 words (the last 8 padded to 4 words), labels by the first word."""
  rng = np.random.default_rng(0)
  tokens = rng.integers(1, 16, (N, L)).astype(np.int32)
  mask = np.ones((N, L), bool)
  mask[-8:, 4:] = False
  labels = (tokens[:, 0] < 8).astype(np.int32)
  batch = tasks.Batch(jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(labels))
  model = models.cnn_attention(CFG, jnp.float64)
  params = jax.jit(model.init)(jax.random.PRNGKey(1))
  return batch, model, params, jax.jit(model.apply)(params, batch)


def test_shapes_and_attention_is_a_distribution_over_the_real_pairs(setup):
  batch, _, params, out = setup
  m = L - 1
  assert out.logits.shape == (N, 2)
  assert out.attention.shape == out.scores.shape == out.pair_mask.shape == (N, m)
  assert out.pair_embeddings.shape == (N, m, 4) and out.pair_keys.shape == (N, m, 3)
  assert out.context.shape == (N, 4)
  np.testing.assert_allclose(out.attention.sum(-1), 1.0, rtol=1e-12)
  np.testing.assert_allclose(out.scores, out.pair_keys @ params["query"], rtol=1e-12)
  np.testing.assert_allclose(out.context, jnp.einsum("nm,nmd->nd", out.attention, out.pair_embeddings),
                             rtol=1e-12)
  # A pair is real iff both its words are: padded sentences have 3 pairs, and 0 weight elsewhere.
  np.testing.assert_array_equal(out.pair_mask, batch.mask[:, :-1] & batch.mask[:, 1:])
  assert int(out.pair_mask[-1].sum()) == 3
  assert float(jnp.max(jnp.where(out.pair_mask, 0.0, out.attention))) == 0.0
  assert float(jnp.min(jnp.where(out.pair_mask, out.attention, 1.0))) > 0.0
  assert set(params) == set(CFG.trainable()), "the trainable dict must cover every top-level key"


def test_pair_conv_is_a_width2_stride1_conv1d():
  rng = np.random.default_rng(1)
  x, kernel, bias = rng.normal(size=(3, 7, 4)), rng.normal(size=(2, 4, 5)), np.arange(5.0)
  # PyTorch Conv1d(4, 5, kernel_size=2) with weight[o, i, t] = kernel[t, i, o].
  weight = kernel.transpose(2, 1, 0)
  ref = np.stack([np.einsum("nit,oit->no", x[:, j:j + 2].transpose(0, 2, 1), weight) + bias
                  for j in range(6)], axis=1)
  np.testing.assert_allclose(pair_conv(jnp.asarray(x), jnp.asarray(kernel), jnp.asarray(bias)), ref,
                             rtol=1e-12, atol=1e-12)


def test_a_short_gd_run_decreases_the_loss_and_moves_every_trainable_group(setup):
  batch, model, params, _ = setup
  loss = models.make_loss(model.apply)
  train_cfg = dynamics.TrainConfig(lr=0.5, steps=40, record_every=20)
  train = dynamics.make_train(loss, batch, lambda p, p0: loss(p, batch)[0], train_cfg,
                              CFG.trainable())
  traj = jax.jit(train)(params, jax.random.PRNGKey(2))
  assert float(traj.observables[-1]) < float(traj.observables[0]) - 1e-3, traj.observables
  for group, trainable in CFG.trainable().items():
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                zip(jax.tree.leaves(traj.final_params[group]), jax.tree.leaves(params[group])))
    assert (moved > 0) == trainable, group


def test_freezing_conv_masks_its_updates(setup):
  batch, model, params, _ = setup
  cfg = models.CNNAttentionConfig(**{**CFG.__dict__, "freeze": ("conv",)})
  assert cfg.trainable() == {"embeddings": True, "keys": True, "query": False, "classifier": True,
                             "conv": False}
  opt = dynamics.masked_optimizer(dynamics.base_optimizer("gd", 0.1), cfg.trainable())

  @jax.jit
  def one_step(p):
    grads = jax.grad(lambda q: models.make_loss(model.apply)(q, batch)[0])(p)
    return grads, opt.update(grads, opt.init(p), p)[0]

  grads, updates = one_step(params)
  assert all(float(jnp.max(jnp.abs(u))) == 0.0 for u in jax.tree.leaves(updates["conv"]))
  assert float(jnp.max(jnp.abs(grads["conv"]["key_kernel"]))) > 0.0


def test_bad_config_and_too_short_sentences_are_one_clear_error(setup):
  _, model, params, _ = setup
  with pytest.raises(tasks.ConfigError, match="^freeze = "):
    models.CNNAttentionConfig(n_words=4, n_classes=2, freeze=("kernels",))
  with pytest.raises(tasks.ConfigError, match="^embed_dim = "):
    models.CNNAttentionConfig(n_words=4, n_classes=2, embed_dim=0)
  with pytest.raises(tasks.ConfigError, match="at least 2 words"):
    model.apply(params, tasks.Batch(jnp.zeros((2, 1), jnp.int32), jnp.ones((2, 1), bool),
                                    jnp.zeros((2,), jnp.int32)))


def test_a_pair_run_starts_centred_and_its_masks_partition_the_pairs():
  """Appendix A's run (analysis.pairs.train_on_pairs): the centred topic-pair values start at 0
  and equal the [V, V] centred pairs' entries at the end; the non-topic mask leaves out exactly
  the topic pairs, and the pairs sharing a topic word are among the non-topic ones."""
  from attndyn.analysis import pairs
  task = tasks.MarkovPairsConfig(n_words=8, n_topics=2, pairs_per_topic=2, sentence_length=6,
                                 n_train=40, n_test=20)
  model = models.CNNAttentionConfig(n_words=8, n_classes=2, classifier="tc", embed_dim=4,
                                    key_dim=3, embed_std=0.1, key_std=0.1)
  run = jax.jit(pairs.train_on_pairs, static_argnums=(1, 2, 3))   # as the sweep compiles it
  out = run(3, task, model, dynamics.TrainConfig(lr=0.5, steps=4, record_every=2))
  obs = out["obs"]
  np.testing.assert_array_equal(obs["score"][0], 0.0)
  np.testing.assert_array_equal(obs["emb_norm"][0], 0.0)
  topic = ~np.asarray(out["nontopic"])                      # the topic pairs, [V, V]
  assert int(topic.sum()) == task.n_topics * task.pairs_per_topic
  for name, key in (("pair_score", "score"), ("pair_norm", "emb_norm")):
    np.testing.assert_allclose(np.sort(np.asarray(out[name])[topic]), np.sort(obs[key][-1]),
                               rtol=1e-5, atol=1e-7)
  assert not np.any(out["shares_word"] & ~out["nontopic"])


def test_split_change_ratios_are_the_ratio_over_each_part():
  from attndyn.analysis import pairs
  from attndyn.analysis.assumption1 import change_ratio
  rng = np.random.default_rng(0)
  values, top = rng.normal(size=(3, 10)), rng.normal(size=(3, 2))
  part = np.zeros((3, 10), bool)
  part[:, :4] = True
  split = pairs.split_change_ratios({"score": values}, {"score": top},
                                    {"in": part, "out": ~part})
  np.testing.assert_array_equal(split["in"]["score"], change_ratio(values[:, :4], top))
  np.testing.assert_array_equal(split["out"]["score"], change_ratio(values[:, 4:], top))


def test_sen_kendall_tau_is_one_for_a_rising_relation_and_minus_one_for_a_falling_one():
  from attndyn.analysis.kendall import sen_kendall_tau
  t = np.linspace(0.0, 1.0, 20)
  score = np.stack([np.stack([t, t ** 2], -1)] * 2)          # [R = 2, T, W = 2]
  norm = np.stack([np.exp(score[0]), -score[1]])             # run 0 rises with s, run 1 falls
  np.testing.assert_allclose(sen_kendall_tau(score, norm), [1.0, -1.0])
  flat = np.stack([score[0], np.zeros_like(score[0])])      # run 1: a constant score
  tau = sen_kendall_tau(flat, np.exp(flat))
  assert tau[0] == pytest.approx(1.0) and np.isnan(tau[1])
