"""The theory-validity atlas: per-configuration measures, where they cross their tolerances, fits.

Numbers in, numbers out (and PNG/markdown writers). Every measure of a row is
computed by the functions ``attndyn run`` and the Section 5.1 reproduction use
(:func:`analysis.summary.run_summaries` / :func:`analysis.summary.aggregate`,
:func:`analysis.sen_checks.windowed_max_error`); this module only cuts a sweep's
trajectories at a common flow time ``τ = lr · step`` first (:func:`until`),
names the measures, and summarises many rows.

Measures of one run (a configuration × seed), each with the assumption it tests:

* ``sen_error``: Corollary 1 (eq 10), max relative error of ``‖v_t‖`` against
  ``sqrt(2(s_t + (e^{s_t} − 1)/m))`` over topic words and the recorded times
  after the first 10% (the reproduction's Fig 2 row).
* ``q_drift``: Theorem 1 (eq 9), ``max_τ |Q_t(τ) − Q_t(0)| / |s_t growth|``,
  max over topic words, along gradient descent.
* ``assumption1_ratio``: Assumption 1, the largest score change of a non-topic
  word over the mean final topic-word score (``aggregate``'s
  ``nontopic_to_topic_score_ratio``; the reproduction's ``assumption1_score``
  row, and the paper's "scores of the topic words exceed the non-topic word
  counterparts by two orders of magnitude"). ``assumption1_norm_ratio`` (the
  largest non-topic norm change over the smallest topic-word norm) is kept as
  a column, not judged.
* ``ode_rel_dev``: Lemma 2 (eqs 7-8), ``max_{τ,t} |s_GD − s_ODE|`` over the mean
  final topic score (the reproduction's ``max_score_dev`` row).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Lemma 2, Theorem 1 (eq 9), Corollary 1 (eq 10), Assumption 1.
  https://arxiv.org/abs/2011.10036
"""
import collections
import math
from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

from attndyn.analysis import figure_io
from attndyn.analysis.sen_checks import windowed_max_error
from attndyn.analysis.summary import aggregate, run_summaries
from attndyn.dynamics.trajectory import Trajectory

__all__ = ["Measure", "MEASURES", "MEASURE_NAMES", "EXPLANATORY", "theory_flags", "until",
           "run_rows", "with_flags", "variance_explained", "ScalingFit", "fit_scaling",
           "holds_fraction", "slice_grid", "phase_diagram", "run_curves", "AXES", "FIT_AXES",
           "findings", "markdown", "summary_flags"]


class Measure(NamedTuple):
  """A row's measure, the assumption it tests and the tolerance key bounding it."""
  name: str
  assumption: str
  tolerance: str
  label: str


# Tolerance keys are those of the Section 5.1 reproduction's settings
# (attndyn/reproduce/lu2021/synthetic.py FULL), which the caller passes in.
MEASURES = (
    Measure("sen_error", "Corollary 1 (SEN, eq 10)", "sen_tolerance",
            "max rel. error of ‖v_t‖ vs eq 10"),
    Measure("q_drift", "Theorem 1 (Q_t conserved, eq 9)", "drift_tolerance",
            "Theorem 1 drift of Q_t"),
    Measure("assumption1_ratio", "Assumption 1 (non-topic words stay put)", "assumption1_ratio",
            "non-topic |Δs| / topic score"),
    Measure("ode_rel_dev", "Lemma 2 (GD follows the reduced ODE)", "ode_tolerance",
            "max |s_GD − s_ODE| / s"),
)
MEASURE_NAMES = tuple(m.name for m in MEASURES)
# Drawn beside the measures in the phase diagrams, not judged (no tolerance): how far the
# non-topic embeddings moved, which Lemma 2's reduced ODE holds fixed and which predicts GD's
# distance from it (atlas.md, "What predicts GD's distance from Lemma 2's reduced ODE").
EXPLANATORY = (("assumption1_norm_ratio", "non-topic |Δ‖v‖| / topic ‖v‖"),)


def theory_flags(numbers: Mapping[str, Optional[float]], tolerances: Mapping[str, float]) -> list:
  """Which of the paper's statements a run breaks, from its measures.

  Args:
    numbers: measure name (:data:`MEASURE_NAMES`) -> value; a missing or
      ``None``/NaN value (e.g. no ODE was run) is not judged.
    tolerances: tolerance key (:attr:`Measure.tolerance`) -> bound.

  Returns:
    ``[(assumption, measure, value, bound), ...]`` for each measure above its
    bound, in the order of :data:`MEASURES`; ``[]`` when the run is inside the
    region where the theory holds.
  """
  out = []
  for m in MEASURES:
    value = numbers.get(m.name)
    if value is None or math.isnan(float(value)):   # not measured; +inf is judged (broken)
      continue
    bound = float(tolerances[m.tolerance])
    if float(value) > bound:
      out.append((m.assumption, m.name, float(value), bound))
  return out


