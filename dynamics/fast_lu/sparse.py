"""The exact GD step of the Lu model with sparsemax attention, on the fast path's seeds-last state.

Softmax factors (:mod:`dynamics.fast_lu`'s docstring, step 2): a word's weight in sentence ``i`` is ``e_w/Z_i``,
a per-word number over a per-sentence one, so the backward pass sums per-sentence values
over each word's sentences and scales them per word. Sparsemax does not: the weight of the
word at position ``l`` of sentence ``i`` is ``p_il = [s_il − τ_i]_+`` with the sentence's
threshold ``τ_i`` (:func:`sparsemax_threshold_leading`), so the backward pass sums
per-occurrence values over each word's occurrences. With ``P_w = Wᵀν_w`` (``K`` channels, as
in the projected softmax step), ``pre_i = Σ_l p_il P_{w_il}`` and ``δ_i = ∂L/∂pre_i``
(:func:`step._classifier_backward`):

* ``∂L/∂p_il = P_{w_il}·δ_i`` and, through sparsemax's Jacobian ``diag(1_S) − 1_S 1_Sᵀ/|S|``
  (Martins & Astudillo 2016, Prop. 2; :func:`models.normalisers.sparsemax`'s own),
  ``∂L/∂s_il = 1[p_il > 0] (∂L/∂p_il − mean over the support of ∂L/∂p_i·)``;
* ``R_w = Σ_{(i,l): w_il = w} [p_il δ_i, ∂L/∂s_il]`` (``K + 1`` channels): gathers of the
  per-occurrence table over each word's occurrences (:class:`Occurrences`);
* ``∂L/∂ν_w = W R_w^{(:K)}``, ``∂L/∂s_w = R_w^{(K)}`` (then ``κ_w`` moves along the fixed
  query as in that docstring's step 1), and ``∂L/∂W = Σ_i ν̄_i δ_iᵀ = Σ_w ν_w R_w^{(:K)ᵀ}``, a sum over words.

The state is the softmax path's (:class:`step._State`) with ``x = ν`` and weight 1
(``step._to_state(..., weighted=False)``), so its conversions to parameters and records are
shared. A fixed query only (the trainable query's
closed form is the softmax path's). At a tie (``s_il = τ_i``) sparsemax is not
differentiable; both paths take the support ``p > 0``. A step whose backward sums or
classifier gradients are not finite is not applied, and the run stays frozen from there with
``failed_at`` set, as in the softmax step. Scores need no shift here (no ``exp``).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.fast_lu.plan import WordPlan, count_group_tables
from attndyn.dynamics.fast_lu.step import (_Layout, _State, _classifier_backward, _combine,
                                           _outer_sum, _project)
from attndyn.dynamics.fast_lu.xla_cpu import (_columns, _finite_per_seed, _gather_sum,
                                              _materialize, _rows, _sum_many_rows, _tree_sum)

__all__ = ["Occurrences", "plan_occurrences", "sparsemax_threshold_leading"]


class Occurrences(NamedTuple):
  """Each state row's occurrences in the sentences, as positions of ``WordPlan.row_tokens``
  flattened (``i L + l``; ``n L`` pads, a zero row), rows grouped by count as the plan's
  light words are (:func:`plan._count_groups`).

  Attributes:
    buckets: per group, ``(start, occ)``: rows ``start .. start + len(occ)`` and ``occ [k, c]``
      their occurrences.
  """
  buckets: tuple


def plan_occurrences(plan: WordPlan) -> Occurrences:
  """The :class:`Occurrences` of ``plan``'s rows (NumPy, on the host)."""
  flat = np.asarray(plan.row_tokens).reshape(-1)
  n_rows, pad = len(plan.words), flat.size
  counts = np.bincount(flat[flat < n_rows], minlength=n_rows)   # decreasing: the plan's order
  order = np.argsort(flat, kind="stable")                       # positions by row
  return Occurrences(count_group_tables(counts, order, pad))


def sparsemax_threshold_leading(scores, mask):
  """Sparsemax's threshold ``τ`` over the leading axis (``[L, ...] -> [...]``), by Michelot's
  iteration (Michelot 1986; Condat 2016, Alg. 2): from the support of every real entry,
  ``τ = (Σ_S θ − 1)/|S|``, then ``S ← {i ∈ S: θ_i > τ}``, until ``S`` no longer changes.

  :func:`models.normalisers.sparsemax_threshold` (the model's, by ranks: ``O(L²)`` a row,
  most of a step when the fast path took it) in the fast path's layout, with ``O(L)`` a round
  and a few rounds when most scores lie far from the threshold. ``τ`` only grows, so entries
  are only removed (rounding cannot make it cycle), the loop ends within ``L`` rounds at the
  same support, and ``τ`` is summed over the same entries: the two agree up to the order of
  that sum wherever their supports do, which can differ only for an entry within rounding of
  the threshold (tests/test_fast_path.py holds them equal). A row with no real entry gives
  ``τ = −1``, as the model's does.
  """
  length = scores.shape[0]

  def threshold(support):
    size = jnp.maximum(_tree_sum([support[l].astype(scores.dtype) for l in range(length)]), 1.0)
    return (_tree_sum([jnp.where(support[l], scores[l], 0.0) for l in range(length)])
            - 1.0) / size

  def shrink(carry):
    support, tau, _ = carry
    kept = support & (scores > tau[None])
    return kept, threshold(kept), jnp.any(kept != support)

  return jax.lax.while_loop(lambda c: c[2], shrink, (mask, threshold(mask), jnp.asarray(True)))[1]


