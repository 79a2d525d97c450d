"""The LSTM encoder–decoder with Luong "general" attention (Snell et al., Section 2.1)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn.models import seq2seq
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError

CFG = seq2seq.Seq2SeqConfig(7, 7, hidden=6, shared_embedding=True)


def _batch():
  tokens = jnp.array([[1, 2, 3, 0], [4, 5, 6, 1]])
  return Batch(tokens=tokens, mask=tokens > 0, labels=jnp.array([[1, 2, 3], [4, 5, 6]]))


def test_fused_lstm_equals_flax_cell_step_by_step(key):
  p = seq2seq.init(key, CFG)
  x = jax.random.normal(jax.random.PRNGKey(1), (3, 5, 6))
  mask = jnp.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool)
  carry, hs = seq2seq.run_lstm(p["encoder"], x, mask)
  cell = nn.OptimizedLSTMCell(6)

  @jax.jit
  def reference(params):
    c = cell.initialize_carry(key, (3, 6))
    hs_ref = []
    for t in range(5):
      new, h = cell.apply({"params": params}, c, x[:, t])
      hs_ref.append(h)
      c = jax.tree.map(lambda a, b: jnp.where(mask[:, t, None], a, b), new, c)
    return jnp.stack(hs_ref, 1), c

  hs_ref, c = reference(p["encoder"])
  np.testing.assert_allclose(hs, hs_ref, atol=1e-12)
  np.testing.assert_allclose(carry[0], c[0], atol=1e-12)
  np.testing.assert_allclose(carry[1], c[1], atol=1e-12)


def test_general_attention_formula(key):
  p = seq2seq.init(key, CFG)
  b = _batch()
  out = seq2seq.apply(p, b, CFG)
  assert out.attention.shape == (2, 1, 3, 4) and out.logits.shape == (2, 3, 7)
  s = np.einsum("td,de,le->tl", out.dec[0], p["attention"]["W"][0], out.enc[0])[:, :3]
  ref = np.exp(s - s.max(1, keepdims=True))
  ref /= ref.sum(1, keepdims=True)
  np.testing.assert_allclose(out.attention[0, 0, :, :3], ref, atol=1e-12)
  assert np.all(out.attention[0, 0, :, 3] == 0)                   # padding gets no weight
  ctx = np.einsum("tl,ld->td", out.attention[0, 0], out.enc[0])
  o = p["output"]
  h = np.tanh(np.concatenate([ctx, out.dec[0]], -1) @ o["W_c"])
  np.testing.assert_allclose(out.logits[0], h @ o["W_s"] + o["b_s"], atol=1e-12)


def test_uniform_attention_and_trainable(key):
  cfg = seq2seq.Seq2SeqConfig(7, 7, hidden=6, attention="uniform", shared_embedding=True)
  out = seq2seq.apply(seq2seq.init(key, cfg), _batch(), cfg)
  np.testing.assert_allclose(out.attention[0, 0], np.tile([1 / 3, 1 / 3, 1 / 3, 0], (3, 1)))
  np.testing.assert_allclose(out.attention[1, 0], 0.25)
  assert cfg.trainable()["attention"] is False and CFG.trainable()["attention"] is True


def test_heads_from_single_head_seeds(key):
  k1, k2 = jax.random.split(key)
  single = [seq2seq.init(k, CFG)["attention"]["W"][0] for k in (k1, k2)]
  cfg2 = seq2seq.Seq2SeqConfig(7, 7, hidden=6, heads=2, shared_embedding=True)
  hk = jnp.stack([seq2seq.single_head_key(k1), seq2seq.single_head_key(k2)])
  p = seq2seq.init(k1, cfg2, head_keys=hk)
  np.testing.assert_array_equal(p["attention"]["W"][0], single[0])
  np.testing.assert_array_equal(p["attention"]["W"][1], single[1])
  out = seq2seq.apply(p, _batch(), cfg2)
  assert out.attention.shape == (2, 2, 3, 4) and p["output"]["W_c"].shape == (18, 6)
  np.testing.assert_allclose(out.attention.sum(-1), 1.0, atol=1e-12)


def test_bad_config():
  with pytest.raises(ConfigError, match="shared_embedding"):
    seq2seq.Seq2SeqConfig(7, 8, shared_embedding=True)
  with pytest.raises(ConfigError, match="^attention = "):
    seq2seq.Seq2SeqConfig(7, 7, attention="dot")
  with pytest.raises(ConfigError, match="^heads = "):
    seq2seq.Seq2SeqConfig(7, 7, heads=0)
