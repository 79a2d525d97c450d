"""Brute-force float64 references for models.structured, and their deviations: ``python -m benchmarks.structured_reference``.

NumPy/SciPy only (nothing from ``models``), so they referee the JAX code from outside:

* :func:`tv_prox`: the prox of 1-D total variation through its dual, a bounded least
  squares problem solved exactly by SciPy's BVLS (an active-set method):
  ``x = y − Dᵀs``, ``s = argmin_{|s| ≤ λ} ½‖y − Dᵀs‖²``, ``D`` the differences along
  each run of real positions.
* :func:`fusedmax`: sparsemax (by sorting) of that prox (Niculae & Blondel 2017).
* :func:`crf_marginals`: ``P(z_i = 1)`` by enumerating all ``2^n`` structures.
* :func:`sparsemap`: Niculae et al. (2018)'s SparseMAP, only ``μ_U`` regularised. On a
  chain (a tree) the marginal polytope is the local one, so for given ``μ_U = a`` the best
  pairwise marginal of an edge is ``min(a_i, a_{i+1})`` for ``w ≥ 0`` and
  ``max(0, a_i + a_{i+1} − 1)`` for ``w < 0``. Written with ``u = a − ½`` and
  ``x_i = σ_i u_i`` (``σ_i = 1`` for ``w ≥ 0``, ``(−1)^i`` for ``w < 0``) both become
  ``|w|/2 · |x_i − x_{i+1}|``, and the problem is ``min ½‖x − σ∘g‖² + |w|/2 · TV(x)``
  over ``x ∈ [−½, ½]^n``, ``g = θ − ½ + w/2 · deg`` (``deg_i`` the number of edges at
  ``i``): the TV prox, clipped (the clip of a 1-D TV prox is the prox of TV plus the box).
  That derivation is not taken on trust: :func:`sparsemap_certificate` checks a
  solution against all ``2^n`` structures (membership in their convex hull by a linear
  program, and no structure improving the first-order condition).

``main`` draws ``--n`` random rows per normaliser (lengths 1 to 10, interior and
trailing padding, pairwise weights negative, zero and positive, λ including 0), computes
each with models.structured in float64 and prints the largest deviation from the
reference, for SparseMAP also the certificate of its own solution, its number of
structures and the deviation of its Jacobian from central differences of the reference.
"""
import argparse
import itertools
import sys

import numpy as np
import scipy.optimize

MAX_LEN = 10


def runs(mask):
  """The chain's runs of adjacent real positions, as index arrays."""
  out, run = [], []
  for i, real in enumerate(np.asarray(mask, bool)):
    if real:
      run.append(i)
    elif run:
      out.append(np.array(run))
      run = []
  return out + ([np.array(run)] if run else [])


def edges(mask):
  """``[L-1]`` bool: positions ``i`` and ``i+1`` both real."""
  m = np.asarray(mask, bool)
  return m[:-1] & m[1:]


def tv_prox(y, mask, lam):
  """``argmin_x ½‖x − y‖² + λ Σ_{edges} |x_{i+1} − x_i|``; 0 at padding."""
  y = np.asarray(y, float)
  x = np.zeros_like(y)
  for run in runs(mask):
    n = len(run)
    if n == 1 or lam == 0:
      x[run] = y[run]
      continue
    dt = np.zeros((n, n - 1))                        # Dᵀ: (Dᵀs)_i = s_{i-1} − s_i
    dt[np.arange(n - 1), np.arange(n - 1)] = -1.0
    dt[np.arange(1, n), np.arange(n - 1)] = 1.0
    s = scipy.optimize.lsq_linear(dt, y[run], bounds=(-lam, lam), method="bvls",
                                  tol=1e-15).x
    x[run] = y[run] - dt @ s
  return x


def sparsemax_rows(z, mask):
  """Sparsemax over the real entries (sorting); 0 at padding."""
  m = np.asarray(mask, bool)
  v = np.sort(z[m])[::-1]
  k = np.arange(1, len(v) + 1)
  cum = np.cumsum(v)
  support = k[1 + k * v > cum]
  tau = (cum[support[-1] - 1] - 1) / support[-1]
  return np.where(m, np.maximum(z - tau, 0.0), 0.0)


def fusedmax(z, mask, lam):
  return sparsemax_rows(tv_prox(z, mask, lam), mask)


def structures(mask):
  """``[2^n, L]`` every 0/1 structure that is 0 at the padding."""
  m = np.asarray(mask, bool)
  real = np.flatnonzero(m)
  out = np.zeros((2 ** len(real), len(m)))
  for k, bits in enumerate(itertools.product([0.0, 1.0], repeat=len(real))):
    out[k, real] = bits
  return out


def vertices(zs, mask):
  """``[N, 2L-1]``: each structure's ``[z; z_i z_{i+1} on edges]``."""
  return np.concatenate([zs, zs[:, :-1] * zs[:, 1:] * edges(mask)], axis=1)


