"""Structured attention on Snell et al.'s copying task: the same five normalisers in the LSTM seq2seq.

The companion of :mod:`attndyn.reproduce.flavours.structured` (CoNLL-2000): the
encoder-decoder of :mod:`models.seq2seq` (its public ``normaliser`` option) on
i.i.d. copying, trained with the training path of ``reproduce snell``
(:func:`dynamics.make_train`, Adam, a fresh batch every step; seeds vmapped by
:func:`dynamics.run_sweep`). Per seed: final token accuracy on fixed evaluation
pairs, learning speed (the first recorded step with token accuracy ≥
``acc_level``), and on the evaluation pairs after training the mean run length of
the attention supports, the fraction of exact zeros and the share of attention
mass on the source word to copy against uniform attention's share. Every row is
``info``: the lecture makes no statement about copying.

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns", 2021.
  https://arxiv.org/abs/2103.07601
  Treviso et al., attention-mechanisms lecture (2020), "Structured attention".
"""
import dataclasses
import time
from typing import Literal

import jax
import numpy as np

from attndyn import dynamics
from attndyn import settings
from attndyn.analysis import copying_stats as cs
from attndyn.analysis import ktiw
from attndyn.analysis import replication as rep
from attndyn.analysis import structured_attention as sa
from attndyn.reproduce.flavours.structured import LABELS, NORMALISERS
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce.yang import common
from attndyn.reproduce import engine
from attndyn.dynamics import copying
from attndyn.models import seq2seq
from attndyn.tasks.copying import DISTRIBUTIONS, CopyingConfig, sample_copying

__all__ = ["NAME", "TITLE", "Settings", "FULL", "QUICK", "LEVEL_SOURCE", "run", "train_copying",
           "copying_claims"]

NAME = "structured_copying"
TITLE = "Structured attention (lecture) on the copying task: the five normalisers in the LSTM seq2seq"


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set structured_copying.KEY=VALUE``).

  Attributes:
    distribution: the copying task's training distribution.
    n_tokens: the words copied are 1..n_tokens.
    length: the length of every sequence.
    hidden: the LSTM's hidden size.
    steps: Adam steps (a fresh batch each).
    batch: pairs per step.
    lr: Adam's learning rate.
    record_every: steps between evaluations.
    eval_size: the fixed evaluation pairs.
    acc_level: the token accuracy whose first crossing is the learning speed.
    seeds: seeds per normaliser (seeds 0..seeds-1, vmapped).
    normalisers: the attention normalisers compared.
  """
  distribution: Literal[DISTRIBUTIONS]
  n_tokens: settings.Count
  length: settings.Count
  hidden: settings.Count
  steps: settings.Count
  batch: settings.Count
  lr: settings.Number
  record_every: settings.Count
  eval_size: settings.Count
  acc_level: settings.Number
  seeds: settings.Count
  normalisers: tuple[Literal[NORMALISERS], ...]


FULL = Settings(distribution="iid", n_tokens=20, length=10, hidden=32, steps=300, batch=32,
                lr=3e-3, record_every=10, eval_size=64, acc_level=0.9, seeds=3,
                normalisers=NORMALISERS)
QUICK = dataclasses.replace(FULL, steps=60, hidden=16)
LEVEL_SOURCE = rep.ours("0.9 token accuracy is the success level of attndyn's Snell copying "
                        "experiment (reproduce snell, 'copying'), fixed there before this one")


def run(ctx, s: Settings) -> Outcome:
  res, seconds = {}, {}
  for norm in s.normalisers:
    ctx.log(f"{NAME}: {norm}: {s.seeds} seeds x {s.steps} steps")
    start = time.perf_counter()
    res[norm] = train_copying(s, norm, s.seeds, ctx=ctx)
    seconds[norm] = time.perf_counter() - start
  claims = copying_claims(res, s, quick=ctx.quick)
  details = {"notes": [
      f"copying ({s.distribution}, {s.n_tokens} words, length {s.length}, models.seq2seq "
      f"'ours' encoding): LSTM hidden {s.hidden}, Adam {s.lr:g}, batch {s.batch}, "
      f"{s.steps} steps (a fresh batch each step), evaluated every {s.record_every} on "
      f"{s.eval_size} fixed pairs; attention measured on them after training."]}
  for norm, c in res.items():
    details[norm] = {"seconds": seconds[norm], "t": c["t"].tolist(),
                     "token_acc": c["token_acc"].tolist(), "steps_to_level": c["steps"].tolist(),
                     **{k: c[k].tolist() for k in ("acc", "run_length", "zero_fraction",
                                                   "on_target", "uniform")}}
  return Outcome(claims, [], details)


def train_copying(c: Settings, norm: str, n_seeds: int, ctx=None) -> dict:
  """Snell's copying task with ``norm`` attention (the training path of ``reproduce snell``:
  :func:`dynamics.copying.copying_point`, Adam, a fresh batch each step; seeds vmapped by ``run_sweep``,
  checkpointed under ``DIR/runs/structured_copying-NORM`` with a reproduction's ``ctx``)."""
  task = CopyingConfig(c.distribution, c.n_tokens, c.length)
  cfg = seq2seq.Seq2SeqConfig(task.vocab, task.vocab, hidden=c.hidden, shared_embedding=True,
                              normaliser=norm)
  ev = sample_copying(jax.random.PRNGKey(10 ** 6), task, c.eval_size)
  tc = dynamics.TrainConfig(optimizer="adam", lr=c.lr, steps=c.steps,
                            record_every=c.record_every, batch_size=c.batch)
  one = copying.copying_point(cfg, task, ktiw.copy_record(cfg, ev), tc, evaluation=ev)
  inputs = {"seed": common.seeds(n_seeds)}
  out = (dynamics.run_sweep(one, inputs) if ctx is None else
         engine.sweep(ctx, f"{NAME}-{norm}", one, inputs, settings.as_json(c),
                      what="seeds"))
  acc = np.asarray(out["obs"]["token_acc"], float)                 # [S, R]
  res = {"t": np.asarray(tc.record_steps(), float), "token_acc": acc, "acc": acc[:, -1]}
  return {**res, **sa.copying_measures(np.asarray(out["attention"], float), ev)}


