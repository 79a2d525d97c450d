"""``attndyn atlas``: where Lu et al. (2021)'s theory holds, over thousands of configurations.

Orchestration only. The grid is a set of *buckets*: the discrete settings
(classifier, m, M, J, words per topic, d, n_train, normaliser, trainable query)
that change the compiled program's shapes or code. Each bucket is one
``attndyn run`` config (:mod:`attndyn.reproduce.engine`, so checkpointed and
resumable under ``DIR/runs/bucket-NNNN``) whose sweep vmaps the continuous
axes, the embedding scale σ (``model.embed_std``) and the learning rate, with
the init seeds: one compiled GD program and one reduced-ODE solve serve every
point of the bucket. A configuration is one (bucket, σ, lr); a row is a
configuration × seed.

Flow time: the learning rates are ``tau / n`` for run lengths ``n`` that are
multiples of ``record_every``, and the run of learning rate ``lr`` stops at step
``n = tau / lr`` (``train.flow_time = tau``: flow time ``τ = lr · step = tau`` for
every lr), where it is read (:func:`analysis.atlas.until`); one chunk of a bucket
holds one lr's points, so it computes ``n`` steps, not the bucket's ``steps``. The
measures are computed from those trajectories by :func:`analysis.atlas.run_rows`,
i.e. by the functions ``attndyn run``'s summary uses, and judged against the
tolerances of the Section 5.1 reproduction (:data:`TOLERANCES`).

Outputs in DIR: ``atlas.csv`` (one row per configuration × seed),
``curves.npz`` + ``curves.json`` (per-row curves ``[row, time]`` and their axis
names), ``atlas.json`` (settings, fits, timings), ``atlas.md`` and the phase
diagrams ``phase_*.png``; ``buckets/`` holds each finished bucket's record (its rows, curves
and provenance, :data:`RECORDS`), from which ``--resume`` reads it back.
"""
import csv
import hashlib
import io
import itertools
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import numpy as np

from attndyn import atomic, compile_cache, overrides, presets
from attndyn.reproduce.lu2021 import synthetic
from attndyn.tasks.errors import ConfigError

__all__ = ["TOLERANCES", "TOLERANCE_SOURCES", "SEN_START_FRACTION", "LEARNED_ACC", "BASE",
           "DISCRETE", "FULL", "QUICK", "TIMES", "RECORDS", "Bucket", "AtlasResult", "settings",
           "buckets", "fast", "solves_ode", "continuous", "learning_rates", "n_configurations",
           "COST", "FastPathWork", "fast_path_work", "bucket_cost", "stage_costs", "run_config",
           "bucket_rows", "run_atlas", "Record", "record_digest", "write_record", "read_record",
           "code_commit", "write_findings", "rewrite_findings", "CSV_NOTE", "write_table",
           "read_table", "write_curves_file", "write_curves"]

# The tolerances and their sources are the Section 5.1 reproduction's own.
TOLERANCES = {k: getattr(synthetic.FULL, k) for k in
              ("sen_tolerance", "drift_tolerance", "assumption1_ratio", "ode_tolerance")}
TOLERANCE_SOURCES = {"sen_tolerance": synthetic.SOURCES["corollary1"],
                     "drift_tolerance": synthetic.SOURCES["drift"],
                     "assumption1_ratio": synthetic.SOURCES["assumption1"],
                     "ode_tolerance": synthetic.SOURCES["ode"]}
SEN_START_FRACTION = synthetic.FULL.sen_start_fraction
LEARNED_ACC = 0.995   # the reproduction's test-accuracy row: ≥ 99.5 %

# The paper's text point (lu2021-text-*: m = 20, M = 5000, J = 4 topics of 2 words, d = 15,
# n = 800 training and 200 test sentences, softmax, a fixed unit query). The flow time is the
# paper's too (lr 0.1 × 5000 epochs = 500). At n = 200 or τ = 150, the base of an earlier atlas,
# the theory already failed at the paper's σ and lr (Assumption 1's and Theorem 1's bounds
# broken by the finite-sample noise of a non-topic word seen in ~1 sentence), which the paper's
# own point does not: the base must be where the reproduction holds, so that the atlas maps
# where it stops holding.
BASE = {"n_nontopic": 20, "vocab_size": 5000, "n_topics": 4, "words_per_topic": 2,
        "embed_dim": 15, "n_train": 800, "n_test": 200, "normaliser": "softmax",
        "train_query": False}
DISCRETE = tuple(BASE)     # the discrete axes (classifier besides)
# Full grid: 60 fast-path buckets (a trainable query included) × 16 σ × 12 lr and 6 autodiff
# buckets (sparsemax, 1.5-entmax) × 4 σ × 3 lr = 11,592 configurations. Each bucket compiles its
# own programs (benchmarks/atlas.py counts them), so the grid has few buckets with many vmapped
# points each; autodiff GD costs far more per point, so its buckets take every
# `autodiff_thin`-th σ and lr.
FULL = {
    # lr = τ/n from 0.25 up, not the paper's 0.1: the runs of lr 0.1 would take 5000 steps,
    # 2.5× these 2000 (docs/atlas.md compares the two lr).
    "tau": 500.0, "steps": 2000, "record_every": 25,
    "run_lengths": [2000, 1600, 1300, 1000, 800, 650, 500, 400, 300, 250, 200, 150],
    "sigma": [float(f"{s:.3g}") for s in np.logspace(-4, 0, 16)],
    "seeds": 4, "classifiers": ["fc", "tc", "tl"], "base": dict(BASE),
    "axes": {"n_nontopic": [2, 5, 20, 50, 100], "vocab_size": [300, 1000, 5000],
             "n_topics": [4, 8], "words_per_topic": [1, 2], "embed_dim": [15, 30],
             "n_train": [200, 800], "normaliser": ["softmax", "sparsemax", "entmax15"],
             "train_query": [False, True]},
    "crosses": [["n_nontopic", "vocab_size"]],
    "precision": "float32",
    "tc_only": [], "autodiff_thin": 4,
    # The reduced ODE's rtol: ode_rel_dev is judged at 2%, so 1e-4 (a hundredth of the
    # tolerance) suffices, and it costs far fewer solver steps than the preset's 1e-6.
    "ode_rtol": 1e-4,
    # Classifiers whose buckets solve the reduced ODE. TL's is left out by default: its ReLU
    # kinks cut the solver's steps short, so even solved one point after another (each with
    # its own steps) it costs a TL bucket about as much again as its GD (docs/atlas.md); add
    # "tl" to measure it.
    "ode_classifiers": ["fc", "tc"],
    # Classifiers (among ode_classifiers) whose buckets also solve the extended reduced ODE
    # (docs/extended_reduced_dynamics.md), for the rows' ext_rel_dev: about the reduced ODE's
    # cost again per bucket, so off by default.
    "extended_classifiers": [],
    # A finished bucket's checkpoints (runs/bucket-NNNN/checkpoints: every run's final
    # parameters, hundreds of MB a bucket at the paper's M = 5000) are deleted once its record
    # is written, since --resume reads the bucket from the record; true keeps them.
    "keep_checkpoints": False,
}
QUICK = {**FULL, "steps": 2000, "record_every": 25, "run_lengths": [2000, 1000, 500, 250],
         "sigma": [float(f"{s:.3g}") for s in np.logspace(-4, 0, 10)],
         "axes": {"n_nontopic": [5, 20, 50], "vocab_size": [1000, 5000],
                  "normaliser": ["softmax", "sparsemax"], "train_query": [False, True]},
         "crosses": [], "tc_only": ["normaliser", "train_query"], "autodiff_thin": 2,
         "ode_rtol": 1e-4}


