"""Structured attention on CoNLL-2000 chunking: softmax, sparsemax, fusedmax, CRF marginals, SparseMAP.

Yang's transformer tagger (:mod:`models.transformer_tagger`) with one head and
``block="paper"`` (the tags are read from the attention output alone, so the
normaliser decides what each word sees), trained for every normaliser with the
Yang experiments' training path (:func:`dynamics.epochs.make_epoch_train`, Adam,
length buckets; seeds vmapped in one call). Chunks are contiguous spans, so this
is where a bias towards contiguous attention could help.

Measured per seed: test chunk F1 and token accuracy (conlleval) at the last
epoch; learning speed (the first step after which dev chunk F1 reaches
``f1_level``: the CoNLL-2000 shared task's baseline, 77.07, which tags each word
with the chunk tag most often seen with its POS tag, so a model past it has learned
more than the POS tags give); on the test sentences, the mean run length of the
attention supports, the fraction of exact zeros, and the share of attention mass
on the query word's own gold chunk against uniform attention's share
(:mod:`analysis.structured_attention`). Claims judged are the lecture's qualitative
statements; performance comparisons are ``info``.

SparseMAP (Niculae et al.'s: only the unary marginals regularised, pairwise w = 1) runs an
active-set QP per attention row with KKT matrices of size L + 2;
at CoNLL lengths (up to 78) and under ``vmap`` that is far too slow to train with on
this machine, so sentences are capped at ``max_len`` words (every normaliser sees the
same sentences).

References:
  Treviso et al., attention-mechanisms lecture (2020), "Structured attention".
  Tjong Kim Sang & Buchholz, "Introduction to the CoNLL-2000 Shared Task: Chunking", 2000.
  Niculae & Blondel, NeurIPS 2017. https://arxiv.org/abs/1705.07704
  Niculae, Martins, Blondel & Cardie, ICML 2018. https://arxiv.org/abs/1802.04223
"""
import dataclasses
import time
from typing import Literal

import numpy as np
import optax

from attndyn import settings
from attndyn.analysis import replication as rep
from attndyn.analysis import structured_attention as sa
from attndyn.analysis import tagger_scores as ts
from attndyn.analysis import yang_figures as figs
from attndyn.reproduce import engine
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce.yang import common
from attndyn.reproduce.yang.common import Data, Tagger
from attndyn.dynamics.epochs import make_tagger_train
from attndyn.tasks import conll2000
from attndyn.tasks.errors import check

__all__ = ["NAME", "TITLE", "NORMALISERS", "Data", "Tagger", "Settings", "FULL", "QUICK", "LECTURE",
           "SOURCES", "LABELS", "validate", "train_normaliser", "run", "make_claims"]

