"""Structured attention over a sequence: fusedmax, linear-chain CRF marginals, SparseMAP.

The lecture's "Structured attention" section (Treviso et al. 2020) gives three ways to
let attention see that its input is a sequence:

* ``fusedmax`` (Niculae & Blondel 2017): sparsemax after the prox of 1-D total
  variation, so adjacent words tend to get exactly equal weight (contiguous
  segments). Output on the simplex.
* ``crf_marginals`` (Kim et al. 2017, "structured attention networks"): one binary
  variable ``z_i`` per word in a linear-chain CRF; the weights are the marginals
  ``P(z_i = 1)`` by forward-backward. Output in ``[0, 1]^L``, *not* on the simplex,
  and dense.
* ``sparsemap`` (Niculae et al. 2018): the same binary chain, but the marginals are a
  sparse convex combination of a few 0/1 structures (the structured sparsemax).
  Output in ``[0, 1]^L``, not on the simplex.

The binary chain scores a structure ``z ∈ {0,1}^L`` by

.. math:: s(z) = \\sum_i θ_i z_i + w \\sum_{(i, i+1) \\in E} z_i z_{i+1},

``θ`` the unary scores (the attention scores), ``w`` the pairwise strength (one number
per row: ``w > 0`` favours contiguous selected runs) and ``E`` the edges between
adjacent *real* positions.

Masks: a masked (padding) position gets weight exactly 0 and zero gradient. It also
breaks the chain: the total-variation penalty and the pairwise term only link two
adjacent positions that are both real, so with trailing padding (the usual case) the
chain is exactly the sentence.

References:
  Niculae & Blondel, "A Regularized Framework for Sparse and Structured Neural
  Attention", NeurIPS 2017. https://arxiv.org/abs/1705.07704
  Kim, Denton, Hoang & Rush, "Structured Attention Networks", ICLR 2017.
  https://arxiv.org/abs/1702.00887
  Niculae, Martins, Blondel & Cardie, "SparseMAP: Differentiable Sparse Structured
  Inference", ICML 2018. https://arxiv.org/abs/1802.04223
  Friedman, Hastie, Höfling & Tibshirani, "Pathwise coordinate optimization", Ann. Appl.
  Stat. 2007 (the 1-D fused-lasso path only fuses). https://arxiv.org/abs/0708.1485
  Treviso et al., attention-mechanisms lecture (2020), "Structured attention".
"""
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from attndyn.models.normalisers import sparsemax
from attndyn.tasks.errors import check, is_concrete_number

__all__ = ["FUSEDMAX_LAM", "CRF_PAIRWISE", "SPARSEMAP_PAIRWISE", "tv_prox", "fusedmax",
           "crf_marginals", "crf_log_partition", "SparseMAPResult", "sparsemap", "sparsemap_solve"]

# Defaults used when these are picked by name as a normaliser (models.normalisers.normalise).
FUSEDMAX_LAM = 0.1        # Niculae & Blondel tune λ on validation; 0.1 fuses only near-ties of O(1) scores
CRF_PAIRWISE = 1.0        # a mild bonus for selecting two adjacent words together
SPARSEMAP_PAIRWISE = 1.0


def _full_mask(x: jax.Array, mask: Optional[jax.Array]) -> jax.Array:
  return jnp.ones(x.shape, bool) if mask is None else jnp.broadcast_to(mask, x.shape)


def _edges(mask: jax.Array) -> jax.Array:
  """``[..., L-1]``: True where positions ``i`` and ``i+1`` are both real."""
  return mask[..., :-1] & mask[..., 1:]


def _rows(fn, *arrays, per_row=()):
  """Apply the 1-D ``fn(*rows, *row_scalars)`` to every row of ``[..., L]`` arrays.

  ``per_row`` are arrays broadcast to the batch shape ``[...]`` (one value a row).
  Returns the outputs with the batch shape restored.
  """
  batch = arrays[0].shape[:-1]
  flat = [a.reshape((-1, a.shape[-1])) for a in arrays]
  flat += [jnp.broadcast_to(s, batch).reshape(-1) for s in per_row]
  out = jax.vmap(fn)(*flat)
  return jax.tree_util.tree_map(lambda o: o.reshape(batch + o.shape[1:]), out)


# ---------------------------------------------------------------------------- fusedmax