def until(traj: Trajectory, n_records: int, last_step: float) -> Trajectory:
  """The first ``n_records`` recorded times of a sweep's trajectory, as if it ended there.

  ``failed_at`` after ``last_step`` becomes ``-1`` (the shorter run did not fail);
  ``final_params`` and ``params`` are dropped (they belong to the longer run).
  """
  cut = lambda x: np.asarray(x)[:, :n_records]
  failed = np.asarray(traj.failed_at)
  failed = np.where(failed > last_step, -1, failed)
  return Trajectory(t=cut(traj.t), observables={k: cut(v) for k, v in traj.observables.items()},
                    final_params=None, failed_at=failed)


def _num(x) -> float:
  return float("nan") if x is None else float(x)


def run_rows(points: Sequence[Mapping], gd: Trajectory, odes: Mapping[str, Trajectory], m: int, *,
             lr: np.ndarray, start_fraction: float, learned_acc: float) -> list:
  """One dict of measures per run of a sweep whose trajectories end at the wanted flow time.

  Args:
    points: the runs' sweep coordinates (copied into the rows).
    gd: gradient descent, leading axis ``P`` (as ``attndyn run`` records it).
    odes: ODE kind -> Trajectory at the same times (``reduced`` gives ``ode_rel_dev``).
    m: non-topic words per sentence.
    lr: ``[P]`` each run's learning rate (flow time ``τ = lr · step``).
    start_fraction: Corollary 1's window starts after this fraction of the run.
    learned_acc: test accuracy at which a run has learned the task (``time_to_learn``).

  Returns:
    ``P`` dicts: ``diverged``, ``failed_tau``, ``test_acc``, ``train_acc``,
    ``final_loss``, ``mean_topic_score``, ``min_topic_score``, ``sen_error``,
    ``sen_error_final``, ``q_drift``, ``assumption1_ratio``,
    ``assumption1_norm_ratio``, ``ode_rel_dev``, ``ext_rel_dev`` (``ode_rel_dev`` of the
    extended reduced ODE, where ``odes`` has ``extended``; not a theory flag: the extension is
    ours), ``ode_failed``, ``time_to_learn`` (NaN where undefined: a diverged run, no ODE,
    never learned).
  """
  records = run_summaries(points, gd, odes, m)
  obs = {k: np.asarray(v) for k, v in gd.observables.items()}
  steps = np.asarray(gd.t)[0]
  sen = windowed_max_error(steps, obs["score"], obs["emb_norm"], m, start_fraction=start_fraction)
  lr = np.asarray(lr, np.float64)
  rows = []
  for p, rec in enumerate(records):
    agg = aggregate([rec])
    mean = lambda key: _num((agg.get(key) or {}).get("mean"))
    diverged = rec["diverged"]
    top = mean("mean_final_topic_score")
    dev = _num(rec["ode_max_abs_score_dev"].get("reduced")) if "reduced" in odes else math.nan
    ext = _num(rec["ode_max_abs_score_dev"].get("extended")) if "extended" in odes else math.nan
    learned = np.nonzero(obs["test_acc"][p] >= learned_acc)[0]
    scores = [w["score"] for w in rec["topic_words"] if w["score"] is not None]
    row = {
        "diverged": diverged,
        "failed_tau": _num(rec["failed_at"]) * lr[p] if diverged else math.nan,
        "test_acc": _num(rec["test_acc"]), "train_acc": _num(rec["train_acc"]),
        "final_loss": _num(rec["final_train_loss"]),
        "mean_topic_score": top, "min_topic_score": min(scores) if scores else math.nan,
        "sen_error": math.nan if diverged else float(sen[p]),
        "sen_error_final": mean("max_sen_rel_error"),
        "q_drift": mean("max_invariant_drift"),
        "assumption1_ratio": mean("nontopic_to_topic_score_ratio"),
        "assumption1_norm_ratio": mean("nontopic_to_topic_norm_ratio"),
        "ode_rel_dev": math.nan if diverged or not top else dev / top,
        "ext_rel_dev": math.nan if diverged or not top else ext / top,
        "ode_failed": any(v is not None for v in rec["ode_failed_at"].values()),
        "time_to_learn": float(steps[learned[0]] * lr[p]) if learned.size else math.nan,
    }
    rows.append(row)
  return rows


