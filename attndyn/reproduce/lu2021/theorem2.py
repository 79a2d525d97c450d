"""Theorem 2: with a fixed linear classifier of independent columns, loss → 0 and attention → topic word.

Attn-FC with orthonormal U (the paper's choice for this check, Sec 5.1) is
one ``attndyn run`` of the ``lu2021-text-fc`` preset on the one engine
(:mod:`attndyn.reproduce.engine`: the exact fast path, checkpointed under
``DIR/runs/theorem2-fc``, so ``--resume`` continues it), recording the
training loss, the mean attention on each sentence's topic word and whether
the topic word has the largest weight in every training sentence
(:func:`analysis.topic_observables`). No ODE: the theorem is about GD.

Theorem 2 says the model "will attend to the topic word in every input
sentence and have its training loss approach zero". A limit cannot be
measured, so it is judged at the epochs and in the words the paper states
(Sec 5.1 ¶2: trained "for 5K epochs", "all three models achieve the training
loss close to zero"; ¶3: "Attn-FC has the training loss roughly zero when the
training is completed, Theorem 2 is confirmed"), with levels of ours fixed
before any run: at epoch 5K the training loss is ≤ ``loss_at_most`` (under 1%
of ln 4 = 1.39, the loss of the uniform start) and the topic word has the
largest weight in every training sentence of every seed; at the last epoch
(50K) the mean topic attention is ≥ ``attention_at_least`` (the limit is 1).
Strict decrease at checkpoints is not judged: small-lr GD gives it almost by
construction.
"""
import dataclasses

import numpy as np

from attndyn import settings
from attndyn.analysis import lu2021_figures as figs
from attndyn.analysis import replication as rep
from attndyn.reproduce import engine
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome

__all__ = ["NAME", "TITLE", "Settings", "FULL", "QUICK", "PAPER_EPOCHS", "LIMIT_EPOCHS", "validate",
           "run"]