def _tv_path(y: jax.Array, edge: jax.Array, lam: jax.Array):
  """Exact prox of ``lam·Σ_{j∈E} |x_{j+1} − x_j|`` at ``y`` by the fusion path (one row).

  The 1-D fused-lasso solution is piecewise linear in λ and groups of adjacent equal
  values only ever fuse as λ grows, never split (Friedman et al. 2007). On a
  group ``G`` between its neighbours the optimality condition is exact:

  .. math:: x_G(λ) = \\bar y_G + λ\\,\\frac{σ_{right} − σ_{left}}{|G|},

  ``σ`` the signs of the jumps to the neighbouring groups (0 where the chain ends).
  So starting from ``x = y`` at λ = 0 we compute, for every pair of neighbouring groups,
  the λ at which their values meet, jump to the first such λ, fuse, and repeat until
  the target λ. Every step fuses at least one pair, so at most ``L − 1`` steps: exact,
  with no tolerance.

  Returns:
    ``(x [L], group [L], slope [L])``: the prox, each position's group id and
    ``dx_i/dλ``.
  """
  length = y.shape[0]
  sign = jnp.sign(y[1:] - y[:-1])                      # the jump signs never change before fusing
  # [L-1]: a group ends at j. Equal neighbours start fused for λ > 0 (a perturbation smaller
  # than λ keeps them together, so the Jacobian averages them); at λ = 0 the prox is the
  # identity and nothing is fused.
  boundary = ~edge | (sign != 0) | (lam <= 0)

  def groups(boundary):
    start = jnp.concatenate([jnp.ones((1,), bool), boundary])
    gid = jnp.cumsum(start) - 1
    count = jax.ops.segment_sum(jnp.ones_like(y), gid, length)
    mean = jax.ops.segment_sum(y, gid, length) / jnp.maximum(count, 1.0)
    linked = jnp.where(boundary & edge, sign, 0.0)     # jumps between linked groups
    left = jax.ops.segment_sum(jnp.concatenate([jnp.zeros((1,), y.dtype), linked]) * start,
                               gid, length)
    end = jnp.concatenate([boundary, jnp.ones((1,), bool)])
    right = jax.ops.segment_sum(jnp.concatenate([linked, jnp.zeros((1,), y.dtype)]) * end,
                                gid, length)
    slope = (right - left) / jnp.maximum(count, 1.0)   # dx_G/dλ
    return gid, mean, slope

  def body(state):
    lam_now, boundary, _ = state
    gid, mean, slope = groups(boundary)
    g, h = gid[:-1], gid[1:]                           # the groups either side of each j
    gap0, closing = mean[h] - mean[g], slope[h] - slope[g]
    meets = boundary & edge & (sign * closing < 0)
    hit = jnp.where(meets, -gap0 / jnp.where(meets, closing, 1.0), jnp.inf)
    t = jnp.maximum(jnp.min(hit, initial=jnp.inf), lam_now)
    fuse = t < lam
    return (jnp.where(fuse, t, lam_now), jnp.where(fuse, boundary & ~(hit <= t), boundary),
            ~fuse)

  state = (jnp.zeros((), y.dtype), boundary, jnp.asarray(length < 2))
  _, boundary, _ = jax.lax.while_loop(lambda s: ~s[2], body, state)
  gid, mean, slope = groups(boundary)
  return mean[gid] + lam * slope[gid], gid, slope[gid]


@jax.custom_jvp
def _tv_prox_row(y, mask, lam):
  x, _, _ = _tv_path(y, _edges(mask), lam)
  return jnp.where(mask, x, 0.0)


@_tv_prox_row.defjvp
def _tv_prox_row_jvp(primals, tangents):
  y, mask, lam = primals
  dy, _, dlam = tangents
  x, gid, slope = _tv_path(y, _edges(mask), lam)
  length = y.shape[0]
  count = jax.ops.segment_sum(jnp.ones_like(y), gid, length)
  # Niculae & Blondel 2017: the Jacobian averages dy within each fused group;
  # with the groups and jump signs fixed, a group's value moves with λ at its slope.
  mean_dy = jax.ops.segment_sum(dy, gid, length) / jnp.maximum(count, 1.0)
  dx = mean_dy[gid] + slope * dlam
  return jnp.where(mask, x, 0.0), jnp.where(mask, dx, 0.0)


def tv_prox(scores: jax.Array, mask: Optional[jax.Array] = None, lam=FUSEDMAX_LAM) -> jax.Array:
  """The prox of 1-D total variation (the fused lasso signal approximator), exactly.

  .. math:: \\mathrm{prox}_{λ TV}(θ) = \\arg\\min_x \\tfrac12 \\|x − θ\\|^2
     + λ \\sum_{(i,i+1)∈E} |x_{i+1} − x_i|

  Computed by the exact fusion path (at most ``L − 1`` fusions; see :func:`_tv_path`),
  so the output is exactly piecewise constant on its fused groups. Gradient: the
  within-group average (Niculae & Blondel 2017), by :func:`jax.custom_jvp`.

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real entries (default: all real). Edges link only
      adjacent real entries; masked entries come out 0 with zero gradient.
    lam: ``λ ≥ 0``, a number or ``[...]`` (one a row; may be traced).

  Returns:
    ``[..., L]``.
  """
  if is_concrete_number(lam):
    check(0 <= lam < float("inf"), "lam", lam, "a finite number >= 0")
  mask = _full_mask(scores, mask)
  lam = jnp.asarray(lam, scores.dtype)
  return _rows(_tv_prox_row, scores, mask, per_row=(lam,))