def crf_marginals(theta, w, mask):
  """``P(z_i = 1)`` and ``log Z`` of the binary chain, by enumeration."""
  zs = structures(mask)
  eta = np.concatenate([np.where(mask, theta, 0.0), w * edges(mask)])
  scores = vertices(zs, mask) @ eta
  top = scores.max()
  log_z = top + np.log(np.sum(np.exp(scores - top)))
  return np.exp(scores - log_z) @ zs, log_z


def sparsemap(theta, w, mask):
  """Niculae et al. (2018)'s SparseMAP marginals ``(μ_U, μ_V)`` (only ``μ_U`` regularised)."""
  m = np.asarray(mask, bool)
  e = edges(m)
  length = len(m)
  deg = np.zeros(length)
  deg[:-1] += e
  deg[1:] += e
  sigma = np.ones(length) if w >= 0 else (-1.0) ** np.arange(length)
  g = np.where(m, np.asarray(theta, float) - 0.5 + 0.5 * w * deg, 0.0)
  x = np.clip(tv_prox(sigma * g, m, abs(w) / 2), -0.5, 0.5)
  a = np.where(m, 0.5 + sigma * x, 0.0)
  pair = np.minimum(a[:-1], a[1:]) if w >= 0 else np.maximum(0.0, a[:-1] + a[1:] - 1)
  return a, np.where(e, pair, 0.0)


def sparsemap_certificate(theta, w, mask, mu_u, mu_v):
  """How far ``(μ_U, μ_V)`` is from SparseMAP's optimum, checked over all ``2^n`` structures.

  Returns ``(gap, outside)``: ``gap = max_z ⟨∇, v(z) − μ⟩ ≥ 0`` with ``∇ = [θ − μ_U;
  w 1_E]`` the objective's gradient (0 exactly at the optimum of a concave objective
  over the polytope; ``‖μ_U − μ_U^⋆‖² ≤ 2·gap``), and ``outside``: the smallest
  ``max |Vᵀα − μ|`` over convex weights ``α`` (a linear program; 0 when ``μ`` is in the
  marginal polytope).
  """
  m = np.asarray(mask, bool)
  verts = vertices(structures(m), m)
  mu = np.concatenate([mu_u, mu_v])
  grad = np.concatenate([np.where(m, theta, 0.0) - mu_u, w * edges(m)])
  gap = float(np.max(verts @ grad) - grad @ mu)
  # min t  s.t.  −t ≤ Vᵀα − μ ≤ t,  α ≥ 0,  Σα = 1
  n, d = verts.shape
  cost = np.zeros(n + 1)
  cost[-1] = 1.0
  ones = np.ones((d, 1))
  a_ub = np.block([[verts.T, -ones], [-verts.T, -ones]])
  b_ub = np.concatenate([mu, -mu])
  a_eq = np.concatenate([np.ones(n), [0.0]])[None]
  lp = scipy.optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0],
                              bounds=[(0, None)] * (n + 1), method="highs")
  return gap, float(lp.x[-1])


