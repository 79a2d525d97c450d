"""Agreement between two distributions over the same source positions: Kendall τ and top-k match.

Snell et al. (Section 3.2) compare the lexical probe β of a model trained with
uniform attention with the attention of a standardly trained model by Kendall's
τ over source positions, per target word, averaged.
"""
import numpy as np

from attndyn.analysis.kendall import kendall_tau_b

__all__ = ["kendall_tau_rows", "top_k_match", "rows_of"]


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
