"""Structured attention (models.structured): fusedmax, binary-chain CRF marginals, SparseMAP.

Every function is compiled once, at the fixed length ``LENGTH`` (the mask varies the real
length), so the file stays within a few seconds.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from hypothesis import assume, example, given
from hypothesis import strategies as st

import models
from models import structured as S
from models.normalisers import NAMED_NORMALISERS, normalise, sparsemax

LENGTH = 5
EPS = 1e-6   # central finite-difference step (float64)

# f(scores [L], mask [L], hyper []) for the three mappings; hyper is λ or the pairwise w
# (always a float64 array, so nothing retraces). SparseMAP's solver compiles slowly, so its
# marginals come from the one compiled sparsemap_solve.
MAPS = {"fusedmax": S.fusedmax,
        "crf": lambda z, m, w: S.crf_marginals(z, w, m),
        "sparsemap": lambda z, m, w: S.sparsemap(z, w, m)}
# SparseMAP's solver is written for a batch of rows and compiles slowly: it is compiled once,
# for BATCH rows, and a single row is solved as BATCH copies of itself.
BATCH = 3
SMAP_BATCH = jax.jit(S.sparsemap_solve)


def SMAP_SOLVE(z, w, mask):
  """``sparsemap_solve`` of one row ``[L]``, through the compiled ``[BATCH, L]`` solver."""
  res = SMAP_BATCH(jnp.stack([z] * BATCH), w, jnp.stack([mask] * BATCH))
  return jax.tree_util.tree_map(lambda a: a[0], res)


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
def chains(draw, scale=3.0):
  """Scores, a mask with at least one real position, and a hyper-parameter in [0, 2]."""
  z = draw(st.lists(st.floats(-scale, scale, allow_nan=False), min_size=LENGTH,
                    max_size=LENGTH))
  mask = draw(st.lists(st.booleans(), min_size=LENGTH, max_size=LENGTH))
  mask[draw(st.integers(0, LENGTH - 1))] = True
  hyper = draw(st.floats(0.0, 2.0))
  return jnp.asarray(z, jnp.float64), jnp.asarray(mask), jnp.asarray(hyper, jnp.float64)


def segments(mask):
  """The chain's runs of adjacent real positions, as lists of indices."""
  runs, run = [], []
  for i, real in enumerate(np.asarray(mask)):
    if real:
      run.append(i)
    elif run:
      runs.append(run)
      run = []
  return runs + ([run] if run else [])


def all_structures(mask):
  """``[2^n, L]`` every 0/1 structure that is 0 at the masked positions."""
  real = np.flatnonzero(np.asarray(mask))
  out = np.zeros((2 ** len(real), LENGTH))
  for k, bits in enumerate(itertools.product([0.0, 1.0], repeat=len(real))):
    out[k, real] = bits
  return out


def vertex(z, mask):
  """A structure's vertex ``[z; z_i z_{i+1} on edges]`` (the chain's feature map)."""
  m = np.asarray(mask)
  edge = m[:-1] & m[1:]
  return np.concatenate([z, z[:-1] * z[1:] * edge])


# ---------------------------------------------------------------------------- on the polytope


@given(data=chains())
# Found by the deep profile: SparseMAP's weighted sum of structures rounded to 1 + 1 ulp here.
@example(data=(jnp.array([0.25, 0.0, 2.0, 0.5, 2.0]), jnp.array([True, False, True, True, True]),
               jnp.array(0.0)))
def test_every_output_lies_on_its_polytope_with_exact_zeros_at_padding(data):
  z, mask, hyper = data
  p = FUSED(z, mask, hyper)
  np.testing.assert_allclose(float(p.sum()), 1.0, atol=1e-12)
  assert bool(jnp.all(p >= 0))
  for name in MAPS:
    out = JIT[name](z, mask, hyper)
    assert out.dtype == jnp.float64
    assert bool(jnp.all(jnp.where(mask, True, out == 0.0))), name
    assert bool(jnp.all((out >= 0) & (out <= 1))), name
  # SparseMAP: a convex combination of valid structures that reproduces its marginals.
  res = SMAP_SOLVE(z, hyper, mask)
  assert bool(res.converged)
  w = np.asarray(res.weights)
  assert np.all(w >= 0) and abs(w.sum() - 1) < 1e-12
  used = np.asarray(res.structures)[w > 0]
  assert np.all(np.isin(used, [0.0, 1.0])) and np.all(used[:, ~np.asarray(mask)] == 0)
  assert len({tuple(s) for s in used}) == len(used)          # no structure twice
  np.testing.assert_allclose(w[w > 0] @ used, res.marginals, atol=1e-12)
  pairs = np.array([vertex(s, mask)[LENGTH:] for s in used])
  np.testing.assert_allclose(w[w > 0] @ pairs, res.pair_marginals, atol=1e-12)


