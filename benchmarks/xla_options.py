"""The XLA options and seed tile the code chooses, each timed against the alternative.

``python -m benchmarks.xla_options [--seeds 64] [--reps 3] [--steps 500] [--out FILE.json]
[--only dataset fast tile flow reduced]``

The programs whose compilation the code tunes, on Lu et al.'s text preset
(:mod:`benchmarks.workload`): the topic-dataset generator
(``tasks.TOPIC_COMPILER_OPTIONS``), the exact fast path
(``dynamics.fast_lu.COMPILER_OPTIONS`` and ``SEED_TILE``), the gradient flow with a linear
classifier (TC, ``dynamics.ode.LINEAR_COMPILER_OPTIONS``) and Lemma 2's
reduced ODE for a linear classifier (TC, ``LINEAR_COMPILER_OPTIONS``) and for
TL (``COMPILER_OPTIONS``). Each is lowered and compiled afresh with the code's
choice and with the alternative (XLA's defaults; for the tile, all seeds in one
tile), alternating, ``reps`` times; then each compiled program runs ``reps``
times, alternating. Printed: median compile and run seconds of both and the
ratios alternative / chosen (above 1: the choice is faster). The comments at
those constants say what each option does and why it was chosen; their
numbers are this script's output on the machine at hand, not constants.
"""
import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from benchmarks.workload import make_workload
from attndyn.dynamics import fast_lu, reduced_ode, xla_options


def _compile(fn, args, options: dict):
  """``(seconds, executable)``: ``fn(*args)`` compiled with ``options`` (those XLA knows).

  Lowered afresh after clearing JAX's caches: JAX keeps the executable of a lowering it has
  compiled with the same options, so a second compile of one lowering takes no time."""
  jax.clear_caches()
  lowered = jax.jit(fn).lower(*args)
  t0 = time.perf_counter()
  compiled = lowered.compile(xla_options.supported(options) or None)
  return time.perf_counter() - t0, compiled


def _run_s(compiled, args, reps: int) -> list:
  out = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    out.append(time.perf_counter() - t0)
  return out


def compare(name: str, fn, args, chosen: dict, alternative: dict, reps: int,
            what: str) -> dict:
  """Compile and run ``fn(*args)`` under both option sets, alternating; medians and ratios."""
  c_compile, c_exe = [], None
  a_compile, a_exe = [], None
  for _ in range(reps):              # alternate, so a busy moment hits both
    t, c_exe = _compile(fn, args, chosen)
    c_compile.append(t)
    t, a_exe = _compile(fn, args, alternative)
    a_compile.append(t)
  jax.block_until_ready(c_exe(*args))   # warm both once
  jax.block_until_ready(a_exe(*args))
  c_run, a_run = [], []
  for _ in range(reps):
    c_run += _run_s(c_exe, args, 1)
    a_run += _run_s(a_exe, args, 1)
  row = {"program": name, "chosen": what, "alternative": "XLA defaults" if not alternative
         else json.dumps(alternative), "chosen_options": chosen,
         "compile_s": statistics.median(c_compile), "alt_compile_s": statistics.median(a_compile),
         "run_s": statistics.median(c_run), "alt_run_s": statistics.median(a_run)}
  row["compile_ratio"] = row["alt_compile_s"] / row["compile_s"]
  row["run_ratio"] = row["alt_run_s"] / row["run_s"]
  return row


