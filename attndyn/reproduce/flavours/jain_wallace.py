"""Jain & Wallace's checks on the trained Attn-TC: Kendall τ-b and adversarial attention.

Per normaliser, Attn-TC is trained on Section 5.1's synthetic task for every
seed, as one ``attndyn run`` on the one engine (:mod:`attndyn.reproduce.engine`;
``DIR/runs/jain_wallace-<normaliser>``: the fast path for softmax, autodiff for
the others); on each test sentence (:func:`analysis.jain_wallace.explain_model`):
τ-b of attention vs gradient importance and vs leave-one-out importance, and
the largest JSD of an attention whose output differs by TVD ≤ ε. All rows are
reported (``info``): there is no paper number for this model.
"""
import dataclasses
from typing import Literal

import jax
import numpy as np

from attndyn import settings
from attndyn.analysis import jain_wallace as jw
from attndyn.analysis import replication as rep
from attndyn.models.classifiers import CLASSIFIERS
from attndyn.models.normalisers import NAMED_NORMALISERS
from attndyn.reproduce import engine
from attndyn.reproduce.flavours.common import seed_params
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome

__all__ = ["NAME", "TITLE", "Settings", "FULL", "QUICK", "TEXTS", "PAPER", "validate", "run"]

NAME = "jain_wallace"
TITLE = "Jain & Wallace (2019) checks on Attn-TC: attention vs importance τ, adversarial attention"


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set jain_wallace.KEY=VALUE``).

  Attributes:
    task: the topic task's [task] run settings (Section 5.1's text preset).
    model: the model's [model] run settings (the text preset's; the normaliser is per run).
    classifier: the classifier of the ``lu2021-text-<classifier>`` preset trained.
    lr: GD's learning rate.
    steps: GD epochs per run.
    seeds: training seeds per normaliser (seeds 0..seeds-1).
    normalisers: the attention normalisers, one run each.
    eps: the adversarial attention's largest output change (TVD).
    adv_steps: gradient steps of each adversarial search.
    adv_restarts: random restarts of each adversarial search.
  """
  task: settings.section("task")
  model: settings.section("model")
  classifier: Literal[CLASSIFIERS]
  lr: settings.Number
  steps: settings.Count
  seeds: settings.Count
  normalisers: tuple[Literal[NAMED_NORMALISERS], ...]
  eps: settings.Number
  adv_steps: settings.Count
  adv_restarts: settings.Count


FULL = Settings(task=dict(common.TEXT_TASK), model=dict(common.TEXT_MODEL), classifier="tc",
                lr=0.1, steps=5000, seeds=5, normalisers=("softmax", "sparsemax", "entmax15"),
                eps=0.01, adv_steps=100, adv_restarts=4)
QUICK = dataclasses.replace(FULL, steps=2000, seeds=3, normalisers=("softmax", "sparsemax"),
                            adv_steps=50, adv_restarts=2)
TEXTS = {"tau_grad": "Kendall τ-b, attention vs gradient importance |∂ŷ/∂x_w|",
         "tau_loo": "Kendall τ-b, attention vs leave-one-out TVD",
         "adv_jsd": "max JSD(adversarial attention, attention) at output TVD ≤ ε",
         "adv_tvd": "output TVD of the adversarial attention (≤ ε by construction)"}
PAPER = {"tau_grad": "J&W: weak for BiLSTM encoders (real text)",
         "tau_loo": "J&W: weak for BiLSTM encoders (real text)",
         "adv_jsd": "J&W: often large (BiLSTM, real text)", "adv_tvd": "≤ ε"}


def _run_config(normaliser: str, s: Settings) -> dict:
  """The run of one normaliser: the text preset of ``s.classifier`` with these settings."""
  return common.text_run(s.classifier, {
      "task": dict(s.task), "model": {**s.model, "normaliser": normaliser},
      "train": {"lr": s.lr, "steps": s.steps, "record_every": s.steps},
      "sweep": {"seeds": s.seeds}, "ode": {"kind": "none"}})


def validate(s: Settings) -> None:
  """Every normaliser's run config is valid (called before anything runs)."""
  for norm in s.normalisers:
    engine.validate(_run_config(norm, s), f"jain_wallace run of {norm}")


def run(ctx, s) -> Outcome:
  _, data = common.topic_data(s.task, path=f"{NAME}.task")
  claims, results, details = [], {}, {}
  for norm in s.normalisers:
    result = engine.run(ctx, f"{NAME}-{norm}", _run_config(norm, s), figures=False)
    params = result.gd.final_params
    loss = np.asarray(result.gd.observables["loss"])[:, -1]
    acc = np.asarray(result.gd.observables["test_acc"])[:, -1]
    per_seed = []
    for i in range(s.seeds):
      ctx.log(f"{NAME}: {norm} seed {i}: τ statistics and adversarial search on "
              f"{data.test.tokens.shape[0]} test sentences")
      per_seed.append(jw.explain_model(seed_params(params, i), data.test, norm,
                                       jax.random.PRNGKey(1000 + i), eps=s.eps,
                                       steps=s.adv_steps, restarts=s.adv_restarts))
    summary = jw.summarise(per_seed)
    results[norm] = per_seed
    for stat in jw.STATS:
      claims.append(rep.claim(
          f"{NAME}.{norm}.{stat}", f"{norm} Attn-TC: {TEXTS[stat]}, mean over test sentences "
          f"(median pooled {summary[stat]['median']:.3g}; undefined on "
          f"{100 * summary[stat]['undefined']:.0f}% of sentences)", paper=PAPER[stat],
          ours=rep.mean_ci(summary[stat]["per_seed"]), tolerance=rep.Tolerance("info"),
          figure="jain_wallace.png", quick=ctx.quick,
          note=f"ε = {s.eps}; final train loss {np.mean(loss):.3g}, test acc "
               f"{100 * np.mean(acc):.1f}%"))
    details[norm] = {"summary": summary, "train_loss": loss.tolist(), "test_acc": acc.tolist()}
  jw.explain_figure(results, ctx.path("jain_wallace.png"), eps=s.eps)
  return Outcome(claims, ["jain_wallace.png"], details)
