"""How closely runs follow Corollary 1's SEN curve (Lu et al. 2021, Eq (10)).

The SEN relation of a topic word with score ``s`` and embedding ``v = ‖q‖ν``,

.. math:: \\|v_t\\|_2 = \\sqrt{2\\left(s_t + \\frac{e^{s_t}}{m} - \\frac1m\\right)} \\qquad (10)

holds after the initial transient (``‖v_t(0)‖`` is small but not 0, so the
relative error is large while ``s_t ≈ 0``). These helpers measure the
relative error over a window of training, for words of their own ``m`` (SST:
the word's mean sentence length minus one, Fig 4) and for centred word pairs
(Appendix A, Fig 9).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Corollary 1, Figs 2, 4, 9 and 10. https://arxiv.org/abs/2011.10036
"""
import numpy as np

from attndyn.analysis.sen import sen_norm

__all__ = ["relative_error", "windowed_max_error", "windowed_mean_error", "first_passage",
           "curve_error_on_scores", "final_mean_error"]


def relative_error(score, emb_norm, m) -> np.ndarray:
  """``|‖v‖ − SEN(s)| / SEN(s)`` elementwise (NaN where SEN(s) = 0)."""
  predicted = np.asarray(sen_norm(np.asarray(score, np.float64), m), np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(predicted > 0, np.abs(np.asarray(emb_norm, np.float64) - predicted) / predicted,
                    np.nan)


def _window(steps, score, emb_norm, m, start_fraction: float) -> np.ndarray:
  """Relative errors ``[..., T' · W]`` at the recorded steps ``≥ start_fraction · steps[-1]``."""
  steps = np.asarray(steps, np.float64)
  window = steps >= start_fraction * steps[-1]
  err = relative_error(score, emb_norm, m)[..., window, :]
  return err.reshape(err.shape[:-2] + (-1,))


def windowed_max_error(steps, score, emb_norm, m, *, start_fraction: float = 0.1) -> np.ndarray:
  """Largest Corollary-1 relative error over the recorded steps after ``start_fraction`` of training.

  Args:
    steps: ``[T]`` recorded steps.
    score: ``[..., T, W]`` scores of W words along training.
    emb_norm: ``[..., T, W]`` their embedding norms ``‖v‖``.
    m: Eq (10)'s m (broadcastable to ``[..., T, W]``).
    start_fraction: the window is ``step ≥ start_fraction · steps[-1]``.

  Returns:
    ``[...]`` the max over the window and the words (NaN ignored).
  """
  flat = _window(steps, score, emb_norm, m, start_fraction)
  with np.errstate(all="ignore"):
    return np.nanmax(np.where(np.isfinite(flat), flat, -np.inf), axis=-1)


def windowed_mean_error(steps, score, emb_norm, m, *, start_fraction: float = 0.1) -> np.ndarray:
  """Mean Corollary-1 relative error over the window and the words: how far a whole SEN curve lies
  from Eq (10) (Fig 10), with the arguments of :func:`windowed_max_error`."""
  flat = _window(steps, score, emb_norm, m, start_fraction)
  with np.errstate(all="ignore"):
    return np.nanmean(np.where(np.isfinite(flat), flat, np.nan), axis=-1)


def first_passage(score, values, grid) -> np.ndarray:
  """``values`` where each path's ``score`` first reaches each ``grid`` level (linear interpolation).

  Args:
    score: ``[R, T]`` paths of a score (need not be monotone).
    values: ``[R, T]`` a quantity along the same paths (e.g. ``‖v_t‖``).
    grid: ``[G]`` score levels, each reached by every path.

  Returns:
    ``[R, G]``.
  """
  score, values, grid = (np.asarray(x, np.float64) for x in (score, values, grid))
  hit = score[:, None, :] >= grid[None, :, None]                         # [R, G, T]
  after = hit.argmax(-1)                                                  # first index at/above
  before = np.maximum(after - 1, 0)
  take = lambda x, i: np.take_along_axis(x, i, axis=1)
  s0, s1, v0, v1 = take(score, before), take(score, after), take(values, before), take(values, after)
  with np.errstate(divide="ignore", invalid="ignore"):
    frac = np.where(s1 > s0, (grid[None] - s0) / (s1 - s0), 1.0)
  return v0 + np.clip(frac, 0.0, 1.0) * (v1 - v0)


def curve_error_on_scores(score, emb_norm, m, *, lo_fraction: float = 0.1,
                          points: int = 50) -> np.ndarray:
  """Mean relative deviation of SEN curves from Eq (10), measured along the score axis.

  A curve ``‖v‖(s)`` is compared with Eq (10) at ``points`` score levels evenly
  spaced on ``[lo_fraction · s_max, s_max]``, where ``s_max`` is the largest
  score that every path (all runs and words given) reaches, so runs that
  train further or sit longer at their converged end are compared on the same
  stretch of curve (Fig 10 compares curves, not times).

  Args:
    score, emb_norm: ``[R, T, W]`` paths of W topic words in R runs.
    m: Eq (10)'s m.

  Returns:
    ``[R]`` the mean over levels and words.
  """
  score, emb_norm = np.asarray(score, np.float64), np.asarray(emb_norm, np.float64)
  r, t, w = score.shape
  paths = lambda x: np.moveaxis(x, -1, 1).reshape(r * w, t)
  s_max = float(score.max(axis=1).min())
  grid = np.linspace(lo_fraction * s_max, s_max, points)
  norms = first_passage(paths(score), paths(emb_norm), grid)              # [R·W, G]
  err = relative_error(np.broadcast_to(grid, norms.shape), norms, m)
  return err.reshape(r, w * points).mean(-1)


def final_mean_error(score, emb_norm, m) -> np.ndarray:
  """Mean over words of the relative error at the last recorded step: ``[..., T, W]`` → ``[...]``."""
  err = relative_error(np.asarray(score)[..., -1, :], np.asarray(emb_norm)[..., -1, :], m)
  return np.nanmean(err, axis=-1)
