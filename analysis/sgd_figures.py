"""Figures of ``attndyn reproduce sgd``: SGD, its SDE and gradient flow as bands over seeds.

Each function draws one PNG on the Agg backend (no pyplot state) and returns
its path. Curves are the mean over seeds with a ±1 standard-deviation band
(the spread of the minibatch noise; every seed starts from the same
parameters); a single reference curve (gradient flow, GD) is a dashed line.
"""
from typing import Mapping, Optional, Sequence

import numpy as np

from attndyn.analysis import figure_io

__all__ = ["COLORS", "band_panels", "scaling_figure", "histogram_figure", "shuffle_figure",
           "bands_of_runs"]


COLORS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")


_save = figure_io.save


def _grid(nrows: int, ncols: int, width: float = 4.4, height: float = 3.4):
  return figure_io.grid(nrows, ncols, width, height)


def band_panels(panels: Sequence[dict], path, *, title: str = "", ncols: Optional[int] = None) -> str:
  """Panels of mean ± sd bands: each ``{title, ylabel, xlabel, logy, curves, refs}``.

  ``curves``: list of ``(label, x [K], runs [S, K])`` (mean line, ±1 sd band);
  ``refs``: list of ``(label, x [K], y [K])`` drawn dashed.
  """
  n = len(panels)
  ncols = ncols or n
  fig, axes = _grid(-(-n // ncols), ncols)
  for ax, panel in zip(axes.ravel(), panels):
    for color, (label, x, runs) in zip(COLORS, panel.get("curves", [])):
      runs = np.asarray(runs, np.float64).reshape((-1, np.shape(runs)[-1]))
      mean, sd = runs.mean(0), runs.std(0, ddof=1) if runs.shape[0] > 1 else 0 * runs[0]
      ax.plot(x, mean, color=color, linewidth=1.4, label=label)
      ax.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.2, linewidth=0)
    for style, (label, x, y) in zip(("k--", "k:", "k-."), panel.get("refs", [])):
      ax.plot(x, y, style, linewidth=1.2, label=label)
    if panel.get("logy"):
      ax.set_yscale("log")
    figure_io.dress(ax, panel.get("title", ""), panel.get("xlabel", "gradient-flow time τ = lr·step"),
                    panel.get("ylabel", ""))
  return figure_io.finish(fig, axes, n, path, title)


def scaling_figure(series: Mapping[str, tuple], path, *, fit=None, title: str = "",
                   xlabel: str = "lr / B", ylabel: str = "Var over seeds of $s_t$") -> str:
  """Log-log scatter of a statistic against ``lr/B``, with the fitted line.

  Args:
    series: label -> ``(x [N], y [N])``.
    fit: an :class:`analysis.sgd_noise.Fit` of ``log y`` on ``log x`` (drawn
      over the first series' range), or ``None``.
  """
  fig, axes = _grid(1, 1, width=5.2, height=4.0)
  ax = axes[0, 0]
  markers = ("o", "s", "^", "D", "v")
  xs = []
  for (label, (x, y)), color, marker in zip(series.items(), COLORS, markers):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ax.plot(x, y, marker, color=color, label=label, markersize=6, linestyle="none")
    xs.append(x)
  if fit is not None and xs:
    grid = np.geomspace(min(v.min() for v in xs), max(v.max() for v in xs), 50)
    ax.plot(grid, np.exp(fit.intercept) * grid ** fit.slope, "k--", linewidth=1.1,
            label=f"fit: slope {fit.slope:.2f} [{fit.lo:.2f}, {fit.hi:.2f}]")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize="x-small")
  if title:
    ax.set_title(title, fontsize="medium")
  return _save(fig, path)


def histogram_figure(groups: Mapping[str, np.ndarray], path, *, refs: Mapping[str, float] = None,
                     title: str = "", xlabel: str = "take-off time τ") -> str:
  """Overlaid histograms of per-seed values (e.g. take-off times), references as vertical lines."""
  fig, axes = _grid(1, 1, width=5.6, height=4.0)
  ax = axes[0, 0]
  finite = [np.asarray(v, np.float64)[np.isfinite(v)] for v in groups.values()]
  allv = np.concatenate([v for v in finite if v.size] or [np.zeros(1)])
  refv = list((refs or {}).values())
  lo, hi = min([allv.min()] + refv), max([allv.max()] + refv)
  bins = np.linspace(lo, hi if hi > lo else lo + 1, 40)
  for (label, v), color in zip(zip(groups, finite), COLORS):
    ax.hist(v, bins=bins, color=color, alpha=0.45, label=f"{label} (n={v.size})")
  for (label, x), style in zip((refs or {}).items(), ("k--", "k:", "k-.")):
    ax.axvline(x, color="k", linestyle=style[1:], linewidth=1.2, label=label)
  ax.set_xlabel(xlabel)
  ax.set_ylabel("seeds")
  ax.grid(alpha=0.3)
  ax.legend(fontsize="x-small")
  if title:
    ax.set_title(title, fontsize="medium")
  return _save(fig, path)