# DIR/atlas-seconds.json: bucket -> wall seconds of each process that computed (part of) it, so
# that a resumed atlas reports the computing time of every bucket, not the time to read it back.
TIMES = "atlas-seconds.json"

# DIR/buckets/bucket-NNNN.csv + .json + -curves.npz: each bucket's rows, what produced them and
# its curves, written when the bucket finishes. `--resume` reads a finished bucket from these
# and not from its checkpoints (runs/, ~40 MB a chunk of final parameters), so a bucket outlives
# its runs/ folder: the .csv and .json are small enough to keep (docs/atlas.md, "Files").
RECORDS = "buckets"


class Bucket(NamedTuple):
  """One compiled program's discrete settings: ``classifier`` and every key of :data:`BASE`."""
  index: int
  values: dict


class AtlasResult(NamedTuple):
  """What :func:`run_atlas` computed.

  Attributes:
    rows: one dict per configuration × seed (the columns of atlas.csv).
    curves: name -> ``[row, time]`` array (curves.npz), NaN after a row's last time.
    findings: the fits, shares of variance and phase diagrams (atlas.json's ``findings``).
    seconds: ``total``: this process's wall-clock seconds; per bucket, its computing
      seconds summed over the processes that computed it (:data:`TIMES`; a resumed atlas
      reads finished buckets back in far less; NaN where unknown, see :func:`_record_time`);
      ``computing``: their sum (NaN if any is unknown).
    failures: bucket -> ODE stage -> the exception that stage raised (its rows have no
      ``ode_rel_dev``); empty when every stage finished.
  """
  rows: list
  curves: dict
  findings: dict
  seconds: dict
  failures: dict = {}


def settings(quick: bool = False, items: Sequence[str] = ()) -> dict:
  """The atlas's settings (:data:`FULL` or :data:`QUICK`) with ``--set KEY=VALUE`` items.

  Raises:
    ConfigError: an unknown key or a bad value, in one line.
  """
  base = json.loads(json.dumps(QUICK if quick else FULL))
  s = overrides.apply(base, items)
  _check(s)
  return s


def _check(s: dict) -> None:
  def bad(key, value, allowed):
    raise ConfigError(f"atlas setting {key} = {value!r} is not allowed: {allowed}.")
  for key in s:
    if key not in FULL:
      bad(key, s[key], f"the keys are {', '.join(FULL)}")
  for key in s["base"]:
    if key not in BASE:
      bad(f"base.{key}", s["base"][key], f"the keys are {', '.join(BASE)}")
  for key, values in s["axes"].items():
    if key not in BASE:
      bad(f"axes.{key}", values, f"axes are {', '.join(BASE)}")
    if not isinstance(values, list) or not values:
      bad(f"axes.{key}", values, "a non-empty list")
  for pair in s["crosses"]:
    if not (isinstance(pair, list) and len(pair) == 2 and all(p in s["axes"] for p in pair)):
      bad("crosses", s["crosses"], "a list of [axis, axis] pairs of axes named in axes")
  if not (isinstance(s["tau"], (int, float)) and not isinstance(s["tau"], bool) and s["tau"] > 0):
    bad("tau", s["tau"], "a number > 0 (the flow time lr·steps every run is read at)")
  for key in ("steps", "record_every", "seeds"):
    if not (isinstance(s[key], int) and not isinstance(s[key], bool) and s[key] >= 1):
      bad(key, s[key], "a positive integer")
  lengths = s["run_lengths"]
  if not (isinstance(lengths, list) and lengths and all(
      isinstance(n, int) and 0 < n <= s["steps"] and n % s["record_every"] == 0 for n in lengths)
          and len(set(lengths)) == len(lengths)):
    bad("run_lengths", lengths, f"distinct multiples of record_every = {s['record_every']} "
        f"up to steps = {s['steps']} (lr = tau / n)")
  sig = s["sigma"]
  if not (isinstance(sig, list) and sig and all(
      isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in sig)):
    bad("sigma", sig, "a non-empty list of embedding standard deviations > 0")
  if not (isinstance(s["classifiers"], list) and s["classifiers"] and
          set(s["classifiers"]) <= {"fc", "tc", "tl"}):
    bad("classifiers", s["classifiers"], "a non-empty list drawn from fc, tc, tl")
  if not (isinstance(s["tc_only"], list) and all(a in BASE for a in s["tc_only"])):
    bad("tc_only", s["tc_only"], "a list of axes varied for Attn-TC only")
  if not (isinstance(s["ode_rtol"], float) and 0 < s["ode_rtol"] < 1):
    bad("ode_rtol", s["ode_rtol"], "a number in (0, 1): the reduced ODE's relative tolerance")
  if not (isinstance(s["ode_classifiers"], list) and
          set(s["ode_classifiers"]) <= {"fc", "tc", "tl"}):
    bad("ode_classifiers", s["ode_classifiers"], "a list drawn from fc, tc, tl")
  if not (isinstance(s["extended_classifiers"], list) and
          set(s["extended_classifiers"]) <= set(s["ode_classifiers"])):
    bad("extended_classifiers", s["extended_classifiers"], "a list drawn from ode_classifiers")
  if not (isinstance(s["autodiff_thin"], int) and s["autodiff_thin"] >= 1):
    bad("autodiff_thin", s["autodiff_thin"], "a positive integer")
  if s["precision"] not in ("float32", "float64"):
    bad("precision", s["precision"], "float32 or float64")
  if not isinstance(s["keep_checkpoints"], bool):
    bad("keep_checkpoints", s["keep_checkpoints"], "true or false")


