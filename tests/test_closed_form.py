"""Eqs (1)-(4): the closed-form per-word updates equal one gradient-descent step."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attndyn import analysis
from attndyn import models
from attndyn import tasks

TOL = dict(rtol=1e-10, atol=1e-14)
# (V, d, d', n, L, J): few shapes, so the jitted check compiles only a handful of times;
# everything else (values, vocabulary used, padding, lr, classifier) is drawn freely.
SHAPES = [(8, 3, 2, 10, 4, 2), (12, 5, 3, 7, 6, 3)]


def _problem(seed, classifier, shape, n_used, key_std, padding):
  """Random parameters and batch (NumPy, so nothing compiles eagerly).

  Tokens come from the first ``n_used`` words, so with small ``n_used`` words repeat
  within a sentence and the remaining words never occur.
  """
  n_words, d, d_key, n, length, n_classes = shape
  rng = np.random.default_rng(seed)
  if classifier == "tl":
    cls = {"U1": rng.normal(size=(d, 4)), "b1": rng.normal(size=4),
           "U2": rng.normal(size=(4, n_classes)), "b2": rng.normal(size=n_classes)}
  else:   # fc and tc apply the same U; only trainability differs, which eqs (1)-(2) ignore.
    cls = {"U": rng.normal(size=(d, n_classes))}
  params = {"embeddings": 0.5 * rng.normal(size=(n_words, d)),
            "keys": key_std * rng.normal(size=(n_words, d_key)),
            "query": rng.normal(size=d_key), "classifier": cls}
  tokens = rng.integers(0, n_used, size=(n, length))
  mask = rng.random((n, length)) < 1.0 - padding
  mask[:, 0] = True                                   # every sentence has a word
  labels = rng.integers(0, n_classes, size=n)
  batch = tasks.Batch(jnp.asarray(tokens, jnp.int32), jnp.asarray(mask),
                      jnp.asarray(labels, jnp.int32))
  return jax.tree.map(jnp.asarray, params), batch


@jax.jit
def _closed_and_autodiff(params, batch, lr):
  closed = analysis.closed_form_updates(params, batch, lr)
  grads = jax.grad(lambda p: models.make_loss(models.lu.apply)(p, batch)[0])(params)
  return closed, grads


@given(seed=st.integers(0, 2**16), classifier=st.sampled_from(["fc", "tc", "tl"]),
       shape=st.sampled_from(SHAPES), n_used=st.integers(1, 12),
       key_std=st.sampled_from([0.0, 0.7, 2.0]), padding=st.sampled_from([0.0, 0.4]),
       lr=st.floats(1e-3, 2.0))
def test_eqs_1_to_4_equal_minus_lr_times_grad(seed, classifier, shape, n_used, key_std, padding,
                                              lr):
  params, batch = _problem(seed, classifier, shape, min(n_used, shape[0]), key_std, padding)
  closed, grads = _closed_and_autodiff(params, batch, lr)
  q = params["query"]
  assert closed["embeddings"].dtype == jnp.float64
  # (1), (2): the embedding and key updates of every word.
  np.testing.assert_allclose(closed["embeddings"], -lr * grads["embeddings"], **TOL)
  np.testing.assert_allclose(closed["keys"], -lr * grads["keys"], **TOL)
  # (3), (4): v = ‖q‖ν and s = qᵀκ move by ‖q‖Δν and qᵀΔκ (exactly, the query being fixed).
  np.testing.assert_allclose(closed["v"], -lr * jnp.linalg.norm(q) * grads["embeddings"], **TOL)
  np.testing.assert_allclose(closed["s"], -lr * grads["keys"] @ q, **TOL)


def test_updates_vanish_exactly_for_absent_and_padding_only_words():
  """Words occurring nowhere, or only at masked positions, get no update; the others do."""
  params, batch = _problem(3, "tl", SHAPES[0], 4, 0.7, 0.0)
  tokens = np.array(batch.tokens)
  mask = np.ones(tokens.shape, bool)
  mask[:, -1] = False
  tokens[:, -1] = 5                                   # word 5 only at padding; 4, 6, 7 nowhere
  batch = batch._replace(tokens=jnp.asarray(tokens), mask=jnp.asarray(mask))
  closed, grads = _closed_and_autodiff(params, batch, 0.3)
  np.testing.assert_allclose(closed["keys"], -0.3 * grads["keys"], **TOL)
  used = np.unique(tokens[:, :-1])
  for name in ("embeddings", "keys", "v", "s"):
    delta = np.asarray(closed[name])
    assert np.all(delta[4:] == 0), name
    assert np.all(np.abs(delta[used]).reshape(len(used), -1).max(axis=1) > 0), name
