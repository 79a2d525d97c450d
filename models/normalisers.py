"""Attention normalisers: scores → weights on the simplex, with masking.

Every normaliser maps the scores ``θ`` of the real words of a sentence to a
distribution over them; masked positions get weight exactly 0 and receive
zero gradient.

* ``softmax``: ``p = exp(θ)/Σ exp(θ)`` (:func:`models.attention.softmax_attention`).
* ``sparsemax`` (Martins & Astudillo 2016): the Euclidean projection of ``θ``
  onto the simplex, ``p = argmin_{p∈Δ} ‖p − θ‖²``. Exactly
  ``p_i = [θ_i − τ]_+`` with ``τ = (Σ_{j∈S} θ_j − 1)/|S|`` on the support
  ``S = {i: θ_i > τ}``: ``S`` holds the ``k`` largest scores for the largest ``k``
  with ``1 + k θ_(k) > Σ_{j≤k} θ_(j)``, found from each score's rank (all pairs compared)
  in rows of up to :data:`PAIRWISE_MAX_LEN` words and by sorting in longer ones.
* α-``entmax`` (Peters, Niculae & Martins 2019): the Tsallis-α regularised
  argmax, ``p_i = [(α − 1)θ_i − τ]_+^{1/(α−1)}`` with ``τ`` such that ``Σ p = 1``.
  ``α → 1`` is softmax, ``α = 2`` sparsemax. ``entmax15`` is exact (Peters et al.,
  Algorithm 2, by ranks or sorting as sparsemax); general α by bisection on ``τ``.

Gradients are exact, via :func:`jax.custom_jvp`: for α-entmax (sparsemax
included) the Jacobian is (Peters et al. 2019, Prop. 1)

.. math:: \\frac{∂p}{∂θ} = \\mathrm{diag}(g) - \\frac{g g^T}{\\sum_j g_j},
   \\qquad g_i = p_i^{2-α} [p_i > 0],

so sparsemax's (α = 2, ``g = 1_S``) depends only on the support ``S``.

References:
  Martins & Astudillo, "From Softmax to Sparsemax", ICML 2016. https://arxiv.org/abs/1602.02068
  Peters, Niculae & Martins, "Sparse Sequence-to-Sequence Models", ACL 2019.
  https://arxiv.org/abs/1905.05702
  Treviso et al., attention-mechanisms lecture (2020), "Sparsemax and α-entmax".

The structured normalisers ``fusedmax``, ``crf`` and ``sparsemap`` live in
:mod:`models.structured`; :func:`normalise` dispatches to them by name. ``crf`` and
``sparsemap`` return marginals of binary variables (in ``[0, 1]``, not summing to 1).
"""
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp

from attndyn.models.attention import softmax_attention
from attndyn.tasks.errors import check

__all__ = ["STRUCTURED", "NORMALISERS", "NAMED_NORMALISERS", "PAIRWISE_MAX_LEN",
           "sparsemax_threshold", "sparsemax", "entmax15", "entmax", "normalise"]

STRUCTURED = ("fusedmax", "crf", "sparsemap")   # models.structured, with default options
NORMALISERS = ("softmax", "sparsemax", "entmax15", "entmax") + STRUCTURED
# Normalisers selectable by name alone (``entmax`` needs ``alpha``).
NAMED_NORMALISERS = ("softmax", "sparsemax", "entmax15") + STRUCTURED


def _sorted_desc(x: jax.Array, mask: jax.Array):
  """``x`` sorted in decreasing order along the last axis with masked entries last.

  Returns ``(xs, valid)``: the sorted values (masked ones replaced by 0) and
  whether each sorted slot is a real entry.
  """
  order = jnp.argsort(jnp.where(mask, -x, jnp.inf), axis=-1, stable=True)
  xs = jnp.take_along_axis(x, order, axis=-1)
  valid = jnp.take_along_axis(mask, order, axis=-1)
  return jnp.where(valid, xs, 0.0), valid


def _entmax_jvp_tangent(p: jax.Array, g: jax.Array, dx: jax.Array) -> jax.Array:
  """``J dx`` with ``J = diag(g) − g gᵀ/Σg`` (Peters et al. 2019, Prop. 1)."""
  gdx = g * dx
  total = jnp.sum(g, axis=-1, keepdims=True)
  return gdx - g * jnp.sum(gdx, axis=-1, keepdims=True) / jnp.where(total > 0, total, 1.0)