def buckets(s: dict) -> list:
  """The discrete settings, in a fixed order: per classifier, the base, each axis alone, then
  each cross (duplicates dropped)."""
  out, seen = [], set()
  for classifier in s["classifiers"]:
    variants = [{}]
    for axis, values in s["axes"].items():
      if axis in s["tc_only"] and classifier != "tc":
        continue
      variants += [{axis: v} for v in values]
    for a, b in s["crosses"]:
      variants += [{a: va, b: vb} for va, vb in itertools.product(s["axes"][a], s["axes"][b])]
    for change in variants:
      values = {"classifier": classifier, **s["base"], **change}
      key = json.dumps(values, sort_keys=True)
      if key not in seen:
        seen.add(key)
        out.append(Bucket(len(out), values))
  return out


def fast(bucket: Bucket) -> bool:
  """Whether the bucket's GD runs on the exact fast path (softmax; the presets' keys start at
  zero, so a trained query is on it too: :func:`dynamics.fast_path_applies`), rather than by
  autodiff."""
  return bucket.values["normaliser"] == "softmax"


def solves_ode(s: dict, bucket: Bucket) -> bool:
  """Whether the bucket solves Lemma 2's reduced ODE beside GD: it is on the fast path, its
  query is fixed (Lemma 2's) and its classifier is in ``ode_classifiers``."""
  return (fast(bucket) and not bucket.values["train_query"]
          and bucket.values["classifier"] in s["ode_classifiers"])


def continuous(s: dict, bucket: Bucket = None) -> tuple:
  """``(sigmas, run_lengths)`` of a bucket: every value, or every ``autodiff_thin``-th for a
  bucket off the fast path."""
  step = 1 if bucket is None or fast(bucket) else s["autodiff_thin"]
  return list(s["sigma"][::step]), list(s["run_lengths"][::step])


def learning_rates(s: dict, bucket: Bucket = None) -> list:
  """``tau / n`` for each run length ``n`` of the bucket."""
  return [s["tau"] / n for n in continuous(s, bucket)[1]]


def n_configurations(s: dict, bucket: Bucket) -> int:
  """σ values × learning rates of the bucket."""
  sigmas, lengths = continuous(s, bucket)
  return len(sigmas) * len(lengths)


# The progress bar's cost model (bucket_cost), in seconds on a 2-core CPU: per multiply-add
# of the fast path's work (a gathered float counts GATHER_COST of them, as in
# dynamics.fast_lu's own choice of gather), per run-step and token of the autodiff path, and a
# bucket's fixed part (compiles; the reduced ODE where it is solved). "multiply_add" is the
# least-squares slope, with the fixed part held, over the full atlas's first nine Attn-FC
# buckets with whole times (2026-11-26, `python -m benchmarks.atlas --cost-check DIR`); the
# autodiff cost is the sampled sparsemax TC bucket's (245 s) of benchmarks/atlas.py. Only the
# ratios between buckets matter: the ETA scales them by the rate measured as the atlas runs.
COST = {"multiply_add": 1.42e-10, "autodiff_token_step": 2.9e-7, "compile": 14.0,
        "reduced_ode": 25.0}


class FastPathWork(NamedTuple):
  """A fast-path bucket's GD work (:mod:`dynamics.fast_lu`).

  Attributes:
    run_steps: σ × seeds × Σ run lengths.
    gathered: floats gathered per run-step: sentences × (m + 1) tokens × channels
      (``2 (J + 1)`` for FC/TC, ``(d + 1) + (hidden + 1)`` for TL).
    products: multiply-adds per run-step of the three ``V_a × d × K`` products over the
      words seen in training (``V_a ≈ M (1 − e^{−n m / M})``; ``K = J`` for FC/TC, the
      hidden width for TL).
  """
  run_steps: int
  gathered: float
  products: float


def fast_path_work(s: dict, bucket: Bucket) -> FastPathWork:
  """:class:`FastPathWork` of a bucket on the fast path (:func:`fast`)."""
  v = bucket.values
  sigmas, lengths = continuous(s, bucket)
  tokens = v["n_train"] * (v["n_nontopic"] + 1)
  d, vocab = v["embed_dim"], v["vocab_size"]
  seen = vocab * -math.expm1(-v["n_train"] * v["n_nontopic"] / vocab) \
      + v["n_topics"] * v["words_per_topic"]
  if v["classifier"] == "tl":
    k = presets.preset("lu2021-text-tl")["model"]["hidden_dim"]
    channels = (d + 1) + (k + 1)
  else:
    k = v["n_topics"]
    channels = 2 * (k + 1)
  return FastPathWork(len(sigmas) * s["seeds"] * sum(lengths), tokens * channels,
                      3 * seen * d * k)


def bucket_cost(s: dict, bucket: Bucket) -> float:
  """A bucket's computing cost in estimated seconds (:data:`COST`), for the ETA: the sum of
  :func:`stage_costs`."""
  return sum(stage_costs(s, bucket).values())


def stage_costs(s: dict, bucket: Bucket) -> dict:
  """A bucket's estimated seconds (:data:`COST`) per stage of its run, in the order they run:
  ``"gd"`` (with the compiles) and, where it is solved, ``"reduced"``.

  On the fast path, GD's work is :func:`fast_path_work`: each gathered float costs
  ``GATHER_COST`` multiply-adds, plus the products over the vocabulary. Off the fast path, a
  measured cost per run-step and token.
  """
  from attndyn.dynamics.fast_lu.step import GATHER_COST
  v = bucket.values
  if fast(bucket):
    w = fast_path_work(s, bucket)
    gd = COST["multiply_add"] * w.run_steps * (GATHER_COST * w.gathered + w.products)
  else:
    sigmas, lengths = continuous(s, bucket)
    run_steps = len(sigmas) * s["seeds"] * sum(lengths)
    gd = COST["autodiff_token_step"] * run_steps * v["n_train"] * (v["n_nontopic"] + 1)
  costs = {"gd": gd + COST["compile"]}
  kind = run_config(s, bucket)["ode"]["kind"]
  if kind in ("reduced", "reduced_extended"):
    costs["reduced"] = COST["reduced_ode"]
  if kind == "reduced_extended":
    costs["extended"] = COST["reduced_ode"]
  return costs


