"""Appendix A / Figs 8-9: Attn-TC-CNN on the Markov-chain word-pair task.

Two parallel width-2 convolutions turn words into word pairs before the
attention; topic word pairs of two Markov chains decide the topic. Every run
draws its own task and initialisation (run i uses seed i for both), and all
runs are one vmapped sweep. Pair scores and embeddings are centred on their
initial values (Appendix A).

Fig 9's claim, "the positive SEN relationship holds even if the attention
layer attends to other layers" (App. A), is judged as a positive, monotone
relation: per run, Kendall's τ between a topic pair's centred score and its
centred embedding norm over the recorded epochs (1 when the norm rises
whenever the score does), averaged over the topic pairs. Eq (10)'s exact curve
is reported only: its m is the word model's, not derived for pairs.
"""
import dataclasses
from typing import Optional

import numpy as np

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.analysis import lu2021_figures as figs
from attndyn.analysis import kendall
from attndyn.analysis import pairs
from attndyn.analysis import replication as rep
from attndyn.analysis.assumption1 import change_ratio
from attndyn.analysis.sen_checks import windowed_max_error
from attndyn import schema, settings
from attndyn.reproduce import engine
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome

__all__ = ["NAME", "TITLE", "Task", "Model", "Settings", "FULL", "QUICK", "SOURCES", "PAPER_REF",
           "validate", "run"]

NAME = "cnn"
TITLE = "Appendix A / Figs 8-9: Attn-TC-CNN on the Markov word-pair task"


@dataclasses.dataclass(frozen=True)
class Task:
  """The Markov word-pair task (:class:`tasks.MarkovPairsConfig`, whose fields these are)."""
  n_words: settings.Count
  n_topics: settings.Count
  pairs_per_topic: settings.Count
  sentence_length: settings.Count
  n_train: settings.Count
  n_test: settings.Count


