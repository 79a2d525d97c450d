"""Figures of a topic-task sweep: SEN relation, dynamics, loss and Theorem-1 invariant.

Each function draws one figure on the Agg backend (through
``matplotlib.figure.Figure`` and ``FigureCanvasAgg``, so the global pyplot
state and the user's backend are left alone), saves one PNG and returns its
path. Trajectories hold NumPy arrays with a leading run axis ``P`` (``t [P, T]``,
observables ``[P, T, ...]``); ``P = 1`` and unbatched trajectories (no run axis)
work too. Time is in optimiser steps.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Fig. 2 (SEN curves), Theorem 1 (eq 9), Corollary 1 (eq 10).
  https://arxiv.org/abs/2011.10036
"""
import warnings
from typing import Mapping, Optional

import numpy as np

from attndyn.analysis import figure_io
from attndyn.analysis.sen import sen_norm
from attndyn.dynamics.trajectory import Trajectory

__all__ = ["sen_figure", "dynamics_figure", "loss_figure", "invariant_figure"]


def _runs(x, trailing: int) -> np.ndarray:
  """``x`` as ``[P, *last trailing axes]``: all leading run axes flattened (``P ≥ 1``)."""
  x = np.asarray(x, dtype=np.float64)
  return x.reshape((-1,) + x.shape[x.ndim - trailing:])


def _steps(traj: Trajectory) -> np.ndarray:
  """``[T]`` recorded steps (of the first run; all runs of a sweep share them)."""
  return _runs(traj.t, 1)[0]


def _figure(ncols: int = 1, width: float = 6.0):
  fig, axes = figure_io.grid(1, ncols, width, 4.5)
  return fig, axes[0]


def _save(fig, path) -> str:
  return figure_io.save(fig, path, dpi=120)


def _colors(n: int):
  cycle = ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9"]
  return [cycle[i % len(cycle)] for i in range(n)]


def sen_figure(trajs: Mapping[str, Trajectory], m, path, *, word: int = 0) -> str:
  """Empirical ``‖v_t‖`` against ``s_t`` for every run, with Corollary 1's curve (Fig. 2).

  .. math:: \\|v_t\\|_2 = \\sqrt{2\\left(s_t + \\frac{e^{s_t}}{m} - \\frac1m\\right)} \\quad (10)

  Args:
    trajs: label -> :class:`Trajectory` recording ``score`` and ``emb_norm``
      (``[P, T, n_topic]``); every run (seed) is drawn.
    m: non-topic words per sentence.
    path: PNG file to write.
    word: which topic word (id) to draw.

  Returns:
    ``path`` as a string.
  """
  fig, (ax,) = _figure()
  lo, hi = 0.0, 0.0
  for color, (label, traj) in zip(_colors(len(trajs)), trajs.items()):
    score = _runs(traj.observables["score"], 2)[..., word]      # [P, T]
    norm = _runs(traj.observables["emb_norm"], 2)[..., word]
    for p in range(score.shape[0]):
      ax.plot(score[p], norm[p], "o-", color=color, markersize=3, linewidth=0.8, alpha=0.7,
              label=f"{label} (empirical, {score.shape[0]} runs)" if p == 0 else None)
    finite = score[np.isfinite(score)]
    if finite.size:
      lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
  grid = np.linspace(lo, hi if hi > lo else lo + 1.0, 200)
  ax.plot(grid, np.asarray(sen_norm(grid, m)), "k--", linewidth=1.5,
          label=f"Corollary 1 (eq 10), m = {m}")
  ax.set_xlabel("score $s_t = q^T \\kappa_t$")
  ax.set_ylabel("embedding norm $\\|v_t\\|_2 = \\|q\\|\\,\\|\\nu_t\\|$")
  ax.set_title(f"SEN relation of topic word {word}: empirical vs theory")
  ax.grid(alpha=0.3)
  ax.legend(fontsize="small")
  return _save(fig, path)


def dynamics_figure(trajs: Mapping[str, Trajectory], path, *, run: int = 0, word: int = 0) -> str:
  """``s_t`` and ``‖v_t‖`` against step, one line per trajectory (GD, reduced ODE, flow, ...).

  Lemma 2 (eqs 7-8) drives the reduced ODE; gradient descent is its Euler
  discretisation with unit step in these time units (footnote 2).

  Args:
    trajs: label (e.g. ``"GD"``, ``"reduced ODE"``, ``"gradient flow"``) ->
      :class:`Trajectory` recording ``score`` and ``emb_norm``.
    path: PNG file to write.
    run: which run of the sweep.
    word: which topic word (id).

  Returns:
    ``path`` as a string.
  """
  fig, (ax_s, ax_v) = _figure(ncols=2)
  styles = ["-", "--", ":", "-."]
  for i, (color, (label, traj)) in enumerate(zip(_colors(len(trajs)), trajs.items())):
    steps = _runs(traj.t, 1)[run]
    style = dict(color=color, linestyle=styles[i % len(styles)], linewidth=1.6, label=label)
    ax_s.plot(steps, _runs(traj.observables["score"], 2)[run, :, word], **style)
    ax_v.plot(steps, _runs(traj.observables["emb_norm"], 2)[run, :, word], **style)
  ax_s.set_ylabel("score $s_t$")
  ax_s.set_title(f"Topic word {word}: score (run {run})")
  ax_v.set_ylabel("embedding norm $\\|v_t\\|_2$")
  ax_v.set_title(f"Topic word {word}: embedding norm (run {run})")
  for ax in (ax_s, ax_v):
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
  return _save(fig, path)


