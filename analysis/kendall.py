"""Kendall's rank correlation τ-b, with ties (no SciPy).

.. math:: τ_b = \\frac{n_c - n_d}{\\sqrt{(n_0 - n_1)(n_0 - n_2)}}

with ``n_c``/``n_d`` the concordant/discordant pairs, ``n_0 = n(n−1)/2``,
``n_1``/``n_2`` the pairs tied in ``x``/``y``. Attention weights tie often
(equal non-topic scores; sparsemax's zeros), hence τ-b rather than τ-a, as in
Jain & Wallace (2019), who compare attention with gradient and leave-one-out
importance by Kendall τ.

References:
  Kendall, "The treatment of ties in ranking problems", Biometrika 1945.
  Jain & Wallace, "Attention is not Explanation", NAACL 2019. https://arxiv.org/abs/1902.10186
"""
import numpy as np
from scipy import stats

__all__ = ["kendall_tau_b", "sen_kendall_tau"]


def kendall_tau_b(x, y, mask=None) -> np.ndarray:
  """τ-b between ``x`` and ``y`` along the last axis, over the entries where ``mask``.

  O(L²) per row, vectorised over leading axes (sentences are short).

  Args:
    x, y: ``[..., L]``.
    mask: ``[..., L]`` bool, True for entries that count (default all).

  Returns:
    ``[...]`` τ-b in ``[−1, 1]``; NaN where a row has fewer than 2 entries or
    one of the two rankings is constant.
  """
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  mask = np.ones(x.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), x.shape)
  dx = np.sign(x[..., :, None] - x[..., None, :])
  dy = np.sign(y[..., :, None] - y[..., None, :])
  pair = mask[..., :, None] & mask[..., None, :]
  upper = np.triu(np.ones(x.shape[-1:] * 2, bool), k=1)
  pair = pair & upper
  s = np.sum(np.where(pair, dx * dy, 0.0), axis=(-2, -1))
  nx = np.sum(pair & (dx != 0), axis=(-2, -1))     # n0 − n1
  ny = np.sum(pair & (dy != 0), axis=(-2, -1))     # n0 − n2
  denom = np.sqrt(nx.astype(np.float64) * ny)
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(denom > 0, s / np.where(denom > 0, denom, 1.0), np.nan)


def sen_kendall_tau(score: np.ndarray, norm: np.ndarray) -> np.ndarray:
  """Per run, Kendall's τ-b between score and norm over time, averaged over the words: 1 when
  a word's norm rises whenever its score does (a positive, monotone SEN relation, Lu et al.
  2021, App. A / Fig 9), whatever the curve. SciPy's ``kendalltau`` (τ-b) per word.

  Args:
    score, norm: ``[R, T, W]`` along training.

  Returns:
    ``[R]``; a word whose score or norm never changes contributes NaN (ignored).
  """
  out = np.full(score.shape[0], np.nan)
  for r in range(score.shape[0]):
    taus = [stats.kendalltau(score[r, :, w], norm[r, :, w]).statistic
            for w in range(score.shape[-1])]
    if np.any(np.isfinite(taus)):
      out[r] = float(np.nanmean(taus))
  return out
