"""Assumption 1 of Lu et al. (2021): non-topic words barely move compared with topic words.

Fig 1 plots, over five runs, the distributions (with 95% confidence intervals)
of the scores and embedding norms of the non-topic and the topic words of the
trained models; Appendix A's Fig 8 does the same for word pairs, centred on
their initial values. These helpers turn per-run word values into the
per-bin mean ± CI histograms of those figures and into one number per run:
the typical non-topic change relative to the typical topic value.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Assumption 1, Fig 1 and Fig 8. https://arxiv.org/abs/2011.10036
"""
from typing import NamedTuple

import numpy as np

from attndyn.analysis.replication import t_quantile_975

__all__ = ["HistogramCI", "histogram_ci", "change_ratio", "largest_change_ratio"]


class HistogramCI(NamedTuple):
  """Per-bin fraction of words, mean over runs with a 95% t half-width.

  Attributes:
    edges: ``[B + 1]`` bin edges shared by every run.
    mean: ``[B]`` mean over runs of the fraction of words in each bin.
    ci95: ``[B]`` half-width of the 95% interval over runs (0 for one run).
  """
  edges: np.ndarray
  mean: np.ndarray
  ci95: np.ndarray


def histogram_ci(values: np.ndarray, bins: int = 30, value_range=None) -> HistogramCI:
  """Fraction of words per bin, mean ± 95% CI over runs (Fig 1's histograms).

  Args:
    values: ``[R, N]`` one value per word (N words) for each of R runs.
    bins: number of bins.
    value_range: ``(lo, hi)`` of the bins (default: the finite range of all runs).

  Returns:
    A :class:`HistogramCI`.
  """
  values = np.asarray(values, float)
  values = values.reshape((-1, values.shape[-1]))
  finite = values[np.isfinite(values)]
  if value_range is None:
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi <= lo:
      lo, hi = lo - 0.5, hi + 0.5
    value_range = (lo, hi)
  edges = np.linspace(value_range[0], value_range[1], bins + 1)
  fractions = np.stack([np.histogram(v[np.isfinite(v)], edges)[0] / max(np.isfinite(v).sum(), 1)
                        for v in values])
  runs = fractions.shape[0]
  ci = np.zeros(bins)
  if runs >= 2:
    ci = t_quantile_975(runs - 1) * fractions.std(0, ddof=1) / np.sqrt(runs)
  return HistogramCI(edges, fractions.mean(0), ci)


def change_ratio(nontopic_change: np.ndarray, topic_value: np.ndarray) -> np.ndarray:
  """``mean_w |Δx_w| / mean_t |x_t|`` per run: non-topic change over topic size.

  With ``Δx`` the non-topic scores' (or embedding norms') change since
  initialisation and ``x_t`` the topic words' scores (or norms), Assumption 1
  says this is small; "two orders of magnitude" is ``≤ 0.01``.

  Args:
    nontopic_change: ``[R, N]`` change of each non-topic word, per run.
    topic_value: ``[R, T]`` value of each topic word, per run.

  Returns:
    ``[R]`` the ratio per run.
  """
  return _ratio(np.mean, nontopic_change, topic_value)


def largest_change_ratio(nontopic_change: np.ndarray, topic_value: np.ndarray) -> np.ndarray:
  """``max_w |Δx_w| / mean_t |x_t|`` per run: the largest non-topic change over topic size.

  For scores this, not :func:`change_ratio`, tests Assumption 1: the score
  gradients of a sentence's words sum to zero (the softmax weights sum to one,
  ``Σ_w a_w (v_w − v̄)ᵀh = 0``), so with a fixed query ``Σ_w Δs_w = 0`` over the
  vocabulary at every step and, once every non-topic score has fallen, the mean
  non-topic ``|Δs|`` is exactly ``T/(V − T)`` times the mean topic score
  (0.0016 at the text preset) whatever the classifier.

  Args:
    nontopic_change: ``[R, N]`` change of each non-topic word, per run.
    topic_value: ``[R, T]`` value of each topic word, per run.

  Returns:
    ``[R]`` the ratio per run.
  """
  return _ratio(np.max, nontopic_change, topic_value)


def _ratio(reduce, nontopic_change, topic_value) -> np.ndarray:
  num = reduce(np.abs(np.asarray(nontopic_change, float)), axis=-1)
  den = np.mean(np.abs(np.asarray(topic_value, float)), axis=-1)
  with np.errstate(divide="ignore", invalid="ignore"):
    return num / den
