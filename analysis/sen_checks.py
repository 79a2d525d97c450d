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

from analysis.sen import sen_norm


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


def final_mean_error(score, emb_norm, m) -> np.ndarray:
  """Mean over words of the relative error at the last recorded step: ``[..., T, W]`` → ``[...]``."""
  err = relative_error(np.asarray(score)[..., -1, :], np.asarray(emb_norm)[..., -1, :], m)
  return np.nanmean(err, axis=-1)