def _bucket_progress(s: dict, bucket: Bucket, report: Callable[[float, bool], None]):
  """The ``on_progress`` of a bucket's run (:func:`attndyn.pipeline.run`) that calls
  ``report(done, computed)``: ``done`` of the bucket's configurations are finished, each
  stage counting for its share of :func:`stage_costs`; ``computed`` is False where what was
  added since the last report was read from checkpoints (a resumed bucket)."""
  costs = stage_costs(s, bucket)
  scale = n_configurations(s, bucket) / sum(costs.values())
  before = dict(zip(costs, np.cumsum([0.0] + list(costs.values()))))

  def on_progress(stage, done, total, read_back):
    if stage not in costs:
      return
    share = before[stage] + costs[stage] * done / max(total, 1)
    report(scale * share, done > read_back)

  return on_progress


def run_config(s: dict, bucket: Bucket) -> dict:
  """The bucket's ``attndyn run`` config (TOML shape): the ``lu2021-text-<classifier>`` preset
  with the bucket's sizes, the σ × lr grid and the seeds."""
  v = bucket.values
  raw = presets.preset(f"lu2021-text-{v['classifier']}")
  raw["precision"] = s["precision"]
  raw["task"].update({k: v[k] for k in ("n_topics", "words_per_topic", "vocab_size",
                                        "n_nontopic", "n_train", "n_test")})
  raw["model"].update({"embed_dim": v["embed_dim"], "key_dim": v["embed_dim"],
                       "normaliser": v["normaliser"], "train_query": v["train_query"],
                       "embed_std": s["sigma"][0]})
  sigmas, _ = continuous(s, bucket)
  lrs = learning_rates(s, bucket)
  # Every run stops at flow time τ (train.flow_time), and a chunk holds one lr's points (lr
  # is the grid's outer axis), so each chunk computes only its own run length, with the
  # one compiled program that serves every chunk.
  raw["train"].update({"lr": lrs[0], "steps": s["steps"], "record_every": s["record_every"],
                       "flow_time": s["tau"]})
  raw["sweep"] = {"seeds": s["seeds"], "data_seeds": [0], "chunk_size": len(sigmas) * s["seeds"],
                  "grid": {"train.lr": lrs, "model.embed_std": sigmas}}
  # Lemma 2's reduced ODE is derived for softmax attention and a fixed query.
  ode = solves_ode(s, bucket)
  extended = ode and v["classifier"] in s["extended_classifiers"]
  raw["ode"]["kind"] = "reduced_extended" if extended else "reduced" if ode else "none"
  raw["ode"]["rtol"] = s["ode_rtol"]
  return raw


def _take(traj, idx):
  import jax
  return jax.tree.map(lambda x: np.asarray(x)[idx], traj)


def bucket_rows(s: dict, bucket: Bucket, result, start_id: int) -> tuple:
  """``(rows, curves)`` of one bucket's :class:`attndyn.pipeline.RunResult`."""
  from attndyn.analysis import atlas as measures
  lrs = learning_rates(s, bucket)
  points = result.points
  rows, curves = [], []
  lr_of = np.array([p["train.lr"] for p in points])
  for lr, n in zip(lrs, continuous(s, bucket)[1]):
    idx = np.nonzero(np.isclose(lr_of, lr, rtol=1e-6))[0]
    k = n // s["record_every"] + 1
    gd = measures.until(_take(result.gd, idx), k, n)
    odes = {kind: measures.until(_take(o, idx), k, n) for kind, o in result.odes.items()}
    sub = [points[i] for i in idx]
    found = measures.run_rows(sub, gd, odes, result.m, lr=np.full(len(idx), lr),
                              start_fraction=SEN_START_FRACTION, learned_acc=LEARNED_ACC)
    curve = measures.run_curves(gd, odes, result.m, lr=np.full(len(idx), lr))
    for j, (point, row) in enumerate(zip(sub, found)):
      rows.append({"bucket": bucket.index, **bucket.values, "sigma": point["model.embed_std"],
                   "lr": lr, "seed": point["seed"], "steps": n, "tau": lr * n, **row})
      curves.append({name: c[j] for name, c in curve.items()})
  ordered = sorted(range(len(rows)), key=lambda i: (rows[i]["sigma"], rows[i]["lr"],
                                                   rows[i]["seed"]))
  rows = [rows[i] for i in ordered]
  curves = [curves[i] for i in ordered]
  configs = {}
  for row in rows:
    row["config"] = configs.setdefault((row["sigma"], row["lr"]), start_id + len(configs))
  rows = [{"config": r.pop("config"), **r} for r in rows]
  return rows, curves


def _ctx(out: Path, quick: bool, resume: bool, command):
  from attndyn.reproduce import runner
  return runner.Context(out=out, quick=quick, verbose=False, resume=resume,
                        command=command, experiment="atlas")