def copying_claims(res: dict, s: Settings, *, quick: bool) -> list:
  """``info`` rows of the copying runs: accuracy, learning speed, contiguity, mass on the target."""
  c, claims = s, []
  for norm, r in res.items():
    label = LABELS[norm]
    steps = cs.first_crossing(r["token_acc"], r["t"], c.acc_level)
    r["steps"] = steps
    claims += [
        rep.claim(f"{NAME}.{norm}.token_acc", f"copying, {label}: final token accuracy "
                  "(fixed evaluation pairs)", paper="—", ours=rep.mean_ci(r["acc"]),
                  tolerance=rep.Tolerance("info"), quick=quick),
        rep.claim(f"{NAME}.{norm}.steps_to_level", f"copying, {label}: first recorded "
                  f"step with token accuracy ≥ {c.acc_level:g}", paper="—",
                  ours=rep.mean_ci(steps), tolerance=rep.Tolerance("info"), quick=quick,
                  note=f"{int(np.isfinite(steps).sum())}/{len(steps)} seeds reached it in "
                       f"{c.steps} steps; level: {LEVEL_SOURCE}"),
        rep.claim(f"{NAME}.{norm}.run_length", f"copying, {label}: mean run length of "
                  "the attention support", paper="—", ours=rep.mean_ci(r["run_length"]),
                  tolerance=rep.Tolerance("info"), quick=quick,
                  note=f"exact-zero fraction {np.mean(r['zero_fraction']):.3f}"),
        rep.claim(f"{NAME}.{norm}.on_target_gain", f"copying, {label}: share of "
                  "attention mass on the source word to copy minus uniform's (paired)",
                  paper="—", ours=rep.paired_ci(r["on_target"], r["uniform"]),
                  tolerance=rep.Tolerance("info"), quick=quick,
                  note=f"share {np.mean(r['on_target']):.3f}, uniform {np.mean(r['uniform']):.3f}"),
    ]
  return claims
