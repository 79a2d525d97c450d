"""The figures of ``attndyn reproduce snell`` (Snell et al.): training curves and bar charts.

Each function draws one PNG on the Agg backend (``matplotlib.figure.Figure`` with
``FigureCanvasAgg``; pyplot's global state is left alone) and returns its path.
"""
from typing import Optional, Sequence

import numpy as np

from attndyn.analysis import figure_io

__all__ = ["COLORS", "curve_panels", "rate_bars", "heatmaps"]

COLORS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6")


def _grid(nrows: int, ncols: int, width: float = 4.2, height: float = 3.2):
  return figure_io.grid(nrows, ncols, width, height)


def _save(fig, path) -> str:
  return figure_io.save(fig, path, dpi=110)


def curve_panels(panels: Sequence[dict], path, *, title: str = "", ncols: Optional[int] = None,
                 per_seed: bool = False) -> str:
  """One axis per panel ``{"title", "t", "curves": {label: [S, R]}, "ylabel", "vlines": [...]}``.

  Curves are drawn per seed (thin lines) when ``per_seed``, else as the mean
  over seeds with a min–max band. ``vlines`` (optional) are marked dashed.
  """
  ncols = ncols or len(panels)
  nrows = -(-len(panels) // ncols)
  fig, axes = _grid(nrows, ncols)
  for ax, p in zip(axes.ravel(), panels):
    t = np.asarray(p["t"])
    for c, (label, runs) in zip(COLORS, p["curves"].items()):
      runs = np.atleast_2d(np.asarray(runs, float))
      if per_seed:
        for i, r in enumerate(runs):
          ax.plot(t, r, color=c, lw=0.8, alpha=0.6, label=label if i == 0 else None)
      else:
        ax.fill_between(t, runs.min(0), runs.max(0), color=c, alpha=0.15, lw=0)
        ax.plot(t, runs.mean(0), color=c, lw=1.6, label=f"{label} (mean, min–max)")
    for v in p.get("vlines", ()):
      ax.axvline(v, color="k", ls="--", lw=0.8)
    ax.set_title(p["title"], fontsize=9)
    ax.set_xlabel(p.get("xlabel", "step"))
    ax.set_ylabel(p.get("ylabel", ""))
    ax.legend(fontsize=7)
  for ax in axes.ravel()[len(panels):]:
    ax.set_visible(False)
  if title:
    fig.suptitle(title, fontsize=10)
  return _save(fig, path)


def rate_bars(labels: Sequence[str], rates: Sequence[float], intervals: Sequence[tuple], path, *,
              title: str = "", ylabel: str = "rate") -> str:
  """Bars of proportions with (asymmetric) interval error bars."""
  fig, axes = _grid(1, 1, width=max(4.0, 1.1 * len(labels)), height=3.4)
  ax = axes[0, 0]
  r = np.asarray(rates, float)
  # a Wilson bound equals p̂ at 0/n and n/n up to rounding: clip so that the bars stay ≥ 0
  lo = np.maximum(r - np.asarray([i[0] for i in intervals]), 0.0)
  hi = np.maximum(np.asarray([i[1] for i in intervals]) - r, 0.0)
  ax.bar(range(len(r)), r, color=[COLORS[i % len(COLORS)] for i in range(len(r))],
         yerr=[lo, hi], capsize=4)
  ax.set_xticks(range(len(r)), labels, fontsize=8, rotation=15)
  ax.set_ylim(0, 1.05)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  return _save(fig, path)


def heatmaps(maps: Sequence[tuple], path, *, title: str = "", xticks=None, yticks=None) -> str:
  """Side-by-side heatmaps ``[(name, [T, L]), ...]`` of one sentence pair."""
  fig, axes = _grid(1, len(maps), width=3.6, height=3.4)
  for ax, (name, m) in zip(axes.ravel(), maps):
    ax.imshow(np.asarray(m, float), cmap="Greys", aspect="auto")
    ax.set_title(name, fontsize=9)
    if xticks is not None:
      ax.set_xticks(range(len(xticks)), xticks, rotation=90, fontsize=6)
    if yticks is not None:
      ax.set_yticks(range(len(yticks)), yticks, fontsize=6)
  if title:
    fig.suptitle(title, fontsize=10)
  return _save(fig, path)