def run_atlas(out, *, quick: bool = False, items: Sequence[str] = (), resume: bool = False,
              progress: bool = True, command=None, findings: bool = True,
              only: Sequence[int] = None, workers: int = 1) -> AtlasResult:
  """Run the atlas into ``out`` (the Python form of ``attndyn atlas``).

  Args:
    out: the output directory (its ``runs/`` hold each bucket's checkpoints).
    quick: the quick grid (:data:`QUICK`) instead of the full one.
    items: ``--set KEY=VALUE`` changes of the settings (e.g. ``tau=100``,
      ``classifiers=["tc"]``, ``axes.n_nontopic=[5,50]``).
    resume: continue from the buckets' checkpoints (a killed atlas loses at most one bucket).
    progress: a progress bar with ETA on stderr.
    command: the command line, recorded in each bucket's run_info.json.
    findings: write atlas.md and the phase diagrams (``False``: the table and curves only).
    only: run only the buckets of these indices (:func:`buckets`; benchmarks sample with it).
    workers: buckets computed side by side, each in a process of its own
      (:mod:`attndyn.processes`; with one per core, each held to its core), the costliest
      first; this process then reads their records. 1: every bucket in this process.
      The rows are the same either way; the reduced ODE's at float32 rounding, since one
      thread and two sum its solver's reductions in different orders.

  Returns:
    An :class:`AtlasResult`.

  Raises:
    ConfigError: bad settings, or a bucket whose config is invalid.
  """
  from attndyn.analysis import atlas as measures
  from attndyn.progress import ProgressBar
  from attndyn.reproduce import engine, runner
  s = settings(quick, items)
  if not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1):
    raise ConfigError(f"workers = {workers!r} is not allowed: a positive integer (processes "
                      f"computing buckets side by side).")
  code_commit()   # the code this process runs, before anyone edits the checkout
  out = Path(out)
  if resume:
    check_resumed_settings(out, s)
  out.mkdir(parents=True, exist_ok=True)
  ctx = _ctx(out, quick, resume, command)
  todo = buckets(s)
  if only is not None:
    todo = [b for b in todo if b.index in set(only)]
  counts = [n_configurations(s, b) for b in todo]
  for b in todo:   # every config valid before anything runs
    engine.validate(run_config(s, b), f"atlas bucket {b.index} ({_describe(b)})")
  names = [f"bucket-{b.index:04d}" for b in todo]
  start_ids = [sum(counts[:i]) for i in range(len(todo))]
  costs = [bucket_cost(s, b) for b in todo]
  # The buckets workers compute: those without a record of these settings, costliest first.
  pending = [i for i in range(len(todo))
             if not (resume and _recorded(out, names[i], record_digest(s, todo[i])))]
  parallel = workers > 1 and len(pending) > 1
  order = (sorted(range(len(todo)), key=lambda i: (i in pending, -costs[i] if i in pending else i))
           if parallel else list(range(len(todo))))
  # the ETA weighs each bucket's configurations by its estimated cost (bucket_cost), in the
  # order they are computed
  ends = np.cumsum([0] + [counts[i] for i in order])
  cumulative = np.cumsum([0.0] + [costs[i] for i in order])
  bar = ProgressBar("atlas", sum(counts), steps_per_point=None, enabled=progress,
                    unit="configurations",
                    cost=lambda done: float(np.interp(done, ends, cumulative)))
  rows, curves, seconds, errors, failures, no_curves, commits = [], [], {}, {}, {}, [], {}
  partial_times = []   # buckets whose time misses chunks of an older attndyn (no seconds)
  if resume:
    spent = _read_times(out)
  else:   # a --force run over an older atlas: its times are not this one's
    spent = {}
    from attndyn import outputs
    if outputs.is_writer():
      (out / TIMES).unlink(missing_ok=True)
  start = time.perf_counter()
  try:
    if parallel:
      from attndyn import processes
      bar.read_back(sum(counts[i] for i in range(len(todo)) if i not in pending))

      partial = {}    # the running buckets' finished configurations (their reports)
      whole = [bar.done]   # the configurations of the finished buckets

      def show(computed: bool):
        (bar.update if computed else bar.read_back)(
            min(bar.total, whole[0] + sum(int(v) for v in partial.values())))

      def reported(job, value):
        partial[job["position"]] = value[0]
        show(value[1])

      def finished(job, result):
        i = job["position"]
        if result["errors"]:
          errors[names[i]] = result["errors"]
          failures[names[i]] = {k: processes.rebuild(v) for k, v in result["failures"].items()}
          if progress:
            _say_failed(todo[i], result["errors"])
        partial.pop(i, None)
        whole[0] += counts[i]
        show(True)

      processes.run_jobs(
          _bucket_job, [{"out": str(out), "quick": quick, "items": list(items),
                         "resume": resume, "command": command, "index": todo[i].index,
                         "start_id": start_ids[i], "position": i, "progress": progress}
                        for i in order if i in pending],
          workers=workers, setup=(_worker_setup, {"jax": processes.jax_settings(),
                                                  "revision": runner.revision(),
                                                  "cache": compile_cache.enabled_here()}),
          on_result=finished, on_progress=reported)
    for i, b in enumerate(todo):
      name, start_id = names[i], start_ids[i]
      record = (read_record(out, name, record_digest(s, b), start_id=start_id, warn=progress)
                if resume or parallel else None)
      if record is not None:   # finished in an earlier process or a worker: rows, curves, times
        r, c, spent[name], commits[name] = record.rows, record.curves, record.seconds, \
            record.commit
        rows += r
        curves += c if c else [{} for _ in r]
        if not c:
          no_curves.append(name)
        if record.partial_time:
          partial_times.append(name)
        seconds[name] = sum(spent[name])
        if not parallel:
          bar.read_back(sum(counts[:i + 1]))
        continue
      base = sum(counts[:i])
      done = _compute_bucket(
          s, b, ctx, start_id, spent, progress,
          on_progress=(lambda n, computed, base=base: (bar.update if computed else bar.read_back)(
              base + int(n))) if progress and not parallel else None)
      rows += done.rows
      curves += done.curves
      if done.errors:
        errors[name], failures[name] = done.errors, done.failures
      seconds[name], commits[name] = done.seconds, done.commit
      if not done.whole:
        partial_times.append(name)
      if parallel:   # a worker's record that could not be read back: computed here
        bar.update(min(bar.total, bar.done + counts[i]))
      else:
        (bar.update if done.computed else bar.read_back)(sum(counts[:i + 1]))
  finally:
    bar.close()
  seconds["total"] = time.perf_counter() - start
  seconds["computing"] = sum(seconds[name] for name in names)
  rows = measures.with_flags(rows, TOLERANCES)
  stacked = _stack(curves)
  write_table(out / "atlas.csv", rows)
  write_curves(out, stacked)
  found = write_findings(out, rows, s, len(todo), seconds["computing"]) if findings else {}
  from attndyn.analysis.summary import json_ready
  atomic.write_json(out / "atlas.json", json_ready({"settings": s, "n_buckets": len(todo),
                                         "n_configurations": sum(counts),
                                         "n_rows": len(rows), "seconds": seconds,
                                         "workers": workers if parallel else 1,
                                         "errors": errors,
                                         "buckets_without_curves": no_curves,
                                         "commits": _by_commit(commits),
                                         "buckets_with_partial_times": partial_times,
                                         "tolerances": TOLERANCES, "findings": found}))
  return AtlasResult(rows, stacked, found, seconds, failures)


class _Computed(NamedTuple):
  """What :func:`_compute_bucket` computed and recorded."""
  rows: list
  curves: list
  seconds: float       # its computing seconds over every process that computed part of it
  computed: bool       # this process computed a chunk (else: read whole from checkpoints)
  whole: bool          # ``seconds`` cover every chunk
  commit: object
  errors: dict         # ODE stage -> message, where a stage failed
  failures: dict       # ODE stage -> its exception