def fusedmax(scores: jax.Array, mask: Optional[jax.Array] = None, lam=FUSEDMAX_LAM) -> jax.Array:
  """Fusedmax (Niculae & Blondel 2017): sparsemax after the 1-D TV prox.

  .. math:: \\mathrm{fusedmax}(θ) = \\arg\\min_{p∈Δ} \\tfrac12\\|p − θ\\|^2
     + λ \\sum_{(i,i+1)∈E} |p_{i+1} − p_i| = \\mathrm{sparsemax}(\\mathrm{prox}_{λTV}(θ))

  (the prox of the sum splits for TV). ``λ = 0`` is sparsemax. Adjacent words whose prox values fuse get
  exactly the same weight. The Jacobian is sparsemax's times the prox's
  (within-group averaging), both exact.

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real words (default: all real).
    lam: ``λ ≥ 0``, a number or ``[...]``.

  Returns:
    ``[..., L]`` weights on the simplex over the real words; masked ones 0.
  """
  mask = _full_mask(scores, mask)
  return sparsemax(tv_prox(scores, mask, lam), mask)


# ---------------------------------------------------------------------------- CRF


def _chain_potentials(unary, mask, pairwise):
  """Unary scores with padding zeroed, and ``[L-1]`` edge weights (0 off the chain)."""
  theta = jnp.where(mask, unary, 0.0)
  return theta, jnp.where(_edges(mask), pairwise, 0.0).astype(unary.dtype)


def _forward_backward(theta, edge_w):
  """Normalised log forward/backward messages of a binary chain (one row).

  ``α̂_i(s) = log α_i(s) − c_i`` with ``c_i = log Σ_s α_i(s)``, so every message stays
  within the size of one position's potentials however long the chain;
  ``log Z = Σ_i c_i``.

  Returns:
    ``(alpha [L, 2], beta [L, 2], log_z [])``.
  """
  lse = jnp.logaddexp

  def fwd(a, xs):
    th, w = xs
    new = jnp.stack([lse(a[0], a[1]), th + lse(a[0], a[1] + w)])
    c = lse(new[0], new[1])
    return new - c, (new - c, c)

  a0 = jnp.stack([jnp.zeros((), theta.dtype), theta[0]])
  c0 = lse(a0[0], a0[1])
  _, (alphas, cs) = jax.lax.scan(fwd, a0 - c0, (theta[1:], edge_w))
  alpha = jnp.concatenate([(a0 - c0)[None], alphas])

  def bwd(b, xs):
    th, w = xs                                      # potentials of position i+1 and edge i
    new = jnp.stack([lse(b[0], th + b[1]), lse(b[0], w + th + b[1])])
    new = new - lse(new[0], new[1])
    return new, new

  b_last = jnp.zeros((2,), theta.dtype)
  _, betas = jax.lax.scan(bwd, b_last, (theta[1:], edge_w), reverse=True)
  beta = jnp.concatenate([betas, b_last[None]])
  return alpha, beta, c0 + jnp.sum(cs)


def _crf_row(unary, mask, pairwise):
  theta, edge_w = _chain_potentials(unary, mask, pairwise)
  alpha, beta, log_z = _forward_backward(theta, edge_w)
  logit = (alpha[:, 1] + beta[:, 1]) - (alpha[:, 0] + beta[:, 0])
  # Padding is a free variable with θ = 0 and no edges: it adds log 2 to log Z.
  n_pad = jnp.sum(~mask).astype(unary.dtype)
  return jnp.where(mask, jax.nn.sigmoid(logit), 0.0), log_z - n_pad * jnp.log(2.0)


def crf_marginals(unary: jax.Array, pairwise=CRF_PAIRWISE,
                  mask: Optional[jax.Array] = None) -> jax.Array:
  """Marginals ``P(z_i = 1)`` of a binary linear-chain CRF (Kim et al. 2017, segmentation attention).

  .. math:: P(z) ∝ \\exp\\Big(\\sum_i θ_i z_i + w \\sum_{(i,i+1)∈E} z_i z_{i+1}\\Big),
     \\qquad μ_i = P(z_i = 1) = \\frac{∂ \\log Z}{∂ θ_i}

  by forward-backward in log space (two :func:`jax.lax.scan`), with the messages
  renormalised at every position so they never grow with the length (``L = 1000`` with
  potentials of 1e3 stays finite in float32). ``μ_i = σ(α̂_i(1) + β̂_i(1) − α̂_i(0) −
  β̂_i(0))``.

  Gradient: plain autodiff through the two scans. That is exact: the Jacobian
  ``∂μ/∂θ`` is the covariance of ``z`` (the Hessian of ``log Z``), which autodiff of
  forward-backward computes without a hand-written backward pass.

  Args:
    unary: ``[..., L]`` scores ``θ``.
    pairwise: ``w``, a number or ``[...]`` (one a row).
    mask: ``[..., L]`` bool, True for real words (default: all real).

  Returns:
    ``[..., L]`` marginals in ``[0, 1]`` (they do not sum to 1); masked ones 0.
  """
  mask = _full_mask(unary, mask)
  w = jnp.asarray(pairwise, unary.dtype)
  return _rows(lambda u, m, p: _crf_row(u, m, p)[0], unary, mask, per_row=(w,))


def crf_log_partition(unary: jax.Array, pairwise=CRF_PAIRWISE,
                      mask: Optional[jax.Array] = None) -> jax.Array:
  """``log Z`` of :func:`crf_marginals`' chain over the real words: ``[...]``."""
  mask = _full_mask(unary, mask)
  w = jnp.asarray(pairwise, unary.dtype)
  return _rows(lambda u, m, p: _crf_row(u, m, p)[1], unary, mask, per_row=(w,))


