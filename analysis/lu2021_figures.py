"""The figures of Lu et al. (2021) as drawn by ``attndyn reproduce lu2021``.

Each function draws one PNG on the Agg backend (``matplotlib.figure.Figure``
with ``FigureCanvasAgg``; pyplot's global state is left alone) from NumPy
arrays and returns its path. Runs (seeds) are a leading axis; curves are drawn
per run or as a mean with a min–max band, histograms as a per-bin mean over
runs with 95% confidence error bars (:func:`analysis.assumption1.histogram_ci`).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Figs 1-10. https://arxiv.org/abs/2011.10036
"""
from typing import Mapping, Optional, Sequence

import numpy as np

from attndyn.analysis import figure_io
from attndyn.analysis.assumption1 import histogram_ci
from attndyn.analysis.sen import sen_norm
from attndyn.analysis.sst_words import sentence_weights

__all__ = ["COLORS", "sen_panels", "distribution_panels", "curve_panels", "twin_panels",
           "fig3_panels", "fig5_panels"]

COLORS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")


_grid = figure_io.grid
_save = figure_io.save


def _band(ax, x, runs, color, label):
  """Mean over runs (line) and min–max (band) of ``runs [R, T]``."""
  runs = np.asarray(runs, np.float64).reshape((-1, np.shape(runs)[-1]))
  with np.errstate(all="ignore"):
    ax.plot(x, np.nanmean(runs, 0), color=color, linewidth=1.5, label=label)
    if runs.shape[0] > 1:
      ax.fill_between(x, np.nanmin(runs, 0), np.nanmax(runs, 0), color=color, alpha=0.2,
                      linewidth=0)


def _sen_theory(ax, scores, m, label=None):
  finite = np.asarray(scores, np.float64)
  finite = finite[np.isfinite(finite)]
  lo = min(0.0, float(finite.min())) if finite.size else 0.0
  hi = max(float(finite.max()), lo + 1e-3) if finite.size else 1.0
  grid = np.linspace(lo, hi, 200)
  ax.plot(grid, np.asarray(sen_norm(grid, m)), "k--", linewidth=1.2,
          label=label or f"Eq (10), m = {m:g}")