def with_flags(rows: Sequence[dict], tolerances: Mapping[str, float]) -> list:
  """Each row plus ``holds`` (a finite run inside every tolerance) and ``broken`` (';'-joined)."""
  out = []
  for row in rows:
    flags = theory_flags(row, tolerances)
    finite = not row["diverged"] and not any(
        math.isnan(row[k]) for k in ("sen_error", "q_drift", "assumption1_ratio"))
    undefined = [k for k in ("sen_error", "q_drift", "assumption1_ratio") if math.isnan(row[k])]
    broken = [f[1] for f in flags] + [f"undefined {k}" for k in undefined]
    out.append({**row, "holds": bool(finite and not flags),
                "broken": "diverged" if row["diverged"] else ";".join(broken)})
  return out


# -- summaries of many rows ---------------------------------------------------------------------

def _column(rows, key) -> np.ndarray:
  return np.array([r[key] for r in rows])


def _log(values) -> np.ndarray:
  v = np.asarray(values, np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)


def variance_explained(rows: Sequence[Mapping], measure: str, axes: Sequence[str]) -> dict:
  """Correlation ratio η² of ``log10(measure)`` on each axis: the share of its variance that the
  axis's value alone explains (between-group over total sum of squares), finite rows only.

  Returns:
    axis -> η² in [0, 1] (NaN when the measure does not vary or the axis has one value).
  """
  y = _log(_column(rows, measure))
  keep = np.isfinite(y)
  out = {}
  for axis in axes:
    x = _column(rows, axis)[keep]
    yk = y[keep]
    total = np.sum((yk - yk.mean()) ** 2) if yk.size else 0.0
    values = np.unique(x.astype(str))
    if total <= 0 or values.size < 2:
      out[axis] = math.nan
      continue
    between = sum(np.sum(x.astype(str) == v) * (yk[x.astype(str) == v].mean() - yk.mean()) ** 2
                  for v in values)
    out[axis] = float(between / total)
  return out


class ScalingFit(NamedTuple):
  """``log10(measure) = c + Σ_i a_i log10(axis_i)`` by least squares.

  Attributes:
    exponents: axis -> a_i.
    intercept: c.
    r2: coefficient of determination on the rows fitted.
    n: rows fitted.
  """
  exponents: dict
  intercept: float
  r2: float
  n: int


def fit_scaling(rows: Sequence[Mapping], measure: str, axes: Sequence[str]) -> ScalingFit:
  """Least-squares power law of ``measure`` in ``axes`` over the finite, positive rows."""
  y = _log(_column(rows, measure))
  xs = [_log(_column(rows, a).astype(np.float64)) for a in axes]
  keep = np.isfinite(y) & np.all([np.isfinite(x) for x in xs], axis=0)
  n = int(keep.sum())
  if n <= len(axes) + 1:
    return ScalingFit({a: math.nan for a in axes}, math.nan, math.nan, n)
  design = np.column_stack([np.ones(n)] + [x[keep] for x in xs])
  coef, *_ = np.linalg.lstsq(design, y[keep], rcond=None)
  resid = y[keep] - design @ coef
  total = np.sum((y[keep] - y[keep].mean()) ** 2)
  r2 = float(1 - np.sum(resid ** 2) / total) if total > 0 else math.nan
  return ScalingFit(dict(zip(axes, map(float, coef[1:]))), float(coef[0]), r2, n)


def holds_fraction(rows: Sequence[Mapping], where: Optional[Mapping] = None) -> tuple:
  """``(fraction of rows with holds, n rows)`` among the rows matching ``where``."""
  sel = [r for r in rows if all(r[k] == v for k, v in (where or {}).items())]
  if not sel:
    return math.nan, 0
  return float(np.mean([r["holds"] for r in sel])), len(sel)


def slice_grid(rows: Sequence[Mapping], x: str, y: str, measure: str,
               fixed: Mapping) -> tuple:
  """A 2-D slice: ``(xs, ys, median over seeds of measure [len(ys), len(xs)])`` for the rows
  matching ``fixed`` (NaN where no finite run)."""
  sel = [r for r in rows if all(r[k] == v for k, v in fixed.items())]
  xs = np.unique([r[x] for r in sel])
  ys = np.unique([r[y] for r in sel])
  z = np.full((ys.size, xs.size), np.nan)
  for i, yv in enumerate(ys):
    for j, xv in enumerate(xs):
      vals = [r[measure] for r in sel if r[x] == xv and r[y] == yv and math.isfinite(r[measure])]
      if vals:
        z[i, j] = np.median(vals)
  return xs, ys, z


