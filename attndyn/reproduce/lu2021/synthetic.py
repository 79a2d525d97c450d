"""Section 5.1: Attn-FC, Attn-TC and Attn-TL on the synthetic topic task (Figs 1-2), GD against the ODEs.

Each classifier is one ``attndyn run`` of its ``lu2021-text-*`` preset on the
one engine (:mod:`attndyn.reproduce.engine`): gradient descent on the exact
fast path, with Lemma 2's reduced ODE (eqs 7-8), the extended reduced ODE (Lemma 2 plus the
non-topic words' collective push, docs/extended_reduced_dynamics.md) and the full gradient flow
integrated from the same initial parameters and recorded at the same steps,
checkpointed under ``DIR/runs/synthetic-<classifier>`` (``--resume``
continues it). A second, ODE-only run per classifier solves the reduced ODE in
float64 at a tight tolerance to check Theorem 1's invariant.

Claims checked, per classifier: 100% test accuracy; Corollary 1's SEN curve
(Eq (10)) within 2% once the first 10% of training is over, on GD and on both
ODEs; the non-topic words' score (and norm) changes two orders of magnitude
below the topic words' (Assumption 1, Fig 1); GD's topic scores within 2% of
each ODE's at every recorded step, and in time (info): the lag of each ODE's half-rise behind
GD's as a fraction of the rise time, and the deviation after the best time shift; Theorem 1's
``Q_t`` (eq 9) conserved along the reduced ODE, its drift along GD, and the drift the extended
ODE predicts. Across classifiers: a lower-capacity
classifier gives larger topic scores (FC > TC > TL). And how a larger-capacity
classifier absorbs signal (:mod:`analysis.absence`): per topic, the test
recall with the topic word masked out.
"""
import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import config, dynamics, settings
from attndyn.analysis import lu2021_figures as figs
from attndyn.analysis import observables
from attndyn.analysis import replication as rep
from attndyn.analysis.absence import recall_without_topic_word
from attndyn.analysis.assumption1 import change_ratio, largest_change_ratio
from attndyn.analysis.deviation import (final_abs_deviation, half_rise_step, max_abs_deviation,
                                        rise_lag, shifted_max_deviation)
from attndyn.analysis.theorem1 import drift_before_failure, max_invariant_drift
from attndyn.analysis.sen_checks import windowed_max_error
from attndyn.reproduce import engine
from attndyn.reproduce.lu2021 import common
from attndyn.dynamics.ode import SOLVERS
from attndyn.models.lu_linear import apply_linear_for
from attndyn.reproduce.runner import Outcome

__all__ = ["NAME", "TITLE", "CLASSIFIERS", "ODE_KINDS", "ODE_NAMES", "OdeKinds", "InvariantSeeds",
           "Invariant", "Settings", "FULL", "QUICK", "PAPER_STEPS", "SOURCES", "validate", "runs",
           "run"]

NAME = "synthetic"
TITLE = ("Section 5.1: Attn-FC/TC/TL on the synthetic task (Figs 1-2, Corollary 1, Assumption 1) "
         "and gradient descent against Lemma 2's ODE and the gradient flow")
CLASSIFIERS = ("fc", "tc", "tl")
ODE_KINDS = ("reduced", "extended", "gradient_flow")
ODE_NAMES = {"reduced": "Lemma 2's reduced ODE",
             "extended": "the extended reduced ODE (Lemma 2 + the non-topic words' collective "
                         "push)",
             "gradient_flow": "the gradient flow"}



@dataclasses.dataclass(frozen=True)
class OdeKinds(settings.Table):
  """Per classifier, the ODEs solved beside its GD (the run schema's ``ode.kind``)."""
  fc: Literal[config.ODE_KINDS]
  tc: Literal[config.ODE_KINDS]
  tl: Literal[config.ODE_KINDS]


@dataclasses.dataclass(frozen=True)
class InvariantSeeds(settings.Table):
  """Per classifier, the seeds of the float64 invariant solve (0: not solved)."""
  fc: settings.Index
  tc: settings.Index
  tl: settings.Index