# ---------------------------------------------------------------------------- fusedmax


@given(data=chains())
def test_fusedmax_at_lambda_zero_is_sparsemax(data):
  z, mask, _ = data
  # Equal up to rounding: equal neighbours start fused, and their mean is recomputed.
  np.testing.assert_allclose(FUSED(z, mask, f64(0.0)), SPARSEMAX(z, mask), rtol=0, atol=1e-15)


@given(data=chains())
def test_tv_prox_is_optimal_and_fusedmax_is_constant_on_its_fused_groups(data):
  z, mask, lam = data
  x = np.asarray(TV(z, mask, lam))
  y, m = np.asarray(z), np.asarray(mask)
  lam = float(lam)
  for run in segments(m):
    # Exact optimality certificate: x − y = s_i − s_{i−1} with the dual s_j = Σ_{i≤j}(x_i − y_i),
    # |s_j| ≤ λ, s_j = λ sign(x_{j+1} − x_j) where x jumps, and s = 0 at both chain ends.
    s = np.cumsum(x[run] - y[run])
    assert abs(s[-1]) < 1e-12
    assert np.all(np.abs(s[:-1]) <= lam + 1e-12)
    jumps = np.diff(x[run])
    moved = jumps != 0
    np.testing.assert_allclose(s[:-1][moved], lam * np.sign(jumps[moved]), atol=1e-12)
    # A generic solver on the same objective (the smooth split form, SLSQP).
    n = len(run)
    obj = lambda v: 0.5 * np.sum((v[:n] - y[run]) ** 2) + lam * np.sum(v[n:])
    cons = [{"type": "ineq", "fun": lambda v, sg=sg: v[n:] - sg * np.diff(v[:n])} for sg in (1, -1)]
    start = np.concatenate([y[run], np.abs(np.diff(y[run]))])
    ref = scipy.optimize.minimize(obj, start, constraints=cons, method="SLSQP",
                                  options={"ftol": 1e-14, "maxiter": 500})
    np.testing.assert_allclose(x[run], ref.x[:n], atol=1e-5)
  # Fused neighbours (equal prox values on an edge) get exactly equal fusedmax weights.
  p = np.asarray(FUSED(z, mask, lam))
  fused = m[:-1] & m[1:] & (x[:-1] == x[1:])
  np.testing.assert_array_equal(p[:-1][fused], p[1:][fused])


def test_fusedmax_fuses_whole_runs_for_large_lambda():
  z = f64([0.5, -1.0, 2.0, 0.3, 1.0])
  mask = jnp.array([True, True, True, True, False])
  np.testing.assert_allclose(FUSED(z, mask, f64(10.0)), [0.25, 0.25, 0.25, 0.25, 0.0], atol=1e-12)
  # Two runs split by padding: each run is fused to its own mean, then sparsemax.
  split = jnp.array([True, True, False, True, True])
  x = TV(z, split, f64(10.0))
  np.testing.assert_allclose(x, [-0.25, -0.25, 0.0, 0.65, 0.65], atol=1e-12)


# ---------------------------------------------------------------------------- CRF


@given(data=chains())
def test_crf_marginals_and_log_partition_equal_brute_force_enumeration(data):
  z, mask, w = data
  zs = all_structures(mask)
  feats = np.array([vertex(s, mask) for s in zs])
  eta = np.concatenate([np.where(mask, z, 0.0), float(w) * np.ones(LENGTH - 1)])
  scores = feats @ eta
  log_z = np.log(np.sum(np.exp(scores - scores.max()))) + scores.max()
  probs = np.exp(scores - log_z)
  np.testing.assert_allclose(CRF(z, mask, w), probs @ zs, atol=1e-12)
  np.testing.assert_allclose(LOG_Z(z, w, mask), log_z, atol=1e-12)


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
  z = f64([0.3, -1.2, 2.0, 0.1, -0.4])
  mask = jnp.array([True, True, True, True, False])
  np.testing.assert_allclose(jax.grad(LOG_Z)(z, f64(0.7), mask), CRF(z, mask, f64(0.7)), atol=1e-12)


# ---------------------------------------------------------------------------- SparseMAP