def phase_diagram(panels: Sequence[Mapping], path, title: str = "") -> str:
  """PNG of 2-D slices, one panel each: log10 of a measure with its tolerance's contour.

  Args:
    panels: dicts ``{xs, ys, z, x, y, label, bound}`` (from :func:`slice_grid`); log axes;
      ``bound`` ``None``: a quantity without a tolerance, drawn without a contour.
    path: where to write.
    title: the figure's title.
  """
  import textwrap
  ncols = min(2, len(panels))
  nrows = -(-len(panels) // ncols)
  fig, axes = figure_io.grid(nrows, ncols, width=4.8, height=3.9)
  for ax, p in zip(axes.ravel(), panels):
    # grid cells by index (the axes' values are log-spaced or categorical), labelled by value
    z = _log(p["z"])
    ix, iy = np.arange(len(p["xs"])), np.arange(len(p["ys"]))
    mesh = ax.pcolormesh(ix, iy, z, shading="nearest", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label=f"log10 {p['label']}")
    finite = np.isfinite(z)
    level = math.log10(p["bound"]) if p["bound"] is not None else math.nan
    if finite.sum() >= 4 and ix.size >= 2 and iy.size >= 2 and \
        np.nanmin(z) < level < np.nanmax(z):
      ax.contour(ix, iy, np.where(finite, z, np.nanmax(z)), [level], colors="white",
                 linewidths=2, linestyles="solid")
    step = max(1, -(-ix.size // 5))
    ax.set_xticks(ix[::step], [f"{v:.2g}" for v in p["xs"][::step]])
    ax.set_yticks(iy, [f"{v:.3g}" for v in p["ys"]])
    note = f"white contour: {p['bound']:g}" if p["bound"] is not None else "no tolerance"
    figure_io.dress(ax, f"{p['label']}\n({note})", p["x"], p["y"], legend=False)
  title = "\n".join(textwrap.wrap(title, 40 * ncols))
  return figure_io.finish(fig, axes, len(panels), path, title)


def run_curves(gd: Trajectory, odes: Mapping[str, Trajectory], m: int, *,
               lr: np.ndarray) -> dict:
  """Per-run curves over the recorded times (``[P, T]`` each) for curves.npz.

  ``tau`` (flow time ``lr · step``), ``loss``, ``test_acc``, ``mean_score_gd`` and
  ``mean_score_ode`` (mean over topic words; NaN without the reduced ODE),
  ``sen_error`` (max over topic words of Corollary 1's relative error) and
  ``ode_abs_dev`` (:func:`analysis.deviation.deviation_curve` of the score).
  """
  from attndyn.analysis.deviation import deviation_curve
  from attndyn.analysis.sen_checks import relative_error
  obs = {k: np.asarray(v, np.float64) for k, v in gd.observables.items()}
  shape = obs["loss"].shape
  err = relative_error(obs["score"], obs["emb_norm"], m)
  err = np.where(np.isfinite(err), err, -np.inf).max(-1)     # -inf: no word defined at t
  sen = np.where(np.isfinite(err), err, np.nan)
  ode = odes.get("reduced")
  return {
      "tau": np.asarray(gd.t, np.float64) * np.asarray(lr, np.float64)[:, None],
      "loss": obs["loss"], "test_acc": obs["test_acc"],
      "mean_score_gd": obs["score"].mean(-1),
      "mean_score_ode": (np.asarray(ode.observables["score"], np.float64).mean(-1)
                         if ode is not None else np.full(shape, np.nan)),
      "sen_error": sen,
      "ode_abs_dev": deviation_curve(gd, ode, "score") if ode is not None else np.full(shape, np.nan),
  }


AXES = ("sigma", "lr", "n_nontopic", "vocab_size", "n_topics", "words_per_topic", "embed_dim",
        "n_train", "classifier", "normaliser", "train_query")
FIT_AXES = ("sigma", "lr", "n_nontopic", "vocab_size")
_AXIS_TEXT = {"sigma": "σ", "lr": "lr", "n_nontopic": "m", "vocab_size": "M", "n_topics": "J",
              "words_per_topic": "words/topic", "embed_dim": "d", "n_train": "n_train",
              "classifier": "classifier", "normaliser": "normaliser", "train_query": "trainable q"}


def _at(rows, where):
  return [r for r in rows if all(r[k] == v for k, v in where.items())]


def _fmt(x, spec=".3g"):
  return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def findings(rows: Sequence[Mapping], out, *, tolerances: Mapping[str, float],
             sources: Mapping[str, str], base: Mapping, paper_point: Mapping,
             settings_text: str, seconds: float) -> dict:
  """Phase diagrams, shares of variance, scaling fits and atlas.md, written to ``out``.

  Args:
    rows: atlas rows (with ``holds``/``broken``, :func:`with_flags`).
    out: the atlas directory.
    tolerances / sources: tolerance key -> bound / where it comes from.
    base: the discrete values the slices hold fixed (``classifier`` included).
    paper_point: ``{"sigma", "lr"}`` closest to the paper's (held fixed where not plotted).
    settings_text: one sentence describing the grid.
    seconds: the atlas's computing time (NaN: unknown).

  Returns:
    The JSON-ready findings (atlas.json's ``findings``); ``markdown`` holds atlas.md's text
    (the caller writes it).
  """
  from pathlib import Path
  out = Path(out)
  found = {"measures": {}, "figures": []}
  softmax = [r for r in rows if r["normaliser"] == "softmax" and not r["train_query"]]
  for m in MEASURES:
    bound = tolerances[m.tolerance]
    vals = np.array([r[m.name] for r in rows], np.float64)
    fin = np.isfinite(vals)
    share = variance_explained(rows, m.name, AXES)
    top = sorted((a for a in share if math.isfinite(share[a])), key=lambda a: -share[a])[:2]
    fit = fit_scaling(softmax, m.name, FIT_AXES)
    found["measures"][m.name] = {
        "assumption": m.assumption, "tolerance": bound, "source": sources[m.tolerance],
        "n": int(fin.sum()), "within": float(np.mean(vals[fin] <= bound)) if fin.any() else None,
        "median": float(np.median(vals[fin])) if fin.any() else None,
        "variance_explained": share, "top_axes": top,
        "fit": {"exponents": fit.exponents, "intercept": fit.intercept, "r2": fit.r2, "n": fit.n,
                "rows": "softmax, fixed query"}}
  slices = [
      ("phase_sigma_lr.png", "sigma", "lr", {k: v for k, v in base.items()}),
      ("phase_sigma_m.png", "sigma", "n_nontopic",
       {**{k: v for k, v in base.items() if k != "n_nontopic"}, "lr": paper_point["lr"]}),
      ("phase_M_m.png", "vocab_size", "n_nontopic",
       {**{k: v for k, v in base.items() if k not in ("n_nontopic", "vocab_size")},
        **paper_point}),
  ]
  for name, x, y, fixed in slices:
    panels = []
    drawn = [(m.name, m.label, tolerances[m.tolerance]) for m in MEASURES] + [
        (name, label, None) for name, label in EXPLANATORY]
    for measure, label, bound in drawn:
      if not all(measure in r for r in rows):
        continue
      xs, ys, z = slice_grid(rows, x, y, measure, fixed)
      if xs.size >= 2 and ys.size >= 2 and np.isfinite(z).any():
        panels.append({"xs": xs, "ys": ys, "z": z, "x": _AXIS_TEXT[x], "y": _AXIS_TEXT[y],
                       "label": label, "bound": bound})
    if panels:
      held = ", ".join(f"{_AXIS_TEXT.get(k, k)}={v}" for k, v in fixed.items()
                       if k not in (x, y))
      phase_diagram(panels, out / name, title=f"median over seeds; {held}")
      found["figures"].append(name)
  found["overall"] = holds_fraction(rows)
  found["by_classifier"] = {c: holds_fraction(rows, {"classifier": c})
                            for c in sorted({r["classifier"] for r in rows})}
  found["by_axis"] = _by_axis(rows, base, paper_point)
  found["holding_region"] = _holding_region(rows, base)
  found["ode_predictors"] = _ode_predictors(rows)
  found["tl"] = _tl_failures(rows)
  found["low_word"] = {c: _tl_failures(rows, c) for c in sorted({r["classifier"] for r in rows})}
  found["markdown"] = markdown(rows, found, tolerances=tolerances, base=base,
                               paper_point=paper_point, settings_text=settings_text,
                               seconds=seconds)
  return found


def _holding_region(rows, base) -> dict:
  """Per classifier, the other discrete axes at ``base``: for each lr, the largest σ up to which
  every seed of every (σ, lr) cell holds, counting up from the smallest σ (None: not even the
  smallest), and how many cells hold in every seed."""
  fixed = {k: v for k, v in base.items() if k != "classifier"}
  out = {}
  for c in sorted({r["classifier"] for r in rows}):
    cells = {}
    for r in _at(rows, {**fixed, "classifier": c}):
      cells.setdefault((r["lr"], r["sigma"]), []).append(bool(r["holds"]))
    if not cells:
      continue
    sigmas = sorted({s for _, s in cells})
    region = {}
    for lr in sorted({lr for lr, _ in cells}):
      top = None
      for sigma in sigmas:
        if not all(cells.get((lr, sigma), [False])):
          break
        top = sigma
      region[lr] = top
    out[c] = {"sigma_max_by_lr": region, "cells": len(cells),
              "cells_every_seed": sum(all(v) for v in cells.values())}
  return out


def _region_text(region: Mapping) -> str:
  """``σ ≤ 0.004 at lr 0.25–0.385; at no σ at lr 0.5–3.33``: runs of lr with the same bound."""
  groups = []
  for lr, top in region.items():
    if groups and groups[-1][1] == top:
      groups[-1][0].append(lr)
    else:
      groups.append(([lr], top))
  text = []
  for lrs, top in groups:
    at = f"lr {_value(lrs[0])}" + (f"–{_value(lrs[-1])}" if len(lrs) > 1 else "")
    text.append(f"{'at no σ' if top is None else f'σ ≤ {top:.3g}'} at {at}")
  return "; ".join(text)


def _and(names: Sequence[str]) -> str:
  """``a``, ``a and b``, ``a, b and c``."""
  return " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))


def _by_axis(rows, base, paper_point) -> dict:
  """Per axis, per value: (holds fraction, rows, most often broken measure) with the other
  discrete axes at ``base`` (σ and lr free; for σ and lr themselves, all of them)."""
  out = {}
  for axis in AXES:
    fixed = {k: v for k, v in base.items() if k != axis}
    sel = _at(rows, fixed)
    values = sorted({r[axis] for r in sel}, key=lambda v: (str(type(v)), v))
    if len(values) < 2:
      continue
    entries = []
    for v in values:
      group = [r for r in sel if r[axis] == v]
      broken = [b for r in group for b in str(r["broken"]).split(";") if b and b != "nan"]
      # Every measure broken in the most runs, in order of first appearance (a row's flags
      # follow the tolerances' order), so that a tie names all of them, the same in any process.
      counts = collections.Counter(broken)
      top = max(counts.values(), default=0)
      worst = [b for b, n in counts.items() if n == top]
      entries.append({"value": v, "holds": float(np.mean([r["holds"] for r in group])),
                      "n": len(group), "most_broken": _and(worst),
                      "most_broken_share": top / len(group)})
    out[axis] = entries
  return out


# What the non-topic words' motion is measured by: Assumption 1 as the paper states it (their
# score changes) and their embeddings' norm changes, both relative to the topic words'.
_MOTION = {"assumption1_ratio": "non-topic score change (Assumption 1)",
           "assumption1_norm_ratio": "non-topic embedding norm change"}


def _ode_predictors(rows) -> dict:
  """Per classifier with reduced-ODE rows: Pearson r of log ``ode_rel_dev`` with the log of each
  :data:`_MOTION` measure, over finite, undiverged runs (all of them, and those at σ < 0.01,
  where Corollary 1 holds and the initialisation is small)."""
  out = {}
  ok = lambda r: (not r["diverged"] and all(
      r.get(k) is not None and np.isfinite(r[k]) and r[k] > 0 for k in ("ode_rel_dev", *_MOTION)))
  for c in sorted({r["classifier"] for r in rows}):
    group = [r for r in rows if r["classifier"] == c and ok(r)]
    for label, sub in (("all", group), ("sigma<0.01", [r for r in group if r["sigma"] < 0.01])):
      if len(sub) < 3:
        continue
      y = np.log([r["ode_rel_dev"] for r in sub])
      out.setdefault(c, {})[label] = {"n": len(sub), **{
          k: float(np.corrcoef(np.log([r[k] for r in sub]), y)[0, 1]) for k in _MOTION}}
  return out


def _finite_median(values) -> float:
  values = [v for v in values if not math.isnan(v)]
  return float(np.median(values)) if values else math.nan


def _tl_failures(rows, classifier: str = "tl") -> dict:
  """A classifier's failures of Theorem 1 / Assumption 1: how often one topic word learned a
  score near 0 (below a tenth of the mean topic score) in the failing runs and in the others."""
  tl = [r for r in rows if r["classifier"] == classifier and not r["diverged"]
        and math.isfinite(r["min_topic_score"]) and math.isfinite(r["mean_topic_score"])]
  fails = [r for r in tl if any(b in str(r["broken"]) for b in ("q_drift", "assumption1_ratio"))]
  rest = [r for r in tl if r not in fails]
  low = lambda r: r["min_topic_score"] < 0.1 * r["mean_topic_score"]
  frac = lambda group: float(np.mean([low(r) for r in group])) if group else math.nan
  lrs = sorted({r["lr"] for r in tl})
  # The median of the runs whose drift is defined: a run with an undefined (NaN) drift is
  # already counted as broken ("undefined q_drift") and must not make its lr's median NaN.
  drift = {lr: _finite_median([r["q_drift"] for r in tl if r["lr"] == lr]) for lr in lrs}
  broken = {m: float(np.mean([m in str(r["broken"]) for r in fails])) if fails else math.nan
            for m in MEASURE_NAMES}
  return {"n": len(tl), "n_fail": len(fails), "low_word_in_fails": frac(fails),
          "low_word_in_rest": frac(rest), "median_drift_by_lr": drift,
          "broken_share_in_fails": broken}


def _value(v):
  return format(v, "g") if isinstance(v, float) else str(v)


def markdown(rows, found, *, tolerances, base, paper_point, settings_text, seconds) -> str:
  """atlas.md: where the theory holds to its tolerances and where it fails, with numbers."""
  frac, n = found["overall"]
  lines = ["# Theory-validity atlas (Lu et al. 2021: Lemma 2, Theorem 1, Corollary 1, "
           "Assumption 1)", "",
           f"{settings_text}. {n} runs (configuration × seed) in "
           + (f"{seconds / 60:.1f} min of computing (the buckets' wall times, summed over the "
              "processes that computed them: worker processes side by side, resumed ones one "
              "after another)." if math.isfinite(seconds) else "an unknown computing time (some "
              "buckets were read back from an atlas that predates its atlas-seconds.json)."), "",
           "A run *holds* when it did not diverge and every measure is within the tolerance the "
           "Section 5.1 reproduction uses for the same row: "
           + "; ".join(f"{m.assumption}: {m.name} ≤ {tolerances[m.tolerance]:g}"
                       for m in MEASURES)
           + " (ode_rel_dev only where the reduced ODE applies: softmax, fixed query).", "",
           "## Headline", "",
           f"- The theory holds in {_fmt(100 * frac, '.1f')}% of the {n} runs; by classifier: "
           + ", ".join(f"{c} {_fmt(100 * f, '.1f')}% of {k}"
                       for c, (f, k) in found["by_classifier"].items()) + "."]
  for name, info in found["measures"].items():
    fit = info["fit"]
    law = " · ".join(f"{_AXIS_TEXT[a]}^{_fmt(e, '.2f')}" for a, e in fit["exponents"].items())
    top = ", ".join(f"{_AXIS_TEXT[a]} (η² = {info['variance_explained'][a]:.2f})"
                    for a in info["top_axes"])
    lines.append(
        f"- **{info['assumption']}** ({name}): within {info['tolerance']:g} in "
        f"{_fmt(math.nan if info['within'] is None else 100 * info['within'], '.1f')}% of {info['n']} finite runs, median "
        f"{_fmt(info['median'])}. Most of its variance (log scale) goes with {top or 'n/a'}. "
        f"Fit over softmax/fixed-query runs: {name} ≈ 10^{_fmt(fit['intercept'], '.2f')} · {law}"
        f" (R² = {_fmt(fit['r2'], '.2f')}, {fit['n']} runs).")
  region = found.get("holding_region") or {}
  if region:
    lines += ["", "## Where every seed holds, per classifier", "",
              "The other axes at " + ", ".join(f"{_AXIS_TEXT.get(k, k)}={_value(v)}"
                                               for k, v in base.items() if k != "classifier")
              + ": for each lr, the σ (from the smallest up) at which every seed holds.", ""]
    for c, info in region.items():
      lines.append(f"- {c}: {_region_text(info['sigma_max_by_lr'])} "
                   f"({info['cells_every_seed']} of {info['cells']} (σ, lr) cells hold in every "
                   "seed).")
  lines += ["", "## Where it holds and where it fails, axis by axis", "",
            "Each axis varied alone, the others at "
            + ", ".join(f"{_AXIS_TEXT.get(k, k)}={_value(v)}" for k, v in base.items())
            + " (all σ and lr of the grid):", ""]
  for axis, entries in found["by_axis"].items():
    parts = []
    for e in entries:
      part = f"{_value(e['value'])}: {100 * e['holds']:.0f}%"
      if e["most_broken"] and e["holds"] < 0.98:
        part += f" (most often broken: {e['most_broken']}, {100 * e['most_broken_share']:.0f}%)"
      parts.append(part)
    lines.append(f"- {_AXIS_TEXT[axis]}: " + "; ".join(parts) + ".")
  preds = found["ode_predictors"]
  if preds:
    lines += ["", "## What predicts GD's distance from Lemma 2's reduced ODE", "",
              "Lemma 2 holds every non-topic word fixed. Pearson r of log ode_rel_dev with the log "
              "of each measure of the non-topic words' motion (relative to the topic words'), "
              "per classifier:", ""]
    for c, by in preds.items():
      lines.append(f"- {c}: " + "; ".join(
          f"{'all runs' if label == 'all' else 'σ < 0.01'} ({v['n']}): "
          + ", ".join(f"{_MOTION[k]} r = {_fmt(v[k], '.2f')}" for k in _MOTION)
          for label, v in by.items()) + ".")
  tl = found["tl"]
  lines += ["", "## Attn-TL", ""]
  if tl["n"]:
    drift = lambda c: ", ".join(f"lr {_value(lr)}: {_fmt(d, '.3g')}" for lr, d in
                                found["low_word"][c]["median_drift_by_lr"].items())
    lines.append(
        f"Of {tl['n']} finite Attn-TL runs, {tl['n_fail']} break Theorem 1's drift or Assumption 1; "
        f"of those, " + ", ".join(f"{_fmt(100 * v, '.0f')}% break {m}" for m, v in
                                  tl["broken_share_in_fails"].items() if v == v and v > 0) + ". "
        f"Median Q_t drift by learning rate (all runs of the classifier): TL {drift('tl')}; "
        + "; ".join(f"{c.upper()} {drift(c)}" for c in found["low_word"] if c != "tl") + ". "
        f"In {_fmt(100 * tl['low_word_in_fails'], '.0f')}% of the failing TL runs one topic word "
        f"ends with a score below a tenth of the mean topic score (against "
        f"{_fmt(100 * tl['low_word_in_rest'], '.0f')}% of the other TL runs; where it does, "
        f"|s_t growth| in the drift's denominator is tiny, so Q_t's drift is large however "
        f"little Q_t moves). The same share among the failing runs of the other classifiers: "
        + ", ".join(f"{c} {_fmt(100 * v['low_word_in_fails'], '.0f')}% of {v['n_fail']}"
                    for c, v in found["low_word"].items() if c != "tl") + ".")
  else:
    lines.append("No Attn-TL runs in this atlas.")
  lines += ["", "## Phase diagrams", "",
            "Median over seeds of each measure; the white contour is its tolerance.", ""]
  lines += [f"![{f}]({f})" for f in found["figures"]]
  lines += ["", "## Files", "",
            "- `atlas.csv`: one row per configuration × seed (`pandas.read_csv('atlas.csv')`).",
            "- `curves.npz` + `curves.json`: per-row curves `[row, time]` and their axis names.",
            "- `atlas.json`: settings, timings and these findings as numbers.",
            "- `runs/bucket-NNNN/`: each bucket as an `attndyn run` directory (checkpoints, "
            "config.toml, summary.json, trajectories.npz)."]
  return "\n".join(lines) + "\n"


def summary_flags(agg: Mapping, tolerances: Mapping[str, float]) -> list:
  """:func:`theory_flags` of a whole ``attndyn run`` from its aggregate (summary.json): the
  worst run's measures (max over runs), so one run outside the region flags the table.

  ``sen_error`` here is at the last step (``max_sen_rel_error``), not the atlas's windowed one;
  ``ode_rel_dev`` is the largest ``max |s_GD − s_ODE|`` of the reduced ODE over the mean final
  topic score.
  """
  worst = lambda key: (agg.get(key) or {}).get("max")
  dev = (agg.get("ode_max_abs_score_dev") or {}).get("reduced") or {}
  top = (agg.get("mean_final_topic_score") or {}).get("mean")
  numbers = {"sen_error": worst("max_sen_rel_error"), "q_drift": worst("max_invariant_drift"),
             "assumption1_ratio": worst("nontopic_to_topic_score_ratio"),
             "ode_rel_dev": dev["max"] / top if dev.get("max") is not None and top else None}
  return theory_flags(numbers, tolerances)