@dataclasses.dataclass(frozen=True)
class Invariant:
  """Theorem 1's float64 solve of the reduced ODE.

  Attributes:
    seeds: seeds per classifier.
    rtol, atol: the solver's tolerances.
    dtmin: the floor on the solver's step where the preset has one (TL's ReLU kinks).
    solver: the diffrax solver.
  """
  seeds: InvariantSeeds
  rtol: settings.Number
  atol: settings.Number
  dtmin: settings.Number
  solver: Literal[tuple(SOLVERS)]


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set synthetic.KEY=VALUE``).

  Attributes:
    run: what each classifier's run changes in its lu2021-text-* preset (any key, checked by
      the run schema: ``--set synthetic.run.train.steps=1000`` etc.); the paper's settings
      themselves live in the presets.
    classifiers: the classifiers run.
    odes: per classifier, the ODEs solved beside GD.
    invariant: Theorem 1's float64 solve.
    sen_start_fraction: Corollary 1's curve is judged after this fraction of training.
    sen_tolerance: the bound on Corollary 1's relative error.
    assumption1_ratio: the bound on the non-topic words' change relative to the topic words'.
    ode_tolerance: the bound on GD's deviation from each ODE, relative to the final topic score.
    invariant_tolerance: the bound on Q_t's drift along the reduced ODE.
    drift_tolerance: the bound on Q_t's drift along GD.
    sen_word: the topic word whose curves Fig 2 and the GD-vs-ODE figure draw.
    absence_recall: a topic counts as recognised without its topic word at this test recall.
    run_figures: whether each run draws its own figures.
  """
  run: settings.RunTable
  classifiers: tuple[Literal[CLASSIFIERS], ...]
  odes: OdeKinds
  invariant: Invariant
  sen_start_fraction: settings.Number
  sen_tolerance: settings.Number
  assumption1_ratio: settings.Number
  ode_tolerance: settings.Number
  invariant_tolerance: settings.Number
  drift_tolerance: settings.Number
  sen_word: settings.Index
  absence_recall: settings.Number
  run_figures: bool


FULL = Settings(
    run={"sweep": {"seeds": 5}, "train": {"steps": 5000, "record_every": 50}},
    classifiers=CLASSIFIERS, odes=OdeKinds(fc="all", tc="all", tl="all"),
    invariant=Invariant(seeds=InvariantSeeds(fc=5, tc=5, tl=5), rtol=1e-10, atol=1e-12,
                        dtmin=0.1, solver="tsit5"),
    sen_start_fraction=0.1, sen_tolerance=0.02, assumption1_ratio=0.01, ode_tolerance=0.02,
    invariant_tolerance=1e-6, drift_tolerance=0.01, sen_word=0, absence_recall=0.9,
    run_figures=True)
# The paper's 5000 epochs in the quick mode too, and both ODEs beside GD for every classifier;
# fewer seeds. The float32 ODEs beside GD are solved at rtol 1e-4, the atlas's `ode_rtol`,
# instead of the presets' 1e-6: the rows they enter are judged at 2% (ode_tolerance,
# sen_tolerance), and float32 leaves little room below 1e-6 (docs/usage.md), where the
# controller rejects many steps (TL's ODEs, whose ReLU kinks shorten the steps, take several
# times as long at 1e-6 as at 1e-4). Theorem 1's row is solved apart, in float64 at
# invariant.rtol, in both modes. TL's takes three seeds: at rtol 1e-10 its ReLU kinks floor
# the solver's steps at dtmin (tens of thousands of steps a seed), and its values lie near
# enough to the tolerance that two seeds' interval does not decide.
QUICK = dataclasses.replace(
    FULL, run={"sweep": {"seeds": 3}, "train": {"steps": 5000, "record_every": 50},
               "ode": {"rtol": 1e-4}},
    invariant=dataclasses.replace(FULL.invariant, seeds=InvariantSeeds(fc=2, tc=2, tl=3)))
PAPER_STEPS = 5000   # shorter runs are still on the plateau: rows about trained models not comparable

SOURCES = {
    "test_acc": rep.from_paper("Sec 5.1 ¶2", "all three models achieve the training loss close "
                               "to zero and the 100.0% test accuracy")
                + "; 99.5 is ours: one of the 200 test sentences may be missed",
    "corollary1": rep.from_paper("Sec 5.1 ¶3, Fig 2", "The coincidence of the empirical and the "
                                 "theoretical curves in all three models validates the SEN "
                                 "relationship") + "; 2% is ours: about the line width at which "
                                 "two curves on Fig 2's scale could be told apart",
    "assumption1": rep.from_paper("Sec 5.1 ¶3, Fig 1", "the scores of the topic words exceed the "
                                  "non-topic word counterparts by two orders of magnitude"),
    "ode": rep.from_paper("Sec 4, footnote 2", "Eq (3) is a discretized approximation of Eq (5) "
                          "… accurate if v_t(t+1) is close to v_t(t)") + "; 2% is ours: the "
                          "same line width at which Fig 2's curves coincide",
    "ode_extended": rep.from_paper("Sec 4, footnote 2", "Eq (3) is a discretized approximation of "
                                   "Eq (5) … accurate if v_t(t+1) is close to v_t(t)")
                    + "; the extended dynamics is ours (docs/extended_reduced_dynamics.md), judged "
                    "at Lemma 2's 2%, itself ours: the line width at which Fig 2's curves coincide",
    "invariant": rep.ours("Theorem 1: Q_t is exactly constant along eqs 7-8; float64 with the "
                          "solver at rtol 1e-10 puts integration error far below 1e-6, while a "
                          "broken conservation law drifts by O(1e-3), as along GD"),
    "drift": rep.ours("Q_t is conserved only while the non-topic words stay put: the same 1% "
                      "as Assumption 1's two orders of magnitude"),
    "capacity": rep.from_paper("Sec 5.1", "Lower-capacity classifiers result in stronger "
                               "attention effects"),
}


def validate(s: Settings) -> None:
  """Every run config is valid (called before anything runs)."""
  runs(s)


def _run_config(classifier: str, s: Settings, *, invariant: bool = False) -> dict:
  """The ``attndyn run`` config of one classifier (its preset, then ``s.run``)."""
  raw = common.text_run(classifier, engine.deep_update(
      s.run, {"ode": {"kind": s.odes[classifier]}}))
  if invariant:
    # TL's floor on the solver step (its ReLU kinks; the other classifiers have none) is the
    # preset's, a tenth of a GD step. Where the flow crosses kinks the steps at the floor are
    # accepted whatever their error, and Q_t's change along the solve comes from them, while
    # between kinks the controller holds it near rtol. A floor ten times lower did not get
    # the text preset's seeds past their kinks within the solver's max_steps (docs/replication/
    # full/lu2021.md gives both runs).
    inv = s.invariant
    # The float64 solve at rtol 1e-10 keeps the 5th-order Tsit5 for every classifier. TL's
    # preset steps with bosh3, the cheaper at its rtol 1e-6; at 1e-10 a higher order should pay
    # between kinks, and bosh3 is not measured there (a TL seed takes minutes with either).
    ode = {"kind": "reduced", "rtol": inv.rtol, "atol": inv.atol, "solver": inv.solver}
    if raw["ode"].get("dtmin") is not None:
      ode["dtmin"] = inv.dtmin
    raw = engine.deep_update(raw, {"precision": "float64", "ode": ode,
                                   "sweep": {"seeds": inv.seeds[classifier]}})
  engine.validate(raw, f"synthetic run of {classifier}")
  return raw


def runs(s: Settings) -> list:
  """Every run on the engine this experiment reads (:class:`engine.Planned`), the longest
  first: TL's (its ReLU kinks floor the solver's steps), each classifier's float64 invariant
  solve before its GD run (tens of thousands of steps at rtol 1e-10)."""
  planned = []
  for c in sorted(s.classifiers, key=CLASSIFIERS.index, reverse=True):
    if s.invariant.seeds[c] >= 1:
      planned.append(engine.Planned(_invariant_name(c), _run_config(c, s, invariant=True),
                                    gd=False))
    planned.append(engine.Planned(f"{NAME}-{c}", _run_config(c, s)))
  return planned


def _invariant_name(classifier: str) -> str:
  return f"{NAME}-{classifier}-invariant-float64"


def _initial_words(cfg, seeds) -> dict:
  """Every word's score and norm at each seed's initialisation (as the engine draws it)."""
  return common.host(observables.initial_word_values(jnp.asarray(seeds, jnp.uint32), cfg.model,
                                                     jnp.dtype(cfg.precision)))


def _train_classifier(ctx, classifier: str, s: Settings, data, planned: dict) -> dict:
  """One classifier's GD and ODE runs on the engine (``planned``: :func:`runs` by name, which
  the runner may have computed ahead), plus what the claims read from them."""
  name = f"{NAME}-{classifier}"
  result = engine.run(ctx, name, planned[name].raw, figures=s.run_figures)
  cfg = result.config
  seeds = [p["seed"] for p in result.points]
  final = result.gd.final_params
  apply = apply_linear_for(cfg.model)
  absent = jax.vmap(lambda p: recall_without_topic_word(
      apply, p, data.test, data.n_topic_words, cfg.task.n_topics))(
          jax.tree.map(jnp.asarray, final))
  out = {"name": name, "result": result, "steps": np.asarray(cfg.train.record_steps()),
         "obs": {k: np.asarray(v) for k, v in result.gd.observables.items()},
         "start": _initial_words(cfg, seeds),
         "end": common.host(jax.vmap(observables.word_values)(jax.tree.map(jnp.asarray, final))),
         "absent_recall": np.asarray(absent)}
  out["invariant"] = None
  invariant = planned.get(_invariant_name(classifier))
  if invariant is not None:
    out["invariant"] = engine.run(ctx, invariant.name, invariant.raw, gd=False, figures=False)
  return out


def _stopped_note(inv) -> str:
  """Where the float64 invariant solves stopped early, and Q_t's drift over what was solved.

  A solve that stops gives no full-span value, so the row's verdict stays that of no value;
  the note says why and what the solved span shows.
  """
  ode = inv.odes["reduced"]
  failed = np.asarray(ode.failed_at)
  if not np.any(failed >= 0):
    return ""
  o = ode.observables
  reasons = (sorted({dynamics.FAILURE_REASONS[int(r)] for r in np.asarray(ode.ode.reason)[failed >= 0]})
             if ode.ode is not None else ["failure"])
  spans = [f"{drift:.3g} up to t = {t:g}" for drift, t in
           drift_before_failure(o["invariant"], o["score"], ode.t, failed)]
  end = float(np.asarray(ode.t)[0, -1])
  return (f"; {int(np.sum(failed >= 0))} solve(s) stopped early at t = "
          f"{', '.join(f'{t:g}' for t in failed[failed >= 0])} of {end:g} "
          f"(reason: {', '.join(reasons)}; max_steps = {inv.config.ode.max_steps}): no full-span "
          f"value"
          + (f"; over the solved span the drift is {'; '.join(spans)}" if spans else ""))


def _ode_rows(c: str, r: dict, s: Settings, m: int, quick: bool, converged: bool) -> list:
  """GD against each ODE, Corollary 1 on the ODEs, Theorem 1 along the ODE and GD."""
  name, result, rows = common.NAMES[c], r["result"], []
  gd = result.gd
  top = np.asarray(r["obs"]["score"][:, -1]).mean(-1)          # [S] mean final topic score
  planned = s.odes[c]
  planned = ODE_KINDS if planned == "both" else (planned,)
  for kind in ODE_KINDS:
    ode = result.odes.get(kind)
    ran = ode is not None
    why = engine.stage_error(result, kind) if kind in planned else \
        f"not run in this mode (synthetic.odes.{c} = {s.odes[c]!r})"
    if ran:
      dev = max_abs_deviation(gd, ode, "score") / top
      end_dev = final_abs_deviation(gd, ode, "score")
      obs = {k: np.asarray(v) for k, v in ode.observables.items()}
      sen = windowed_max_error(r["steps"], obs["score"], obs["emb_norm"], m,
                               start_fraction=s.sen_start_fraction)
    else:
      dev = end_dev = sen = np.array([])
    comparable = converged and ran
    cfg = result.config
    solved = f"solved by {cfg.ode.solver} at rtol {cfg.ode.rtol:g} in {cfg.precision}"
    note = (f"largest |s_GD − s_ODE| at the last step: {np.max(end_dev):.3g}; {solved}" if ran
            else f"no values: {why}")
    rows.append(rep.claim(
        f"{NAME}.{c}.{kind}.max_score_dev",
        f"{name}: largest |s_GD − s_ODE| over recorded steps and topic words, relative to the "
        f"mean final topic score, against {ODE_NAMES[kind]} from the same init",
        paper="Lemma 2 / Sec 4: GD follows the continuous-time dynamics", ours=rep.mean_ci(dev),
        figure="Eqs 5-8, Sec 4", quick=quick or not ran, comparable=comparable, note=note,
        tolerance=rep.Tolerance("at_most", s.ode_tolerance, f"≤ {s.ode_tolerance:g}",
                                source=SOURCES["ode_extended" if kind == "extended" else "ode"])))
    rows.extend(_timing_rows(c, kind, gd, ode, top, quick, comparable, why))
    rows.append(rep.claim(
        f"{NAME}.{c}.{kind}.corollary1",
        f"{name}: max relative error of ‖v_t‖ vs Eq (10) along {ODE_NAMES[kind]}, after the "
        f"first {s.sen_start_fraction:.0%}",
        paper="curves coincide (Fig 2)", ours=rep.mean_ci(sen), figure="Fig 2, Eq (10)",
        quick=quick or not ran, comparable=comparable, note=solved if ran else f"no values: {why}",
        tolerance=rep.Tolerance("at_most", s.sen_tolerance, f"≤ {s.sen_tolerance:g}",
                                source=SOURCES["corollary1"])))
  inv = r["invariant"]
  q_ode = np.array([])
  note = f"not run in this mode (synthetic.invariant.seeds.{c} = 0)"
  if inv is not None and "reduced" in inv.odes:
    q_ode = max_invariant_drift(inv.odes["reduced"].observables)
    note = (f"float64 (its inits are drawn in float64, so they are not GD's float32 ones), "
            f"rtol {s.invariant.rtol:g}, atol {s.invariant.atol:g}, "
            f"{len(q_ode)} seed(s)"
            + (f", steps at kinks floored at dtmin {inv.config.ode.dtmin:g} (accepted whatever "
               f"their error)" if inv.config.ode.dtmin is not None else "")) + _stopped_note(inv)
  elif inv is not None:
    note = f"no values: {engine.stage_error(inv, 'reduced')}"
  rows.append(rep.claim(
      f"{NAME}.{c}.theorem1.ode",
      f"{name}: Theorem 1's Q_t along the reduced ODE, max_τ |Q_t(τ) − Q_t(0)| / |s_t growth| "
      f"(max over topic words)", paper="conserved (Theorem 1, eq 9)", ours=rep.mean_ci(q_ode),
      figure="Theorem 1, eq 9", quick=quick or not q_ode.size, comparable=bool(q_ode.size),
      note=note,
      tolerance=rep.Tolerance("at_most", s.invariant_tolerance,
                              f"≤ {s.invariant_tolerance:g}", source=SOURCES["invariant"])))
  obs = r["obs"]
  q_gd = max_invariant_drift(obs)
  ext = result.odes.get("extended")
  if ext is not None:
    q_ext = max_invariant_drift(ext.observables)
    rows.append(rep.claim(
        f"{NAME}.{c}.extended.theorem1_drift",
        f"{name}: drift of Theorem 1's Q_t along the extended reduced ODE, max_τ |Q_t(τ) − "
        f"Q_t(0)| / |s_t growth| (max over topic words): predicted, not conserved "
        f"(docs/extended_reduced_dynamics.md, eq 10)",
        paper="not in the paper (Theorem 1 holds with the non-topic words fixed)",
        ours=rep.mean_ci(q_ext), figure="Theorem 1, eq 9", quick=quick, comparable=converged,
        tolerance=rep.Tolerance("info"),
        note=f"along GD (synthetic.{c}.theorem1.gd): {np.mean(q_gd):.4g}; per seed extended / GD: "
             + ", ".join(f"{x:.4g}/{y:.4g}" for x, y in zip(q_ext, q_gd))))
  rows.append(rep.claim(
      f"{NAME}.{c}.theorem1.gd",
      f"{name}: drift of Theorem 1's Q_t along gradient descent, max_τ |Q_t(τ) − Q_t(0)| / "
      f"|s_t growth| (max over topic words)",
      paper="nearly conserved (Assumption 1 holds approximately)", ours=rep.mean_ci(q_gd),
      figure="Theorem 1, eq 9", quick=quick, comparable=converged,
      tolerance=rep.Tolerance("at_most", s.drift_tolerance, f"≤ {s.drift_tolerance:g}",
                              source=SOURCES["drift"])))
  return rows


def _timing_rows(c: str, kind: str, gd, ode, top, quick: bool, comparable: bool, why: str) -> list:
  """GD's rise against the ODE's in time: the half-rise lag and the deviation after the best
  shift (info: no source gives a bound in time)."""
  name = common.NAMES[c]
  if ode is not None:
    lag = rise_lag(gd, ode, "score")
    shifted, shift = shifted_max_deviation(gd, ode, "score")
    t = np.asarray(gd.t, np.float64)[0]                       # GD's record steps, for both
    half_gd, half_ode = half_rise_step(gd, t), half_rise_step(ode, t)
    lag_note = ("mean half-rise step GD / ODE per seed: "
                + ", ".join(f"{g:.0f}/{o:.0f}" for g, o in zip(half_gd, half_ode)))
    shift_note = ("best shift of the ODE per seed (steps, + = ODE moved earlier): "
                  + ", ".join(f"{x:+.0f}" for x in shift)
                  + "; shifts tried: ±10% of the run, 801 of them")
    shifted = shifted / top
  else:
    lag = shifted = np.array([])
    lag_note = shift_note = f"no values: {why}"
  return [
      rep.claim(f"{NAME}.{c}.{kind}.rise_lag",
                f"{name}: lag of {ODE_NAMES[kind]}'s half-rise step behind GD's, as a fraction "
                f"of GD's 10–90% rise time (mean over topic words; + = ODE late)",
                paper="not in the paper (time-aware reading of Lemma 2 / Sec 4)",
                ours=rep.mean_ci(lag), figure="Eqs 5-8, Sec 4", quick=quick or not lag.size,
                comparable=comparable, tolerance=rep.Tolerance("info"), note=lag_note),
      rep.claim(f"{NAME}.{c}.{kind}.shifted_score_dev",
                f"{name}: largest |s_GD − s_ODE| relative to the mean final topic score, after "
                f"the best time shift of {ODE_NAMES[kind]} (one per seed)",
                paper="not in the paper (is the ODE late or wrong?)", ours=rep.mean_ci(shifted),
                figure="Eqs 5-8, Sec 4", quick=quick or not shifted.size, comparable=comparable,
                tolerance=rep.Tolerance("info"), note=shift_note),
  ]


def _ode_figure(runs: dict, s: Settings, path) -> str:
  """``s_t`` and ``‖v_t‖`` of one topic word under GD and both ODEs, a row per classifier."""
  w = s.sen_word
  panels = []
  for c, r in runs.items():
    result = r["result"]
    for key, label in (("score", "score $s_t$"), ("emb_norm", "$\\|v_t\\|$")):
      curves = [("GD", r["steps"], np.asarray(result.gd.observables[key])[..., w])]
      for kind in ODE_KINDS:
        if kind in result.odes:
          curves.append((ODE_NAMES[kind], r["steps"],
                         np.asarray(result.odes[kind].observables[key])[..., w]))
      panels.append({"title": f"{common.NAMES[c]}: {label}, topic word {w}", "ylabel": label,
                     "curves": curves})
  return figs.curve_panels(panels, path, ncols=2,
                           title="GD against Lemma 2's ODE and the gradient flow, same inits "
                                 "(mean over runs, min–max band)")


def run(ctx, s) -> Outcome:
  planned = {p.name: p for p in runs(s)}   # every config checked before anything runs
  task = {k: v for k, v in _run_config(s.classifiers[0], s)["task"].items() if k != "kind"}
  task_cfg, data = common.topic_data(task)
  n_topic, m = task_cfg.n_topic_words, task_cfg.n_nontopic
  trained = {}
  for c in s.classifiers:
    trained[c] = _train_classifier(ctx, c, s, data, planned)

  claims, notes = [], []
  quick = ctx.quick
  steps = trained[s.classifiers[0]]["steps"][-1] if trained else 0
  converged = steps >= PAPER_STEPS
  for c, r in trained.items():
    name = common.NAMES[c]
    obs = r["obs"]
    acc = 100.0 * obs["test_acc"][:, -1]
    claims.append(rep.claim(
        f"{NAME}.{c}.test_acc", f"{name} test accuracy after {steps} epochs",
        paper=100.0, ours=rep.mean_ci(acc), unit="%", figure="Sec 5.1", paper_ref="Sec 5.1 ¶2",
        tolerance=rep.Tolerance("at_least", 99.5, "≥ 99.5 %", source=SOURCES["test_acc"]),
        quick=quick, comparable=converged))
    err = windowed_max_error(r["steps"], obs["score"], obs["emb_norm"], m,
                             start_fraction=s.sen_start_fraction)
    claims.append(rep.claim(
        f"{NAME}.{c}.corollary1",
        f"{name}: max relative error of ‖v_t‖ vs Eq (10) over all topic words, after the first "
        f"{s.sen_start_fraction:.0%} of training",
        paper="curves coincide (Fig 2)", ours=rep.mean_ci(err), figure="Fig 2, Eq (10)",
        tolerance=rep.Tolerance("at_most", s.sen_tolerance, f"≤ {s.sen_tolerance:g}",
                                source=SOURCES["corollary1"]),
        quick=quick, comparable=converged))
    ds = r["end"]["score"] - r["start"]["score"]
    dn = r["end"]["norm"] - r["start"]["norm"]
    score_ratio = largest_change_ratio(ds[:, n_topic:], r["end"]["score"][:, :n_topic])
    norm_ratio = change_ratio(dn[:, n_topic:], r["end"]["norm"][:, :n_topic])
    bound = s.assumption1_ratio
    claims.append(rep.claim(
        f"{NAME}.{c}.assumption1_score",
        f"{name}: largest |Δs| of a non-topic word / mean topic-word score (the mean |Δs| "
        f"is fixed by Σ_w Δs_w = 0)",
        paper="two orders of magnitude below (Fig 1)", ours=rep.mean_ci(score_ratio),
        figure="Fig 1, Assumption 1",
        tolerance=rep.Tolerance("at_most", bound, f"≤ {bound:g}", source=SOURCES["assumption1"]),
        quick=quick, comparable=converged))
    claims.append(rep.claim(
        f"{NAME}.{c}.assumption1_norm",
        f"{name}: mean |Δ‖v‖| of non-topic words / mean topic-word ‖v‖",
        paper="nearly constant (Fig 1)", ours=rep.mean_ci(norm_ratio), figure="Fig 1, Assumption 1",
        tolerance=rep.Tolerance("at_most", bound, f"≤ {bound:g}", source=SOURCES["assumption1"]),
        quick=quick, comparable=converged))
    claims.extend(_ode_rows(c, r, s, m, quick, converged))
    absent = r["absent_recall"] >= s.absence_recall                       # [S, J]
    claims.append(rep.claim(
        f"{NAME}.{c}.absence", f"{name}: topics per run still recognised with their topic word "
        f"masked out (test recall ≥ {s.absence_recall:g})",
        paper="not reported (explains 'the classifier absorbs the signal', Sec 5.1)",
        ours=rep.mean_ci(absent.sum(1).astype(float)), tolerance=rep.Tolerance("info"),
        figure="Sec 5.1", quick=quick, comparable=converged,
        note="per-run recalls by topic: " + "; ".join(
            " ".join(f"{v:.2f}" for v in row) for row in r["absent_recall"])))
    if absent.any():
      topic_score = r["end"]["score"][:, :n_topic].reshape(
          absent.shape[0], task_cfg.n_topics, task_cfg.words_per_topic).mean(-1)   # [S, J]
      lowest = np.argmin(topic_score, axis=1)
      has = absent.any(1)
      claims.append(rep.claim(
          f"{NAME}.{c}.absence_lowest", f"{name}: in runs with a topic recognised by absence, "
          "it is the topic whose words have the lowest final score",
          paper="not reported", ours=rep.mean_ci(absent[np.arange(len(lowest)), lowest][has].astype(float)),
          tolerance=rep.Tolerance("info"), figure="Sec 5.1", quick=quick, comparable=converged,
          note=f"{int(has.sum())}/{len(has)} runs have one; lowest-topic mean score "
               f"{topic_score[np.arange(len(lowest)), lowest].mean():.3f} vs the other topics "
               f"{np.mean(np.delete(topic_score, lowest, axis=1)):.3f}"))
    notes.append(f"{name}: final loss {np.mean(obs['loss'][:, -1]):.4g}, mean topic score "
                 f"{np.mean(obs['score'][:, -1]):.3f}, max |Δs| of a non-topic word "
                 f"{np.max(np.abs(ds[:, n_topic:])):.3g}; GD path: "
                 f"{r['result'].gd_path.get('path')} ({r['result'].gd_path.get('reason')}); "
                 f"seconds per stage: " + ", ".join(
                     f"{k} {v:.1f}" for k, v in r["result"].seconds.items()))
  if all(c in trained for c in CLASSIFIERS):
    mean_score = {c: trained[c]["obs"]["score"][:, -1].mean(-1) for c in CLASSIFIERS}
    ordered = (mean_score["fc"] > mean_score["tc"]) & (mean_score["tc"] > mean_score["tl"])
    claims.append(rep.claim(
        f"{NAME}.capacity_order",
        "lower-capacity classifier, larger topic scores: mean topic score FC > TC > TL "
        "(per seed, same init)", paper="FC > TC > TL (Fig 1)", ours=rep.mean_ci(ordered),
        figure="Fig 1", tolerance=rep.Tolerance("all_true", source=SOURCES["capacity"]),
        quick=quick, comparable=converged,
        note="scores " + ", ".join(f"{common.NAMES[c]} {v.mean():.2f}"
                                   for c, v in mean_score.items())))

  figures = []
  panels = {
      "non-topic word scores": {common.NAMES[c]: r["end"]["score"][:, n_topic:] for c, r in trained.items()},
      "topic word scores": {common.NAMES[c]: r["end"]["score"][:, :n_topic] for c, r in trained.items()},
      "non-topic word ‖v‖": {common.NAMES[c]: r["end"]["norm"][:, n_topic:] for c, r in trained.items()},
      "topic word ‖v‖": {common.NAMES[c]: r["end"]["norm"][:, :n_topic] for c, r in trained.items()},
  }
  n_seeds = len(next(iter(trained.values()))["result"].points) if trained else 0
  figs.distribution_panels(panels, ctx.path("fig1_assumption1.png"),
                           title=f"Fig 1: trained models, {n_seeds} runs (95% CI over runs)")
  figures.append("fig1_assumption1.png")
  w = s.sen_word
  figs.sen_panels({common.NAMES[c]: (r["obs"]["score"][..., w], r["obs"]["emb_norm"][..., w], m)
                   for c, r in trained.items()}, ctx.path("fig2_sen.png"),
                  title=f"Fig 2: SEN of topic word {w}, all {n_seeds} runs vs Corollary 1")
  figures.append("fig2_sen.png")
  _ode_figure(trained, s, ctx.path("gd_vs_ode.png"))
  figures.append("gd_vs_ode.png")
  for c, r in trained.items():
    figures.extend(engine.figure_path(r["name"], f) for f in ("attndyn.dynamics.png", "invariant.png")
                   if (engine.run_dir(ctx, r["name"]) / f).is_file())
  notes.append(f"Task: J={task_cfg.n_topics}×{task_cfg.words_per_topic} topic words, "
               f"M={task_cfg.vocab_size}, m={m}, {task_cfg.n_train}/{task_cfg.n_test} sentences; "
               f"each classifier is `attndyn run --preset lu2021-text-<c>` with "
               f"{s.run} (runs/ holds each run's summary.json and trajectories.npz).")
  return Outcome(claims, figures, {"notes": notes})
