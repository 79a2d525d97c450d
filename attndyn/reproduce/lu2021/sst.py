"""Section 5.2: Attn-FC and Attn-TC on SST-2 and SST-5 (test accuracy, Fig 4).

Settings are the paper's text as the replication notes found them to
reproduce: sentence-level SST (SST-2 drops neutral: 6920/872/1821), words
lowercased, vocabulary from all splits, d = 200, embeddings N(0, 1e-6)
(std 1e-3), a fixed query N(0, 0.3²) of dimension 10, keys 0, full-batch GD
with lr 0.1, and early stopping on the dev LOSS with patience 100 epochs
(evaluated every 10). Padding is masked (score −∞) as the text says; the
authors' code's unmasked ``<pad>`` word is the ``pad_word`` variant.

FC's fixed U is the authors' (standard normal with a unit diagonal, UᵀU ≈
diag(d)); FC with orthonormal columns (the synthetic section's U) learns about
200× slower on SST and is run as a documented extra. FC trains the exact
``P = E U`` reduction (:mod:`models.lu_fc_reduced`), TC the full model
projected through U; the FC variants × seeds are one vmapped sweep and TC's
seeds another. Each seed stops on its own
(:func:`dynamics.make_train_early_stopping`), a sweep ends when all its seeds
have stopped (:func:`dynamics.segmented.run_segments`), and test accuracy is
taken at each seed's best dev-loss parameters.
"""
import dataclasses
import math
import time
from typing import Literal

import numpy as np

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.analysis import lu2021_figures as figs
from attndyn.analysis import replication as rep
from attndyn.analysis import sst_runs
from attndyn.analysis import sst_words
from attndyn import schema, settings
from attndyn.reproduce import engine
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome
from attndyn.dynamics import segmented as dynamics_segmented

__all__ = ["NAME", "TITLE", "PAPER_ACC", "VARIANTS", "LABELS", "Model", "MaxSteps", "Settings",
           "FULL", "QUICK", "WATCH",
           "PAPER_REF", "SOURCES", "load", "TRAINING", "segment_settings", "train_config",
           "run"]

NAME = "sst"
TITLE = "Section 5.2: SST-2 / SST-5 test accuracy (masked and unmasked padding), Fig 4"
PAPER_ACC = {("sst2", "fc"): 76.68, ("sst2", "tc"): 79.59, ("sst5", "fc"): 38.49,
             ("sst5", "tc"): 40.53}
# variant: (FC's U init or None for TC, classifier trained)
VARIANTS = {"fc": ("randn_unit_diag", 0.0), "fc_orthonormal": ("orthonormal", 0.0),
            "tc": (None, 1.0)}
LABELS = {"fc": "Attn-FC (authors' U)", "fc_orthonormal": "Attn-FC (orthonormal U)",
          "tc": "Attn-TC"}


@dataclasses.dataclass(frozen=True)
class Model:
  """The Lu model's sizes and initial scales (:class:`models.LuModelConfig`'s fields of the
  same names; vocabulary and classes come from the data)."""
  embed_dim: settings.Count
  key_dim: settings.Count
  embed_std: settings.Number
  key_std: settings.Number
  query_std: settings.Number


