"""The lexical probe β (KTIW), copying metrics, and the bag-of-words proxy (Snell et al., Sections 2.2–2.3)."""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis import ktiw
from attndyn.models import bow_proxy, seq2seq
from attndyn.tasks.batch import Batch


def _batch():
  tokens = jnp.array([[1, 2, 3, 0], [4, 4, 2, 5]])
  return Batch(tokens=tokens, mask=tokens > 0, labels=jnp.array([[3, 1, 2], [4, 2, 5]]))


def test_probe_is_output_with_one_hot_attention(key):
  """β_{t,l} is the model's probability of o_t when the attention is moved entirely to l."""
  b = _batch()
  for heads in (2,):
    cfg = seq2seq.Seq2SeqConfig(6, 6, hidden=5, heads=heads, shared_embedding=True)

    @jax.jit
    def both(p):
      out = seq2seq.apply(p, b, cfg)
      onehot = jnp.eye(4)[None, None, None, :, :] * jnp.ones((2, heads, 3, 1, 1))  # [n,K,T,l,L]
      ctx = jnp.einsum("nktjl,nld->jntkd", onehot, out.enc)
      prob = jax.nn.softmax(jax.vmap(lambda c: seq2seq.readout(p, c, out.dec))(ctx), -1)
      ref = jnp.take_along_axis(prob, b.labels[None, ..., None], -1)[..., 0]        # [l,n,T]
      return ktiw.lexical_probe(p, cfg, out, b.labels), jnp.moveaxis(ref, 0, -1)

    beta, ref = both(seq2seq.init(key, cfg))
    assert beta.shape == (2, 3, 4)
    np.testing.assert_allclose(beta, ref, atol=1e-12)
    alpha = ktiw.probe_alignment(beta, b.mask)
    np.testing.assert_allclose(alpha.sum(-1), 1.0, atol=1e-12)
    assert np.all(alpha[0, :, 3] == 0)


def test_copy_metrics_by_hand():
  b = Batch(tokens=jnp.array([[1, 2, 3]]), mask=jnp.ones((1, 3), bool), labels=jnp.array([[1, 2, 3]]))
  eye = jnp.eye(3)[None, None]
  wrong = jnp.roll(jnp.eye(3), 1, axis=1)[None, None]                # attends to l = t+1
  logits = jax.nn.one_hot(jnp.array([[1, 2, 2]]), 4) * 5.0           # last output wrong
  z = jnp.zeros((1, 3, 2))
  out = seq2seq.Seq2SeqOutput(logits, jnp.concatenate([wrong, eye], 1), z, z)
  beta = jnp.array([[[.5, .1, .1], [.6, .2, .1], [.1, .1, .7]]])
  metrics = jax.jit(ktiw.copy_metrics)
  m = metrics(out, beta, b)
  np.testing.assert_allclose(m["token_acc"], 2 / 3)
  np.testing.assert_allclose(m["attn_acc"], 1.0)                     # the best head is the diagonal
  np.testing.assert_allclose(m["attn_pos_acc"], 1.0)
  np.testing.assert_allclose(m["beta_acc"], 2 / 3)                   # t=1 points at word 1
  np.testing.assert_allclose(m["beta_correct"], (.5 + .2 + .7) / 3)
  np.testing.assert_allclose(m["beta_other"], ((.1 + .1) / 2 + (.6 + .1) / 2 + (.1 + .1) / 2) / 3)
  one = seq2seq.Seq2SeqOutput(logits, wrong, z, z)
  np.testing.assert_allclose(metrics(one, beta, b)["attn_acc"], 0.0)


def test_bow_proxy_gradient_is_cooccurrence():
  """At γ = 0 the proxy's negative gradient is the co-occurrence count minus a uniform share (slides)."""
  b = _batch()
  V = 6
  g = jax.grad(lambda p: bow_proxy.loss(p, b)[0])(bow_proxy.init(V, V, jnp.float64))["gamma"]
  counts = np.zeros((V, V))
  x, y, m = map(np.asarray, (b.tokens, b.labels, b.mask))
  n_targets = (y > 0).sum()
  for r in range(2):
    for o in y[r][y[r] > 0]:
      for i in x[r][m[r]]:
        counts[i, o] += 1 / m[r].sum()
  ref = -(counts - counts.sum(1, keepdims=True) / V) / n_targets
  np.testing.assert_allclose(g, ref, atol=1e-12)
  beta = bow_proxy.lexical_probe({"gamma": jnp.asarray(counts)}, b)
  p = jax.nn.softmax(jnp.asarray(counts), -1)
  np.testing.assert_allclose(beta[1, 2, 3], p[5, 5])                # o_3 = 5, x_4 = 5


def test_bow_proxy_loss_equals_the_per_target_cross_entropy(key):
  """The shared-logits form equals the cross-entropy of every target word scored separately."""
  b = _batch()
  gamma = {"gamma": jax.random.normal(key, (6, 6), jnp.float64)}
  value, logits = bow_proxy.loss(gamma, b)
  y = np.asarray(b.labels)
  logp = np.asarray(jax.nn.log_softmax(logits, -1))
  ref = -np.mean([logp[i, o] for i in range(2) for o in y[i] if o > 0])
  np.testing.assert_allclose(value, ref, rtol=1e-12)


def test_trained_bow_proxy_lowers_its_loss_and_starts_at_zero():
  """:func:`dynamics.translation.train_bow_proxy`: no step leaves γ = 0; Adam steps lower the
  proxy's loss on the pairs it is trained on."""
  from attndyn.dynamics.translation import train_bow_proxy
  b = _batch()
  zero = train_bow_proxy(b, 6, 6, 0.1, 0)
  np.testing.assert_array_equal(zero["gamma"], np.zeros((6, 6)))
  losses = [float(bow_proxy.loss(train_bow_proxy(b, 6, 6, 0.1, n), b)[0]) for n in (0, 5, 20)]
  assert losses[0] > losses[1] > losses[2]