def sen_panels(panels: Mapping[str, tuple], path, *, title: str = "", ncols: Optional[int] = None,
               xlabel: str = "score $s$", ylabel: str = "$\\|v\\|_2$") -> str:
  """Empirical SEN curves of every run against Eq (10), one panel per entry (Figs 2, 9, 10).

  .. math:: \\|v_t\\|_2 = \\sqrt{2\\left(s_t + \\frac{e^{s_t}}{m} - \\frac1m\\right)} \\quad (10)

  Args:
    panels: title -> ``(score [R, T], emb_norm [R, T], m)``.
    path: PNG to write.
    title: figure title.
    ncols: panels per row (default: all in one row).
    xlabel, ylabel: axis labels.
  """
  n = len(panels)
  ncols = ncols or n
  nrows = -(-n // ncols)
  fig, axes = _grid(nrows, ncols)
  for ax, (name, (score, norm, m)) in zip(axes.ravel(), panels.items()):
    score = np.asarray(score, np.float64).reshape((-1, np.shape(score)[-1]))
    norm = np.asarray(norm, np.float64).reshape(score.shape)
    for r in range(score.shape[0]):
      ax.plot(score[r], norm[r], "-", color=COLORS[r % len(COLORS)], linewidth=1.0, alpha=0.8,
              label=f"{score.shape[0]} runs (empirical)" if r == 0 else None)
    _sen_theory(ax, score, m)
    figure_io.dress(ax, name, xlabel, ylabel)
  return figure_io.finish(fig, axes, n, path, title)


def distribution_panels(panels: Mapping[str, Mapping[str, np.ndarray]], path, *, title: str = "",
                        bins: int = 30) -> str:
  """Histograms with 95% CI over runs, several models overlaid per panel (Figs 1 and 8).

  Args:
    panels: panel title -> {model label -> values ``[R, N]`` (one row per run)}.
    path: PNG to write.
    title: figure title.
    bins: bins per panel (shared by the overlaid models).
  """
  fig, axes = _grid(1, len(panels))
  for ax, (name, models) in zip(axes[0], panels.items()):
    finite = np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in models.values()])
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi <= lo:
      lo, hi = lo - 0.5 * max(abs(lo), 1e-6), hi + 0.5 * max(abs(hi), 1e-6)
    n_words = min(np.shape(v)[-1] for v in models.values())
    n_bins = int(min(bins, max(6, n_words // 2)))
    for color, (label, values) in zip(COLORS, models.items()):
      h = histogram_ci(values, n_bins, (lo, hi))
      centres, width = 0.5 * (h.edges[1:] + h.edges[:-1]), np.diff(h.edges)
      ax.bar(centres, h.mean, width=width, color=color, alpha=0.35, label=label)
      ax.errorbar(centres, h.mean, yerr=h.ci95, fmt="none", ecolor=color, elinewidth=0.8,
                  capsize=1.5)
    ax.set_title(name, fontsize="medium")
    ax.set_ylabel("fraction of words")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 3))
  if title:
    fig.suptitle(title)
  return _save(fig, path)


def curve_panels(panels: Sequence[dict], path, *, title: str = "", ncols: Optional[int] = None,
                 width: float = 4.2) -> str:
  """Generic curves against step: each panel a dict ``{title, xlabel, ylabel, curves, logy}``.

  ``curves`` is a list of ``(label, x [T], y [R, T])`` drawn as the mean over
  runs with a min–max band (Figs 3, 5, 6, 7 and Theorem 2).
  """
  n = len(panels)
  ncols = ncols or n
  nrows = -(-n // ncols)
  fig, axes = _grid(nrows, ncols, width=width)
  for ax, panel in zip(axes.ravel(), panels):
    for color, (label, x, y) in zip(COLORS, panel["curves"]):
      _band(ax, np.asarray(x, np.float64), y, color, label)
    if panel.get("theory") is not None:
      x, y, label = panel["theory"]
      ax.plot(x, y, "k--", linewidth=1.2, label=label)
    if panel.get("logy"):
      ax.set_yscale("log")
    figure_io.dress(ax, panel.get("title", ""), panel.get("xlabel", "epoch"), panel.get("ylabel", ""))
  return figure_io.finish(fig, axes, n, path, title)


def twin_panels(panels: Sequence[dict], path, *, title: str = "", ncols: Optional[int] = None) -> str:
  """Two quantities with their own y axes against step (Figs 6-7: purity in red, occurrence in blue).

  Each panel: ``{title, x, left (label, y [R, T]), right (label, y [R, T])}``.
  """
  n = len(panels)
  ncols = ncols or n
  nrows = -(-n // ncols)
  fig, axes = _grid(nrows, ncols)
  for ax, panel in zip(axes.ravel(), panels):
    x = np.asarray(panel["x"], np.float64)
    (l_label, l_y), (r_label, r_y) = panel["left"], panel["right"]
    _band(ax, x, l_y, "C3", l_label)
    twin = ax.twinx()
    _band(twin, x, r_y, "C0", r_label)
    twin.set_ylabel(r_label, color="C0")
    figure_io.dress(ax, panel.get("title", ""), "epoch", legend=False)
    ax.set_ylabel(l_label, color="C3")
  return figure_io.finish(fig, axes, n, path, title)


def fig5_panels(label: str, steps, score, norm, words: Sequence[tuple], m_word, batch,
                shared: Optional[int]) -> list:
  """Fig 5's panels of one run (for :func:`curve_panels`): each word's SEN curve against
  Eq (10) with its own ``m``, both words' scores and ``‖v‖`` along training, and, where they
  share a sentence, their attention weights in it (:func:`analysis.sst_words.sentence_weights`).

  Args:
    label: the model's name.
    steps: ``[T]`` the recorded epochs.
    score, norm: ``[T, V]`` every word's score and ``‖v‖`` of the run.
    words: ``((name, id), …)``: the frequent word, then the pure one.
    m_word: ``[V]`` Eq (10)'s m per word.
    batch: the training sentences; ``shared``: the index of one containing both words, or None.
  """
  panels = []
  for w, wid in words[::-1]:
    grid = np.linspace(min(0.0, score[:, wid].min()), max(score[:, wid].max(), 1e-3), 100)
    panels.append({"title": f"{label}: SEN of '{w}'", "xlabel": "score", "ylabel": "‖v‖",
                   "curves": [("empirical", score[:, wid], norm[:, wid][None])],
                   "theory": (grid, np.asarray(sen_norm(grid, m_word[wid])),
                              f"Eq (10), m = {m_word[wid]:.1f}")})
  panels.append({"title": f"{label}: score", "ylabel": "score",
                 "curves": [(w, steps, score[:, wid][None]) for w, wid in words]})
  panels.append({"title": f"{label}: ‖v‖", "ylabel": "‖v‖",
                 "curves": [(w, steps, norm[:, wid][None]) for w, wid in words]})
  if shared is not None:
    toks = np.asarray(batch.tokens[shared])[np.asarray(batch.mask[shared])]
    distinct, cols = np.unique(toks, return_inverse=True)
    weights = sentence_weights(score[:, distinct], cols)
    pick = lambda wid: weights[:, int(np.flatnonzero(toks == wid)[0])][None]
    panels.append({"title": f"{label}: weights in sentence {shared}", "ylabel": "attention",
                   "curves": [(w, steps, pick(wid)) for w, wid in words]})
  return panels


def fig3_panels(steps, curves: Mapping[str, Mapping[str, np.ndarray]], word: int,
                standard: Sequence[str], diminution: Sequence[str], plot_steps: int,
                diminution_plot_steps: int) -> list:
  """Fig 3's panels (for :func:`curve_panels`): topic word ``word``'s score and ``‖v‖`` and the
  training loss of the ``standard`` variants up to ``plot_steps``, then the score and ``‖v‖``
  of the ``diminution`` variants up to ``diminution_plot_steps``.

  Args:
    steps: ``[T]`` the recorded epochs.
    curves: ``{"score", "norm", "loss": {variant: [R, T]}}``.
  """
  cut, cut_dim = steps <= plot_steps, steps <= diminution_plot_steps
  x, xd = steps[cut], steps[cut_dim]
  score, norm, loss = curves["score"], curves["norm"], curves["loss"]
  return [
      {"title": f"score of topic word {word}", "ylabel": "$s_t$",
       "curves": [(v, x, score[v][:, cut]) for v in standard]},
      {"title": f"‖v‖ of topic word {word}", "ylabel": "$\\|v_t\\|$",
       "curves": [(v, x, norm[v][:, cut]) for v in standard]},
      {"title": "training loss", "ylabel": "loss", "logy": True,
       "curves": [(v, x, loss[v][:, cut]) for v in standard]},
      {"title": f"diminution start: score of word {word}", "ylabel": "$s_t$",
       "curves": [(v, xd, score[v][:, cut_dim]) for v in diminution]},
      {"title": f"diminution start: ‖v‖ of word {word}", "ylabel": "$\\|v_t\\|$",
       "curves": [(v, xd, norm[v][:, cut_dim]) for v in diminution]},
  ]