@given(data=chains())
def test_sparsemap_is_the_projection_onto_the_marginal_polytope(data):
  z, mask, w = data
  res = SMAP_SOLVE(z, w, mask)
  zs = all_structures(mask)
  feats = np.array([vertex(s, mask) for s in zs])               # [2^n, D]
  eta = np.concatenate([np.where(mask, z, 0.0), float(w) * (np.asarray(mask[:-1] & mask[1:]))])
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
  # Sparse: at most dim + 1 structures (Carathéodory), far fewer than the 2^n available.
  n_real = int(mask.sum())
  assert int(np.sum(np.asarray(res.weights) > 0)) <= 2 * n_real


def test_sparsemap_picks_one_structure_for_a_clear_winner_and_blends_near_ties():
  mask = jnp.ones(LENGTH, bool)
  res = SMAP_SOLVE(f64([3.0, 3.0, -3.0, 3.0, -3.0]), f64(1.0), mask)
  assert int(np.sum(np.asarray(res.weights) > 0)) == 1
  np.testing.assert_array_equal(res.marginals, [1.0, 1.0, 0.0, 1.0, 0.0])
  # Scores of 1/2 everywhere and no coupling: μ = 1/2 is the projection, from 2+ structures.
  res = SMAP_SOLVE(f64([0.5] * LENGTH), f64(0.0), mask)
  np.testing.assert_allclose(res.marginals, 0.5, atol=1e-12)
  assert int(np.sum(np.asarray(res.weights) > 0)) >= 2


# ---------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", ["fusedmax", "crf", "sparsemap"])
@given(data=chains())
def test_jacobians_equal_central_finite_differences_and_padding_gets_none(name, data):
  z, mask, hyper = data
  if name != "crf":
    # Two scores closer than the stencil are a kink the one-sided check below can miss (the
    # failing example had two scores 6e-8 apart): such points are not where a derivative is
    # defined, so they are skipped, with a margin of 100 steps.
    real = np.sort(np.asarray(z)[np.asarray(mask)])
    assume(bool(np.all(np.diff(real) > 100 * EPS)))
  f = JIT[name]
  base = f(z, mask, hyper)
  plus = jnp.stack([f(z + EPS * e, mask, hyper) for e in jnp.eye(LENGTH)])
  minus = jnp.stack([f(z - EPS * e, mask, hyper) for e in jnp.eye(LENGTH)])
  if name != "crf":
    # Piecewise-linear maps: skip points with a kink inside the stencil, where the
    # one-sided differences disagree (the Jacobian jumps there).
    assume(bool(jnp.allclose(plus - base, base - minus, atol=1e-12)))
  numeric = ((plus - minus) / (2 * EPS)).T                              # [out, in]
  jac, d_hyper = JAC[name](z, mask, hyper)
  np.testing.assert_allclose(jac, numeric, atol=1e-7)
  real = np.asarray(mask)
  assert np.all(np.asarray(jac)[~real] == 0) and np.all(np.asarray(jac)[:, ~real] == 0)
  # The hyper-parameter (λ or w) too, where it is not at a kink.
  up, down = (f(z, mask, hyper + d) for d in (EPS, -EPS))
  if name == "crf" or bool(jnp.allclose(up - base, base - down, atol=1e-12)):
    np.testing.assert_allclose(d_hyper, (up - down) / (2 * EPS), atol=1e-7)


# ---------------------------------------------------------------------------- batching, names


def test_batched_calls_equal_a_loop_over_rows():
  z = 2 * jax.random.normal(jax.random.PRNGKey(1), (BATCH, LENGTH), jnp.float64)
  mask = jnp.array([[True] * 5, [True, True, True, False, False], [True, False, True, True, True]])
  hyper = jnp.array([0.3, 1.0, 0.0])
  assert {"fusedmax", "crf", "sparsemap"} <= set(NAMED_NORMALISERS)
  looped = {n: jnp.stack([JIT[n](z[i], mask[i], hyper[i]) for i in range(BATCH)]) for n in MAPS}
  for name, option in (("fusedmax", "lam"), ("crf", "pairwise")):     # by name, under vmap
    by_name = jax.jit(jax.vmap(lambda z, m, h: normalise(name, z, m, **{option: h})))
    np.testing.assert_allclose(by_name(z, mask, hyper), looped[name], atol=1e-12, err_msg=name)
  # SparseMAP batches natively (a vmap of its solver would be one more slow compile): three
  # different rows in one batch equal each row solved alone.
  np.testing.assert_allclose(SMAP_BATCH(z, hyper, mask).marginals, looped["sparsemap"], atol=1e-12)


def test_the_lu_model_accepts_the_structured_normalisers():
  for name in ("fusedmax", "crf", "sparsemap"):
    assert models.LuModelConfig(n_words=5, n_classes=2, normaliser=name).normaliser == name