# ---------------------------------------------------------------------------- SparseMAP


def _viterbi(unary, edge_w, allowed):
  """The best ``z ∈ {0,1}^L`` of ``Σ θ_i z_i + Σ_j w_j z_j z_{j+1}`` with ``z = 0`` off ``allowed``.

  Max-plus forward pass and a reverse scan over the back-pointers (one row).
  Returns ``z [L]`` in ``unary.dtype``.
  """
  th = jnp.where(allowed, unary, -jnp.inf)

  def fwd(d, xs):
    t, w = xs
    to1 = jnp.stack([d[0], d[1] + w])
    return jnp.stack([jnp.max(d), t + jnp.max(to1)]), jnp.stack([jnp.argmax(d), jnp.argmax(to1)])

  d0 = jnp.stack([jnp.zeros((), unary.dtype), th[0]])
  d_last, back = jax.lax.scan(fwd, d0, (th[1:], edge_w))

  def bwd(s, bp):
    return bp[s], s

  first, rest = jax.lax.scan(bwd, jnp.argmax(d_last), back, reverse=True)
  return jnp.concatenate([first[None], rest]).astype(unary.dtype)


def _features(z, edge):
  """A structure's vertex of the marginal polytope: ``[z; z_j z_{j+1} on edges]``."""
  return jnp.concatenate([z, z[..., :-1] * z[..., 1:] * edge], axis=-1)


# What SparseMAP regularises: Niculae et al. (2018) only the unary marginals ("unary", the
# default); "full" regularises the pairwise ones too (the Euclidean projection onto 𝓜).
SPARSEMAP_REGULARISERS = ("unary", "full")


def _regularised(z, edge, full: bool):
  """The part of a structure's vertex that the quadratic term sees: ``z`` or ``[z; z_j z_{j+1}]``."""
  return _features(z, edge) if full else z


class SparseMAPResult(NamedTuple):
  """SparseMAP's solution for one row (leading batch axes ``[...]`` when batched).

  Attributes:
    marginals: ``[..., L]`` unary marginals ``μ_U = Σ_k α_k z_k``.
    pair_marginals: ``[..., L-1]`` ``μ_V = Σ_k α_k z_{k,j} z_{k,j+1}`` (0 off the chain).
    structures: ``[..., K, L]`` the 0/1 structures of the active set (rows with weight
      0 are unused slots).
    weights: ``[..., K]`` their convex weights ``α`` (0 off the active set).
    converged: ``[...]`` bool: the optimality check passed within ``max_iter``.
    n_iter: ``[...]`` active-set iterations used.
  """
  marginals: jax.Array
  pair_marginals: jax.Array
  structures: jax.Array
  weights: jax.Array
  converged: jax.Array
  n_iter: jax.Array


def _kkt_matrix(gram, active):
  """``[[G_A, 1_A], [1_Aᵀ, 0]]`` with identity rows and columns at inactive slots."""
  k = gram.shape[0]
  both = active[:, None] & active[None, :]
  top = jnp.where(both, gram, jnp.eye(k, dtype=gram.dtype))
  ones = active.astype(gram.dtype)
  return jnp.block([[top, ones[:, None]], [ones[None, :], jnp.zeros((1, 1), gram.dtype)]])


def _kkt_rhs(active, rhs_top, rhs_last):
  return jnp.concatenate([jnp.where(active, rhs_top, 0.0), jnp.reshape(rhs_last, (1,))])


def _kkt_solve(gram, active, rhs_top, rhs_last):
  """Solve ``[[G_A, 1], [1ᵀ, 0]] [x; τ] = [r; r_last]`` on the active set ``A``.

  Inactive slots get identity rows (``x_k = 0`` there). Returns ``(x [K], τ [])``.
  """
  k = gram.shape[0]
  sol = jnp.linalg.solve(_kkt_matrix(gram, active), _kkt_rhs(active, rhs_top, rhs_last))
  return sol[:k], sol[k]