# ---------------------------------------------------------------------------- sparsemax


# Rows up to this length find the sparsemax and 1.5-entmax thresholds from every entry's rank,
# by comparing all pairs (L² comparisons, no sort); longer rows sort. On XLA:CPU a sort of a
# short row costs more than the comparisons (`python -m benchmarks.normalisers`).
PAIRWISE_MAX_LEN = 32


def _ranks(x: jax.Array, mask: jax.Array):
  """For each real entry ``i``: which real entries rank at or before it in decreasing order
  (ties by position, as :func:`_sorted_desc`'s stable sort breaks them), ``[..., L, L]``, and
  its rank ``k_i`` (1 for the largest), ``[..., L]``."""
  pos = jnp.arange(x.shape[-1])
  xi, xj = x[..., :, None], x[..., None, :]
  ahead = ((xj > xi) | ((xj == xi) & (pos[None, :] <= pos[:, None]))) & mask[..., None, :]
  return ahead, jnp.sum(ahead, axis=-1)


def _sparsemax_threshold_sorted(scores: jax.Array, mask: jax.Array):
  zs, valid = _sorted_desc(scores, mask)
  k = jnp.arange(1, scores.shape[-1] + 1, dtype=scores.dtype)
  cums = jnp.cumsum(zs, axis=-1)
  in_support = valid & (1.0 + k * zs > cums)
  size = jnp.maximum(jnp.sum(in_support, axis=-1), 1)
  tau = (jnp.take_along_axis(cums, (size - 1)[..., None], axis=-1)[..., 0] - 1.0) / size
  return tau, size


def _sparsemax_threshold_pairwise(scores: jax.Array, mask: jax.Array):
  """:func:`_sparsemax_threshold_sorted` from ranks: the sorted prefix sum at entry ``i``'s
  rank is the sum of the entries ranked at or before it."""
  ahead, rank = _ranks(scores, mask)
  k = rank.astype(scores.dtype)
  cums = jnp.sum(jnp.where(ahead, scores[..., None, :], 0.0), axis=-1)
  in_support = mask & (1.0 + k * scores > cums)
  size = jnp.maximum(jnp.sum(in_support, axis=-1), 1)
  top = mask & (rank <= size[..., None])                  # the `size` largest entries
  tau = (jnp.sum(jnp.where(top, scores, 0.0), axis=-1) - 1.0) / size
  return tau, size


def sparsemax_threshold(scores: jax.Array, mask: jax.Array):
  """The threshold ``τ`` and support size ``|S|`` of sparsemax: by ranks for rows up to
  :data:`PAIRWISE_MAX_LEN` entries, by sorting (O(L log L)) for longer ones.

  Returns:
    ``(tau [...], support_size [...])``.
  """
  if scores.shape[-1] <= PAIRWISE_MAX_LEN:
    return _sparsemax_threshold_pairwise(scores, mask)
  return _sparsemax_threshold_sorted(scores, mask)


@jax.custom_jvp
def _sparsemax(scores, mask):
  tau, _ = sparsemax_threshold(scores, mask)
  return jnp.where(mask, jnp.maximum(scores - tau[..., None], 0.0), 0.0)


@_sparsemax.defjvp
def _sparsemax_jvp(primals, tangents):
  scores, mask = primals
  d_scores, _ = tangents
  p = _sparsemax(scores, mask)
  support = (p > 0).astype(p.dtype)
  return p, _entmax_jvp_tangent(p, support, jnp.where(mask, d_scores, 0.0))


def sparsemax(scores: jax.Array, mask: Optional[jax.Array] = None) -> jax.Array:
  """Sparsemax (Martins & Astudillo 2016, eq 2 and Prop. 1) over the last axis.

  .. math:: p_i = [θ_i − τ]_+,\\quad τ = \\frac{\\sum_{j∈S} θ_j − 1}{|S|}

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real entries (default: all real).

  Returns:
    ``[..., L]`` weights on the simplex over the real entries; masked ones 0.
    A row with no real entry gives all zeros.
  """
  mask = jnp.ones(scores.shape, bool) if mask is None else jnp.broadcast_to(mask, scores.shape)
  return _sparsemax(scores, mask)


# ---------------------------------------------------------------------------- 1.5-entmax


