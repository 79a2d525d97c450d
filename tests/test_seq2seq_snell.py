"""The authors' copying model (models/seq2seq_snell.py) against PyTorch's formulas, in NumPy."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn.models import seq2seq_snell as snell
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError


def _uniform_ok(x: np.ndarray, bound: float):
  """``x`` looks like i.i.d. ``U(−bound, bound)``: inside the bound, filling it, mean 0 and
  variance ``bound²/3`` within 5 standard errors (``Var(X²) = 4 bound⁴ / 45`` for the uniform)."""
  x = np.ravel(x)
  n = x.size
  assert np.abs(x).max() <= bound
  assert np.abs(x).max() >= bound * (1 - 10 / n)          # P(all n inside (1 − 10/n)·bound) ≈ e^-10
  assert abs(x.mean()) <= 5 * bound / math.sqrt(3 * n)
  assert abs((x ** 2).mean() - bound ** 2 / 3) <= 5 * math.sqrt(4 / 45 / n) * bound ** 2


def test_initialisers_are_pytorchs_defaults(key):
  h, v = 64, 42
  cfg = snell.SnellSeq2SeqConfig(v, v - 1, hidden=h)
  gru = snell.SnellSeq2SeqConfig(v, v - 1, hidden=h, cell="gru", shared_embedding=False)
  p, pg = jax.tree.map(np.asarray, jax.jit(lambda k: (snell.init(k, cfg), snell.init(k, gru)))(key))
  # nn.Linear: kaiming_uniform_(W, a=√5): gain √(2/(1+a²)), std gain/√fan_in, bound √3·std.
  linear_bound = lambda fan_in: math.sqrt(3) * math.sqrt(2 / (1 + 5)) / math.sqrt(fan_in)
  assert linear_bound(h) == pytest.approx(1 / math.sqrt(h), rel=1e-15)
  for name, fan_in in (("attention", h), ("project", h)):
    _uniform_ok(p[name]["W"], linear_bound(fan_in))
    _uniform_ok(p[name]["b"], 1 / math.sqrt(fan_in))        # nn.Linear's bias: U(±1/√fan_in)
  _uniform_ok(p["output"]["after"]["W"], linear_bound(2 * h))
  _uniform_ok(p["output"]["after"]["b"], 1 / math.sqrt(2 * h))
  _uniform_ok(p["output"]["vocab"]["W"], linear_bound(h))
  _uniform_ok(p["output"]["vocab"]["b"], 1 / math.sqrt(h))
  for lstm in ("encoder", "decoder"):                        # nn.LSTM: every tensor U(±1/√h)
    assert p[lstm]["W_ih"].shape == (h, 4 * h) and p[lstm]["b_hh"].shape == (4 * h,)
    for w in ("W_ih", "W_hh", "b_ih", "b_hh"):
      _uniform_ok(p[lstm][w], 1 / math.sqrt(h))
  for rnn in ("encoder", "decoder"):                         # nn.GRU: every tensor U(±1/√h)
    assert pg[rnn]["W_hh"].shape == (h, 3 * h) and pg[rnn]["b_ih"].shape == (3 * h,)
    for w in ("W_ih", "W_hh", "b_ih", "b_hh"):
      _uniform_ok(pg[rnn][w], 1 / math.sqrt(h))
  assert "embed_dec" not in p and pg["embed_dec"].shape == (v, h)
  e = np.concatenate([np.ravel(p["embed"]), np.ravel(pg["embed_dec"])])   # nn.Embedding: N(0, 1)
  assert p["embed"].shape == (v, h)
  n = e.size
  assert abs(e.mean()) <= 5 / math.sqrt(n) and abs((e ** 2).mean() - 1) <= 5 * math.sqrt(2 / n)
  kurt = (e ** 4).mean() / (e ** 2).mean() ** 2              # 3 for a normal, 1.8 for a uniform
  assert abs(kurt - 3) <= 5 * math.sqrt(96 / n)


def _torch_lstm(p, xs, h0, c0):
  h, c, out = h0, c0, []
  for x in xs:
    z = x @ p["W_ih"] + p["b_ih"] + h @ p["W_hh"] + p["b_hh"]
    i, f, g, o = np.split(z, 4)
    sig = lambda u: 1 / (1 + np.exp(-u))
    c = sig(f) * c + sig(i) * np.tanh(g)
    h = sig(o) * np.tanh(c)
    out.append(h)
  return np.array(out), h, c


def _torch_gru(p, xs, h):
  out = []
  sig = lambda u: 1 / (1 + np.exp(-u))
  for x in xs:
    xr, xz, xn = np.split(x @ p["W_ih"] + p["b_ih"], 3)
    hr, hz, hn = np.split(h @ p["W_hh"] + p["b_hh"], 3)
    r, z = sig(xr + hr), sig(xz + hz)
    h = (1 - z) * np.tanh(xn + r * hn) + z * h
    out.append(h)
  return np.array(out), h


def _sparsemax(z):
  """Euclidean projection of ``z`` onto the simplex (Martins & Astudillo 2016, Alg. 1)."""
  zs = np.sort(z)[::-1]
  k = np.arange(1, z.size + 1)
  support = k[1 + k * zs > np.cumsum(zs)].max()
  return np.maximum(z - (zs[:support].sum() - 1) / support, 0)


def test_forward_is_the_authors_model(key):
  """seq2seq_model.py's encode/decode for one sentence, written out in NumPy (float64)."""
  h, v = 3, 6
  cfg = snell.SnellSeq2SeqConfig(v, v - 1, hidden=h)
  sparse = snell.SnellSeq2SeqConfig(v, v - 1, hidden=h, normaliser="sparsemax")
  gru = snell.SnellSeq2SeqConfig(v, v - 1, hidden=h, heads=2, cell="gru", shared_embedding=False,
                                 context_first=True)   # multihead.py's model
  src = np.array([[2, 0, 3, 4]])                             # [x; EOS = 4]
  b = Batch(tokens=jnp.asarray(src), mask=jnp.ones(src.shape, bool), labels=jnp.asarray(src))

  @jax.jit   # one compile for everything the test evaluates
  def model(key):
    p = snell.init(key, cfg)
    out = snell.apply(p, b, cfg)
    pg = snell.init(key, gru)
    return p, out, snell.nll(out.logits, b.labels), snell.probe(p, cfg, out, b.labels), \
        snell.apply(p, b, sparse).attention, pg, snell.apply(pg, b, gru)

  p, out, loss, beta, sp_attention, pg, og = jax.tree.map(np.asarray, model(key))
  e = p["embed"]
  enc, hn, cn = _torch_lstm(p["encoder"], e[src[0]], np.zeros(h), np.zeros(h))
  dec, _, _ = _torch_lstm(p["decoder"], e[np.r_[5, src[0, :-1]]], hn, cn)   # [SOS; x]
  query = dec @ p["attention"]["W"][0] + p["attention"]["b"][0]            # attn_lin (bias)
  s = query @ enc.T
  a = np.exp(s - s.max(1, keepdims=True))
  a /= a.sum(1, keepdims=True)                                             # over all 4, EOS too
  c = (a @ enc) @ p["project"]["W"][0] + p["project"]["b"][0]              # project_enc
  z = np.tanh(np.concatenate([dec, c], 1) @ p["output"]["after"]["W"] + p["output"]["after"]["b"])
  logits = z @ p["output"]["vocab"]["W"] + p["output"]["vocab"]["b"]
  logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  np.testing.assert_allclose(out.attention[0, 0], a, rtol=1e-12)
  np.testing.assert_allclose(out.logits[0], logp, rtol=1e-12)
  # nn.NLLLoss over every target position, EOS included
  assert float(loss) == pytest.approx(-logp[np.arange(4), src[0]].mean(),
                                                                 rel=1e-12)
  # the probe: p(o_t | d_t, c = W_p h_l + b_p), get_state_scores2_one_off's context
  beta = beta[0]
  cl = enc @ p["project"]["W"][0] + p["project"]["b"][0]
  for t, l in ((0, 0), (2, 3), (3, 1)):
    zz = np.tanh(np.r_[dec[t], cl[l]] @ p["output"]["after"]["W"] + p["output"]["after"]["b"])
    lg = zz @ p["output"]["vocab"]["W"] + p["output"]["vocab"]["b"]
    assert float(beta[t, l]) == pytest.approx(np.exp(lg[src[0, t]]) / np.exp(lg).sum(), rel=1e-12)
  # a normaliser other than softmax replaces it (the structured ones are models.normalisers')
  np.testing.assert_allclose(sp_attention[0, 0], np.array([_sparsemax(r) for r in s]), atol=1e-12)
  # multihead.py: GRUs, two embedding tables, per-head attn_proj / enc_proj, mean context, [c; d]
  enc, hn = _torch_gru(pg["encoder"], pg["embed"][src[0]], np.zeros(h))
  dec, _ = _torch_gru(pg["decoder"], pg["embed_dec"][np.r_[5, src[0, :-1]]], hn)
  cs = []
  for k in range(2):
    s = (dec @ pg["attention"]["W"][k] + pg["attention"]["b"][k]) @ enc.T
    a = np.exp(s - s.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    np.testing.assert_allclose(og.attention[0, k], a, rtol=1e-12)
    cs.append((a @ enc) @ pg["project"]["W"][k] + pg["project"]["b"][k])
  c = np.mean(cs, 0)
  o = pg["output"]
  logits = np.tanh(np.concatenate([c, dec], 1) @ o["after"]["W"] + o["after"]["b"]) @ o["vocab"]["W"] \
      + o["vocab"]["b"]
  np.testing.assert_allclose(og.logits[0], logits - np.log(np.exp(logits).sum(1, keepdims=True)),
                             rtol=1e-12)


def test_bad_config():
  with pytest.raises(ConfigError, match="^sos = "):
    snell.SnellSeq2SeqConfig(6, 6)
  with pytest.raises(ConfigError, match="^normaliser = "):
    snell.SnellSeq2SeqConfig(6, 5, normaliser="max")
  with pytest.raises(ConfigError, match="^cell = "):
    snell.SnellSeq2SeqConfig(6, 5, cell="rnn")
  with pytest.raises(ConfigError, match="^hidden = "):
    snell.SnellSeq2SeqConfig(6, 5, hidden=0)