def make_step(plan: WordPlan, lay: _Layout, labels_onehot, trainable: dict, dtype):
  """``step(state, lr [S], qq0 [S]) -> state``: one exact full-batch GD step of the model with
  sparsemax attention and a fixed query (``qq0 = ‖q‖²``); see the module docstring."""
  n, kk = lay.n, lay.k
  n_active = len(plan.words)
  positions = _columns(plan.row_tokens)                          # L × [n, 1]
  length = len(positions)
  real = np.asarray(plan.row_tokens) < n_active                  # [n, L]
  occurrences = [(start, _columns(occ)) for start, occ in plan_occurrences(plan).buckets]
  onehot = jnp.asarray(labels_onehot, dtype)[:, :, None]         # [n, J, 1]
  first_layer = "U1" if lay.kind == "tl" else "U"

  def forward(proj, score):
    """The attention ``p [L, n, S]`` and ``pre = Σ_l p_il P_{w_il}`` ``[n, K, S]``."""
    s = jnp.stack([_rows(score, c) for c in positions])         # [L, n, S]
    mask = jnp.broadcast_to(real.T[:, :, None], s.shape)
    tau = sparsemax_threshold_leading(s, mask)
    p = jnp.where(mask, jnp.maximum(s - tau[None], 0.0), 0.0)
    pre = _tree_sum([p[l][:, None] * _rows(proj, c) for l, c in enumerate(positions)])
    return p, pre

  def backward(proj, p, delta):
    """``R [V_a(+1), K+1, S]``: each word's ``Σ`` over its occurrences of ``[p δ, ∂L/∂s]``."""
    dp = [_tree_sum([_rows(proj, c)[:, k] * delta[:, k] for k in range(kk)]) for c in positions]
    support = [(p[l] > 0).astype(p.dtype) for l in range(length)]   # L × [n, S]
    size = _tree_sum(support)
    mean = _tree_sum([a * b for a, b in zip(support, dp)]) / jnp.where(size > 0, size, 1.0)
    ds = jnp.stack([a * (b - mean) for a, b in zip(support, dp)], 1)   # [n, L, S]
    per_occ = jnp.concatenate([jnp.moveaxis(p, 0, 1)[:, :, None] * delta[:, None],
                               ds[:, :, None]], 2)                      # [n, L, K+1, S]
    per_occ = per_occ.reshape((n * length,) + per_occ.shape[2:])
    per_occ = jnp.concatenate([per_occ, jnp.zeros((1,) + per_occ.shape[1:], per_occ.dtype)])
    parts = [_gather_sum(per_occ, cols) for _, cols in occurrences]
    if plan.dummy:
      parts.append(jnp.zeros((1,) + per_occ.shape[1:], per_occ.dtype))
    return jnp.concatenate(parts, 0) if len(parts) > 1 else parts[0]

  def step(state: _State, lr, qq) -> _State:
    # Stages stored (_materialize), as in the softmax step: otherwise XLA:CPU fuses the
    # gathers into each of their consumers.
    pred = state.step >= 0
    c, nu, score = state.cls, state.x, state.score
    w = c[first_layer]
    proj = _materialize(pred, _project, w, nu)                   # P = Wᵀν [V, K, S]
    p, pre = _materialize(pred, forward, proj, score)
    delta, grads = _materialize(pred, lambda c_, pre_: _classifier_backward(
        lay, onehot, trainable, c_, pre_), c, pre)
    r = _materialize(pred, backward, proj, p, delta)
    ok = _finite_per_seed(r)
    if trainable["classifier"]:
      first = _materialize(pred, lambda x, r_: _outer_sum(x, r_[:, :kk], x.shape[0],
                                                          _sum_many_rows), nu, r)
      grads = dict(grads, **{first_layer: first})
    for g in grads.values():
      ok &= _finite_per_seed(g)
    live = ok & (state.failed_at < 0)
    new_score = score
    if trainable["keys"]:
      new_score = jnp.where(live, score - (lr * qq) * r[:, kk], score)
    new_nu = nu
    if trainable["embeddings"]:
      new_nu = jnp.where(live, nu - lr[None, None] * _combine(w, r), nu)
    cls = {k: (jnp.where(live, v - lr * grads[k], v) if k in grads else v) for k, v in c.items()}
    failed_at = jnp.where((state.failed_at < 0) & ~ok, state.step, state.failed_at)
    return _State(new_nu, new_score, state.weight, state.shift, cls, state.step + 1, failed_at)

  return step