def _entmax15_threshold_sorted(x: jax.Array, mask: jax.Array) -> jax.Array:
  xs, valid = _sorted_desc(x, mask)
  k = jnp.arange(1, x.shape[-1] + 1, dtype=x.dtype)
  mean = jnp.cumsum(xs, axis=-1) / k
  mean_sq = jnp.cumsum(xs**2, axis=-1) / k
  ss = k * (mean_sq - mean**2)
  delta = jnp.maximum((1.0 - ss) / k, 0.0)
  tau = mean - jnp.sqrt(delta)
  size = jnp.maximum(jnp.sum(valid & (tau <= xs), axis=-1), 1)
  return jnp.take_along_axis(tau, (size - 1)[..., None], axis=-1)[..., 0]


def _entmax15_threshold_pairwise(x: jax.Array, mask: jax.Array) -> jax.Array:
  """:func:`_entmax15_threshold_sorted` from ranks (see :func:`_sparsemax_threshold_pairwise`)."""
  ahead, rank = _ranks(x, mask)
  k = jnp.maximum(rank, 1).astype(x.dtype)
  xj = x[..., None, :]
  mean = jnp.sum(jnp.where(ahead, xj, 0.0), axis=-1) / k
  mean_sq = jnp.sum(jnp.where(ahead, xj**2, 0.0), axis=-1) / k
  ss = k * (mean_sq - mean**2)
  delta = jnp.maximum((1.0 - ss) / k, 0.0)
  tau = mean - jnp.sqrt(delta)
  size = jnp.maximum(jnp.sum(mask & (tau <= x), axis=-1), 1)
  at_size = mask & (rank == size[..., None])              # τ at the sorted position `size`
  return jnp.sum(jnp.where(at_size, tau, 0.0), axis=-1)


def _entmax15_threshold(x: jax.Array, mask: jax.Array) -> jax.Array:
  """``τ`` of 1.5-entmax for the halved scores ``x = θ/2`` (Peters et al. 2019, Alg. 2): by
  ranks up to :data:`PAIRWISE_MAX_LEN` entries, by sorting above."""
  if x.shape[-1] <= PAIRWISE_MAX_LEN:
    return _entmax15_threshold_pairwise(x, mask)
  return _entmax15_threshold_sorted(x, mask)


@jax.custom_jvp
def _entmax15(scores, mask):
  x = jnp.where(mask, scores / 2.0, 0.0)
  x = x - jnp.max(jnp.where(mask, x, -jnp.inf), axis=-1, keepdims=True)
  x = jnp.where(mask, x, 0.0)
  tau = _entmax15_threshold(x, mask)
  return jnp.where(mask, jnp.maximum(x - tau[..., None], 0.0) ** 2, 0.0)


@_entmax15.defjvp
def _entmax15_jvp(primals, tangents):
  scores, mask = primals
  d_scores, _ = tangents
  p = _entmax15(scores, mask)
  return p, _entmax_jvp_tangent(p, jnp.sqrt(p), jnp.where(mask, d_scores, 0.0))


def entmax15(scores: jax.Array, mask: Optional[jax.Array] = None) -> jax.Array:
  """1.5-entmax, exact (Peters, Niculae & Martins 2019, Algorithm 2; ranks or a sort).

  .. math:: p_i = [θ_i/2 − τ]_+^2, \\quad \\sum_i p_i = 1

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real entries (default: all real).

  Returns:
    ``[..., L]`` weights on the simplex over the real entries; masked ones 0.
  """
  mask = jnp.ones(scores.shape, bool) if mask is None else jnp.broadcast_to(mask, scores.shape)
  return _entmax15(scores, mask)


# ---------------------------------------------------------------------------- α-entmax


@partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _entmax_bisect(scores, mask, alpha, n_iter):
  am1 = alpha - 1.0
  x = jnp.where(mask, scores * am1, 0.0)
  x_max = jnp.max(jnp.where(mask, x, -jnp.inf), axis=-1, keepdims=True)
  x = jnp.where(mask, x - x_max, 0.0)                      # max entry 0
  n = jnp.maximum(jnp.sum(mask, axis=-1, keepdims=True), 1).astype(x.dtype)
  lo = jnp.full_like(x_max, -1.0)                           # Σp(lo) ≥ 1
  hi = -(n ** (-am1))                                       # Σp(hi) ≤ 1

  def p_of(tau):
    return jnp.where(mask, jnp.maximum(x - tau, 0.0) ** (1.0 / am1), 0.0)

  def body(_, bounds):
    lo, hi = bounds
    mid = 0.5 * (lo + hi)
    big = jnp.sum(p_of(mid), axis=-1, keepdims=True) >= 1.0
    return jnp.where(big, mid, lo), jnp.where(big, hi, mid)

  lo, hi = jax.lax.fori_loop(0, n_iter, body, (lo, hi))
  p = p_of(0.5 * (lo + hi))
  total = jnp.sum(p, axis=-1, keepdims=True)
  return p / jnp.where(total > 0, total, 1.0)


