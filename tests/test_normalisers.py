"""Normalisers (softmax, sparsemax, entmax), scorers, multi-head and hard attention."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from attndyn import models
from attndyn.models.attention import softmax_attention
from attndyn.models.hard_attention import hard_attention
from attndyn.models.multihead import init_multihead, multihead_attention
from attndyn.models import normalisers
from attndyn.models.normalisers import entmax, entmax15, normalise, sparsemax, sparsemax_threshold
from attndyn.models.scorers import SCORERS, init_scorer, score
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError

FNS = {
    "sparsemax": sparsemax,
    "entmax15": entmax15,
    "entmax_1.3": lambda z, m: entmax(z, m, alpha=1.3),
    "entmax_2": lambda z, m: entmax(z, m, alpha=2.0),
    "entmax_1.5": lambda z, m: entmax(z, m, alpha=1.5),
    "softmax": lambda z, m: normalise("softmax", z, m),
}


LENGTH = 6   # fixed, so each jitted function compiles once; the mask varies the real length
JIT = {name: jax.jit(fn) for name, fn in FNS.items()}
BATCHED = {name: jax.jit(jax.vmap(fn, in_axes=(0, None))) for name, fn in FNS.items()}
JACREV = {name: jax.jit(jax.jacrev(fn)) for name, fn in FNS.items()}
JACFWD = {name: jax.jit(jax.jacfwd(fn)) for name, fn in FNS.items()}
SPARSE = ["sparsemax", "entmax15", "entmax_1.3"]   # ours; entmax_2 = sparsemax is checked below


@st.composite
def scores_and_mask(draw):
  z = draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=LENGTH, max_size=LENGTH))
  mask = draw(st.lists(st.booleans(), min_size=LENGTH, max_size=LENGTH))
  mask[draw(st.integers(0, LENGTH - 1))] = True
  return jnp.asarray(z, jnp.float64), jnp.asarray(mask)


@pytest.mark.parametrize("name", list(FNS))
@given(data=scores_and_mask())
def test_simplex_and_exact_zeros_at_masked_positions(name, data):
  z, mask = data
  p = JIT[name](z, mask)
  assert p.dtype == jnp.float64
  np.testing.assert_allclose(float(p.sum()), 1.0, atol=1e-12)
  assert bool(jnp.all(p >= 0))
  assert bool(jnp.all(jnp.where(mask, True, p == 0.0)))


@pytest.mark.parametrize("name", SPARSE)
@given(data=scores_and_mask())
def test_gradients_equal_central_finite_differences(name, data):
  z, mask = data
  eps = 1e-6
  shifts = eps * jnp.eye(LENGTH)
  plus, minus = BATCHED[name](z + shifts, mask), BATCHED[name](z - shifts, mask)   # [in, out]
  # Skip points whose support changes inside the stencil (the Jacobian jumps there).
  on = JIT[name](z, mask) > 0
  assume(bool(jnp.all(((plus > 0) == on) & ((minus > 0) == on))))
  numeric = ((plus - minus) / (2 * eps)).T                                        # [out, in]
  np.testing.assert_allclose(JACREV[name](z, mask), numeric, atol=2e-6)
  np.testing.assert_allclose(JACFWD[name](z, mask), numeric, atol=2e-6)


SPARSEMAX_JAC = jax.jit(jax.jacrev(sparsemax))
THRESHOLD = jax.jit(sparsemax_threshold)


@given(data=scores_and_mask())
def test_sparsemax_support_rule_and_projection(data):
  z, mask = data
  p = JIT["sparsemax"](z, mask)
  tau, size = THRESHOLD(z, mask)
  support = mask & (z > tau)
  assert int(support.sum()) == int(size)
  np.testing.assert_allclose(float(tau), (float(jnp.sum(jnp.where(support, z, 0.0))) - 1) / int(size),
                             atol=1e-12)
  np.testing.assert_allclose(p, jnp.where(support, z - tau, 0.0), atol=1e-12)
  # Independent check: the Euclidean projection onto the simplex by bisection on τ.
  zs = np.asarray(z)[np.asarray(mask)]
  lo, hi = zs.max() - 1.0, zs.max()
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if np.maximum(zs - mid, 0).sum() >= 1 else (lo, mid)
  np.testing.assert_allclose(np.asarray(p)[np.asarray(mask)], np.maximum(zs - lo, 0), atol=1e-9)
  # The Jacobian depends only on the support: diag(s) - s sᵀ/|S|.
  s = np.asarray(support, np.float64)
  np.testing.assert_allclose(SPARSEMAX_JAC(z, mask), np.diag(s) - np.outer(s, s) / s.sum(),
                             atol=1e-12)


def test_sorting_and_bisection_entmax_agree_and_special_cases():
  z = jax.random.normal(jax.random.PRNGKey(3), (4, LENGTH), jnp.float64) * 2
  mask = jax.random.bernoulli(jax.random.PRNGKey(4), 0.7, (4, LENGTH)).at[:, 0].set(True)
  for zi, mi in zip(z, mask):        # the jitted [LENGTH] functions of the hypothesis tests
    np.testing.assert_allclose(JIT["entmax15"](zi, mi), JIT["entmax_1.5"](zi, mi), atol=1e-10)
    np.testing.assert_allclose(JIT["sparsemax"](zi, mi), JIT["entmax_2"](zi, mi), atol=1e-10)
    np.testing.assert_allclose(JIT["softmax"](zi, mi), softmax_attention(zi, mi))
  # Uniform scores: every normaliser is uniform over the real words.
  real = jnp.array([True, True, False, True, False, True])
  for name in ("softmax", "sparsemax", "entmax15"):
    np.testing.assert_allclose(JIT[name](jnp.zeros(LENGTH), real), real / 4.0, atol=1e-12)
  # Sparse outputs really are sparse.
  spread = jnp.array([3.0, 0.0, -1.0, 0.5, 2.9, -4.0])
  assert int(jnp.sum(JIT["sparsemax"](spread, real) == 0)) == 5     # 2 masked, 3 real
  assert float(JIT["entmax15"](spread, jnp.ones(LENGTH, bool))[5]) == 0.0


def test_bad_normaliser_names_and_alpha_raise_config_errors():
  with pytest.raises(ConfigError, match="normaliser = 'sparsemaxx'.*softmax, sparsemax"):
    normalise("sparsemaxx", jnp.zeros(3))
  with pytest.raises(ConfigError, match="alpha = 1.0.*a number > 1"):
    entmax(jnp.zeros(3), alpha=1.0)
  with pytest.raises(ConfigError, match="alpha"):
    normalise("entmax", jnp.zeros(3))
  with pytest.raises(ConfigError, match="^normaliser = 'hard'.*softmax, sparsemax, entmax15"):
    models.LuModelConfig(n_words=5, n_classes=2, normaliser="hard")


def test_hard_attention_is_one_hot_with_the_straight_through_softmax_gradient():
  z = jnp.array([[0.3, 2.0, 5.0, -1.0], [1.0, 1.0, 0.0, 0.5]])
  mask = jnp.array([[True, True, False, True], [True, True, True, True]])
  p = hard_attention(z, mask)
  np.testing.assert_array_equal(p, jnp.array([[0, 1, 0, 0], [1, 0, 0, 0]], jnp.float64))
  w = jnp.array([1.0, -2.0, 3.0, 0.5])
  grad_hard = jax.jit(jax.grad(lambda x: jnp.sum(hard_attention(x, mask) * w)))(z)
  grad_soft = jax.jit(jax.grad(lambda x: jnp.sum(softmax_attention(x, mask) * w)))(z)
  np.testing.assert_allclose(grad_hard, grad_soft, atol=1e-12)
  assert float(grad_hard[0, 2]) == 0.0


def test_scorers_match_their_formulas(key):
  kq, kk, kp = jax.random.split(key, 3)
  q = np.asarray(jax.random.normal(kq, (2, 3, 4), jnp.float64))
  k = np.asarray(jax.random.normal(kk, (2, 5, 4), jnp.float64))
  p = jax.tree.map(np.asarray, init_scorer(kp, "additive", 4, 4, hidden=6, dtype=jnp.float64))

  @jax.jit
  def all_scores(p):
    return {"dot": score("dot", {}, q, k), "scaled_dot": score("scaled_dot", {}, q, k),
            "bilinear": score("bilinear", {"W": jnp.eye(4)}, q, k),
            "additive": score("additive", p, q, k)}

  got = all_scores(p)
  dot = np.einsum("bmd,bnd->bmn", q, k)
  np.testing.assert_allclose(got["dot"], dot, atol=1e-12)
  np.testing.assert_allclose(got["scaled_dot"], dot / 2.0, atol=1e-12)
  np.testing.assert_allclose(got["bilinear"], dot, atol=1e-12)
  manual = np.array([[[p["v"] @ np.tanh(p["W1"] @ k[b, j] + p["W2"] @ q[b, i])
                       for j in range(5)] for i in range(3)] for b in range(2)])
  np.testing.assert_allclose(got["additive"], manual, atol=1e-12)
  assert set(got) == set(SCORERS)
  with pytest.raises(ConfigError, match="d_query"):
    init_scorer(kp, "dot", 3, 4)


@pytest.mark.parametrize("normaliser", ["sparsemax"])
def test_multihead_weights_are_masked_distributions(key, normaliser):
  params = init_multihead(key, 8, 2, scorer="bilinear", dtype=jnp.float64)
  x = jax.random.normal(jax.random.PRNGKey(1), (3, 5, 8), jnp.float64)
  mask = jnp.arange(5)[None] < jnp.array([5, 3, 1])[:, None]
  out = jax.jit(multihead_attention, static_argnames=("scorer", "normaliser"))(
      params, x, x, mask, scorer="bilinear", normaliser=normaliser)
  assert out.out.shape == (3, 5, 8) and out.attention.shape == (3, 2, 5, 5)
  np.testing.assert_allclose(out.attention.sum(-1), 1.0, atol=1e-12)
  assert bool(jnp.all(jnp.where(mask[:, None, None, :], True, out.attention == 0.0)))
  np.testing.assert_allclose(out.attention[2, :, :, 0], 1.0)      # one real key: all weight on it


def test_lu_model_with_sparse_normalisers(key):
  k_tok, k_lab = jax.random.split(jax.random.PRNGKey(5))
  batch = Batch(jax.random.randint(k_tok, (8, LENGTH), 0, 10), jnp.ones((8, LENGTH), bool),
                jax.random.randint(k_lab, (8,), 0, 2))
  base = models.LuModelConfig(n_words=10, n_classes=2, embed_dim=3, key_dim=2, embed_std=0.1,
                              key_std=1.0)
  params = models.lu.init(key, base, jnp.float64)
  assert models.lu.apply_for(base) is models.lu.apply       # softmax: the paper's model, unchanged
  for name in ("sparsemax",):
    cfg = models.LuModelConfig(n_words=10, n_classes=2, embed_dim=3, key_dim=2, embed_std=0.1,
                               key_std=1.0, normaliser=name)
    out = jax.jit(models.lu_attention(cfg).apply)(params, batch)
    np.testing.assert_allclose(out.attention, JIT[name](out.scores, batch.mask))
    np.testing.assert_allclose(out.attention.sum(-1), 1.0, atol=1e-12)
    assert float(jnp.mean(out.attention == 0)) > 0.1          # key_std 1: sparse
    short = Batch(batch.tokens, batch.mask.at[:, -1].set(False), batch.labels)
    grads = jax.jit(jax.grad(lambda p: models.make_loss(models.lu.apply_for(cfg))(p, short)[0]))(
        params)
    assert bool(jnp.all(jnp.isfinite(grads["keys"])))


PAIRED = {"sparsemax": (jax.jit(normalisers._sparsemax_threshold_pairwise),
                        jax.jit(normalisers._sparsemax_threshold_sorted)),
          "entmax15": (jax.jit(normalisers._entmax15_threshold_pairwise),
                       jax.jit(normalisers._entmax15_threshold_sorted))}


@st.composite
def rows_with_ties(draw):
  """Rows of 9 scores from a few distinct values (so ties are common), a mask with at least
  one real entry."""
  values = draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=4))
  z = draw(st.lists(st.sampled_from(values), min_size=9, max_size=9))
  mask = draw(st.lists(st.booleans(), min_size=9, max_size=9))
  mask[draw(st.integers(0, 8))] = True
  return jnp.asarray(z, jnp.float64), jnp.asarray(mask)


@pytest.mark.parametrize("name", list(PAIRED))
@given(data=rows_with_ties())
def test_the_thresholds_by_ranks_equal_those_by_sorting(name, data):
  """Rows up to PAIRWISE_MAX_LEN find the threshold from ranks instead of a sort: the same τ
  (and support size) as the sorted prefix sums, ties and masked entries included."""
  z, mask = data
  x = z / 2.0 if name == "entmax15" else z
  by_ranks, by_sorting = (fn(x, mask) for fn in PAIRED[name])
  np.testing.assert_allclose(np.asarray(by_ranks), np.asarray(by_sorting), rtol=0, atol=1e-12)


def test_rows_longer_than_the_pairwise_limit_sort():
  """Both paths serve sparsemax: a row above PAIRWISE_MAX_LEN (sorted) gives the same weights
  as its two halves' worth of padding masked away (ranks)."""
  n = normalisers.PAIRWISE_MAX_LEN
  z = jax.random.normal(jax.random.PRNGKey(5), (2 * n,), jnp.float64)
  mask = jnp.arange(2 * n) < n - 3
  long = sparsemax(z, mask)
  short = sparsemax(z[:n], mask[:n])
  np.testing.assert_allclose(long[:n], short, atol=1e-12)
  assert float(jnp.abs(long[n:]).max()) == 0.0
  np.testing.assert_allclose(entmax15(z, mask)[:n], entmax15(z[:n], mask[:n]), atol=1e-12)