def _compute_bucket(s: dict, b: Bucket, ctx, start_id: int, spent: dict, progress: bool,
                    on_progress: Callable[[float, bool], None] = None) -> _Computed:
  """Run one bucket (its ``attndyn run``, from its checkpoints where ``ctx.resume``), write
  its record and its time, and drop its checkpoints unless ``keep_checkpoints``.
  ``on_progress(done, computed)``: after each chunk (:func:`_bucket_progress`)."""
  from attndyn.reproduce import engine
  t0 = time.perf_counter()
  out, name = Path(ctx.out), f"bucket-{b.index:04d}"
  before = _run_info(out, name) if ctx.resume else {}
  result = engine.run(ctx, name, run_config(s, b), figures=False,
                      on_progress=None if on_progress is None
                      else _bucket_progress(s, b, on_progress))
  if result.errors and progress:   # a failed ODE stage: its rows have no ode_rel_dev; say so
    _say_failed(b, result.errors)
  r, c = bucket_rows(s, b, result, start_id=start_id)
  total, computed, whole = _record_time(out, spent, name, time.perf_counter() - t0, before)
  commit = code_commit() if computed else None   # None: read from checkpoints
  write_record(out, name, record_digest(s, b), r, c, start_id=start_id, seconds=spent[name],
               commit=commit, partial_time=not whole, settings=s)
  if not s["keep_checkpoints"]:
    _drop_checkpoints(ctx, name)
  return _Computed(r, c, total, computed, whole, commit, dict(result.errors),
                   dict(result.exceptions))


def _say_failed(b: Bucket, errs: dict) -> None:
  print(f"atlas: bucket {b.index} ({_describe(b)}): " + "; ".join(
      f"the {k} stage failed: {v}" for k, v in errs.items()), file=sys.stderr)


def _worker_setup(arg: dict) -> None:
  """A bucket worker's setup: this process's JAX settings and its code's commit (the records
  name the code the command started with, not the checkout as a worker finds it), and the
  modules a bucket runs imported now, as :func:`run_atlas` imports them when it starts, not
  when the first bucket reaches them minutes later (by when the checkout may hold other code)."""
  import importlib

  from attndyn import processes
  processes.configure_jax(arg["jax"])   # before anything the imports may compute
  if arg.get("cache"):   # the parent's compile cache heals here too, with one warning
    from attndyn import compile_cache
    compile_cache.enable_in_worker()
  from attndyn.reproduce import runner
  runner.inherit_revision(arg["revision"])
  for module in ("attndyn.reproduce.engine", "attndyn.analysis.atlas"):
    importlib.import_module(module)


def _bucket_job(job: dict) -> dict:
  """One bucket in a worker process (:func:`run_atlas` with ``workers``): computed and
  recorded as :func:`run_atlas` would; returns its failed ODE stages (the rows are in its
  record)."""
  from attndyn import processes
  s = settings(job["quick"], job["items"])
  b = buckets(s)[job["index"]]
  ctx = _ctx(Path(job["out"]), job["quick"], job["resume"], job["command"])
  spent = _read_times(ctx.out) if job["resume"] else {}
  done = _compute_bucket(s, b, ctx, job["start_id"], spent, progress=False,
                         on_progress=(lambda n, computed: processes.report([n, computed]))
                         if job["progress"] else None)
  return {"errors": done.errors,
          "failures": {k: processes.describe(v) for k, v in done.failures.items()}}


# Settings that change what is kept, not the rows: --resume may change them.
_RESUMABLE = ("keep_checkpoints",)