def _band(ax, steps, values, color, label, *, positive: bool = False, of: str = ""):
  """Mean over runs as a line, min–max over runs as a band (non-finite values skipped)."""
  values = np.where(np.isfinite(values), values, np.nan)
  if positive:
    values = np.where(values > 0, values, np.nan)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN columns: leave a gap
    mean, lo, hi = (np.nanmean(values, 0), np.nanmin(values, 0), np.nanmax(values, 0))
  n = values.shape[0]
  ax.plot(steps, mean, color=color, linewidth=1.6, label=f"{label} (mean of {of or f'{n} runs'})")
  if n > 1:
    ax.fill_between(steps, lo, hi, color=color, alpha=0.2, linewidth=0, label=f"{label} (min–max)")


def loss_figure(trajs: Mapping[str, Trajectory], path) -> str:
  """Training loss against step on a log scale: mean over runs with a min–max band.

  .. math:: L = \\frac{1}{|\\Psi|}\\sum_{(\\chi, y)\\in\\Psi}
     -\\log \\mathrm{softmax}(c(\\bar\\nu(\\chi)))_y

  Args:
    trajs: label -> :class:`Trajectory` recording ``loss`` (``[P, T]``).
    path: PNG file to write.

  Returns:
    ``path`` as a string.
  """
  fig, (ax,) = _figure()
  plotted = False
  for color, (label, traj) in zip(_colors(len(trajs)), trajs.items()):
    loss = _runs(traj.observables["loss"], 1)
    _band(ax, _steps(traj), loss, color, label, positive=True)
    plotted |= bool(np.any(np.isfinite(loss) & (loss > 0)))
  if plotted:
    ax.set_yscale("log")
  else:   # every run diverged: an empty frame that says so, not a log-scale error
    ax.text(0.5, 0.5, "no finite loss to plot (every run diverged)", transform=ax.transAxes,
            ha="center", va="center")
  ax.set_xlabel("step")
  ax.set_ylabel("training loss (cross-entropy, nats)")
  ax.set_title("Training loss")
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize="small")
  return _save(fig, path)


def invariant_figure(trajs: Mapping[str, Trajectory], path, *, word: Optional[int] = None) -> str:
  """Drift of Theorem 1's conserved quantity, ``Q_t(τ) − Q_t(0)``, against step.

  .. math:: Q_t = s_t
     + e^{s_t}\\left\\langle \\frac{1}{Z(\\chi\\setminus t)}\\right\\rangle_{\\Psi_t}
     - \\tfrac12 \\left\\|v_t - \\langle \\bar v(\\chi\\setminus t)\\rangle_{\\Psi_t}\\right\\|_2^2
     \\quad (9)

  Zero along the reduced dynamics of Lemma 2; gradient descent drifts.

  Args:
    trajs: label -> :class:`Trajectory` recording ``invariant`` (``[P, T, n_topic]``).
    path: PNG file to write.
    word: one topic word (id), or ``None`` to pool all topic words of all runs
      (mean line, min–max band).

  Returns:
    ``path`` as a string.
  """
  fig, (ax,) = _figure()
  for color, (label, traj) in zip(_colors(len(trajs)), trajs.items()):
    q = _runs(traj.observables["invariant"], 2)                 # [P, T, W]
    change = q - q[:, :1, :]
    if word is not None:
      change = change[..., word:word + 1]
    pooled = np.moveaxis(change, -1, 1).reshape(-1, change.shape[1])   # [P*W, T]
    _band(ax, _steps(traj), pooled, color, label,
          of=f"{change.shape[0]} runs × {change.shape[-1]} words")
  ax.axhline(0.0, color="k", linewidth=0.8, linestyle="--", label="Theorem 1 (conserved)")
  ax.set_xlabel("step")
  ax.set_ylabel("$Q_t(\\tau) - Q_t(0)$")
  which = "all topic words" if word is None else f"topic word {word}"
  ax.set_title(f"Theorem 1 invariant drift ({which})")
  ax.grid(alpha=0.3)
  ax.legend(fontsize="small")
  return _save(fig, path)