NAME = "structured"
TITLE = "Structured attention (lecture): softmax / sparsemax / fusedmax / CRF / SparseMAP on CoNLL-2000"
NORMALISERS = ("softmax", "sparsemax", "fusedmax", "crf", "sparsemap")


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set structured.KEY=VALUE``).

  Attributes:
    data: the CoNLL-2000 sentences read.
    max_len: sentences longer than this are left out (every normaliser sees the same ones; at
      least 2).
    buckets: length buckets of the training sentences.
    model: the tagger.
    lr: Adam's learning rate.
    batch_size: sentences per step.
    epochs: training epochs.
    seeds: seeds per normaliser (seeds 0..seeds-1, vmapped).
    normalisers: the attention normalisers compared.
    f1_level: the dev chunk F1 whose first crossing is the learning speed.
  """
  data: Data
  max_len: settings.Count
  buckets: settings.Count
  model: Tagger
  lr: settings.Number
  batch_size: settings.Count
  epochs: settings.Count
  seeds: settings.Count
  normalisers: tuple[Literal[NORMALISERS], ...]
  f1_level: settings.Number


FULL = Settings(data=Data(min_count=2, limit=None, test_limit=None), max_len=10, buckets=2,
                model=Tagger(d_model=32, n_heads=1, d_ff=64, features="words+pos",
                             block="paper", dropout=0.0),
                lr=1e-2, batch_size=16, epochs=6, seeds=3, normalisers=NORMALISERS,
                f1_level=0.7707)
QUICK = dataclasses.replace(FULL, data=Data(min_count=2, limit=1500, test_limit=400), max_len=10,
                            buckets=1, epochs=3, seeds=3)
LECTURE = "Treviso et al. lecture (2020), 'Structured attention'"
SOURCES = {
    "fused_runs": rep.ours(f"{LECTURE}: fusedmax 'penalize[s] weight differences between "
                           "adjacent positions', so its support comes in longer runs than "
                           "sparsemax's; judged as a paired difference over seeds ≥ 0"),
    "sparsemap_runs": rep.ours(f"{LECTURE}: SparseMAP is the structured counterpart of sparsemax "
                               "over the linear chain (pairwise bonus w = 1 for adjacent selected "
                               "words), so its support comes in longer runs than sparsemax's"),
    "crf_dense": rep.ours(f"{LECTURE}: latent structured attention (CRF marginals), 'Cons: no "
                          "sparsity'; every seed's test maps have no exact zero"),
    "sparsemap_sparse": rep.ours(f"{LECTURE}: SparseMAP, the 'structured counterpart of "
                                 "sparsemax'; every seed's test maps have exact zeros"),
    "fused_sparse": rep.ours(f"{LECTURE}: fusedmax maps onto the simplex like sparsemax; every "
                             "seed's test maps have exact zeros"),
}
LABELS = {"softmax": "softmax", "sparsemax": "sparsemax", "fusedmax": "fusedmax",
          "crf": "CRF marginals", "sparsemap": "SparseMAP"}


def validate(s: Settings) -> None:
  """``max_len`` is at least 2 (called before anything runs; the annotations check the rest)."""
  check(s.max_len >= 2, f"{NAME}.max_len", s.max_len, "an integer >= 2")


def train_normaliser(ctx, s, data, train_b, dev_b, norm: str) -> dict:
  """Train ``s.seeds`` taggers with ``norm`` attention (one checkpointed vmapped sweep,
  ``DIR/runs/structured-NORM``)."""
  cfg = common.tagger_config(data, settings.as_json(s.model), attention=norm,
                             path=f"{NAME}.model")
  pred_dev = ts.predictor(cfg, dev_b)
  one = make_tagger_train(cfg, train_b, lambda p, aux: {"dev": pred_dev(p)}, epochs=s.epochs,
                          batch_size=s.batch_size, optimizer=optax.adam(s.lr))
  traj = engine.sweep(ctx, f"{NAME}-{norm}", lambda p: one(p["seed"]),
                      {"seed": common.seeds(s.seeds)}, settings.as_json(s),
                      what="seeds")
  obs = ts.host(traj.observables)
  return {"cfg": cfg, "params": traj.final_params, "failed_at": np.asarray(traj.failed_at),
          "dev_f1": ts.f1_per_epoch(obs["eval"]["dev"], dev_b, data.tags),
          "train_loss": np.asarray(obs["train_loss"])}


def run(ctx, s: Settings) -> Outcome:
  data = common.load_data(settings.as_json(s.data), path=f"{NAME}.data")
  train, dev, test = (conll2000.cap_length(getattr(data, k), s.max_len)
                      for k in ("train", "dev", "test"))
  train_b = conll2000.length_buckets(train, s.buckets)
  dev_b = conll2000.length_buckets(dev, 1)
  steps_per_epoch = sum(b.tokens.shape[0] // s.batch_size for b in train_b)
  res, seconds = {}, {}
  for norm in s.normalisers:
    ctx.log(f"{NAME}: {norm}: {s.seeds} seeds x {s.epochs} epochs x {steps_per_epoch} steps, "
            f"{train.tokens.shape[0]} train sentences of <= {s.max_len} words")
    start = time.perf_counter()
    trained = train_normaliser(ctx, s, data, train_b, dev_b, norm)
    res[norm] = {**trained, **sa.tagger_measures(trained["cfg"], trained["params"], test,
                                                 data.tags, s.seeds)}
    seconds[norm] = time.perf_counter() - start
  claims = make_claims(res, s, steps_per_epoch, quick=ctx.quick)
  i = conll2000.first_longest(test)   # the figure's sentence (whatever the training)
  n = int(np.asarray(test.mask[i]).sum())
  words = [t.word for t in conll2000.capped_sentence(data, s.max_len, i)][:n]
  seg = sa.chunk_segments(test.labels[i:i + 1], test.mask[i:i + 1], data.tags)[0]
  figs.attention_maps({LABELS[k]: res[k]["maps"][0][i, 0] for k in s.normalisers}, words, seg,
                      ctx.path("structured_attention_maps.png"),
                      title=f"Test sentence {i} (≤ {s.max_len} words), seed 0: attention "
                            "(rows: query) per normaliser; lines: gold chunk boundaries")
  details = {"notes": [
      f"CoNLL-2000 sentences of ≤ {s.max_len} words: {train.tokens.shape[0]} train, "
      f"{dev.tokens.shape[0]} dev, {test.tokens.shape[0]} test (of {data.sizes}).",
      f"tagger: 1 head, block 'paper', d_model {s.model.d_model}, {s.model.features}, "
      f"dropout {s.model.dropout}; Adam {s.lr:g}, batch {s.batch_size}, "
      f"{s.epochs} epochs of {steps_per_epoch} steps; seeds 0..{s.seeds - 1} vmapped."]}
  for norm in s.normalisers:
    r = res[norm]
    details[norm] = {"seconds": seconds[norm], "dev_f1_per_epoch": r["dev_f1"].tolist(),
                     "train_loss": r["train_loss"].tolist(), "failed_at": r["failed_at"].tolist(),
                     "steps_to_level": r["steps"].tolist(),
                     **{k: r[k].tolist() for k in ("f1", "acc", "run_length", "zero_fraction",
                                                    "in_chunk", "uniform")}}
  return Outcome(claims, ["structured_attention_maps.png"], details)


def make_claims(res: dict, s: Settings, steps_per_epoch: int, *, quick: bool) -> list:
  """The rows: per normaliser ``info`` rows, and the lecture's qualitative statements judged.

  ``res[norm]`` holds per-seed arrays ``f1, acc, run_length, zero_fraction, in_chunk,
  uniform [S]`` and ``dev_f1 [S, E]``; ``steps`` (the learning speed) is added to it.
  """
  claims, q = [], quick
  for norm in s.normalisers:
    r, label = res[norm], LABELS[norm]
    steps = ts.steps_to_level(r["dev_f1"], s.f1_level, steps_per_epoch)
    r["steps"] = steps
    reached = int(np.sum(np.isfinite(steps)))
    claims += [
        rep.claim(f"{NAME}.{norm}.test_f1", f"{label}: test chunk F1 (conlleval), last epoch",
                  paper="no number (lecture is qualitative)", ours=rep.mean_ci(r["f1"]),
                  tolerance=rep.Tolerance("info"), quick=q),
        rep.claim(f"{NAME}.{norm}.test_acc", f"{label}: test token accuracy", paper="—",
                  ours=rep.mean_ci(r["acc"]), tolerance=rep.Tolerance("info"), quick=q),
        rep.claim(f"{NAME}.{norm}.steps_to_level", f"{label}: steps until dev chunk F1 ≥ "
                  f"{s.f1_level:g} (the CoNLL-2000 POS-only baseline)", paper="—",
                  ours=rep.mean_ci(steps), tolerance=rep.Tolerance("info"), quick=q,
                  note=f"{reached}/{len(steps)} seeds reached it within {s.epochs} epochs "
                       f"(checked after each epoch of {steps_per_epoch} steps)"),
        rep.claim(f"{NAME}.{norm}.dev_f1_auc", f"{label}: mean dev chunk F1 over the epochs "
                  "(area under the learning curve; needs no level)", paper="—",
                  ours=rep.mean_ci(np.mean(r["dev_f1"], axis=-1)),
                  tolerance=rep.Tolerance("info"), quick=q),
        rep.claim(f"{NAME}.{norm}.run_length", f"{label}: mean run length of the attention "
                  "support (test, per query)", paper="—", ours=rep.mean_ci(r["run_length"]),
                  tolerance=rep.Tolerance("info"), quick=q),
        rep.claim(f"{NAME}.{norm}.zero_fraction", f"{label}: fraction of exact-zero weights "
                  "(test, real query × real key)", paper="—", ours=rep.mean_ci(r["zero_fraction"]),
                  tolerance=rep.Tolerance("info"), quick=q),
        rep.claim(f"{NAME}.{norm}.in_chunk_gain", f"{label}: share of attention mass on the "
                  "query's own gold chunk minus uniform attention's share (paired over seeds)",
                  paper="—", ours=rep.paired_ci(r["in_chunk"], r["uniform"]),
                  tolerance=rep.Tolerance("info"), quick=q,
                  note=f"share {np.mean(r['in_chunk']):.3f}, uniform {np.mean(r['uniform']):.3f}"),
    ]
    if norm != "softmax" and "softmax" in res:
      claims.append(rep.claim(
          f"{NAME}.{norm}.f1_vs_softmax", f"{label} − softmax: test chunk F1 (paired over seeds)",
          paper="—", ours=rep.paired_ci(r["f1"], res["softmax"]["f1"]),
          tolerance=rep.Tolerance("info"), quick=q))
  if "sparsemax" in res:
    for norm, key in (("fusedmax", "fused_runs"), ("sparsemap", "sparsemap_runs")):
      if norm in res:
        claims.append(rep.claim(
            f"{NAME}.{norm}.longer_runs_than_sparsemax", f"{LABELS[norm]} − sparsemax: mean run "
            "length of the attention support (paired over seeds)",
            paper="contiguous attention (qualitative)", paper_ref=LECTURE,
            ours=rep.paired_ci(res[norm]["run_length"], res["sparsemax"]["run_length"]),
            tolerance=rep.Tolerance("at_least", 0.0, "≥ 0 (95% interval)", source=SOURCES[key]),
            quick=q, comparable=not q))
  if "crf" in res:
    claims.append(rep.claim(
        f"{NAME}.crf.dense", f"{LABELS['crf']}: the test attention maps have no exact zero",
        paper="no sparsity", paper_ref=LECTURE, ours=rep.proportion_ci(
            res["crf"]["zero_fraction"] == 0),
        tolerance=rep.Tolerance("all_true", source=SOURCES["crf_dense"]), quick=q))
  for norm, key in (("sparsemap", "sparsemap_sparse"), ("fusedmax", "fused_sparse")):
    if norm in res:
      claims.append(rep.claim(
          f"{NAME}.{norm}.sparse", f"{LABELS[norm]}: the test attention maps have exact zeros",
          paper="sparse", paper_ref=LECTURE, ours=rep.proportion_ci(res[norm]["zero_fraction"] > 0),
          tolerance=rep.Tolerance("all_true", source=SOURCES[key]), quick=q))
  return claims