def _active_set_step(structs, active, alpha, eta, edge, mask, full: bool):
  """One iteration of the active-set method on one row.

  The active structures ``A`` are kept affinely independent in the regularised part
  ``q(z)`` (so the KKT matrix is nonsingular). On ``A`` the equality-constrained QP
  ``min ½‖Σ β_k q_k‖² − Σ β_k s_k, Σ β_k = 1`` (``s_k = η·f(z_k)`` a structure's score) is
  solved exactly; then

  * ``β`` infeasible (a weight < 0): step from ``α`` towards ``β`` until a weight hits 0
    and drop that structure (Nocedal & Wright 2006, Alg. 16.3);
  * ``β`` feasible: the MAP oracle (Viterbi) at the gradient ``η − μ`` (``μ``'s pairwise
    part 0 under ``"unary"``) returns the best structure ``z``; its gain over the active
    ones is ``f(z)·(η − μ) − τ``. No gain: optimal. A gain and ``q(z)`` outside the
    affine hull of the active ``q_k``: ``z`` joins with weight 0. A gain and ``q(z) =
    Σ c_k q_k`` with ``Σ c_k = 1`` (affinely dependent: only possible under ``"unary"``,
    e.g. ``q(100) = q(110) − q(010) + q(000)``): the QP on ``A ∪ {z}`` is unbounded
    along ``e_z − c``, which keeps ``μ_U`` and gains ``t·gain``; step along it until
    the first weight with ``c_k > 0`` hits 0 and let ``z`` take that slot. The exchanged
    set is affinely independent again (``c_k ≠ 0``).

  Returns the new ``(structs, active, alpha)`` and ``(done, optimal)``.
  """
  n_slots, length = structs.shape
  eps = jnp.finfo(eta.dtype).eps
  feats = _features(structs, edge)                     # [K, D]
  quad = _regularised(structs, edge, full)             # [K, Q]
  kkt = _kkt_matrix(quad @ quad.T, active)
  lu = jax.scipy.linalg.lu_factor(kkt)
  sol = jax.scipy.linalg.lu_solve(lu, _kkt_rhs(active, feats @ eta, 1.0))
  beta, tau = jnp.where(active, sol[:n_slots], 0.0), sol[n_slots]
  # Weights within rounding of 0 count as 0 (else a structure is dropped and re-added).
  feasible = jnp.all(jnp.where(active, beta >= -32 * eps, True))

  # Feasible: the oracle's best structure at the gradient η − μ.
  weights = jnp.where(active, jnp.maximum(beta, 0.0), 0.0)
  mu_q = quad.T @ weights
  grad = eta - jnp.zeros_like(eta).at[:mu_q.shape[0]].set(mu_q)
  z_new = _viterbi(grad[:length], grad[length:], mask)
  gain = _features(z_new, edge) @ grad - tau           # > 0: z_new improves the objective
  known = jnp.any(active & jnp.all(structs == z_new, axis=-1))
  tol = 32 * eps * (1.0 + jnp.abs(tau) + jnp.sum(jnp.abs(grad)))
  optimal = (gain <= tol) | known
  # The affine projection Σ c_k q_k of q(z_new) onto the active set's hull (the same KKT
  # matrix); it reproduces q(z_new) exactly when z_new is affinely dependent. 0/1 vectors
  # outside the hull lie at a distance of order 1, far above sqrt(eps).
  q_new = _regularised(z_new, edge, full)
  proj = jax.scipy.linalg.lu_solve(lu, _kkt_rhs(active, quad @ q_new, 1.0))
  c = jnp.where(active, proj[:n_slots], 0.0)
  dependent = jnp.linalg.norm(quad.T @ c - q_new) <= jnp.sqrt(eps) * (1.0 + jnp.linalg.norm(q_new))
  free = jnp.argmin(active)
  full_set = jnp.all(active)
  improve = feasible & ~optimal
  add = improve & ~dependent & ~full_set
  ray = improve & dependent

  # Ray step along e_new − c: the first weight with c_k > 0 to reach 0 leaves, z_new takes its slot.
  leaving = active & (c > 32 * eps)
  ray_ratio = jnp.where(leaving, weights / jnp.where(leaving, c, 1.0), jnp.inf)
  out = jnp.argmin(ray_ratio)
  t = ray_ratio[out]
  ray_alpha = jnp.where(active, jnp.maximum(weights - t * c, 0.0), 0.0).at[out].set(t)

  # Infeasible: step from alpha towards beta until the first weight hits 0; drop it.
  shrinking = active & (beta < alpha) & (beta < 0)
  ratio = jnp.where(shrinking, alpha / jnp.where(shrinking, alpha - beta, 1.0), jnp.inf)
  blocking = jnp.argmin(ratio)
  step = jnp.clip(ratio[blocking], 0.0, 1.0)
  stepped = jnp.where(active, alpha + step * (beta - alpha), 0.0).at[blocking].set(0.0)

  new_alpha = jnp.where(feasible, jnp.where(ray, ray_alpha, weights), stepped)
  new_active = jnp.where(feasible, active.at[free].set(active[free] | add),
                         active.at[blocking].set(False))
  slot = jnp.where(ray, out, free)
  new_structs = jnp.where(add | ray, structs.at[slot].set(z_new), structs)
  return (new_structs, new_active, new_alpha), (feasible & (optimal | (full_set & ~dependent)),
                                                feasible & optimal)


