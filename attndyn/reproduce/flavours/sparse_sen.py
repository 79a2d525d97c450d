"""Corollary 1 (SEN) and Lemma 2 with sparsemax / 1.5-entmax attention: derived relation, ODE vs GD.

For each normaliser, Attn-TC on Section 5.1's synthetic task (keys 0, so every
score starts at 0 and the attention starts uniform, 1/(m+1) per word) is
trained by full-batch GD over seeds; the derived eqs (7)-(8) analogue
(:func:`dynamics.sparsemax_ode.sparse_sen_ode`, ``form="sen"``) is solved from
the same start. Claims: the derived SEN relation (:mod:`analysis.sparse_sen`)
holds on GD in the full-support phase; GD follows the ODE; the ODE conserves
``Q``; under sparsemax the score stops at ``s = 1`` while ``‖v_t‖`` keeps
growing (the relation ends there); test accuracy is 100%.
"""
import dataclasses
from typing import Literal

import jax.numpy as jnp
import numpy as np

from attndyn import dynamics
from attndyn import schema
from attndyn import settings
from attndyn.analysis import replication as rep
from attndyn.analysis import sparse_sen as ss
from attndyn.models.classifiers import CLASSIFIERS
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce import engine

__all__ = ["NAME", "TITLE", "Settings", "FULL", "QUICK", "LABELS", "SOURCES", "run"]