NAME = "theorem2"
TITLE = "Theorem 2: Attn-FC (orthonormal U) trained longer: loss → 0, attention → topic word"


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set theorem2.KEY=VALUE``).

  Attributes:
    run: what the run changes in the lu2021-text-fc preset (any key, checked by the run
      schema: ``--set theorem2.run.train.steps=20000`` etc.); the paper's settings live in
      the preset.
    checkpoints: the epochs whose loss and topic attention the note lists.
    loss_at_most: the level the training loss at epoch 5K is judged against.
    attention_at_least: the level the mean topic attention at the last epoch is judged against.
  """
  run: settings.RunTable
  checkpoints: tuple[settings.Count, ...]
  loss_at_most: settings.Number
  attention_at_least: settings.Number


FULL = Settings(run={"sweep": {"seeds": 5}, "train": {"steps": 50000, "record_every": 5000},
                     "ode": {"kind": "none"}},
                checkpoints=(5000, 20000, 50000), loss_at_most=0.01, attention_at_least=0.9)
# The quick mode reaches the paper's 5K epochs (its loss and every-sentence rows are judged),
# not the 50K of the attention level (that row is 'quick: not comparable').
QUICK = dataclasses.replace(
    FULL, run={"sweep": {"seeds": 3}, "train": {"steps": 5000, "record_every": 1000},
               "ode": {"kind": "none"}},
    checkpoints=(1000, 3000, 5000))
PAPER_EPOCHS = 5000      # Sec 5.1 ¶2: "for 5K epochs", then "training loss close to zero"
LIMIT_EPOCHS = 50000     # FULL's last epoch, where the attention level (→ 1) is judged
_THEOREM = "Theorem 2 (Sec 4)"
# The paper's words have no number ("close to zero", Sec 5.1 ¶2; "roughly zero", ¶3); the level
# is ours, fixed before any run, and no sentence of the paper supports another: it stays.
_SOURCE_LOSS = ("paper, Sec 5.1 ¶2: after 5K epochs “all three models achieve the training loss "
                "close to zero”, ¶3: “Attn-FC has the training loss roughly zero” (the paper's "
                "words, no number); the number ≤ 0.01 is ours (under 1% of ln 4, the loss of the "
                "uniform start), fixed before any run")
_SOURCE_EVERY = ("paper, Theorem 2: “attend to the topic word in every input sentence”; at 5K "
                 "epochs (Sec 5.1 ¶2-3)")
_SOURCE_ATT = ("paper, Theorem 2: the topic word is attended to as training proceeds (weight → 1); "
               "≥ 0.9 at 50K epochs is ours: a limit of 1 reached within 10% after ten times the "
               "paper's 5K epochs")


def _run_config(s: Settings) -> dict:
  """The ``attndyn run`` config: the ``lu2021-text-fc`` preset with ``s.run`` applied."""
  raw = common.text_run("fc", s.run)
  engine.validate(raw, f"{NAME} run")
  return raw


def validate(s: Settings) -> None:
  """The run config is valid (called before anything runs)."""
  _run_config(s)


def run(ctx, s) -> Outcome:
  result = engine.run(ctx, f"{NAME}-fc", _run_config(s), figures=False)
  steps = np.asarray(result.config.train.record_steps())
  obs = result.gd.observables
  curves = {k: np.asarray(obs[k]) for k in ("loss", "topic_attention", "topic_argmax_all")}
  n_seeds = curves["loss"].shape[0]
  n_classes = result.config.task.n_topics
  at = [int(np.flatnonzero(steps == c)[0]) for c in s.checkpoints if c in steps]
  loss_ck, att_ck = curves["loss"][:, at], curves["topic_attention"][:, at]
  ck = ", ".join(f"{c // 1000}K" if c >= 1000 else f"{c}" for c in steps[at])
  last = int(steps[-1])
  # Which epoch each row is judged at, decided from the budget before looking at any value:
  # the paper's 5K when it was recorded (else the last epoch, then not comparable).
  k5 = int(np.flatnonzero(steps == PAPER_EPOCHS)[0]) if PAPER_EPOCHS in steps else len(steps) - 1
  at5 = int(steps[k5])
  trend = (f"at epochs {ck}: loss " + " / ".join(f"{v:.3g}" for v in loss_ck.mean(0))
           + ", topic attention " + " / ".join(f"{v:.3f}" for v in att_ck.mean(0)))
  claims = [
      rep.claim(f"{NAME}.loss_at_5k", f"Attn-FC (orthonormal U) training loss at epoch {at5}",
                paper="loss → 0 (“close to zero” after 5K epochs)",
                paper_ref="Theorem 2; Sec 5.1 ¶2", ours=rep.mean_ci(curves["loss"][:, k5]),
                tolerance=rep.Tolerance("at_most", s.loss_at_most, f"≤ {s.loss_at_most:g}",
                                        source=_SOURCE_LOSS),
                figure=_THEOREM, quick=ctx.quick, comparable=at5 == PAPER_EPOCHS,
                note=f"{trend}; the loss at epoch {at5} is "
                     f"{100 * np.mean(curves['loss'][:, k5]) / np.log(n_classes):.2g}% of "
                     f"ln {n_classes} (text's settings: orthonormal U, unit query)"),
      rep.claim(f"{NAME}.attends_every_sentence", f"at epoch {at5} the topic word has the "
                "largest attention weight in every training sentence", paper="every input sentence",
                paper_ref="Theorem 2", ours=rep.mean_ci(curves["topic_argmax_all"][:, k5]),
                tolerance=rep.Tolerance("all_true", source=_SOURCE_EVERY), figure=_THEOREM,
                quick=ctx.quick, comparable=at5 == PAPER_EPOCHS),
      rep.claim(f"{NAME}.final_attention", f"mean attention on the topic word at epoch {last}",
                paper="→ 1", paper_ref="Theorem 2",
                ours=rep.mean_ci(curves["topic_attention"][:, -1]),
                tolerance=rep.Tolerance("at_least", s.attention_at_least,
                                        f"≥ {s.attention_at_least:g}", source=_SOURCE_ATT),
                figure=_THEOREM, quick=ctx.quick, comparable=last >= LIMIT_EPOCHS),
  ]
  figs.curve_panels([
      {"title": "training loss", "ylabel": "cross-entropy", "logy": True,
       "curves": [("Attn-FC", steps, curves["loss"])]},
      {"title": "attention on the topic word", "ylabel": "mean weight",
       "curves": [("Attn-FC", steps, curves["topic_attention"])]},
  ], ctx.path("theorem2.png"), title=f"Theorem 2: Attn-FC, orthonormal U, {n_seeds} runs")
  notes = [f"Attn-FC with orthonormal U (UᵀU = I), the lu2021-text-fc preset, {n_seeds} seeds "
           f"on the engine ({result.gd_path.get('path', '?')} path); recorded every "
           f"{result.config.train.record_every} epochs; run: {engine.figure_path(f'{NAME}-fc', '')}"]
  return Outcome(claims, ["theorem2.png"], {"notes": notes, "steps": steps,
                                             "loss": curves["loss"].mean(0),
                                             "topic_attention": curves["topic_attention"].mean(0)})