def _sparsemap_solve(unary, mask, pairwise, n_slots: int, max_iter: int,
                     full: bool) -> SparseMAPResult:
  """The active-set method over structures (:func:`_active_set_step`), rows ``[B, L]``.

  ``pairwise [B]``. Every row starts from its MAP structure; the loop runs until every
  row is done (optimal, or its slots are full) or ``max_iter``.
  """
  dtype = unary.dtype
  n_rows, length = unary.shape
  edge = _edges(mask).astype(dtype)
  theta, edge_w = _chain_potentials(unary, mask, pairwise[:, None])
  eta = jnp.concatenate([theta, edge_w], axis=-1)      # the score of z is eta·features(z)

  z0 = jax.vmap(_viterbi)(theta, edge_w, mask)         # start from the MAP structures
  structs = jnp.zeros((n_rows, n_slots, length), dtype).at[:, 0].set(z0)
  active = jnp.zeros((n_rows, n_slots), bool).at[:, 0].set(True)
  alpha = jnp.zeros((n_rows, n_slots), dtype).at[:, 0].set(1.0)
  step = jax.vmap(partial(_active_set_step, full=full))

  def body(state):
    carry, done, converged, it, n_iter = state
    new, (now_done, optimal) = step(*carry, eta, edge, mask)
    keep = lambda old, upd: jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), old, upd)
    new = jax.tree_util.tree_map(keep, carry, new)
    return (new, done | now_done, converged | (~done & optimal), it + 1,
            n_iter + (~done).astype(jnp.int32))

  def cond(state):
    return ~jnp.all(state[1]) & (state[3] < max_iter)

  state = ((structs, active, alpha), jnp.zeros(n_rows, bool), jnp.zeros(n_rows, bool),
           jnp.zeros((), jnp.int32), jnp.zeros(n_rows, jnp.int32))
  (structs, active, _), _, converged, _, n_iter = jax.lax.while_loop(cond, body, state)
  # The final weights by one direct solve on the final active set, kept a convex combination.
  feats = jax.vmap(_features)(structs, edge)
  quad = jax.vmap(partial(_regularised, full=full))(structs, edge)
  alpha, _ = jax.vmap(_kkt_solve)(jnp.einsum("bkq,bjq->bkj", quad, quad), active,
                                  jnp.einsum("bkd,bd->bk", feats, eta), jnp.ones(n_rows, dtype))
  alpha = jnp.where(active, jnp.maximum(alpha, 0.0), 0.0)
  alpha = alpha / jnp.sum(alpha, axis=-1, keepdims=True)
  # A convex combination of 0/1 vertices lies in [0, 1]; the rounded weighted sum can land an
  # ulp above 1 (every active structure has z_i = 1 and the weights sum to 1 + ulp): clip.
  mu = jnp.clip(jnp.einsum("bkd,bk->bd", feats, alpha), 0.0, 1.0)
  mu_u = mu[:, :length]
  if not full:
    # With w = 0 the positions decouple and the solution is clip(θ, 0, 1); the weighted sum
    # of structures equals it up to a few ulps, so such rows return the clip itself.
    mu_u = jnp.where((pairwise == 0)[:, None], jnp.clip(theta, 0.0, 1.0), mu_u)
  return SparseMAPResult(mu_u, mu[:, length:], structs, alpha, converged, n_iter)


def _sizes(length: int, regulariser: str, max_structures: Optional[int],
           max_iter: Optional[int]):
  check(regulariser in SPARSEMAP_REGULARISERS, "regulariser", regulariser,
        f"one of {', '.join(SPARSEMAP_REGULARISERS)}")
  full = regulariser == "full"
  # The active set stays affinely independent in the regularised part: at most dim + 1
  # structures, L + 1 for μ_U ∈ R^L, 2L for [μ_U; μ_V] ∈ R^{2L-1}.
  default = 2 * length if full else length + 1
  n_slots = default if max_structures is None else int(max_structures)
  check(n_slots >= 1, "max_structures", max_structures, "a positive integer")
  return n_slots, (10 * n_slots + 10 if max_iter is None else int(max_iter)), full


@partial(jax.custom_jvp, nondiff_argnums=(3, 4, 5))
def _sparsemap_rows(unary, mask, pairwise, n_slots, max_iter, full):
  return _sparsemap_solve(unary, mask, pairwise, n_slots, max_iter, full).marginals