def seed_tile(w, steps: int, reps: int) -> dict:
  """The fast path with ``SEED_TILE`` seeds per tile against all seeds in one tile (run only)."""
  cfg = dynamics.TrainConfig(lr=w.lr, steps=steps, record_every=steps)
  record = lambda p, p0: {"score": models.word_scores(p)[:w.task.n_topic_words]}
  opts = xla_options.supported(fast_lu.COMPILER_OPTIONS)
  exes = {}
  for tile in (fast_lu.SEED_TILE, w.seeds):
    train = fast_lu.make_fast_sweep_train(w.model_cfg, w.data.train, record, cfg,
                                          w.model_cfg.trainable(), seed_tile=tile)
    exes[tile] = jax.jit(train, compiler_options=opts).lower(w.params0).compile()
    jax.block_until_ready(exes[tile](w.params0))
  runs = {tile: [] for tile in exes}
  for _ in range(reps):
    for tile, exe in exes.items():
      runs[tile] += _run_s(exe, (w.params0,), 1)
  chosen, alt = (statistics.median(runs[t]) for t in (fast_lu.SEED_TILE, w.seeds))
  return {"program": "fast path GD: seeds per tile", "chosen": f"{fast_lu.SEED_TILE} seeds",
          "alternative": f"{w.seeds} seeds (one tile)", "run_s": chosen, "alt_run_s": alt,
          "run_ratio": alt / chosen, "seed_epochs_per_s": w.seeds * steps / chosen}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.xla_options",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--seeds", type=int, default=64, help="seeds of the fast path and the ODEs")
  ap.add_argument("--steps", type=int, default=500, help="GD steps and ODE time span")
  ap.add_argument("--reps", type=int, default=3, help="compiles and runs per variant (median)")
  ap.add_argument("--out", type=Path, default=None, help="also write the rows to this JSON file")
  ap.add_argument("--only", nargs="+", default=None,
                  choices=("dataset", "fast", "tile", "reduced", "flow"),
                  help="time only these programs (default: all)")
  args = ap.parse_args(argv)
  want = lambda name: args.only is None or name in args.only
  rows = []
  print(f"{'program':34} {'chosen':22} {'compile s':>10} {'alt':>8} {'ratio':>6} "
        f"{'run s':>8} {'alt':>8} {'ratio':>6}", flush=True)

  def add(r):  # each row as soon as it is measured (the TL solve alone takes minutes)
    rows.append(r)
    compile_ = (f"{r['compile_s']:10.2f} {r['alt_compile_s']:8.2f} {r['compile_ratio']:6.2f}"
                if "compile_s" in r else f"{'':10} {'':8} {'':6}")
    print(f"{r['program']:34} {r['chosen']:22} {compile_} {r['run_s']:8.3f} "
          f"{r['alt_run_s']:8.3f} {r['run_ratio']:6.2f}", flush=True)

  w = make_workload(args.seeds)
  n_topic = w.task.n_topic_words

  # The topic-dataset generator.
  if want("dataset"):
    add(compare("topic dataset", functools.partial(tasks.make_topic_dataset, cfg=w.task),
                (jax.random.PRNGKey(0),), tasks.TOPIC_COMPILER_OPTIONS, {}, args.reps,
                "-O1, loop emitters"))
  # The fast path (TC), all seeds in one call.
  cfg = dynamics.TrainConfig(lr=w.lr, steps=args.steps, record_every=args.steps // 10)
  record = analysis.topic_observables(models.lu.apply, w.data)
  train = fast_lu.make_fast_sweep_train(w.model_cfg, w.data.train, record, cfg,
                                        w.model_cfg.trainable())
  if want("fast"):
    add(compare("fast path GD (TC)", lambda p: train(p), (w.params0,),
                fast_lu.COMPILER_OPTIONS, {}, args.reps, "-O1"))
  if want("tile"):
    add(seed_tile(w, args.steps, args.reps))
  ts = cfg.record_steps()
  # The gradient flow of the full model with a linear classifier (TC), a solve per seed
  # (vmapped, as `attndyn run` solves it), on 4 of the seeds: it is the slow one per point.
  if want("flow"):
    flow_params = jax.tree.map(lambda x: x[:4], w.params0)
    loss = models.make_loss(models.lu.apply)
    flow = jax.vmap(lambda p: dynamics.gradient_flow(
        loss, p, w.data.train, record, lr=w.lr, ts=ts, trainable=w.model_cfg.trainable(),
        rtol=1e-4, atol=1e-7))
    add(compare("gradient flow (TC, 4 seeds)", flow, (flow_params,),
                dynamics.ode.LINEAR_COMPILER_OPTIONS, {}, args.reps, "-O1, loop emitters"))
  # Lemma 2's reduced ODE, all seeds as one solve: TC (linear velocity) and TL.
  for classifier, chosen, what in (("tc", reduced_ode.LINEAR_COMPILER_OPTIONS,
                                    "-O1, loop emitters"),
                                   ("tl", reduced_ode.COMPILER_OPTIONS, "-O1")):
    if not want("reduced"):
      break
    wc = w if classifier == "tc" else make_workload(args.seeds, classifier="tl")
    rec = analysis.topic_observables(models.lu.apply, wc.data)
    ode = lambda p, wc=wc, rec=rec: dynamics.reduced_sen_ode_sweep(
        p, wc.data.train, wc.data.train_topic_word, np.arange(n_topic), rec, lr=wc.lr, ts=ts,
        trainable=wc.model_cfg.trainable(), rtol=1e-6, atol=1e-9)
    add(compare(f"reduced ODE ({classifier.upper()}, one solve)", ode, (wc.params0,),
                chosen, {}, args.reps, what))

  print(f"(alternative: XLA's defaults, or all {args.seeds} seeds in one tile; ratio = "
        f"alternative / chosen; {args.seeds} seeds, {args.steps} steps, median of {args.reps}; "
        f"{jax.devices()[0].platform}, {jax.__version__})")
  if args.out is not None:
    args.out.write_text(json.dumps(rows, indent=1, default=float))
  return 0


if __name__ == "__main__":
  sys.exit(main())