def shuffle_figure(tau, curves: Mapping[str, np.ndarray], rows: Sequence[tuple], path, *,
                   title: str = "") -> str:
  """Shuffled-epoch SGD against its SME: variance along τ, and measured against predicted ratio.

  Args:
    tau: ``[K]`` gradient-flow times.
    curves: label -> ``[K]`` across-seed variance (left panel, log scale).
    rows: ``(label, Var_SDE/Var_SGD, (lo, hi), predicted)`` per shuffled configuration (right
      panel): the measured ratio with its interval, the prediction from the epoch-boundary noise
      alone as a bar (an arrow where it is infinite).
  """
  fig, axes = _grid(1, 2, width=5.2, height=4.0)
  ax = axes[0, 0]
  for (label, v), color in zip(curves.items(), COLORS):
    ax.plot(tau, np.asarray(v, np.float64), color=color, linewidth=1.3, label=label,
            linestyle="--" if label.startswith("SDE") else "-")
  ax.set_yscale("log")
  figure_io.dress(ax, "across-seed Var of $s_t$ (mean over topic words)",
                  "gradient-flow time τ = lr·step", "Var")
  ax = axes[0, 1]
  top = max([r[2][1] for r in rows] + [p for *_, p in rows if np.isfinite(p)])
  labelled = False
  for i, (label, ratio, (lo, hi), pred) in enumerate(rows):
    ax.errorbar([i], [ratio], yerr=[[ratio - lo], [hi - ratio]], fmt="o", color="C0",
                label="measured (95% bootstrap)" if i == 0 else None)
    if np.isfinite(pred):
      ax.plot([i - 0.3, i + 0.3], [pred, pred], "k-", linewidth=2,
              label=None if labelled else "epoch-boundary noise alone")
      labelled = True
    else:
      ax.annotate("∞", (i, top * 3), ha="center", fontsize="large")
  ax.set_xticks(range(len(rows)), [r[0] for r in rows], fontsize="small")
  ax.set_yscale("log")
  ax.set_ylim(top=top * 10)
  figure_io.dress(ax, "Var_SDE / Var_SGD: measured and predicted", "", "ratio")
  return figure_io.finish(fig, axes, 2, path, title)


def bands_of_runs(tau, sgd: Mapping[tuple, dict], sde_runs: Mapping[tuple, dict], gf: dict,
                  gd: dict, lr: float, batch_sizes: Sequence[int]) -> list:
  """The panels of ``fig_bands`` (for :func:`band_panels`): topic word 0's score and ``‖v‖``
  and the training loss along τ, for SGD with replacement at ``lr`` (at most three of
  ``batch_sizes``: the first, middle and last), the SME at the first of those, with gradient
  flow and GD at ``lr`` as references.

  Args:
    tau: ``[K]`` gradient-flow times.
    sgd: ``{(lr, B, sampling): observables [S, K, ...]}``.
    sde_runs: ``{(B, sampling): observables [S, K, ...]}``.
    gf, gd: the references' observables ``[K, ...]`` (``gd`` at ``lr``).
  """
  show = batch_sizes if len(batch_sizes) <= 3 else [
      batch_sizes[0], batch_sizes[len(batch_sizes) // 2], batch_sizes[-1]]
  panels = []
  for q, ylabel, logy in (("score", "topic score $s_t$ (word 0)", False),
                          ("emb_norm", "$\\|v_t\\|$ (word 0)", False), ("loss", "training loss", True)):
    pick = (lambda a: a[..., 0]) if q != "loss" else (lambda a: a)
    curves = [(f"SGD B={b}", tau, pick(sgd[lr, b, "replacement"][q])) for b in show]
    curves += [(f"SDE B={b}", tau, pick(o[q])) for (b, smp), o in sde_runs.items()
               if smp == "replacement" and b == show[0]]
    panels.append({"title": q, "ylabel": ylabel, "logy": logy, "curves": curves,
                   "refs": [("gradient flow", tau, pick(gf[q])), (f"GD lr {lr:g}", tau, pick(gd[q]))]})
  return panels