@_entmax_bisect.defjvp
def _entmax_bisect_jvp(alpha, n_iter, primals, tangents):
  scores, mask = primals
  d_scores, _ = tangents
  p = _entmax_bisect(scores, mask, alpha, n_iter)
  g = jnp.where(p > 0, p ** (2.0 - alpha), 0.0)
  return p, _entmax_jvp_tangent(p, g, jnp.where(mask, d_scores, 0.0))


def entmax(scores: jax.Array, mask: Optional[jax.Array] = None, *, alpha: float = 1.5,
           n_iter: int = 60) -> jax.Array:
  """α-entmax by bisection on the threshold (Peters, Niculae & Martins 2019, eq 8).

  .. math:: p_i = [(α − 1)θ_i − τ]_+^{1/(α−1)}, \\quad \\sum_i p_i = 1

  ``τ`` lies in ``[max_i (α−1)θ_i − 1, max_i (α−1)θ_i − L^{1−α}]``; ``n_iter``
  halvings narrow it by ``2^{−n_iter}`` and the result is renormalised.

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real entries (default: all real).
    alpha: ``α > 1`` (a Python number; 2 is sparsemax, 1.5 is :func:`entmax15`).
    n_iter: bisection steps.

  Returns:
    ``[..., L]`` weights on the simplex over the real entries; masked ones 0.

  Raises:
    ConfigError: ``alpha`` not a number > 1.
  """
  check(isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha > 1.0,
        "alpha", alpha, "a number > 1 (alpha = 1 is softmax: use normaliser 'softmax')")
  mask = jnp.ones(scores.shape, bool) if mask is None else jnp.broadcast_to(mask, scores.shape)
  return _entmax_bisect(scores, mask, float(alpha), int(n_iter))


# ---------------------------------------------------------------------------- dispatch


def normalise(name: str, scores: jax.Array, mask: Optional[jax.Array] = None, *,
              alpha: Optional[float] = None, lam=None, pairwise=None) -> jax.Array:
  """Attention weights of ``scores`` by the normaliser ``name`` (one of :data:`NORMALISERS`).

  Args:
    name: ``softmax``, ``sparsemax``, ``entmax15``, ``entmax`` (needs ``alpha``), or
      the structured ``fusedmax``, ``crf``, ``sparsemap`` (:mod:`models.structured`).
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real words (default: all real).
    alpha: α of ``entmax``.
    lam: λ of ``fusedmax`` (default :data:`models.structured.FUSEDMAX_LAM`).
    pairwise: the pairwise strength of ``crf`` / ``sparsemap`` (default
      :data:`models.structured.CRF_PAIRWISE` / ``SPARSEMAP_PAIRWISE``).

  Raises:
    ConfigError: an unknown name, or ``entmax`` without a valid ``alpha``.
  """
  check(name in NORMALISERS, "normaliser", name, f"one of {', '.join(NORMALISERS)}")
  mask = jnp.ones(scores.shape, bool) if mask is None else jnp.broadcast_to(mask, scores.shape)
  if name == "softmax":
    return softmax_attention(scores, mask)
  if name == "sparsemax":
    return sparsemax(scores, mask)
  if name == "entmax15":
    return entmax15(scores, mask)
  if name in STRUCTURED:
    from attndyn.models import structured   # imported here: models.structured imports this module
    if name == "fusedmax":
      return structured.fusedmax(scores, mask, structured.FUSEDMAX_LAM if lam is None else lam)
    if name == "crf":
      return structured.crf_marginals(
          scores, structured.CRF_PAIRWISE if pairwise is None else pairwise, mask)
    return structured.sparsemap(
        scores, structured.SPARSEMAP_PAIRWISE if pairwise is None else pairwise, mask)
  check(alpha is not None, "alpha", alpha, "a number > 1 for normaliser 'entmax'")
  return entmax(scores, mask, alpha=alpha)
