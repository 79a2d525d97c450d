"""Structured attention (models.structured): fusedmax, binary-chain CRF marginals, SparseMAP.

The references are benchmarks.structured_reference's NumPy/SciPy float64 ones (TV prox by
bounded least squares on the dual, enumeration of all 2^n structures, SparseMAP's clipped-TV
closed form certified over all 2^n structures), never the code under test. Every function
is compiled once, at the fixed array length ``LENGTH`` = 10; the mask sets the real length
(1 to 10, trailing padding, sometimes a hole inside), so the file stays within seconds.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from hypothesis import assume, example, given
from hypothesis import strategies as st

from attndyn import dynamics
from attndyn import models
from benchmarks import structured_reference as R
from attndyn.models import structured as S
from attndyn.models.normalisers import NAMED_NORMALISERS, normalise, sparsemax

LENGTH = 10
EPS = 1e-6   # central finite-difference step (float64)

# f(scores [L], mask [L], hyper []) for the three mappings; hyper is λ or the pairwise w
# (always a float64 array, so nothing retraces).
MAPS = {"fusedmax": S.fusedmax,
        "crf": lambda z, m, w: S.crf_marginals(z, w, m),
        "sparsemap": lambda z, m, w: S.sparsemap(z, w, m)}
# The brute-force references, same signature, NumPy in and out.
REFS = {"fusedmax": lambda z, m, lam: R.fusedmax(z, m, lam),
        "crf": lambda z, m, w: R.crf_marginals(z, w, m)[0],
        "sparsemap": lambda z, m, w: R.sparsemap(z, w, m)[0]}
# SparseMAP's solver is written for a batch of rows: it is compiled once, for BATCH rows,
# and a single row is solved as BATCH copies of itself.
BATCH = 3
SMAP_BATCH = jax.jit(S.sparsemap_solve, static_argnames="regulariser")


def SMAP_SOLVE(z, w, mask, regulariser="unary"):
  """``sparsemap_solve`` of one row ``[L]``, through the compiled ``[BATCH, L]`` solver."""
  res = SMAP_BATCH(jnp.stack([z] * BATCH), w, jnp.stack([mask] * BATCH), regulariser=regulariser)
  return jax.tree_util.tree_map(lambda a: np.asarray(a[0]), res)


JIT = {"fusedmax": jax.jit(MAPS["fusedmax"]), "crf": jax.jit(MAPS["crf"]),
       "sparsemap": lambda z, m, w: SMAP_SOLVE(z, w, m).marginals}
# Reverse mode: the transpose of each custom JVP (and of autodiff through the CRF's scans).
JAC = {n: jax.jit(jax.jacrev(f, argnums=(0, 2))) for n, f in MAPS.items()}
FUSED, CRF = JIT["fusedmax"], JIT["crf"]
TV = jax.jit(S.tv_prox)
LOG_Z = jax.jit(S.crf_log_partition)
SPARSEMAX = jax.jit(sparsemax)


def f64(x):
  """A float64 array: Python floats would be weakly typed and retrace the jitted functions."""
  return jnp.asarray(x, jnp.float64)


@st.composite
def chains(draw, scale=3.0, hyper=(-3.0, 3.0)):
  """Scores, a mask of 1 to LENGTH real positions (trailing padding, sometimes a hole),
  and a hyper-parameter in ``hyper`` (0 exactly one time in four, and clipped at 0 for λ)."""
  n = draw(st.integers(1, LENGTH))
  z = draw(st.lists(st.floats(-scale, scale, allow_nan=False), min_size=LENGTH,
                    max_size=LENGTH))
  mask = [i < n for i in range(LENGTH)]
  if n > 2 and draw(st.booleans()):
    mask[draw(st.integers(1, n - 2))] = False
  h = draw(st.one_of(st.just(0.0), st.floats(*hyper), st.floats(*hyper), st.floats(*hyper)))
  return jnp.asarray(z, jnp.float64), jnp.asarray(mask), jnp.asarray(max(h, hyper[0]), jnp.float64)


def lambdas():
  return chains(hyper=(0.0, 2.0))


# ---------------------------------------------------------------------------- on the polytope


def _pad(values, fill=0.0):
  out = np.full(LENGTH, fill)
  out[:len(values)] = values
  return out


@given(data=chains())
# Found by the deep profile: SparseMAP's weighted sum of structures rounded to 1 + 1 ulp here.
@example(data=(f64(_pad([0.25, 0.0, 2.0, 0.5, 2.0])), jnp.arange(LENGTH) < 5, f64(0.0)))
def test_every_output_lies_on_its_polytope_with_exact_zeros_at_padding(data):
  z, mask, hyper = data
  lam = jnp.abs(hyper)
  p = FUSED(z, mask, lam)
  np.testing.assert_allclose(float(p.sum()), 1.0, atol=1e-12)
  assert bool(jnp.all(p >= 0))
  for name in MAPS:
    out = JIT[name](z, mask, lam if name == "fusedmax" else hyper)
    assert out.dtype == jnp.float64
    assert np.all(np.where(mask, True, np.asarray(out) == 0.0)), name
    assert np.all((np.asarray(out) >= 0) & (np.asarray(out) <= 1)), name
  # SparseMAP: a convex combination of valid structures that reproduces its marginals.
  for regulariser in S.SPARSEMAP_REGULARISERS:
    res = SMAP_SOLVE(z, hyper, mask, regulariser)
    assert bool(res.converged), regulariser
    w = res.weights
    assert np.all(w >= 0) and abs(w.sum() - 1) < 1e-12
    used = res.structures[w > 0]
    assert np.all(np.isin(used, [0.0, 1.0])) and np.all(used[:, ~np.asarray(mask)] == 0)
    assert len({tuple(s) for s in used}) == len(used)          # no structure twice
    np.testing.assert_allclose(w[w > 0] @ used, res.marginals, atol=1e-12)
    pairs = R.vertices(used, mask)[:, LENGTH:]
    np.testing.assert_allclose(w[w > 0] @ pairs, res.pair_marginals, atol=1e-12)


# ---------------------------------------------------------------------------- fusedmax


@given(data=lambdas())
def test_fusedmax_at_lambda_zero_is_sparsemax(data):
  z, mask, _ = data
  # Equal up to rounding: equal neighbours start fused, and their mean is recomputed.
  np.testing.assert_allclose(FUSED(z, mask, f64(0.0)), SPARSEMAX(z, mask), rtol=0, atol=1e-15)


@given(data=lambdas())
def test_tv_prox_and_fusedmax_equal_the_bounded_least_squares_reference(data):
  z, mask, lam = data
  x = np.asarray(TV(z, mask, lam))
  y, m = np.asarray(z), np.asarray(mask)
  lam = float(lam)
  np.testing.assert_allclose(x, R.tv_prox(y, m, lam), rtol=0, atol=1e-12)
  np.testing.assert_allclose(FUSED(z, mask, f64(lam)), R.fusedmax(y, m, lam), rtol=0, atol=1e-12)
  for run in R.runs(m):
    # Exact optimality certificate: x − y = s_i − s_{i−1} with the dual s_j = Σ_{i≤j}(x_i − y_i),
    # |s_j| ≤ λ, s_j = λ sign(x_{j+1} − x_j) where x jumps, and s = 0 at both chain ends.
    s = np.cumsum(x[run] - y[run])
    assert abs(s[-1]) < 1e-12
    assert np.all(np.abs(s[:-1]) <= lam + 1e-12)
    jumps = np.diff(x[run])
    moved = jumps != 0
    np.testing.assert_allclose(s[:-1][moved], lam * np.sign(jumps[moved]), atol=1e-12)


@given(a=st.floats(-2, 2), gap=st.floats(1e-3, 1.0), lam=st.floats(0.0, 1.0))
def test_fusedmax_fuses_two_different_neighbours_exactly_when_lambda_covers_their_gap(a, gap, lam):
  # An isolated pair [a, a + gap]: the TV prox moves each end by λ towards the other, so the two
  # fuse (to their mean) iff gap ≤ 2λ. A third word, far below and cut off by padding, keeps
  # sparsemax's support on the pair.
  assume(abs(gap - 2 * lam) > 1e-9)
  z = f64(_pad([a, a + gap, 0.0, a - 10.0]))
  mask = jnp.arange(LENGTH) < 4
  mask = mask.at[2].set(False)
  p = np.asarray(FUSED(z, mask, f64(lam)))
  if gap < 2 * lam:
    assert p[0] == p[1] and p[0] == pytest.approx(0.5, abs=1e-12)   # exactly equal weights
  else:
    assert p[0] < p[1]


def test_fusedmax_fuses_whole_runs_for_large_lambda():
  z = f64(_pad([0.5, -1.0, 2.0, 0.3, 1.0]))
  mask = jnp.arange(LENGTH) < 4
  np.testing.assert_allclose(FUSED(z, mask, f64(10.0)), _pad([0.25] * 4), atol=1e-12)
  # Two runs split by padding: each run is fused to its own mean, then sparsemax.
  split = mask.at[2].set(False).at[4].set(True)
  np.testing.assert_allclose(TV(z, split, f64(10.0)), _pad([-0.25, -0.25, 0.0, 0.65, 0.65]),
                             atol=1e-12)


# ---------------------------------------------------------------------------- CRF


@given(data=chains())
def test_crf_marginals_and_log_partition_equal_brute_force_enumeration(data):
  z, mask, w = data
  mu, log_z = R.crf_marginals(np.asarray(z), float(w), np.asarray(mask))
  np.testing.assert_allclose(CRF(z, mask, w), mu, rtol=0, atol=1e-12)
  np.testing.assert_allclose(LOG_Z(z, w, mask), log_z, rtol=0, atol=1e-11)


def test_crf_is_stable_for_a_long_chain_with_large_potentials():
  n = 1000
  z = 1e3 * jax.random.normal(jax.random.PRNGKey(0), (n,), jnp.float32)
  mask = jnp.arange(n) < 990
  crf = jax.jit(S.crf_marginals)
  mu = crf(z, -1e3, mask)
  grad = jax.jit(jax.grad(lambda u: jnp.sum(S.crf_marginals(u, -1e3, mask) * jnp.arange(n))))(z)
  assert mu.dtype == jnp.float32
  assert bool(jnp.all(jnp.isfinite(mu))) and bool(jnp.all(jnp.isfinite(grad)))
  assert bool(jnp.all((mu >= 0) & (mu <= 1))) and bool(jnp.all(mu[990:] == 0))
  # log Z is of order 1e5 here: unnormalised messages would lose every digit of μ in float32.
  np.testing.assert_allclose(mu, crf(z.astype(jnp.float64), -1e3, mask), atol=1e-4)


def test_crf_marginals_are_the_gradient_of_the_log_partition():
  z = f64(_pad([0.3, -1.2, 2.0, 0.1, -0.4]))
  mask = jnp.arange(LENGTH) < 4
  np.testing.assert_allclose(jax.grad(LOG_Z)(z, f64(0.7), mask), CRF(z, mask, f64(0.7)), atol=1e-12)


# ---------------------------------------------------------------------------- SparseMAP


@given(data=chains())
@example(data=(f64(_pad([1.0, 1.0])), jnp.arange(LENGTH) < 2, f64(0.0)))
@example(data=(f64(_pad([2.0, 2.0, 2.0])), jnp.arange(LENGTH) < 3, f64(0.0)))
def test_sparsemap_is_niculae_et_al_s_and_is_sparse(data):
  z, mask, w = data
  y, m = np.asarray(z), np.asarray(mask)
  res = SMAP_SOLVE(z, w, mask)
  ref_u, ref_v = R.sparsemap(y, float(w), m)
  np.testing.assert_allclose(res.marginals, ref_u, rtol=0, atol=1e-12)
  if float(w) != 0.0:
    # With w = 0 the objective does not contain μ_V: every μ_V that keeps (μ_U, μ_V) in the
    # marginal polytope is optimal (edge j anywhere in [max(0, u_j + u_{j+1} − 1),
    # min(u_j, u_{j+1})]), and the solver and the reference may each return another one;
    # the certificate below checks that ours is one of them.
    np.testing.assert_allclose(res.pair_marginals, ref_v, rtol=0, atol=1e-12)
  # Optimal over all 2^n structures: in their convex hull, and none improves on μ.
  gap, outside = R.sparsemap_certificate(y, float(w), m, res.marginals, res.pair_marginals)
  assert gap <= 1e-12 and outside <= 1e-9
  # Sparse: a few affinely independent structures (at most n + 1), not a dense mixture of 2^n.
  used = res.structures[res.weights > 0]
  n_real = int(m.sum())
  lifted = np.concatenate([used[:, m], np.ones((len(used), 1))], axis=1)
  assert len(used) <= n_real + 1 and np.linalg.matrix_rank(lifted) == len(used)


@given(data=chains())
def test_sparsemap_without_pairwise_weight_is_the_clip_of_the_scores(data):
  z, mask, _ = data
  out = SMAP_SOLVE(z, f64(0.0), mask).marginals
  np.testing.assert_array_equal(out, np.where(mask, np.clip(z, 0.0, 1.0), 0.0))


def test_sparsemap_examples_and_the_full_regulariser_differs():
  mask2, mask3 = jnp.arange(LENGTH) < 2, jnp.arange(LENGTH) < 3
  two, three = f64(_pad([1.0, 1.0])), f64(_pad([2.0, 2.0, 2.0]))
  np.testing.assert_array_equal(SMAP_SOLVE(two, f64(0.0), mask2).marginals, _pad([1.0, 1.0]))
  np.testing.assert_array_equal(SMAP_SOLVE(three, f64(0.0), mask3).marginals, _pad([1.0] * 3))
  half = f64(_pad([0.5, 0.5]))
  np.testing.assert_allclose(SMAP_SOLVE(half, f64(3.0), mask2).marginals, _pad([1.0, 1.0]),
                             atol=1e-12)
  np.testing.assert_allclose(SMAP_SOLVE(half, f64(-3.0), mask2).marginals, _pad([0.5, 0.5]),
                             atol=1e-12)
  # The projection onto the marginal polytope charges the pairwise marginal too: with w = 0
  # adjacent selections repel there.
  full = lambda z, mask: SMAP_SOLVE(z, f64(0.0), mask, "full").marginals
  np.testing.assert_allclose(full(two, mask2), _pad([2 / 3, 2 / 3]), atol=1e-12)
  np.testing.assert_allclose(full(three, mask3), _pad([1.0, 2 / 3, 1.0]), atol=1e-12)
  # An unpadded array of each short length gives the padded answer.
  for n in (1, 3):
    z = jnp.arange(n, dtype=jnp.float64) * 0.7 - 0.2
    np.testing.assert_allclose(jax.jit(S.sparsemap)(z, 1.5),
                               R.sparsemap(np.asarray(z), 1.5, np.ones(n, bool))[0], atol=1e-12)


@given(data=chains())
def test_sparsemap_full_regulariser_is_the_projection_onto_the_marginal_polytope(data):
  z, mask, w = data
  assume(int(mask.sum()) <= 5)                                   # SLSQP over 2^n weights
  res = SMAP_SOLVE(z, w, mask, "full")
  zs = R.structures(mask)
  feats = R.vertices(zs, mask)                                    # [2^n, D]
  eta = np.concatenate([np.where(mask, z, 0.0), float(w) * R.edges(mask)])
  mu = np.concatenate([res.marginals, res.pair_marginals])
  # Exact optimality over all 2^n structures: no vertex improves ⟨η − μ, ·⟩ beyond μ itself.
  assert np.max(feats @ (eta - mu)) <= (eta - mu) @ mu + 1e-10
  # A generic QP over the convex weights of all 2^n structures (SLSQP) agrees.
  k = len(zs)
  ref = scipy.optimize.minimize(
      lambda a: 0.5 * np.sum((a @ feats - eta) ** 2), np.full(k, 1.0 / k),
      jac=lambda a: feats @ (a @ feats - eta), bounds=[(0, 1)] * k, method="SLSQP",
      constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1}],
      options={"ftol": 1e-15, "maxiter": 1000})
  np.testing.assert_allclose(mu, ref.x @ feats, atol=1e-5)
  assert int(np.sum(res.weights > 0)) <= 2 * int(mask.sum())


def test_sparsemap_picks_one_structure_for_a_clear_winner_and_blends_near_ties():
  mask = jnp.arange(LENGTH) < 5
  res = SMAP_SOLVE(f64(_pad([3.0, 3.0, -3.0, 3.0, -3.0])), f64(1.0), mask)
  assert int(np.sum(res.weights > 0)) == 1
  np.testing.assert_array_equal(res.marginals, _pad([1.0, 1.0, 0.0, 1.0, 0.0]))
  # Scores of 1/2 everywhere and a coupling: μ = 1/2 is a blend of 2+ structures.
  res = SMAP_SOLVE(f64(_pad([0.5] * 5)), f64(-1.0), mask)
  np.testing.assert_allclose(res.marginals, _pad([0.5] * 5), atol=1e-12)
  assert int(np.sum(res.weights > 0)) >= 2


# ---------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", ["fusedmax", "crf", "sparsemap"])
@given(data=chains())
@example(data=(f64(_pad([0.3, 0.3, 1.5, -0.2])), jnp.arange(LENGTH) < 4, f64(0.0)))
def test_jacobians_equal_central_differences_of_the_reference_and_padding_gets_none(name, data):
  z, mask, hyper = data
  if name == "fusedmax":
    hyper = jnp.abs(hyper)
  y, m, h = np.asarray(z), np.asarray(mask), float(hyper)
  ref = REFS[name]
  base = ref(y, m, h)
  plus = np.stack([ref(y + EPS * e, m, h) for e in np.eye(LENGTH)])
  minus = np.stack([ref(y - EPS * e, m, h) for e in np.eye(LENGTH)])
  if name != "crf":
    # Piecewise-smooth maps: skip points with a kink inside the stencil, where the
    # one-sided differences disagree (the Jacobian jumps there).
    assume(np.allclose(plus - base, base - minus, atol=1e-10))
  numeric = ((plus - minus) / (2 * EPS)).T                              # [out, in]
  jac, d_hyper = JAC[name](z, mask, hyper)
  np.testing.assert_allclose(jac, numeric, atol=1e-7)
  assert np.all(np.asarray(jac)[~m] == 0) and np.all(np.asarray(jac)[:, ~m] == 0)
  # The hyper-parameter (λ or w) too, where it is not at a kink (w = 0 is one for SparseMAP).
  if name != "crf" and abs(h) <= EPS:
    return                                 # λ ≥ 0 has no left side at 0; w = 0 is a kink
  up, down = ref(y, m, h + EPS), ref(y, m, h - EPS)
  if name == "crf" or np.allclose(up - base, base - down, atol=1e-10):
    np.testing.assert_allclose(d_hyper, (up - down) / (2 * EPS), atol=1e-7)


# ---------------------------------------------------------------------------- batching, training


def test_batched_calls_equal_a_loop_over_rows():
  z = 2 * jax.random.normal(jax.random.PRNGKey(1), (BATCH, LENGTH), jnp.float64)
  mask = jnp.stack([jnp.arange(LENGTH) < 10, jnp.arange(LENGTH) < 3,
                    (jnp.arange(LENGTH) < 7).at[1].set(False)])
  hyper = jnp.array([0.3, 1.0, 0.0])
  assert {"fusedmax", "crf", "sparsemap"} <= set(NAMED_NORMALISERS)
  looped = {n: jnp.stack([JIT[n](z[i], mask[i], hyper[i]) for i in range(BATCH)]) for n in MAPS}
  for name, option in (("fusedmax", "lam"), ("crf", "pairwise")):     # by name, under vmap
    by_name = jax.jit(jax.vmap(lambda z, m, h: normalise(name, z, m, **{option: h})))
    np.testing.assert_allclose(by_name(z, mask, hyper), looped[name], atol=1e-12, err_msg=name)
  # SparseMAP batches natively (a vmap of its solver would be one more slow compile): three
  # different rows in one batch equal each row solved alone.
  np.testing.assert_allclose(SMAP_BATCH(z, hyper, mask).marginals, looped["sparsemap"], atol=1e-12)


@pytest.mark.parametrize("name", ["fusedmax", "crf", "sparsemap"])
def test_the_lu_model_learns_with_each_structured_normaliser(name, tiny_data):
  # A few full-batch GD steps of Attn-TC with the structured attention: the loss falls, so the
  # normaliser's gradient reaches the keys and the classifier through the model.
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                             key_dim=2, classifier="tc", embed_std=0.3, key_std=1.0,
                             normaliser=name)
  model = models.lu_attention(cfg, jnp.float64)
  loss = models.make_loss(model.apply)
  grad = jax.jit(jax.value_and_grad(lambda p: loss(p, data.train)[0]))
  params = model.init(jax.random.PRNGKey(2))
  losses = []
  for _ in range(6):
    value, g = grad(params)
    losses.append(float(value))
    params = jax.tree_util.tree_map(lambda p, d: p - 0.5 * d, params, g)
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0] - 1e-3, losses
  out = jax.jit(model.apply)(params, data.train)
  np.testing.assert_allclose(out.attention, normalise(name, out.scores, data.train.mask),
                             atol=1e-12)