def check_resumed_settings(out: Path, s: dict) -> None:
  """``--resume`` continues the atlas ``out`` was started with, as ``attndyn run --resume``
  does: settings that differ from the ones its atlas.json or bucket records name are refused,
  each named, before anything is computed (a finished atlas is never silently recomputed and
  replaced). Records of an older attndyn name no settings and are not compared.

  Raises:
    ConfigError: naming each setting that differs, its value there and now.
  """
  def comparable(doc):
    return {k: v for k, v in doc.items() if k not in _RESUMABLE} if isinstance(doc, dict) \
        else None
  sources = [out / "atlas.json"] + sorted((out / RECORDS).glob("bucket-*.json"))
  now = comparable(json.loads(json.dumps(s)))
  for path in sources:
    try:
      before = comparable(json.loads(path.read_text(encoding="utf-8")).get("settings"))
    except (OSError, ValueError, AttributeError):
      continue          # unreadable: read_record names it and redoes its bucket
    if before is None or before == now:
      continue
    changed = [f"{k} = {json.dumps(before.get(k))} there, {json.dumps(now.get(k))} now"
               for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
    raise ConfigError(
        f"--resume: the atlas settings differ from the ones {str(out)!r} was started with "
        f"({str(path)!r}): {'; '.join(changed)}. Resume with the same --quick and --set "
        f"(the finished atlas is kept), or start afresh in another --out (or this one with "
        f"--force, without --resume).")


def _recorded(out: Path, name: str, digest: str) -> bool:
  """Whether the bucket's record names these settings (:func:`read_record` checks the rest)."""
  try:
    return json.loads(_record_paths(out, name)[1].read_text(encoding="utf-8")).get(
        "digest") == digest
  except (OSError, ValueError, UnicodeDecodeError, AttributeError):
    return False


class Record(NamedTuple):
  """A finished bucket as :func:`write_record` kept it.

  Attributes:
    rows: its rows (atlas.csv's columns but the flags).
    curves: one dict of curves per row; ``[]`` when the curves file is missing.
    seconds: the computing seconds of each process that computed part of it.
    commit: :func:`code_commit` of the process that computed it (``None``: unknown).
    partial_time: ``seconds`` miss chunks whose files recorded no time (a lower bound).
  """
  rows: list
  curves: list
  seconds: list
  commit: object
  partial_time: bool


def record_digest(s: dict, bucket: Bucket) -> str:
  """sha256 of what a bucket's rows depend on: its ``attndyn run`` config (grid, seeds, flow
  time, precision), its run lengths, the recording interval and the row measures' constants."""
  run = run_config(s, bucket)
  if run["ode"]["kind"] == "none":
    # No ODE is solved, so the solver's settings (the preset's) do not reach the rows.
    run["ode"] = {"kind": "none"}
  key = {"run": run, "run_lengths": continuous(s, bucket)[1],
         "tau": s["tau"], "record_every": s["record_every"],
         "start_fraction": SEN_START_FRACTION, "learned_acc": LEARNED_ACC}
  return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _drop_checkpoints(ctx, name: str) -> None:
  """Delete a finished bucket's checkpoints, once its record is written (``keep_checkpoints``):
  ``--resume`` reads the bucket from the record; its run_info.json, summary.json and
  trajectories.npz stay."""
  from attndyn import checkpoint, outputs
  from attndyn.reproduce import engine
  if outputs.is_writer():
    shutil.rmtree(engine.run_dir(ctx, name) / checkpoint.DIRNAME, ignore_errors=True)


def _record_paths(out: Path, name: str) -> tuple:
  folder = Path(out) / RECORDS
  return folder / f"{name}.csv", folder / f"{name}.json", folder / f"{name}-curves.npz"


def write_record(out: Path, name: str, digest: str, rows: list, curves: list, *,
                 start_id: int, seconds: list, commit=None, partial_time: bool = False,
                 settings: dict = None) -> None:
  """The bucket's record in ``DIR/buckets`` (see :data:`RECORDS`); the .json, which says the
  record is whole, is written last, each file atomically. One process writes it.
  ``commit``: :func:`code_commit` of the process that computed the bucket (``None`` when
  it was read whole from checkpoints written by an earlier process); ``partial_time``: the
  seconds miss chunks whose files recorded none (see :func:`_record_time`); ``settings``: the
  atlas's, which :func:`check_resumed_settings` compares on ``--resume``."""
  from attndyn import outputs
  if not outputs.is_writer():
    return
  table, meta, curve_file = _record_paths(out, name)
  atomic.make_dirs(table.parent)
  write_table(table, rows)
  write_curves_file(curve_file, _stack(curves))
  env = outputs.environment()
  atomic.write_json(meta, {
      "bucket": name, "digest": digest, "rows": len(rows), "start_id": start_id,
      "seconds": [x if math.isfinite(x) else None for x in seconds],
      "partial_time": partial_time, "settings": settings,
      "attndyn": env["versions"].get("attndyn"), "commit": commit, "environment": env})


def read_record(out: Path, name: str, digest: str, *, start_id: int,
                warn: bool = True):
  """A bucket's :class:`Record` in ``DIR/buckets``, or ``None`` when it
  has none, it is damaged, or it was made with other settings (``digest``); then the bucket is
  redone (read from its checkpoints where they hold it) and its record rewritten. ``curves``
  is ``[]`` when the record's curves file is missing (the rows alone are kept in the
  repository); the config ids are renumbered from ``start_id``."""
  table, meta, curve_file = _record_paths(out, name)
  if not meta.is_file():
    return None
  def skip(why):
    if warn:
      print(f"atlas: {meta.parent / name}.*: {why}; redoing the bucket (from its checkpoints "
            f"where they hold it)", file=sys.stderr)
    return None
  try:
    doc = json.loads(meta.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
      raise ValueError("not a JSON object")
    rows = read_table(table)
  except (OSError, ValueError, UnicodeDecodeError, csv.Error) as err:
    return skip(f"the record is unreadable ({type(err).__name__}: {err})")
  if doc.get("digest") != digest:
    return skip("the record was made with other settings")
  if len(rows) != doc.get("rows") or not isinstance(doc.get("start_id"), int):
    return skip(f"the record holds {len(rows)} rows, its .json says {doc.get('rows')}")
  for row in rows:
    row["config"] += start_id - doc["start_id"]
  curves = []
  if curve_file.is_file():
    from attndyn.analysis import npz
    try:
      stacked = npz.read(curve_file)
    except ConfigError as err:
      return skip(str(err))
    if "tau" not in stacked or any(len(v) != len(rows) for v in stacked.values()):
      return skip("its curves file does not have a tau curve and one curve per row")
    curves = [{k: v[j][np.isfinite(stacked["tau"][j])] for k, v in stacked.items()}
              for j in range(len(rows))]
  seconds = [math.nan if x is None else float(x) for x in doc.get("seconds") or [math.nan]]
  return Record(rows, curves, seconds, doc.get("commit"), doc.get("partial_time") is True)


def _by_commit(commits: dict) -> dict:
  """commit -> the buckets it computed (``"unknown"``: outside a git checkout, or read whole
  from an earlier process's checkpoints)."""
  out = {}
  for name, commit in commits.items():
    out.setdefault(commit or "unknown", []).append(name)
  return out


def code_commit():
  """The git commit of the attndyn checkout this process imported, with ``+dirty`` when its
  tracked files differed from it (read once per process, by
  :func:`attndyn.reproduce.runner.revision`, which :func:`run_atlas` calls before any bucket);
  ``None`` outside a git checkout. Each bucket's record names it, so an atlas finished over
  several processes says which code computed which bucket."""
  from attndyn.reproduce import runner
  rev = runner.revision()
  return None if rev is None else rev["commit"] + ("+dirty" if rev["dirty"] else "")


def _read_times(out: Path) -> dict:
  """:data:`TIMES` of a resumed atlas: bucket -> seconds of each process that computed part of
  it. A missing or unreadable file is an empty record (it holds timings, nothing computed)."""
  try:
    doc = json.loads((out / TIMES).read_text())
    return {k: [math.nan if x is None else float(x) for x in v] for k, v in doc.items()}
  except (OSError, ValueError, TypeError, AttributeError):
    return {}


def _run_info(out: Path, name: str) -> dict:
  """The bucket's run_info.json (``{}`` if missing or unreadable)."""
  try:
    info = json.loads((out / "runs" / name / "run_info.json").read_text())
    return info if isinstance(info, dict) else {}
  except (OSError, ValueError):
    return {}


def _record_time(out: Path, spent: dict, name: str, seconds: float, before: dict) -> tuple:
  """``(seconds, computed, whole)``: the bucket's computing seconds across processes, whether
  this process computed any chunk of it (its run_info.json says so; then its ``seconds``
  are added to :data:`TIMES`), and whether those seconds cover every chunk.

  Chunks an earlier process computed and this one read back count with the seconds their
  files record (:meth:`attndyn.checkpoint.Checkpoints.write`). A chunk file without them (an
  older attndyn's) leaves its time out: ``whole`` is false, the time a lower bound.

  A bucket read back whole keeps the seconds of the processes that computed it: from
  :data:`TIMES`, else from its chunk files, else (an atlas older than both) the stage
  seconds of the run_info.json it had before this process, ``before``, if the process that
  wrote it computed the whole bucket (``resumed`` false: a resume rewrites run_info.json
  with its read-back time), else unknown (NaN).
  """
  chunks = _run_info(out, name).get("chunks") or {}
  computed = sum(chunks.get("computed", {}).values()) if chunks else 1
  loaded = {k: n for k, n in (chunks.get("loaded") or {}).items() if n}
  loaded_seconds = chunks.get("loaded_seconds") or {}
  known = [loaded_seconds.get(k) for k in loaded if loaded_seconds.get(k) is not None]
  whole = len(known) == len(loaded)
  if not computed and name not in spent:
    if loaded and whole:
      spent[name] = [float(sum(known))]
    else:
      by_one = before.get("seconds") and before.get("resumed") is False
      spent[name] = [float(sum(before["seconds"].values())) if by_one else math.nan]
      whole = True
  elif computed:
    spent.setdefault(name, []).extend([seconds] + ([float(sum(known))] if known else []))
  else:
    whole = True
  from attndyn import outputs
  if outputs.is_writer():    # one process of a multi-host atlas writes, as for the runs' files
    _store_time(out, name, spent[name])
  return sum(spent[name]), bool(computed), whole


def _store_time(out: Path, name: str, seconds: list) -> None:
  """Set the bucket's entry of :data:`TIMES`, keeping every other bucket's: read and
  rewritten under a lock on ``out`` itself, since workers (:func:`run_atlas`'s ``workers``)
  each record their own buckets into the one file."""
  import fcntl
  fd = os.open(out, os.O_RDONLY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    times = _read_times(out)
    times[name] = list(seconds)
    atomic.write_json(out / TIMES, {k: [x if math.isfinite(x) else None for x in v]
                                    for k, v in times.items()})
  finally:
    os.close(fd)


def write_findings(out: Path, rows: list, s: dict, n_buckets: int, seconds: float) -> dict:
  """atlas.md and the phase diagrams from the rows (:func:`analysis.atlas.findings`)."""
  from attndyn.analysis import atlas as measures
  found = measures.findings(rows, out, tolerances=TOLERANCES, sources=TOLERANCE_SOURCES,
                            base={"classifier": "tc", **s["base"]},
                            paper_point={"sigma": _nearest(s["sigma"], 1e-3),
                                         "lr": _nearest(learning_rates(s), 0.25)},
                            settings_text=_settings_text(s, n_buckets), seconds=seconds)
  atomic.write_text(Path(out) / "atlas.md", found.pop("markdown"))
  return found


def rewrite_findings(out) -> dict:
  """Redraw atlas.md and the phase diagrams of a finished atlas from its atlas.csv and
  atlas.json (nothing is rerun); atlas.json's findings are replaced."""
  from attndyn.analysis.summary import json_ready
  out = Path(out)
  doc = json.loads((out / "atlas.json").read_text())
  found = write_findings(out, read_table(out / "atlas.csv"), doc["settings"], doc["n_buckets"],
                         doc["seconds"].get("computing", doc["seconds"]["total"]))
  atomic.write_json(out / "atlas.json", json_ready({**doc, "findings": found}))
  return found


def _nearest(values, target):
  return min(values, key=lambda v: abs(math.log(v / target)))


def _describe(b: Bucket) -> str:
  return ", ".join(f"{k}={v}" for k, v in b.values.items())


def _settings_text(s: dict, n_buckets: int) -> str:
  lrs = learning_rates(s)
  n = sum(n_configurations(s, b) for b in buckets(s))
  return (f"{n_buckets} buckets of up to {len(s['sigma'])} σ × {len(lrs)} lr "
          f"(every {s['autodiff_thin']}-th σ and lr off the fast path), {n} configurations in "
          f"the grid, {s['seeds']} seeds each; "
          f"flow time τ = lr·steps = {s['tau']:g} for every lr ({min(lrs):.3g} … {max(lrs):.3g}), "
          f"σ (embedding std) {min(s['sigma']):g} … {max(s['sigma']):g}; "
          f"base: {json.dumps(s['base'])}; {s['precision']}")


def _stack(curves: list) -> dict:
  """``[row, time]`` arrays of the rows' curves, NaN after each row's end (and for a row
  whose curves were not kept, ``{}``)."""
  kept = [c for c in curves if c]
  if not kept:
    return {}
  length = max(len(c["tau"]) for c in kept)
  out = {}
  for name in kept[0]:
    arr = np.full((len(curves), length), np.nan, np.float32)
    for i, c in enumerate(curves):
      if c:
        arr[i, :len(c[name])] = c[name]
    out[name] = arr
  return out


CSV_NOTE = "pandas.read_csv(DIR/atlas.csv): one row per configuration × seed"


def write_table(path: Path, rows: list) -> None:
  """atlas.csv (NaN written as empty cells, ±inf as inf/-inf, booleans as true/false)."""
  buf = io.StringIO()
  if rows:
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
      writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else
                           str(v).lower() if isinstance(v, bool) else v) for k, v in r.items()})
  atomic.write_text(path, buf.getvalue())