NAME = "sparse_sen"
TITLE = "Lemma 2 / Corollary 1 with sparsemax and 1.5-entmax attention (derived here; no paper)"


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set sparse_sen.KEY=VALUE``).

  Attributes:
    task: the topic task's [task] run settings (Section 5.1's text preset).
    model: the model's [model] run settings (the text preset's; the normaliser is per run).
    classifier: the Lu classifier trained.
    lr: GD's learning rate (the ODE's too).
    steps: GD epochs.
    record_every: epochs between recorded points (GD and ODE alike).
    seeds: seeds per normaliser (seeds 0..seeds-1).
    normalisers: the attention normalisers (those the derived relation covers).
    sen_tolerance: the largest relative deviation of GD's ‖v_t‖ from the derived SEN relation.
    ode_tolerance: the largest |s_t(GD) − s_t(ODE)| (sparse normalisers).
    invariant_tolerance: the largest drift of the ODE's Q.
    freeze_band: how close to 1 sparsemax's final topic scores must be.
    sen_word: the topic word drawn in the figure.
  """
  task: settings.section("task")
  model: settings.section("model")
  classifier: Literal[CLASSIFIERS]
  lr: settings.Number
  steps: settings.Count
  record_every: settings.Count
  seeds: settings.Count
  normalisers: tuple[Literal[ss.FLAVOURS], ...]
  sen_tolerance: settings.Number
  ode_tolerance: settings.Number
  invariant_tolerance: settings.Number
  freeze_band: settings.Number
  sen_word: settings.Index


FULL = Settings(task=dict(common.TEXT_TASK), model=dict(common.TEXT_MODEL), classifier="tc",
                lr=0.1, steps=2000, record_every=20, seeds=5,
                normalisers=("softmax", "sparsemax", "entmax15"), sen_tolerance=0.02,
                ode_tolerance=0.1, invariant_tolerance=1e-4, freeze_band=0.01, sen_word=0)
QUICK = dataclasses.replace(FULL, steps=1000, seeds=2, normalisers=("sparsemax", "entmax15"))
LABELS = {"softmax": "softmax", "sparsemax": "sparsemax", "entmax15": "1.5-entmax"}
# No paper: every rule is derived here (docs/sparsemax_sen.md) and every margin is ours.
SOURCES = {
    "sen": rep.ours("the 2% at which Lu et al.'s Fig 2 draws GD's SEN curve on Eq (10), as for "
                    "softmax's Corollary 1 rows"),
    "ode": rep.ours("the derived ODE, like Lemma 2's, neglects the non-topic words' motion; 0.1 in "
                    "score (a tenth of sparsemax's end score 1) for that"),
    "invariant": rep.ours("Q is exactly conserved along the derived ODE; 1e-4 is the solver's "
                          "error at its tolerances, far below a broken conservation law's drift"),
    "test_acc": rep.ours("Lu et al. Sec 5.1 report 100% for softmax on this task; ≥ 99% allows 2 "
                         "of the 200 test sentences"),
    "freeze": rep.ours("derived: sparsemax's gradient in s_t is exactly 0 once the support is {t}"),
}


def run(ctx, s) -> Outcome:
  task_cfg, data = common.topic_data(s.task, path=f"{NAME}.task")
  m = task_cfg.n_nontopic
  topic_words = jnp.arange(task_cfg.n_topic_words)
  with schema.at(NAME):
    train_cfg = dynamics.TrainConfig(lr=s.lr, steps=s.steps, record_every=s.record_every)
  claims, panels, details = [], {}, {}
  for norm in s.normalisers:
    cfg = common.lu_config(task_cfg, s.classifier, s.model, normaliser=norm,
                            path=f"{NAME}.model")
    one = ss.gd_and_ode_point(cfg, data, topic_words, norm, train_cfg, s.lr)
    ctx.log(f"{NAME}: {norm} Attn-TC x {s.seeds} seeds, {s.steps} epochs, GD + ODE")
    out = engine.sweep(ctx, f"{NAME}-{norm}", one, {"seed": common.seeds(s.seeds)},
                       settings.as_json(s))
    gd, ode = out["gd"], out["ode"]
    label = LABELS[norm]
    sen_err = ss.sen_phase_error(gd["score"], gd["emb_norm"], m, norm)          # [S, W]
    dev_s = np.max(np.abs(gd["score"] - ode["score"]), axis=(1, 2))              # [S]
    dev_v = np.max(np.abs(gd["emb_norm"] - ode["emb_norm"]), axis=(1, 2))
    drift = np.max(ss.phase_invariant_drift(ode["invariant"], ode["score"], norm), axis=-1)
    claims.append(rep.claim(
        f"{NAME}.{norm}.sen_error", f"{label}: GD's ‖v_t‖ vs the derived SEN relation √(2Φ(s_t)), "
        "largest relative deviation while 0.2 ≤ s_t ≤ 0.95·s_end, worst topic word",
        paper="derived here (softmax: Eq (10))", ours=rep.mean_ci(np.nanmax(sen_err, axis=-1)),
        tolerance=rep.Tolerance("at_most", s.sen_tolerance, source=SOURCES["sen"]),
        figure="sparse_sen.png",
        quick=ctx.quick, note=f"s_end = {ss._phase_end(norm):g}; Φ in docs/sparsemax_sen.md"))
    claims.append(rep.claim(
        f"{NAME}.{norm}.ode_vs_gd_score", f"{label}: max over time and topic words of "
        "|s_t(GD) − s_t(ODE)|, the derived eqs (7)-(8) analogue", paper="derived here",
        ours=rep.mean_ci(dev_s),
        tolerance=(rep.Tolerance("info") if norm == "softmax"
                   else rep.Tolerance("at_most", s.ode_tolerance, source=SOURCES["ode"])),
        figure="sparse_sen.png", quick=ctx.quick,
        note=("reference: Lemma 2's own ODE, whose mid-transition deviation from GD is the "
              "non-topic words' motion (independent measurement: up to 0.43 mid-transition); "
              if norm == "softmax" else "") +
             f"‖v_t‖ deviation {np.mean(dev_v):.3g}; ODE failed at "
             f"{sorted(set(np.asarray(out['ode_failed_at']).tolist()))} (-1: none)"))
    claims.append(rep.claim(
        f"{NAME}.{norm}.ode_invariant", f"{label}: the ODE conserves Q = Φ(s_t) − ½‖v_t − ⟨v̄∖t⟩‖² "
        "(max |Q − Q(0)| while s_t ≤ 0.95·s_end)", paper="Theorem 1 analogue, derived here",
        ours=rep.mean_ci(drift),
        tolerance=rep.Tolerance("at_most", s.invariant_tolerance, source=SOURCES["invariant"]),
        figure=None, quick=ctx.quick))
    claims.append(rep.claim(
        f"{NAME}.{norm}.test_acc", f"{label} Attn-TC: final test accuracy", paper=100.0,
        paper_ref="Lu et al. Sec 5.1 ¶2, softmax",
        ours=rep.mean_ci(100.0 * gd["test_acc"][:, -1]),
        tolerance=rep.Tolerance("at_least", 99.0, source=SOURCES["test_acc"]),
        unit="%", quick=ctx.quick))
    if norm == "sparsemax":
      final_s = gd["score"][:, -1, :]                                             # [S, W]
      final_v = gd["emb_norm"][:, -1, :]
      at_one = np.all(np.abs(final_s - 1.0) <= s.freeze_band, axis=-1)
      grows = np.all(final_v > 1.2 * float(ss.sen_norm_flavour(1.0, m, "sparsemax")), axis=-1)
      claims.append(rep.claim(
          f"{NAME}.sparsemax.score_freezes", "sparsemax: every topic score ends within "
          f"{s.freeze_band:g} of 1 (its gradient is exactly 0 once the support is {{t}}; the "
          "band allows for one GD step past 1 and the small motion of the non-topic scores) "
          "while ‖v_t‖ grows past 1.2·√(1 + 2/m)", paper="derived here", ours=rep.mean_ci(at_one & grows),
          tolerance=rep.Tolerance("all_true", source=SOURCES["freeze"]), quick=ctx.quick,
          # Decided from the budget, never from the scores judged: FULL's epochs are what this
          # claim is stated for (it was 'every score reached the band', i.e. the outcome itself).
          comparable=s.steps >= FULL.steps,
          note=f"final scores {np.round(final_s.min(), 4)}–{np.round(final_s.max(), 4)}, final "
               f"‖v_t‖ {np.round(final_v.min(), 3)}–{np.round(final_v.max(), 3)}"))
    w = s.sen_word
    panels[label] = {"normaliser": norm, "m": m, "steps": np.asarray(train_cfg.record_steps()),
                     "gd_score": gd["score"][:, :, w], "gd_norm": gd["emb_norm"][:, :, w],
                     "ode_score": ode["score"][:, :, w], "ode_norm": ode["emb_norm"][:, :, w]}
    details[norm] = {"sen_error_per_seed": np.nanmax(sen_err, axis=-1).tolist(),
                     "ode_dev_score": dev_s.tolist(), "ode_dev_norm": dev_v.tolist(),
                     "ode_invariant_drift": drift.tolist(),
                     "final_score": gd["score"][:, -1, :].tolist(),
                     "final_emb_norm": gd["emb_norm"][:, -1, :].tolist()}
  ss.sparse_sen_figure(panels, ctx.path("sparse_sen.png"),
                       title=f"Attn-TC, topic word {s.sen_word}, {s.seeds} seeds: GD, the "
                             f"derived ODE and SEN relation")
  details["notes"] = [f"Attn-TC on Section 5.1's task (m = {m}), keys 0, unit fixed query, GD lr "
                      f"{s.lr} × {s.steps} epochs; ODE: diffrax Tsit5, form 'sen'."]
  return Outcome(claims, ["sparse_sen.png"], details)