def _optimal_face(grad, edge_w, mask):
  """Structures that affinely span every best structure of ``Σ g_i z_i + Σ_j v_j z_j z_{j+1}`` (one row).

  The best structures are the paths of the chain's trellis that use only tight
  transitions (those on some best path). With canonical best prefixes ``P(i, b)`` (the
  forward pass's back-pointers) and suffixes ``S(i, b)`` (the backward pass's), the
  paths ``P(i, b) ∪ S(i, b)`` through every state and ``P(i, a) ∪ S(i+1, b)`` through
  every transition affinely span all best paths: a best path ``e_1 … e_n`` telescopes
  to ``Σ_k π(e_k) − Σ_{k<n} π(state after e_k)``, coefficients summing to 1.

  Returns ``(candidates [6L−4, L], tight [6L−4])``: those paths and whether each is best
  (within rounding); a path through a padded position is never best.
  """
  length = grad.shape[0]
  dtype = grad.dtype
  th = jnp.where(mask, grad, -jnp.inf)
  bits = jnp.array([0.0, 1.0], dtype)
  pair = lambda w: w * bits[:, None] * bits[None, :]   # [a, b]: w a b
  state = lambda t: jnp.stack([jnp.zeros((), dtype), t])   # [0, t] (t may be -inf)

  def fwd(f, xs):
    t, w = xs                                           # position i+1, edge i
    to = f[:, None] + pair(w)
    return state(t) + jnp.max(to, 0), jnp.argmax(to, 0)

  f0 = state(th[0])
  f_last, back = jax.lax.scan(fwd, f0, (th[1:], edge_w))

  def bwd(b, xs):
    t, w = xs
    to = pair(w) + (state(t) + b)[None, :]
    return jnp.max(to, 1), jnp.argmax(to, 1)

  _, ahead = jax.lax.scan(bwd, jnp.zeros((2,), dtype), (th[1:], edge_w), reverse=True)
  eye = jnp.eye(length, dtype=dtype)

  def prefix(p, xs):                                    # P(i+1, b) = P(i, back[i][b]) + b e_{i+1}
    bp, e = xs
    new = p[bp] + bits[:, None] * e[None, :]
    return new, new

  p0 = bits[:, None] * eye[0][None, :]
  _, ps = jax.lax.scan(prefix, p0, (back, eye[1:]))
  pre = jnp.concatenate([p0[None], ps])                 # [L, 2, L]

  def suffix(s, xs):                                    # S(i, a) = S(i+1, ahead[i][a]) + a e_i
    fp, e = xs
    new = s[fp] + bits[:, None] * e[None, :]
    return new, new

  s_last = bits[:, None] * eye[-1][None, :]
  _, ss = jax.lax.scan(suffix, s_last, (ahead, eye[:-1]), reverse=True)
  suf = jnp.concatenate([ss, s_last[None]])             # [L, 2, L]
  through_state = (pre + suf - bits[None, :, None] * eye[:, None, :]).reshape(2 * length, length)
  through_edge = (pre[:-1, :, None, :] + suf[1:, None, :, :]).reshape(4 * (length - 1), length)
  cand = jnp.concatenate([through_state, through_edge])
  valid = jnp.all(jnp.where(mask, True, cand == 0.0), axis=-1)
  g = jnp.where(mask, grad, 0.0)
  score = cand @ g + (cand[:, :-1] * cand[:, 1:]) @ edge_w
  best = jnp.max(jnp.where(valid, score, -jnp.inf))
  tol = jnp.sqrt(jnp.finfo(dtype).eps) * (1.0 + jnp.sum(jnp.abs(g)) + jnp.sum(jnp.abs(edge_w)))
  return cand, valid & (score >= best - tol)


def _face_jvp(res: SparseMAPResult, unary, mask, pairwise, d_eta, full: bool):
  """``dμ_U`` of the SparseMAP solution ``res`` along ``dη``, from its optimal face (one row).

  At a point where the solution is differentiable, ``μ`` stays in the affine hull of the
  optimal face ``F`` (every structure whose gain is 0), spanned by the directions ``D``
  (rows: the face's spanning structures' vertices minus one of them). Stationarity
  along them, ``D (η − μ_q) = 0`` (``μ_q`` the regularised part, ``Q`` the rows' part of
  it), differentiated with ``dμ = Dᵀ dβ``: ``Q Qᵀ dβ = D dη``, so
  ``dμ_U = D_Uᵀ (QQᵀ)^+ D dη``. With ``F`` spanned by the active set alone this is
  Niculae et al. (2018, Sec. 3.3)'s ``Mᵀ Z F dη`` on the active set; the face also
  counts the structures the solution could use but does not (ties, e.g. ``w = 0``, where
  every structure within the clip's free positions is optimal).
  """
  length = unary.shape[0]
  edge = _edges(mask).astype(unary.dtype)
  theta, edge_w = _chain_potentials(unary, mask, pairwise)
  mu = jnp.concatenate([res.marginals, res.pair_marginals])
  eta = jnp.concatenate([theta, edge_w])
  grad = eta - (mu if full else jnp.concatenate([res.marginals, jnp.zeros_like(edge_w)]))
  cand, tight = _optimal_face(grad[:length], grad[length:], mask)
  feats = _features(cand, edge)
  ref = feats[jnp.argmax(tight)]
  dirs = jnp.where(tight[:, None], feats - ref, 0.0)   # [N, D]
  quad = dirs if full else dirs[:, :length]
  pinv = jnp.linalg.pinv(quad)                          # [Q, N]: (QQᵀ)^+ = pinv(Q)ᵀ pinv(Q)
  d_beta = pinv.T @ (pinv @ (dirs @ d_eta))
  return dirs[:, :length].T @ d_beta


@_sparsemap_rows.defjvp
def _sparsemap_rows_jvp(n_slots, max_iter, full, primals, tangents):
  unary, mask, pairwise = primals
  d_unary, _, d_pairwise = tangents
  res = _sparsemap_solve(unary, mask, pairwise, n_slots, max_iter, full)
  edge = _edges(mask).astype(unary.dtype)
  d_eta = jnp.concatenate([jnp.where(mask, d_unary, 0.0), d_pairwise[:, None] * edge], axis=-1)
  d_mu = jax.vmap(partial(_face_jvp, full=full))(res, unary, mask, pairwise, d_eta)
  return res.marginals, jnp.where(mask, d_mu, 0.0)