def read_table(path) -> list:
  """atlas.csv back as a list of dicts of Python values (the inverse of :func:`write_table`).

  Raises:
    ValueError: a line without one cell per column (a file cut short).
  """
  def value(text):
    if text == "":
      return math.nan
    if text in ("true", "false"):
      return text == "true"
    for kind in (int, float):
      try:
        return kind(text)
      except ValueError:
        pass
    return text
  with open(path, newline="", encoding="utf-8") as f:
    reader = csv.DictReader(f)
    rows = []
    for r in reader:
      if None in r or None in r.values():   # a row cut short or with extra cells
        raise ValueError(f"{path}: line {reader.line_num} does not have one cell per column")
      rows.append({k: value(v) for k, v in r.items()})
    return rows


def write_curves_file(path: Path, curves: dict) -> None:
  """``[row, time]`` curves as an .npz, atomically."""
  from attndyn.analysis import npz
  atomic.write(path, lambda tmp: npz.write(tmp, curves))


def write_curves(out: Path, curves: dict) -> None:
  """curves.npz (``[row, time]`` float32, row = atlas.csv's row) and curves.json (axis names)."""
  write_curves_file(out / "curves.npz", curves)
  atomic.write_json(out / "curves.json", {
      "axes": {name: ["row", "time"] for name in curves},
      "row": "the row of atlas.csv (same order)",
      "time": "recorded index; tau holds the flow time lr·step of each; NaN after the row's end"})
