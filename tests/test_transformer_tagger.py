"""Yang's transformer tagger against a NumPy re-derivation; attention override/uniform; epoch training;
the adversary's loss direction."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attndyn.analysis import adversarial_search, tagger_scores
from attndyn.reproduce.yang import common
from attndyn.dynamics.epochs import make_epoch_train
from attndyn.models import transformer_tagger as tt
from attndyn.tasks import conll2000
from attndyn.tasks.errors import ConfigError

# One compile per configuration instead of op-by-op dispatch.
apply = jax.jit(tt.apply, static_argnums=2)


def _batch(key, b=3, length=6, n_words=11, n_pos=5):
  k1, k2 = jax.random.split(key)
  lengths = jnp.array([length, 4, 2])[:b]
  mask = jnp.arange(length)[None] < lengths[:, None]
  tokens = jnp.where(mask, jax.random.randint(k1, (b, length), 2, n_words), 0)
  pos = jnp.where(mask, jax.random.randint(k2, (b, length), 2, n_pos), 0)
  return conll2000.TaggedBatch(tokens, pos, mask, jnp.zeros((b, length), jnp.int32))


def _numpy_paper_tagger(p, batch, cfg):
  """Yang Section 4.1 written out head by head (paper block, eval mode)."""
  p = jax.tree.map(np.asarray, p)
  tok, pos, mask = (np.asarray(x) for x in (batch.tokens, batch.pos, batch.mask))
  b, length = tok.shape
  d, h = cfg.d_model, cfg.n_heads
  dk = d // h
  x = np.concatenate([p["word_emb"][tok], p["pos_emb"][pos]], -1)
  pe = np.zeros((length, d))
  for i in range(length):
    for k in range(0, d, 2):
      pe[i, k] = math.sin(i / 10000 ** (k / d))
      pe[i, k + 1] = math.cos(i / 10000 ** (k / d))
  hid = x @ p["input"]["w"] + p["input"]["b"] + pe
  lin = lambda name: hid @ p[name]["w"] + p[name]["b"]
  q, k_, v = lin("query"), lin("key"), lin("value")
  ctx = np.zeros((b, length, d))
  att = np.zeros((b, h, length, length))
  for n in range(b):
    real = mask[n]
    for j in range(h):
      sl = slice(j * dk, (j + 1) * dk)
      s = q[n, :, sl] @ k_[n, :, sl].T / math.sqrt(dk)
      s = np.where(real[None], s, -np.inf)
      a = np.exp(s - s.max(-1, keepdims=True))
      a /= a.sum(-1, keepdims=True)
      att[n, j] = a
      ctx[n, :, sl] = a @ v[n, :, sl]
  out = ctx @ p["attn_out"]["w"] + p["attn_out"]["b"]
  return out @ p["output"]["w"] + p["output"]["b"], att


def test_paper_block_matches_the_written_out_equations(key):
  cfg = tt.TaggerConfig(n_words=11, n_pos=5, n_tags=4, d_model=8, n_heads=4, d_ff=8,
                        features="words+pos", block="paper")
  params = tt.init(key, cfg, jnp.float64)
  batch = _batch(jax.random.fold_in(key, 1))
  out = apply(params, batch, cfg)
  logits, att = _numpy_paper_tagger(params, batch, cfg)
  assert out.logits.shape == (3, 6, 4) and out.attention.shape == (3, 4, 6, 6)
  np.testing.assert_allclose(out.logits, logits, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(out.attention, att, rtol=1e-10, atol=1e-14)


def test_full_block_padding_override_and_uniform(key):
  cfg = tt.TaggerConfig(n_words=11, n_pos=5, n_tags=4, d_model=8, n_heads=2, d_ff=6,
                        features="words", block="full")
  uni_cfg = tt.TaggerConfig(**{**cfg.__dict__, "attention": "uniform"})
  params = tt.init(key, cfg, jnp.float64)
  batch = _batch(jax.random.fold_in(key, 1))
  wide = jax.tree.map(lambda x: jnp.concatenate([x, jnp.zeros((3, 3), x.dtype)], 1), batch)

  @jax.jit
  def outputs(params):   # one compile for every variant
    out = tt.apply(params, batch, cfg)
    uni = tt.uniform_attention(batch.mask, 2, jnp.float64)
    return {"out": out, "wide": tt.apply(params, wide, cfg).logits,
            "same": tt.apply(params, batch, cfg, attention=out.attention).logits,
            "uni": uni, "uni_cfg": tt.apply(params, batch, uni_cfg),
            "dropout": tt.apply(params, batch, cfg, key=key).logits}

  o = jax.tree.map(np.asarray, outputs(params))
  logits, att = o["out"].logits, o["out"].attention
  m = np.asarray(batch.mask)
  np.testing.assert_allclose(att.sum(-1), 1.0, rtol=1e-12)
  assert not att[1][..., ~m[1]].any()                        # padded keys get weight 0
  # Extra padding changes nothing at the real tokens.
  np.testing.assert_allclose(o["wide"][:, :6][m], logits[m], rtol=1e-10, atol=1e-12)
  # Its own maps as an override reproduce it; uniform maps = the uniform config, and differ.
  np.testing.assert_allclose(o["same"], logits, rtol=1e-12)
  np.testing.assert_array_equal(o["uni_cfg"].attention, o["uni"])
  np.testing.assert_allclose(o["uni"][2, 0, 0, :3], [0.5, 0.5, 0.0])
  assert not np.allclose(o["uni_cfg"].logits, logits)
  assert not np.allclose(o["dropout"], logits)               # dropout only with a key


def test_bad_configs_raise():
  with pytest.raises(ConfigError, match="d_model"):
    tt.TaggerConfig(n_words=5, n_pos=3, n_tags=3, d_model=10, n_heads=4)
  with pytest.raises(ConfigError, match="features"):
    tt.TaggerConfig(n_words=5, n_pos=3, n_tags=3, features="chars")
  with pytest.raises(ConfigError, match="dropout"):
    tt.TaggerConfig(n_words=5, n_pos=3, n_tags=3, dropout=1.0)


@pytest.fixture(scope="module")
def tiny():
  data = common.load_data({"limit": 72, "test_limit": 16})
  cfg = common.tagger_config(data, {"d_model": 8, "n_heads": 4, "d_ff": 8, "dropout": 0.1,
                                    "block": "paper"})
  return data, cfg


def test_settings_tables_read_the_data_and_tagger_their_mappings_do(tiny):
  """``load_data`` and ``tagger_config`` take ``tagger``'s settings tables (frozen dataclasses)
  as they take mappings: the same cached data, the same tagger."""
  import dataclasses

  from attndyn import settings
  from attndyn.reproduce.yang import tagger

  data, _ = tiny
  d = dataclasses.replace(tagger.QUICK.data, limit=72, test_limit=16)
  assert common.load_data(d) is common.load_data(settings.as_json(d))
  m = dataclasses.replace(tagger.QUICK.model, d_model=8, d_ff=8, block="paper")
  assert common.tagger_config(data, m) == common.tagger_config(data, settings.as_json(m))


def test_epoch_training_vmapped_over_seeds(tiny):
  """The epoch trainer with a per-word linear tagger (cheap to compile; the transformer's
  gradient is checked in the adversary test)."""
  data, cfg = tiny

  def logits(p, b):
    return p["w"][b.tokens] + p["p"][b.pos]

  def loss_fn(p, b, k, aux):
    drop = jax.random.bernoulli(k, 0.9, b.mask.shape)      # the dropout key changes per step
    return tt.token_nll(logits(p, b), b.labels, b.mask & drop)

  def evaluate(p, aux):
    return tt.token_nll(logits(p, data.dev), data.dev.labels, data.dev.mask)

  buckets = conll2000.length_buckets(data.train, 2)
  train = make_epoch_train(loss_fn, buckets, evaluate, epochs=3, batch_size=16,
                           optimizer=optax.adam(0.1))
  init = {"w": jnp.zeros((cfg.n_words, cfg.n_tags)), "p": jnp.zeros((cfg.n_pos, cfg.n_tags))}
  traj = jax.jit(jax.vmap(lambda k: train(init, k)))(jax.random.split(jax.random.PRNGKey(1), 2))
  loss, dev = np.asarray(traj.observables["train_loss"]), np.asarray(traj.observables["eval"])
  assert loss.shape == dev.shape == (2, 3) and np.all(loss[:, -1] < loss[:, 0])
  assert np.all(dev[:, -1] < dev[:, 0]) and np.all(np.asarray(traj.failed_at) == -1)
  np.testing.assert_array_equal(traj.t, [[1, 2, 3], [1, 2, 3]])
  # Same init, different shuffles and dropout keys: different runs.
  assert not np.allclose(traj.final_params["w"][0], traj.final_params["w"][1])


def test_f1_per_epoch_and_epoch_selection(tiny):
  data, _ = tiny
  buckets = conll2000.length_buckets(data.test, 2)
  gold = tuple(np.asarray(b.labels, np.int8) for b in buckets)
  wrong = tuple(np.zeros_like(g) for g in gold)                 # all O: F1 0
  preds = tuple(np.stack([np.stack([w, g]), np.stack([g, g])]) for g, w in zip(gold, wrong))
  f1 = tagger_scores.f1_per_epoch(preds, buckets, data.tags)          # [2 runs, 2 epochs]
  np.testing.assert_allclose(f1, [[0.0, 1.0], [1.0, 1.0]])
  np.testing.assert_array_equal(tagger_scores.select_epoch(f1), [1, 0])


def test_adversary_loss_uses_kl_adversary_to_original(tiny, key):
  data, cfg = tiny
  b = jax.tree.map(lambda x: x[:4], data.test)
  p0 = tt.init(key, cfg)
  p1 = tt.init(jax.random.fold_in(key, 1), cfg)
  @jax.jit
  def loss_at(lam, p):
    fn = lambda q: adversarial_search.adversary_loss(cfg, lam, p0, "nll")(q, b, None)
    loss, grad = jax.value_and_grad(fn)(p)
    return loss, tt.apply(p, b, cfg).attention, tt.apply(p0, b, cfg).attention, grad
  lam = 0.7
  (nll, a1, a0, _), (loss, _, _, grad) = loss_at(0.0, p1), loss_at(lam, p1)
  # Gradients reach every parameter of the tagger, finite.
  for g in jax.tree.leaves(grad):
    assert np.all(np.isfinite(g)) and np.any(g != 0)
  m = np.asarray(b.mask, float)
  def mean_kl(p, q):
    k = np.sum(np.where(np.asarray(p) > 0, p * (np.log(np.maximum(p, 1e-30)) -
                                               np.log(np.maximum(q, 1e-30))), 0), -1)
    return np.sum(k * m[:, None]) / (m.sum() * cfg.n_heads)
  np.testing.assert_allclose(nll - loss, lam * mean_kl(np.asarray(a1, np.float64),
                                                       np.asarray(a0, np.float64)), rtol=1e-4)
  assert not np.isclose(mean_kl(np.asarray(a1, np.float64), np.asarray(a0, np.float64)),
                        mean_kl(np.asarray(a0, np.float64), np.asarray(a1, np.float64)), rtol=1e-3)
  # The adversary equal to the original: KL 0, the loss is the NLL of its own argmax.
  np.testing.assert_allclose(loss_at(lam, p0)[0], loss_at(0.0, p0)[0], rtol=1e-6)


def test_a_probe_reads_its_sources_attention_or_uniform_weights(tiny, key):
  """:func:`tt.source_attention` gives the source tagger's own maps, or uniform weights over
  the real words; a probe reading a tagger's own maps is that tagger (same loss), and no
  gradient of the probe's loss reaches the source."""
  data, cfg = tiny
  b = jax.tree.map(lambda x: x[:4], data.test)
  p0 = tt.init(key, cfg, jnp.float64)
  p1 = tt.init(jax.random.fold_in(key, 1), cfg, jnp.float64)
  maps = tt.source_attention(cfg)
  probe = tt.probe_loss(cfg, maps)

  @jax.jit
  def outputs(p, q):
    return {"own": maps((p, False), b), "uniform": maps((p, True), b),
            "attention": tt.apply(p, b, cfg).attention,
            "probe_self": probe(p, b, None, (p, False)),
            "nll": tt.token_nll(tt.apply(p, b, cfg).logits, b.labels, b.mask),
            "source_grad": jax.grad(lambda s: probe(q, b, None, (s, False)))(p)}

  o = outputs(p0, p1)
  np.testing.assert_allclose(o["own"], o["attention"], rtol=1e-12)
  np.testing.assert_array_equal(o["uniform"], tt.uniform_attention(b.mask, cfg.n_heads,
                                                                     jnp.float64))
  np.testing.assert_allclose(o["probe_self"], o["nll"], rtol=1e-12)
  for g in jax.tree.leaves(o["source_grad"]):
    assert not np.any(g)