def _flat_rows(unary, mask, pairwise):
  """``[..., L]`` → ``[B, L]`` rows and ``pairwise`` → ``[B]``."""
  mask = _full_mask(unary, mask)
  batch = unary.shape[:-1]
  w = jnp.broadcast_to(jnp.asarray(pairwise, unary.dtype), batch).reshape(-1)
  return unary.reshape((-1, unary.shape[-1])), mask.reshape((-1, unary.shape[-1])), w, batch


def sparsemap(unary: jax.Array, pairwise=SPARSEMAP_PAIRWISE, mask: Optional[jax.Array] = None,
              *, regulariser: str = "unary", max_structures: Optional[int] = None,
              max_iter: Optional[int] = None) -> jax.Array:
  """SparseMAP marginals of the binary chain (Niculae et al. 2018): structured sparsemax.

  Niculae et al. (2018, eq. 4 with the unary/pairwise split of Sec. 2) regularise only
  the unary marginals:

  .. math:: μ^\\star = \\arg\\max_{μ ∈ \\mathcal{M}} θ^\\top μ_U + w\\,1_E^\\top μ_V
     − \\tfrac12 \\|μ_U\\|^2,

  ``𝓜 = conv{[z; z_j z_{j+1}] : z ∈ {0,1}^L}`` the marginal polytope of the chain
  (``μ_U`` the unary, ``μ_V`` the pairwise marginals on the edges ``E``). That is the
  default, ``regulariser="unary"``. With ``w = 0`` the positions are independent and
  ``μ_U = clip(θ, 0, 1)``; ``w > 0`` pulls adjacent positions towards equal values,
  ``w < 0`` apart.

  ``regulariser="full"`` regularises ``‖μ‖²``, all of it: the Euclidean projection of
  ``η = [θ; w 1_E]`` onto ``𝓜``. It is a different normaliser: the pairwise part of a
  structure then costs ``½‖μ_V‖²`` too, so even with ``w = 0`` adjacent selections
  repel (``θ = [1, 1]`` gives ``[2/3, 2/3]``, not ``[1, 1]``).

  Returns the unary part ``μ_U = Σ_k α_k z_k`` of a sparse convex combination of
  structures (see :func:`sparsemap_solve` for them and their weights).

  Algorithm: the active-set method (Nocedal & Wright 2006, Alg. 16.3) over structures,
  as Niculae et al. use: each iteration solves the KKT system on the current structures
  exactly and calls the MAP oracle (Viterbi) at the gradient; it stops when no structure
  improves on the active ones (up to a few ulps) or the oracle returns one already
  active. With only ``μ_U`` regularised the Hessian ``G = MᵀM`` over structures is
  singular whenever a structure's unary part is an affine combination of the active
  ones' (e.g. ``100 = 110 − 010 + 000``); such a structure is exchanged into the active
  set by a step along the null direction (see :func:`_active_set_step`), so the active
  set stays affinely independent, its KKT matrix nonsingular, and ``L + 1`` slots
  always suffice (``2L`` under ``"full"``).

  Gradient: the closed form on the active set (Niculae et al. 2018, Sec. 3.3),
  ``∂μ_U/∂η = Mᵀ Z F`` with ``Z = G⁻¹ − G⁻¹11ᵀG⁻¹/(1ᵀG⁻¹1)``, ``F`` the active
  structures' vertices and ``M`` their unary parts, by :func:`jax.custom_jvp`; no
  unrolling of the solver.

  Args:
    unary: ``[..., L]`` scores ``θ``.
    pairwise: ``w``, a number or ``[...]`` (one a row).
    mask: ``[..., L]`` bool, True for real words (default: all real).
    regulariser: ``"unary"`` (Niculae et al. 2018, the default) or ``"full"`` (the
      projection of ``[θ; w 1_E]`` onto ``𝓜``).
    max_structures: active-set capacity ``K`` (default ``L + 1``, ``2L`` under
      ``"full"``: always enough; a smaller one may stop unconverged).
    max_iter: active-set iteration cap (default ``10K + 10``).

  Batch by passing ``[..., L]``: the solver is written for a batch of rows.

  Returns:
    ``[..., L]`` marginals in ``[0, 1]`` (they do not sum to 1); masked ones 0.
  """
  n_slots, iters, full = _sizes(unary.shape[-1], regulariser, max_structures, max_iter)
  rows, mask, w, batch = _flat_rows(unary, mask, pairwise)
  return _sparsemap_rows(rows, mask, w, n_slots, iters, full).reshape(unary.shape)


def sparsemap_solve(unary: jax.Array, pairwise=SPARSEMAP_PAIRWISE,
                    mask: Optional[jax.Array] = None, *, regulariser: str = "unary",
                    max_structures: Optional[int] = None,
                    max_iter: Optional[int] = None) -> SparseMAPResult:
  """:func:`sparsemap`'s full solution: marginals, structures, weights, convergence.

  Not differentiable (use :func:`sparsemap`). Arguments as :func:`sparsemap`.
  """
  n_slots, iters, full = _sizes(unary.shape[-1], regulariser, max_structures, max_iter)
  rows, mask, w, batch = _flat_rows(unary, mask, pairwise)
  res = _sparsemap_solve(rows, mask, w, n_slots, iters, full)
  return jax.tree_util.tree_map(lambda a: a.reshape(batch + a.shape[1:]), res)