@dataclasses.dataclass(frozen=True)
class MaxSteps(settings.Table):
  """The most epochs a run of each dataset trains (early stopping usually ends it sooner)."""
  sst2: settings.Count
  sst5: settings.Count


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set sst.KEY=VALUE``).

  Attributes:
    datasets: the SST variants trained (SST-2 drops the neutral sentences).
    paddings: ``masked`` (score −∞, the paper's text) and/or ``pad_word`` (the authors'
      code's unmasked ``<pad>`` word).
    variants: the classifiers trained (:data:`VARIANTS`).
    model: the model's sizes and initial scales.
    lr: full-batch gradient descent's learning rate.
    max_steps: the most epochs per dataset.
    record_every: epochs between records.
    eval_every, patience: the dev loss is evaluated every ``eval_every`` epochs and a run
      stops after ``patience`` evaluations without improvement.
    segment: epochs per compiled segment (and per checkpoint).
    seeds: seeds per variant.
    max_sentences: keep only the first that many sentences of every split (0: all; tests).
    tolerance: the test accuracy is judged at the paper's minus this many points.
    top_words: the top-scored words whose SEN is checked.
    sen_ok: a word's ‖v‖ within this relative error of Eq (10) counts as following it.
    fig4_words: the words per panel group of Fig 4.
  """
  datasets: tuple[Literal["sst2", "sst5"], ...]
  paddings: tuple[Literal["masked", "pad_word"], ...]
  variants: tuple[Literal[tuple(VARIANTS)], ...]
  model: Model
  lr: settings.Number
  max_steps: MaxSteps
  record_every: settings.Count
  eval_every: settings.Count
  patience: settings.Count
  segment: settings.Count
  seeds: settings.Count
  max_sentences: settings.Index
  tolerance: settings.Number
  top_words: settings.Count
  sen_ok: settings.Number
  fig4_words: settings.Count


FULL = Settings(datasets=("sst2", "sst5"), paddings=("masked", "pad_word"),
                variants=("fc", "fc_orthonormal", "tc"),
                model=Model(embed_dim=200, key_dim=10, embed_std=1e-3, key_std=0.0,
                            query_std=0.3),
                lr=0.1, max_steps=MaxSteps(sst2=30000, sst5=40000), record_every=200,
                eval_every=10, patience=10, segment=2000, seeds=3, max_sentences=0,
                tolerance=3.0, top_words=50, sen_ok=0.25, fig4_words=2)
QUICK = dataclasses.replace(FULL, paddings=("masked",), variants=("fc", "tc"),
                            max_steps=MaxSteps(sst2=300, sst5=300), record_every=20, segment=300,
                            seeds=1)
WATCH = ("best", "powerful")
PAPER_REF = "Sec 5.2 ¶2"   # "reached 76.68% and 79.59% test accuracy on SST2 and 38.49% and 40.53% on SST5"
SOURCES = {
    "test_acc": rep.ours("the paper reports one run per model with no spread; 3 points allows for "
                         "seed-to-seed variation and the preprocessing the text leaves open "
                         "(tokenisation, vocabulary, early-stopping details)"),
    "sen_top_words": rep.from_paper("Sec 5.2 ¶3", "we checked the words of the largest fifty "
                                    "scores … most of the words have their SEN curves close to "
                                    "our theoretical prediction") + "; ‘most’ as ≥ half; ‘close’ "
                                    "as within 25% of Eq (10) is ours (the paper gives no number; "
                                    "a quarter is well inside the factor-of-two gaps of Fig 5's "
                                    "deviating words)",
}

_LOADED = {}


def load(dataset: str, padding: str, max_sentences: int = 0) -> tasks.SSTData:
  """SST-2 or SST-5 with masked padding or the authors' pad word (parsed once per process).

  ``max_sentences > 0`` keeps only the first that many sentences of every split (tests).
  """
  if dataset not in _LOADED:
    _LOADED[dataset] = tasks.load_sst(fine_grained=dataset == "sst5")
  data = _LOADED[dataset]
  return data, tasks.sst.splits_of(data, padding, max_sentences)


# The settings that decide a group's training (its segment checkpoint's digest). The rest choose
# which groups run (datasets, paddings, variants; max_steps of the other dataset) or only judge
# (tolerance, top_words, sen_ok, fig4_words), so adding SST-5 to a finished SST-2 run, or
# changing a tolerance, resumes the groups already trained instead of training them again.
TRAINING = ("model", "lr", "record_every", "eval_every", "patience", "segment", "seeds",
            "max_sentences")


def segment_settings(s: Settings, variants, steps: int, label: str) -> dict:
  """What decides one group's segments: :data:`TRAINING`, its variants, epochs and data label."""
  return {"training": {k: settings.as_json(getattr(s, k)) for k in TRAINING},
          "variants": list(variants), "steps": steps, "label": label}


def _group(ctx, s: Settings, data, b: dict, variants, steps: int, label: str) -> dict:
  """Train the runs of some variants × seeds in segments; data are arguments, not constants.

  FC variants train the exact ``P = E U`` reduction (:mod:`models.lu_fc_reduced`),
  TC the full model projected through ``U`` (:func:`models.lu_linear.apply_linear`).
  """
  fc = VARIANTS[variants[0]][0] is not None
  base = dict(n_words=data.n_words, n_classes=data.n_classes, **dataclasses.asdict(s.model))
  with schema.at(f"{NAME}.model"):
    cfgs = [models.LuModelConfig(classifier="fc" if fc else "tc",
                                 fc_init=VARIANTS[v][0] or "orthonormal", **base) for v in variants]
  segment = min(s.segment, steps)
  seg_cfg = dynamics.TrainConfig(lr=s.lr, steps=segment, record_every=s.record_every)
  group = sst_runs.make_group(cfgs, common.seeds(s.seeds), seg_cfg, patience=s.patience,
                              eval_every=s.eval_every)
  params0, aux, seed, which = group.params0, group.aux, group.seed, group.which
  n_seg = math.ceil(steps / segment)
  ctx.log(f"{NAME}: {label}: {', '.join(variants)} x {s.seeds} seeds, up to {n_seg} x "
          f"{segment} epochs (early stopping on dev loss, patience "
          f"{s.patience * s.eval_every} epochs)")
  t0 = time.perf_counter()

  def progress(k, stopped):
    ctx.log(f"{NAME}: {label} {'/'.join(variants)}: {(k + 1) * segment} epochs, "
            f"{int((stopped >= 0).sum())}/{len(stopped)} stopped, {time.perf_counter() - t0:.0f} s")

  # Not an `attndyn run` config (SST data, per-seed early stopping between segments from the
  # host): the segments are checkpointed under runs/NAME instead (--resume continues after the
  # last finished segment).
  name = f"{NAME}-{label.replace(' ', '-')}-{'fc' if fc else 'tc'}"
  settings = segment_settings(s, variants, steps, label)
  with engine.segment_checkpoint(ctx, name, settings, params0) as (start, on_state):
    res = dynamics_segmented.run_segments(lambda p: group.segment(p, aux, b), params0,
                                          segment=segment,
                                          max_segments=n_seg, record_every=s.record_every,
                                          on_segment=progress,
                                          patience_steps=s.patience * s.eval_every,
                                          start=start, on_state=on_state)
  acc, score, norm = group.evaluate(res.best_params, aux, b["test"])
  return {"variant": np.asarray([variants[i] for i in which]), "seed": seed,
          "test_acc": 100 * np.asarray(acc), "best_step": res.best_step,
          "stopped_at": res.stopped_at, "steps": res.steps, "obs": res.observables,
          "final_score": np.asarray(score), "final_norm": np.asarray(norm)}


def train_config(ctx, s: Settings, dataset: str, padding: str) -> dict:
  """Train every variant × seed of one dataset and padding; cached in ``ctx``.

  FC variants (one vmapped sweep) and TC (another) each stop when all their
  seeds have stopped (:func:`dynamics.segmented.run_segments`).

  Returns:
    Host arrays over the points ``P``: ``variant``, ``seed``, ``test_acc`` (at the
    best dev loss, %), ``best_step``, ``stopped_at``, ``final_score [P, V]``,
    ``final_norm [P, V]``; ``steps [T]`` and observables ``obs`` (``score``,
    ``norm`` ``[P, T, V]``, ``attended [P, T, n]``, losses ``[P, T]``; a group
    that stopped sooner repeats its last record); plus ``data`` and ``batches``.
  """
  key = (dataset, padding, s.max_sentences, tuple(s.variants), s.seeds,
         s.max_steps[dataset], s.record_every, s.segment)
  cache = ctx.cache.setdefault(NAME, {})
  if key in cache:
    return cache[key]
  data, b = load(dataset, padding, s.max_sentences)
  steps = s.max_steps[dataset]
  groups = [[v for v in s.variants if VARIANTS[v][0] is not None],
            [v for v in s.variants if VARIANTS[v][0] is None]]
  parts = [_group(ctx, s, data, b, g, steps, f"{dataset} {padding}") for g in groups if g]
  out = sst_runs.merge_groups(parts, s.record_every)
  out.update(data=data, batches=b)
  cache[key] = out
  return out


def _sel(run: dict, variant: str) -> np.ndarray:
  return np.flatnonzero(run["variant"] == variant)


def run(ctx, s) -> Outcome:
  claims, notes, details = [], [], {"stops": {}}
  fig4 = {}
  q = ctx.quick
  for padding in s.paddings:          # masked (the paper's) first for every dataset
    for dataset in s.datasets:
      r = train_config(ctx, s, dataset, padding)
      data, b = r["data"], r["batches"]
      m_word = sst_words.mean_sentence_length(b["train"], data.n_words) - 1
      for v in s.variants:
        idx = _sel(r, v)
        acc = rep.mean_ci(r["test_acc"][idx])
        stops = {"best_step": r["best_step"][idx].tolist(), "stopped_at": r["stopped_at"][idx].tolist()}
        details["stops"][f"{dataset}.{padding}.{v}"] = stops
        never = sum(x < 0 for x in stops["stopped_at"])
        notes.append(f"{dataset.upper()} {padding} {LABELS[v]}: test acc per seed "
                     + ", ".join(f"{a:.2f}" for a in r["test_acc"][idx])
                     + f"; best dev-loss epoch per seed {stops['best_step']}; stopped at "
                     f"{stops['stopped_at']}"
                     + (f" ({never} seed(s) never stopped within {r['steps'][-1]} epochs)"
                        if never else ""))
        cid = f"{dataset}.{v}.{padding}.test_acc"
        text = f"{dataset.upper()} {LABELS[v]}, {'masked padding' if padding == 'masked' else 'unmasked pad word (authors code)'}: test accuracy"
        paper = PAPER_ACC.get((dataset, v))
        if padding == "masked" and paper is not None:
          claims.append(rep.claim(
              cid, text, paper=paper, paper_ref=PAPER_REF, ours=acc, unit="%", figure="Sec 5.2",
              tolerance=rep.Tolerance("at_least", paper - s.tolerance,
                                      f"≥ paper − {s.tolerance:g} points",
                                      source=SOURCES["test_acc"]),
              comparable=False, quick=q,
              note="FC uses the authors' randn unit-diagonal U" if v == "fc" else ""))
        else:
          claims.append(rep.claim(
              cid, text, paper=paper if paper is not None else "–",
              paper_ref=PAPER_REF if paper is not None else "", ours=acc, unit="%",
              figure="Sec 5.2", tolerance=rep.Tolerance("info"), quick=q,
              note="extra: the text's orthonormal U learns ~200× slower" if v == "fc_orthonormal"
              else "the paper reports masked padding only" if padding == "pad_word" else ""))
        if padding == "masked" and v in ("fc", "tc"):
          frac = sst_words.top_sen_fraction(r["final_score"], r["final_norm"], idx, m_word,
                                            s.top_words, s.sen_ok)
          claims.append(rep.claim(
              f"{dataset}.{v}.sen_top_words", f"{dataset.upper()} {LABELS[v]}: fraction of the "
              f"{s.top_words} top-scored words whose ‖v‖ is within {s.sen_ok:.0%} of Eq (10) "
              f"(m = word's mean sentence length − 1) at the best dev-loss epoch",
              paper="most of the top-50 words follow Eq (10) (Fig 4)", ours=rep.mean_ci(frac),
              tolerance=rep.Tolerance("at_least", 0.5, "≥ 0.5 (most)",
                                      source=SOURCES["sen_top_words"]),
              paper_ref="Sec 5.2 ¶3", figure="Fig 4",
              comparable=False, quick=q))
          p0 = idx[0]
          words = sst_words.top_words(r["final_score"][p0], s.fig4_words, exclude=[0])
          for w in words:
            fig4[f"{dataset.upper()} {LABELS[v]}: '{data.vocab[w]}'"] = (
                r["obs"]["score"][p0, :, w][None], r["obs"]["norm"][p0, :, w][None],
                float(m_word[w]))
      ctx.partial(Outcome(list(claims), [], {"notes": list(notes), **details}))
      if padding == "masked":
        tc = _sel(r, "tc")
        if tc.size:
          top = sst_words.top_words(r["final_score"][tc[0]], 10, exclude=[0])
          notes.append(f"{dataset.upper()} Attn-TC top-10 words by score (seed 0): "
                       + ", ".join(data.vocab[w] for w in top))
  figures = []
  if fig4:
    figs.sen_panels(fig4, ctx.path("fig4_sst_sen.png"), ncols=4,
                    title="Fig 4: SEN of top-scored SST words vs Eq (10) (seed 0, masked padding)")
    figures.append("fig4_sst_sen.png")
  notes.insert(0, f"d = {s.model.embed_dim}, embedding std {s.model.embed_std:g}, fixed "
                  f"query N(0, {s.model.query_std:g}²) of dim {s.model.key_dim}, keys 0, "
                  f"GD lr {s.lr}, early stopping on the dev loss (patience "
                  f"{s.patience * s.eval_every} epochs, evaluated every {s.eval_every}), "
                  f"at most {settings.as_json(s.max_steps)} epochs, {s.seeds} seed(s) vmapped; "
                  f"test accuracy at each seed's best dev-loss parameters. Vocabulary lowercased, "
                  f"all splits.")
  return Outcome(claims, figures, {"notes": notes, **details})
