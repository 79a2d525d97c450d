"""Agreement between two distributions over the same source positions: Kendall τ and top-k match.

Snell et al. (Section 3.2) compare the lexical probe β of a model trained with
uniform attention with the attention of a standardly trained model by Kendall's
τ over source positions, per target word, averaged.
"""
import numpy as np

from attndyn.analysis.kendall import kendall_tau_b

__all__ = ["kendall_tau_rows", "top_k_match", "rows_of", "mean_tau", "agreement_by_seed"]


def kendall_tau_rows(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
  """Kendall's τ-b between ``x[r]`` and ``y[r]`` over the positions where ``mask[r]`` holds
  (:func:`analysis.kendall.kendall_tau_b` on rows).

  .. math:: \\tau_b = \\frac{n_c - n_d}{\\sqrt{(n_0 - n_x)(n_0 - n_y)}}

  with ``n_0`` the number of pairs and ``n_x``, ``n_y`` the pairs tied in x or y.

  Args:
    x, y: ``[R, L]`` scores.
    mask: ``[R, L]`` bool.

  Returns:
    ``[R]`` τ-b; NaN for rows with fewer than 2 positions or all tied.
  """
  return kendall_tau_b(x, y, mask)


def top_k_match(x: np.ndarray, y: np.ndarray, mask: np.ndarray, k: int = 1) -> np.ndarray:
  """``[R]`` bool: ``argmax y[r]`` is among the ``k`` largest entries of ``x[r]`` (masked)."""
  x = np.where(mask, np.asarray(x, float), -np.inf)
  y = np.where(mask, np.asarray(y, float), -np.inf)
  top = np.argsort(-x, axis=1, kind="stable")[:, :k]
  return (top == np.argmax(y, 1)[:, None]).any(1)


def rows_of(a: np.ndarray, src_mask: np.ndarray, tgt: np.ndarray):
  """Flatten ``[N, T, L]`` to the rows of real target words: ``([R, L], mask [R, L])``."""
  real = np.asarray(tgt) > 0
  m = np.broadcast_to(np.asarray(src_mask, bool)[:, None, :], np.shape(a))
  return np.asarray(a)[real], m[real]


def mean_tau(x: np.ndarray, y: np.ndarray, src_mask: np.ndarray, tgt: np.ndarray) -> float:
  """Kendall τ-b between ``x`` and ``y`` (``[N, T, L]``) over source positions, averaged over
  the real target words (NaN rows left out)."""
  b, m = rows_of(y, src_mask, tgt)
  a, _ = rows_of(x, src_mask, tgt)
  return float(np.nanmean(kendall_tau_rows(a, b, m)))


def agreement_by_seed(per_seed, fixed: dict, comparisons, src_mask: np.ndarray,
                      tgt: np.ndarray) -> "tuple[dict, dict]":
  """Per comparison, per seed: mean τ-b and top-1 match of the scores with that seed's
  ``attention`` (Section 3.2's measure).

  ``per_seed[i]`` holds ``attention`` and the seed's own scores; ``fixed`` the scores shared
  by every seed; ``"other_seed"`` compares with the attention of the next seed (cyclically;
  left empty with one seed). Every score is ``[N, T, L]``. Returns ``(tau, top1)``, each
  ``{comparison: [per seed]}``.
  """
  taus = {c: [] for c in comparisons}
  top1 = {c: [] for c in comparisons}
  for i, ps in enumerate(per_seed):
    att, m = rows_of(ps["attention"], src_mask, tgt)
    for c in comparisons:
      if c == "other_seed":
        if len(per_seed) < 2:
          continue
        other = per_seed[(i + 1) % len(per_seed)]["attention"]
      else:
        other = ps[c] if c in ps else fixed[c]
      x, _ = rows_of(other, src_mask, tgt)
      taus[c].append(float(np.nanmean(kendall_tau_rows(x, att, m))))
      top1[c].append(float(top_k_match(x, att, m, 1).mean()))
  return taus, top1