@dataclasses.dataclass(frozen=True)
class Model:
  """Attn-TC-CNN's sizes and initial scales (:class:`models.CNNAttentionConfig`'s fields of the
  same names; the classifier is TC). Its own table, not ``settings.section("model")``: the run
  schema's model section has keys the CNN model does not take (``normaliser``) or that the
  experiment sets itself (``classifier``)."""
  embed_dim: settings.Count
  key_dim: settings.Count
  embed_std: settings.Number
  key_std: settings.Number
  query_std: settings.Number
  query_norm: Optional[settings.Number]


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set cnn.KEY=VALUE``).

  Attributes:
    task: the task's sizes (every run draws its own task from its seed).
    model: the model's sizes and initial scales.
    lr, steps, record_every: full-batch gradient descent.
    runs: the runs (task and init seeds ``0..runs-1``), one vmapped sweep.
    min_test_acc: the test accuracy (%) the runs are judged against.
    chunk: runs per compiled call and checkpoint (0: all at once).
    assumption1_ratio: the bound on the non-topic pairs' change relative to the topic pairs'.
    sen_tau_at_least: the Kendall τ the score-norm relation is judged against.
  """
  task: Task
  model: Model
  lr: settings.Number
  steps: settings.Count
  record_every: settings.Count
  runs: settings.Count
  min_test_acc: settings.Number
  chunk: settings.Index
  assumption1_ratio: settings.Number
  sen_tau_at_least: settings.Number


FULL = Settings(task=Task(n_words=200, n_topics=2, pairs_per_topic=2, sentence_length=10,
                          n_train=4000, n_test=1000),
                model=Model(embed_dim=15, key_dim=15, embed_std=1e-3, key_std=0.0,
                            query_std=1.0, query_norm=1.0),
                lr=0.1, steps=3000, record_every=30, runs=10, min_test_acc=99.0, chunk=0,
                assumption1_ratio=0.01, sen_tau_at_least=0.9)
QUICK = dataclasses.replace(FULL, task=dataclasses.replace(FULL.task, n_train=1000, n_test=500),
                            steps=600, record_every=20, runs=4)

# App. A's paragraphs are named by their first words (the paper text has no page breaks).
SOURCES = {
    "test_acc": rep.from_paper("App. A, ¶ “In our experiments, the word dictionary…”",
                               "trained for 3,000 epochs and achieved 99.89% test accuracy")
                + "; ≥ 99 % is ours: one run reported, one point (10 of 1,000 test sentences) "
                  "for the spread over seeds",
    # App. A gives no number ("nearly unchanged in comparison", "largely held"); the only number
    # the paper puts on such histograms is Sec 5.1's, for Fig 1's word scores. The bound is not
    # changed here; the rows say which part is whose.
    "assumption1_score": rep.from_paper("App. A, ¶ “We repeated the experiments for ten runs…”, "
                                        "Fig 8", "the non-topic word pair scores and the "
                                        "embeddings are nearly unchanged in comparison to their "
                                        "counterparts of the topic ones") + " (and “Assumption 1 "
                         "is largely held”: no number); ≤ 0.01 is the paper's number for Fig 1's "
                         "word scores (Sec 5.1 ¶3: “exceed the non-topic word counterparts by two "
                         "orders of magnitude”), carried to Fig 8's pairs by us",
    "assumption1_norm": rep.from_paper("App. A, ¶ “We repeated the experiments for ten runs…”, "
                                       "Fig 8", "the non-topic word pair scores and the embeddings "
                                       "are nearly unchanged in comparison to their counterparts "
                                       "of the topic ones") + " (no number; for Fig 1's norms "
                        "Sec 5.1 ¶3 says “nearly constant”, no number either); ≤ 0.01 is ours: "
                        "the scores' two orders of magnitude, applied to the norms",
    "sen_tau": rep.from_paper("App. A, ¶ “Randomly picking a topic word pair…”, Fig 9",
                              "the positive SEN relationship holds even if the attention layer "
                              "attends to other layers") + "; τ ≥ 0.9 is ours: a monotone "
                              "increasing relation gives τ = 1, 0.9 allows 5% of epoch pairs out "
                              "of order (the first epochs, where both are still ≈ 0)",
}
PAPER_REF = {"test_acc": "App. A, ¶ “In our experiments…”",
             "sen": "App. A, ¶ “Randomly picking a topic word pair…”"}


def _configs(s: Settings):
  """``(task, model, train)`` configs of the settings; a bad value names its setting."""
  with schema.at(f"{NAME}.task"):
    task_cfg = tasks.MarkovPairsConfig(**dataclasses.asdict(s.task))
  with schema.at(f"{NAME}.model"):
    cfg = models.CNNAttentionConfig(n_words=task_cfg.n_words, n_classes=task_cfg.n_topics,
                                    classifier="tc", **dataclasses.asdict(s.model))
  with schema.at(NAME):
    train_cfg = dynamics.TrainConfig(lr=s.lr, steps=s.steps,
                                     record_every=s.record_every)
  return task_cfg, cfg, train_cfg


def validate(s: Settings) -> None:
  """The settings make valid configs (called before anything runs)."""
  _configs(s)


def run(ctx, s) -> Outcome:
  task_cfg, cfg, train_cfg = _configs(s)

  def one(inp):
    return pairs.train_on_pairs(inp["seed"], task_cfg, cfg, train_cfg)

  ctx.log(f"{NAME}: Attn-TC-CNN x {s.runs} runs, {s.steps} epochs")
  # Not an `attndyn run` config (another model, a per-seed Markov-pair dataset): the engine's
  # checkpointed sweep (runs/cnn, --resume) with generic autodiff GD.
  out = engine.sweep(ctx, NAME, one, {"seed": common.seeds(s.runs)}, settings.as_json(s),
                     chunk_size=s.chunk or None, what="runs")
  obs = out["obs"]
  steps = np.asarray(train_cfg.record_steps())
  m = task_cfg.n_steps - 1   # word pairs per sentence minus the topic pair
  nontopic = out["nontopic"].reshape(s.runs, -1)
  ns = out["pair_score"].reshape(s.runs, -1)
  nn = out["pair_norm"].reshape(s.runs, -1)
  n_nt = nontopic.sum(-1)[0]
  nt_score = ns[nontopic].reshape(s.runs, n_nt)
  nt_norm = nn[nontopic].reshape(s.runs, n_nt)
  top_score, top_norm = obs["score"][:, -1], obs["emb_norm"][:, -1]
  # The same ratios over the non-topic pairs that share a word with a topic pair (their CNN
  # output mixes in a topic word's moving embedding or key) and over those that do not; how
  # many share one differs between runs, so per run.
  shares = out["shares_word"].reshape(s.runs, -1)
  split = pairs.split_change_ratios({"score": ns, "norm": nn},
                                    {"score": top_score, "norm": top_norm},
                                    {"shared": shares, "disjoint": nontopic & ~shares})
  share_note = (f"non-topic pairs sharing a word with a topic pair per run: "
                + ", ".join(str(int(k)) for k in shares.sum(-1)) + f" of {n_nt}")
  acc = 100 * obs["test_acc"][:, -1]
  sen_err = windowed_max_error(steps, obs["score"], obs["emb_norm"], m)
  sen_tau = kendall.sen_kendall_tau(np.asarray(obs["score"]), np.asarray(obs["emb_norm"]))
  bound = s.assumption1_ratio
  q = ctx.quick
  claims = [
      rep.claim(f"{NAME}.test_acc", f"Attn-TC-CNN test accuracy after {s.steps} epochs",
                paper=99.89, paper_ref=PAPER_REF["test_acc"], ours=rep.mean_ci(acc), unit="%",
                figure="App. A", tolerance=rep.Tolerance(
                    "at_least", s.min_test_acc, f"≥ {s.min_test_acc:g} %",
                    source=SOURCES["test_acc"]),
                quick=q, comparable=s.steps >= 3000 and task_cfg.n_train >= 4000),
      *[rep.claim(f"{NAME}.assumption1_{key}", text, paper="nearly unchanged (Fig 8)",
                  ours=rep.mean_ci(change_ratio(nontopic, topic)), figure="Fig 8",
                  tolerance=rep.Tolerance("at_most", bound, f"≤ {bound:g}",
                                          source=SOURCES[f"assumption1_{key}"]), quick=q,
                  note=f"split: {split['shared'][key].mean():.3g} over the pairs sharing a word "
                       f"with a topic pair, {split['disjoint'][key].mean():.3g} over the others "
                       f"(cnn.assumption1_{key}_shared / _disjoint)")
        for key, text, nontopic, topic in (
            ("score", "centred pair scores: mean |Δs| of non-topic pairs / mean Δs of topic pairs",
             nt_score, top_score),
            ("norm", "centred pair embeddings: mean ‖q‖‖Δμ‖ of non-topic pairs / that of topic "
             "pairs", nt_norm, top_norm))],
      *[rep.claim(f"{NAME}.assumption1_{key}_{part}",
                  f"as cnn.assumption1_{key}, over the non-topic pairs that "
                  f"{'share' if part == 'shared' else 'share no'} word with a topic pair",
                  paper="nearly unchanged (Fig 8; the paper does not split the pairs)",
                  ours=rep.mean_ci(split[part][key]), figure="Fig 8", quick=q,
                  tolerance=rep.Tolerance("info"), note=share_note)
        for key in ("score", "norm") for part in ("shared", "disjoint")],
      rep.claim(f"{NAME}.sen_positive", "Kendall τ between a topic pair's centred score and its "
                "centred ‖q‖‖Δμ‖ over the recorded epochs (mean over topic pairs, per run)",
                paper="positive SEN relation holds (Fig 9)", paper_ref=PAPER_REF["sen"],
                ours=rep.mean_ci(sen_tau), figure="Fig 9", quick=q,
                tolerance=rep.Tolerance("at_least", s.sen_tau_at_least,
                                        f"≥ {s.sen_tau_at_least:g}", source=SOURCES["sen_tau"]),
                note="1 = the norm rises whenever the score does"),
      rep.claim(f"{NAME}.sen_error", f"max relative deviation of the centred topic-pair SEN from "
                f"Eq (10) (m = {m}) after the first 10% of training", paper="positive SEN relation "
                "holds (Fig 9)", ours=rep.mean_ci(sen_err), tolerance=rep.Tolerance("info"),
                figure="Fig 9", quick=q, note="Eq (10) is derived for words, not word pairs"),
  ]
  figs.distribution_panels({
      "non-topic pair Δs": {"Attn-TC-CNN": nt_score},
      "topic pair Δs": {"Attn-TC-CNN": top_score},
      "non-topic pair ‖q‖‖Δμ‖": {"Attn-TC-CNN": nt_norm},
      "topic pair ‖q‖‖Δμ‖": {"Attn-TC-CNN": top_norm},
  }, ctx.path("fig8_cnn_distributions.png"),
      title=f"Fig 8: centred pair scores and embedding norms, {s.runs} runs (95% CI)")
  figs.sen_panels({"topic pair 0 (centred)": (obs["score"][..., 0], obs["emb_norm"][..., 0], m)},
                  ctx.path("fig9_cnn_sen.png"), title=f"Fig 9: SEN of a topic word pair, "
                  f"{s.runs} runs", xlabel="$s - s(0)$", ylabel="$\\|q\\|\\,\\|\\mu - \\mu(0)\\|$")
  notes = [f"V = {task_cfg.n_words}, {task_cfg.n_topics} topics × {task_cfg.pairs_per_topic} "
           f"topic pairs, length {task_cfg.sentence_length}, {task_cfg.n_train}/{task_cfg.n_test} "
           f"sentences; d = d' = 15, embedding std {s.model.embed_std:g}, keys 0, unit "
           f"fixed query, conv init as PyTorch's; GD lr {s.lr} × {s.steps} epochs; "
           f"{s.runs} runs (task and init seeds 0..{s.runs - 1}) vmapped.",
           f"Final training loss {np.mean(obs['loss'][:, -1]):.3g}; per-run test accuracy "
           + ", ".join(f"{a:.2f}" for a in acc) + "."]
  return Outcome(claims, ["fig8_cnn_distributions.png", "fig9_cnn_sen.png"], {"notes": notes})