def random_row(rng, length=None):
  """``(theta [L], mask [L], w, lam)``: a length 1–10, padding at the end and sometimes
  inside, a pairwise weight negative, zero or positive, a λ in [0, 2] (0 one time in 5)."""
  length = int(rng.integers(1, MAX_LEN + 1)) if length is None else length
  n = int(rng.integers(1, length + 1))
  mask = np.arange(length) < n
  if length > 2 and rng.random() < 0.3:
    mask[rng.integers(0, length)] = False            # a hole inside (or more padding)
    mask[rng.integers(0, length)] = True
  theta = rng.uniform(-3, 3, length)
  if rng.random() < 0.2:
    theta = np.round(theta)                          # ties and integers
  w = [0.0, float(rng.uniform(-3, 0)), float(rng.uniform(0, 3))][int(rng.integers(0, 3))]
  lam = 0.0 if rng.random() < 0.2 else float(rng.uniform(0, 2))
  return theta, mask, w, lam


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.structured_reference",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--n", type=int, default=240, help="random rows per normaliser (default 240)")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.n < 1:
    parser.error("--n takes a positive integer")
  import jax
  jax.config.update("jax_enable_x64", True)
  import jax.numpy as jnp
  from attndyn.models import structured as S

  rng = np.random.default_rng(args.seed)
  rows = [random_row(rng, MAX_LEN) for _ in range(args.n)]   # one array length: one compile
  theta = jnp.asarray(np.stack([r[0] for r in rows]))
  mask = jnp.asarray(np.stack([r[1] for r in rows]))
  w = jnp.asarray([r[2] for r in rows])
  lam = jnp.asarray([r[3] for r in rows])
  fused = np.asarray(jax.jit(S.fusedmax)(theta, mask, lam))
  crf = np.asarray(jax.jit(S.crf_marginals)(theta, w, mask))
  log_z = np.asarray(jax.jit(S.crf_log_partition)(theta, w, mask))
  res = jax.tree_util.tree_map(np.asarray, jax.jit(S.sparsemap_solve)(theta, w, mask))
  jac, jac_w = map(np.asarray, jax.jit(jax.vmap(jax.jacfwd(
      lambda t, m, p: S.sparsemap(t, p, m), argnums=(0, 2))))(theta, mask, w))

  dev = {"fusedmax": 0.0, "crf": 0.0, "crf_log_z": 0.0, "sparsemap": 0.0,
         "sparsemap_pairs": 0.0, "sparsemap_jac": 0.0,
         "sparsemap_jac_w": 0.0}
  gap = outside = ref_gap = ref_outside = 0.0
  n_struct, fd_rows, fd_w_rows, real_lengths = [], 0, 0, []
  eps = 1e-6
  for i, (t, m, wi, li) in enumerate(rows):
    real_lengths.append(int(m.sum()))
    dev["fusedmax"] = max(dev["fusedmax"], np.max(np.abs(fused[i] - fusedmax(t, m, li))))
    mu, lz = crf_marginals(t, wi, m)
    dev["crf"] = max(dev["crf"], np.max(np.abs(crf[i] - mu)))
    dev["crf_log_z"] = max(dev["crf_log_z"], abs(log_z[i] - lz))
    ref_u, ref_v = sparsemap(t, wi, m)
    dev["sparsemap"] = max(dev["sparsemap"], np.max(np.abs(res.marginals[i] - ref_u)))
    dev["sparsemap_pairs"] = max(dev["sparsemap_pairs"],
                                 np.max(np.abs(res.pair_marginals[i] - ref_v), initial=0.0))
    g, o = sparsemap_certificate(t, wi, m, res.marginals[i], res.pair_marginals[i])
    gap, outside = max(gap, g), max(outside, o)
    g, o = sparsemap_certificate(t, wi, m, ref_u, ref_v)
    ref_gap, ref_outside = max(ref_gap, g), max(ref_outside, o)
    n_struct.append(int(np.sum(res.weights[i] > 0)))
    # The Jacobian against central differences of the reference, where both one-sided
    # differences agree (no kink within the stencil).
    plus = np.stack([sparsemap(t + eps * e, wi, m)[0] for e in np.eye(len(t))])
    minus = np.stack([sparsemap(t - eps * e, wi, m)[0] for e in np.eye(len(t))])
    if np.allclose(plus - ref_u, ref_u - minus, atol=1e-10):
      fd_rows += 1
      dev["sparsemap_jac"] = max(dev["sparsemap_jac"],
                                 np.max(np.abs(jac[i] - ((plus - minus) / (2 * eps)).T)))
    up, down = sparsemap(t, wi + eps, m)[0], sparsemap(t, wi - eps, m)[0]
    if wi != 0 and np.allclose(up - ref_u, ref_u - down, atol=1e-10):   # w = 0 is a kink
      fd_w_rows += 1
      dev["sparsemap_jac_w"] = max(dev["sparsemap_jac_w"],
                                   np.max(np.abs(jac_w[i] - (up - down) / (2 * eps))))
  counts = np.bincount(real_lengths, minlength=MAX_LEN + 1)[1:]
  n_w = [sum(r[2] < 0 for r in rows), sum(r[2] == 0 for r in rows), sum(r[2] > 0 for r in rows)]
  print(f"{args.n} rows (seed {args.seed}), array length {MAX_LEN}, float64; real lengths 1..10: "
        f"{' '.join(map(str, counts))}; padded rows {sum(int((~r[1]).any()) for r in rows)}; "
        f"w < 0 / = 0 / > 0: {n_w[0]} / {n_w[1]} / {n_w[2]}; "
        f"λ = 0: {sum(r[3] == 0 for r in rows)}")
  print()
  print("| normaliser | reference | max abs deviation |")
  print("|---|---|---:|")
  print(f"| fusedmax | sparsemax(TV prox by BVLS on the dual) | {dev['fusedmax']:.2e} |")
  print(f"| CRF marginals | enumeration of 2^n structures | {dev['crf']:.2e} |")
  print(f"| CRF log Z | enumeration | {dev['crf_log_z']:.2e} |")
  print("| SparseMAP μ_U | clipped TV prox (certified over 2^n structures) "
        f"| {dev['sparsemap']:.2e} |")
  print(f"| SparseMAP μ_V | the same | {dev['sparsemap_pairs']:.2e} |")
  print(f"| SparseMAP ∂μ_U/∂θ | central differences of the reference "
        f"({fd_rows} rows without a kink) "
        f"| {dev['sparsemap_jac']:.2e} |")
  print(f"| SparseMAP ∂μ_U/∂w | the same ({fd_w_rows} rows) | {dev['sparsemap_jac_w']:.2e} |")
  print()
  print(f"SparseMAP certificate over all 2^n structures: ours gap {gap:.1e}, outside the polytope "
        f"{outside:.1e}; the reference's gap {ref_gap:.1e}, outside {ref_outside:.1e}")
  print(f"SparseMAP structures in a solution: mean {np.mean(n_struct):.2f}, max {max(n_struct)} "
        f"(of up to 2^n = {2 ** MAX_LEN}); converged {int(res.converged.sum())}/{args.n}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
