"""JSD / TVD / KL laws (float64)."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attndyn.analysis import divergences


def _dist(seed, n, sparse):
  x = np.random.default_rng(seed).exponential(size=n)
  if sparse:
    x[: n // 2] = 0.0
    x[-1] += 1e-3
  return jnp.asarray(x / x.sum())


@given(st.integers(0, 10_000), st.integers(2, 7), st.booleans(), st.booleans())
def test_jsd_tvd_bounds_and_symmetry(seed, n, sparse_p, sparse_q):
  p, q = _dist(seed, n, sparse_p), _dist(seed + 1, n, sparse_q)
  j, t = divergences.jsd(p, q), divergences.tvd(p, q)
  assert 0.0 <= j <= np.log(2) + 1e-12
  assert 0.0 <= t <= 1.0 + 1e-12
  np.testing.assert_allclose(j, divergences.jsd(q, p), rtol=1e-12)
  np.testing.assert_allclose(t, divergences.tvd(q, p), rtol=1e-12)
  # Pinsker-type bound linking the two: JSD <= TVD * ln 2 (Lin 1991).
  assert j <= t * np.log(2) + 1e-12
  np.testing.assert_allclose(divergences.jsd(p, p), 0.0, atol=1e-15)


def test_disjoint_supports_reach_the_bounds():
  p = jnp.array([0.5, 0.5, 0.0, 0.0])
  q = jnp.array([0.0, 0.0, 0.25, 0.75])
  np.testing.assert_allclose(divergences.jsd(p, q), np.log(2), rtol=1e-12)
  np.testing.assert_allclose(divergences.tvd(p, q), 1.0, rtol=1e-12)
  assert np.isinf(divergences.kl(p, q))


def test_kl_matches_definition_and_gradient_is_finite_at_zeros():
  p = jnp.array([0.2, 0.0, 0.8])
  q = jnp.array([0.3, 0.3, 0.4])
  np.testing.assert_allclose(divergences.kl(p, q),
                             0.2 * np.log(0.2 / 0.3) + 0.8 * np.log(0.8 / 0.4), rtol=1e-12)
  g = jax.grad(lambda p: divergences.jsd(p, q))(p)
  assert np.all(np.isfinite(g))
