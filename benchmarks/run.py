"""Time the Lu text preset across implementations: ``python -m benchmarks.run [--quick] --out DIR``.

Workload (:mod:`benchmarks.workload`): J=4, M=5000, m=20, 800 sentences, d=15,
TC, full-batch GD, float32, S seeds sharing one dataset. For each
S ∈ {1, 8, 64, 256} ({1, 8, 64} with ``--quick``) it times, in this one process:
the PyTorch per-seed loop (``torch_loop``, when ``torch`` is importable), the
obvious JAX version (``jax_naive``), the fast path (``attndyn``) and the
generic autodiff path vmapped over seeds (``attndyn_generic``, S ≤ 64) and with the seeds
one after another (``attndyn_generic_serial``, what ``attndyn run`` does on CPU).

Method:
  * throughput: seed·epochs/s from the median of ``--reps`` (≥ 3) timed calls
    after one warm-up call;
  * compile time: ``jit(f).lower(...).compile()``, timed apart from the runs;
  * memory: ``peak_mem_mb`` is the rise of the process's resident memory over
    its level before the implementation was built, sampled every 2 ms while it
    compiles and runs; ``xla_mem_mb`` is the executable's own arguments +
    outputs + temporaries;
  * bandwidth: a STREAM-like triad measured in the same run; the achieved
    fraction is :func:`benchmarks.workload.model_bytes_per_seed_epoch` × the
    throughput ÷ the triad bandwidth.

Also: throughput vs M and vs n_train (S = 64), the memory of a 1,024-seed sweep
run in chunks (``dynamics.run_sweep`` with ``chunk_size``), and the reduced
ODE for 64 seeds from given initial parameters, including trace and compile (when
``dynamics.reduced_sen_ode_sweep`` exists): all seeds as one solve, recording the topic
words' scores and norms; the same as vmapped per-seed solves; and the joint solve
recording ``attndyn run``'s full-model observables. Each is then traced, compiled and
solved once more as separate stages (``again_trace_s``, ``again_compile_s``,
``again_solve_s``) to show where the time goes.

Writes ``DIR/bench.json`` (the table: a list of rows with ``impl``, ``seeds``,
``seed_epochs_per_s``, ``compile_s``, ``peak_mem_mb``, ratios, ...),
``DIR/extra.json`` (machine, triad, scaling, memory, ODE) and ``DIR/scaling.png``.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import atomic, lock
from benchmarks import impls
from benchmarks.memsample import PeakRSS
from benchmarks.stream import triad_bandwidth
from benchmarks.workload import make_workload, model_bytes_per_seed_epoch

MB = 2.0 ** 20

# Epochs per timed call, chosen so one call takes seconds, not minutes.
EPOCHS = {
    "full": {"torch_loop": {1: 50, 8: 50, 64: 50, 256: 50},
             "jax_naive": {1: 200, 8: 100, 64: 50, 256: 50},
             "attndyn_generic": {1: 200, 8: 100, 64: 50},
             "attndyn_generic_serial": {1: 200, 8: 100, 64: 50},
             "attndyn": {1: 1000, 8: 500, 64: 200, 256: 100}},
    "quick": {"torch_loop": {1: 20, 8: 20, 64: 20},
              "jax_naive": {1: 50, 8: 50, 64: 50},
              "attndyn_generic": {1: 50, 8: 50},
              "attndyn_generic_serial": {1: 50, 8: 50},
              "attndyn": {1: 200, 8: 100, 64: 100}},
}


def _cpu_name() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown"


def time_impl(name: str, build, w, epochs: int, reps: int) -> dict:
  """Build (compile), warm up, then time ``reps`` calls of one implementation."""
  with PeakRSS() as mem:
    impl = build(w, epochs)
    impl.run()
    times = []
    for _ in range(reps):
      t0 = time.perf_counter()
      impl.run()
      times.append(time.perf_counter() - t0)
  median = statistics.median(times)
  return {
      "impl": name, "seeds": w.seeds, "measured_seeds": impl.measured_seeds, "epochs": epochs,
      "seed_epochs_per_s": impl.measured_seeds * epochs / median,
      "median_s": median, "times_s": times, "compile_s": impl.compile_s,
      "peak_mem_mb": (mem.peak - mem.base) / MB, "rss_peak_mb": mem.peak / MB,
      "xla_mem_mb": None if impl.xla_mem_bytes is None else impl.xla_mem_bytes / MB,
  }


def _ratios(rows):
  by = {(r["impl"], r["seeds"]): r for r in rows}
  for r in rows:
    for base in ("jax_naive", "torch_loop"):
      ref = by.get((base, r["seeds"]))
      if ref is not None:
        r[f"ratio_vs_{base}"] = r["seed_epochs_per_s"] / ref["seed_epochs_per_s"]


def print_table(rows, bandwidth_gbs: float, out=sys.stdout):
  """The side-by-side table of seed·epochs/s, ratios, compile time, memory, bandwidth."""
  head = (f"{'impl':16s} {'S':>4s} {'epochs':>6s} {'seed·ep/s':>10s} {'×naive':>7s} "
          f"{'×torch':>7s} {'compile_s':>9s} {'peak_MB':>8s} {'xla_MB':>7s} {'BW%':>6s}")
  print(head, file=out)
  print("-" * len(head), file=out)
  fmt = lambda x, f: "-" if x is None else format(x, f)
  for r in rows:
    print(f"{r['impl']:16s} {r['seeds']:4d} {r['epochs']:6d} {r['seed_epochs_per_s']:10.0f} "
          f"{fmt(r.get('ratio_vs_jax_naive'), '7.2f')} {fmt(r.get('ratio_vs_torch_loop'), '7.2f')} "
          f"{r['compile_s']:9.2f} {r['peak_mem_mb']:8.0f} {fmt(r['xla_mem_mb'], '7.0f')} "
          f"{100 * r['bandwidth_fraction']:6.2f}", file=out)
  print(f"(BW% = {rows[0]['model_bytes_per_seed_epoch'] / 1e6:.2f} MB per seed·epoch × "
        f"throughput ÷ triad {bandwidth_gbs:.1f} GB/s; torch_loop times "
        f"{rows[0].get('measured_seeds', '')} or fewer seeds and is linear in S)", file=out)


def scaling(mode: str, reps: int) -> list:
  """Throughput vs M and vs n_train at S = 64."""
  if mode == "quick":
    grid = {"vocab_size": [1000, 5000], "n_train": [400, 800]}
    which = {"attndyn": 100}
  else:
    grid = {"vocab_size": [1000, 2500, 5000, 10000], "n_train": [200, 400, 800, 1600]}
    which = {"attndyn": 200, "jax_naive": 50}
  rows = []
  for param, values in grid.items():
    for value in values:
      w = make_workload(64, **{param: value})
      for name, epochs in which.items():
        r = time_impl(name, impls.IMPLS[name], w, epochs, reps)
        r.update(sweep=param, value=value)
        rows.append(r)
        print(f"  scaling {param}={value:5d} {name:10s} {r['seed_epochs_per_s']:8.0f} seed·epochs/s",
              flush=True)
  return rows


def memory_claim(seeds: int, epochs: int, chunk: int) -> dict:
  """Peak RSS of ``seeds`` seeds × ``epochs`` epochs through ``dynamics.run_sweep`` in chunks.

  Records the paper's observables (``analysis.topic_observables``) every 50
  epochs, as the orchestrator does.
  """
  from attndyn import analysis
  from attndyn import dynamics
  from attndyn import models

  w = make_workload(1)
  cfg = dynamics.TrainConfig(lr=w.lr, steps=epochs, record_every=50)
  record = analysis.topic_observables(models.lu.apply, w.data)
  train = dynamics.make_fast_train(models.make_loss(models.lu.apply), w.data.train, record, cfg,
                                   w.model_cfg.trainable(), model_cfg=w.model_cfg)

  def fn(key):
    return train(models.lu.init(key, w.model_cfg, jnp.float32), key)

  keys = jax.random.split(jax.random.PRNGKey(2), seeds)
  with PeakRSS() as mem:
    t0 = time.perf_counter()
    out = dynamics.run_sweep(fn, keys, chunk_size=chunk,
                             compiler_options=dynamics._FAST_COMPILER_OPTIONS)
    seconds = time.perf_counter() - t0
  out_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(out))
  # Only the recorded observables grow with the epochs; the final parameters
  # (1,024 × 5,008 × 30 floats ≈ 600 MB here) are stored once whatever the length.
  per_record = sum(np.asarray(x).nbytes for x in jax.tree.leaves(out.observables)) / cfg.n_records
  full_records = 5000 // 50 + 1
  return {"seeds": seeds, "epochs": epochs, "chunk_size": chunk, "seconds": seconds,
          "seed_epochs_per_s": seeds * epochs / seconds,
          "rss_base_mb": mem.base / MB, "rss_peak_mb": mem.peak / MB,
          "rss_rise_mb": (mem.peak - mem.base) / MB, "output_mb": out_bytes / MB,
          "projected_5000_epoch_peak_mb": (mem.peak + per_record * (full_records - cfg.n_records))
          / MB}


def reduced_ode_timing(seeds: int = 64, observables: str = "sen", solve: str = "together") -> dict:
  """The reduced SEN ODE (Lemma 2) for ``seeds`` seeds, wall time including trace and compile.

  Solved with the tolerances ``attndyn run`` uses (``[ode]`` defaults), not the
  module's float64-grade defaults, which lie below float32 rounding, and saved
  at the 101 times of a 5,000-epoch run recorded every 50. The ODE starts from
  given initial parameters: ``init_s`` (their own compiled call, the same
  ``models.lu.init`` the GD stage runs, with the ODE stage's XLA options: 64
  vmapped threefry inits compile in about 0.55 s at LLVM -O1 against 2.8 s at
  -O2) is timed apart and is not in ``seconds_including_compile``.

  Args:
    seeds: seeds solved in one compiled call.
    observables: ``"sen"`` records what the reduced system itself is about,
      every topic word's score ``s_t`` and ``‖v_t‖`` (the issue's "reduced ODE
      for 64 seeds"); ``"full"`` records what ``attndyn run`` does,
      :func:`analysis.topic_observables` of the reconstructed full model (loss,
      train/test accuracy, Theorem-1 quantity, non-topic changes: a forward pass
      of all 1,000 sentences per seed and saved time).
    solve: ``"together"``: :func:`dynamics.reduced_sen_ode_sweep`, one solve for
      all seeds (what ``attndyn run`` does when the seeds share a dataset);
      ``"vmap"``: ``vmap`` of the per-seed :func:`dynamics.reduced_sen_ode`.
  """
  from attndyn import dynamics
  if not hasattr(dynamics, "reduced_sen_ode_sweep"):
    return {"skipped": "dynamics.reduced_sen_ode_sweep not available in this checkout"}
  from attndyn import analysis
  from attndyn import models
  from attndyn.config import ODEConfig
  from attndyn.dynamics import xla_options
  ode = ODEConfig(kind="reduced")

  w = make_workload(1)
  cfg = dynamics.TrainConfig(lr=w.lr, steps=5000, record_every=50)
  n_topic = w.task.n_topic_words
  if observables == "full":
    record = analysis.topic_observables(models.lu.apply, w.data)
  else:
    def record(params, params0):
      del params0
      topic = {"query": params["query"], "keys": params["keys"][:n_topic],
               "embeddings": params["embeddings"][:n_topic]}
      return {"score": models.word_scores(topic), "emb_norm": analysis.embedding_norms(topic)}
  topic_words = jnp.arange(n_topic)
  kw = dict(lr=w.lr, ts=cfg.record_steps(), trainable=w.model_cfg.trainable(),
            solver=ode.solver, rtol=ode.rtol, atol=ode.atol, max_steps=ode.max_steps)

  if solve == "together":
    def fn(params0):
      return dynamics.reduced_sen_ode_sweep(params0, w.data.train, w.data.train_topic_word,
                                            topic_words, record, **kw)
  else:
    def fn(params0):
      return jax.vmap(lambda p: dynamics.reduced_sen_ode(
          p, w.data.train, w.data.train_topic_word, topic_words, record, **kw))(params0)

  # The options attndyn run compiles the TC preset's reduced-ODE stage with.
  options = xla_options.supported(dynamics._REDUCED_ODE_LINEAR_COMPILER_OPTIONS)
  keys = jax.random.split(jax.random.PRNGKey(3), seeds)
  t0 = time.perf_counter()
  # Compiled with the ODE stage's options, as attndyn run compiles the init inside that stage.
  params0 = jax.block_until_ready(
      jax.jit(jax.vmap(lambda k: models.lu.init(k, w.model_cfg, jnp.float32)),
              compiler_options=options)(keys))
  init_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  out = dynamics.run_sweep(fn, params0, batched=True, compiler_options=options)
  seconds = time.perf_counter() - t0
  failed = int(np.sum(np.asarray(out.failed_at) >= 0))
  # Where the time goes: the same program again, staged (a new function, so jit's cache
  # does not hit).
  t0 = time.perf_counter()
  staged = jax.jit(lambda p: fn(p), compiler_options=options)
  lowered = staged.lower(params0)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  jax.block_until_ready(compiled(params0))
  t3 = time.perf_counter()
  return {"seeds": seeds, "epochs": 5000, "observables": observables, "solve": solve,
          "seconds_including_compile": seconds, "init_s": init_s, "failed_runs": failed,
          "rtol": ode.rtol, "atol": ode.atol, "solver": ode.solver,
          "again_trace_s": t1 - t0, "again_compile_s": t2 - t1, "again_solve_s": t3 - t2}


def plot(rows, scale_rows, path: Path):
  """Throughput vs S, vs M and vs n_train."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
  for name in dict.fromkeys(r["impl"] for r in rows):
    pts = sorted((r["seeds"], r["seed_epochs_per_s"]) for r in rows if r["impl"] == name)
    axes[0].plot(*zip(*pts), "o-", label=name)
  axes[0].set(xscale="log", yscale="log", xlabel="seeds S", ylabel="seed·epochs / s",
              title="Throughput vs seeds (M=5000, n=800)")
  for ax, param, label in ((axes[1], "vocab_size", "non-topic words M"),
                           (axes[2], "n_train", "training sentences n")):
    for name in dict.fromkeys(r["impl"] for r in scale_rows):
      pts = sorted((r["value"], r["seed_epochs_per_s"]) for r in scale_rows
                   if r["impl"] == name and r["sweep"] == param)
      if pts:
        ax.plot(*zip(*pts), "o-", label=name)
    ax.set(xscale="log", yscale="log", xlabel=label, ylabel="seed·epochs / s",
           title=f"Throughput vs {label} (S=64)")
  for ax in axes:
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # the scaling panels are empty with --no-scaling
      ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
  return value


class _Parser(argparse.ArgumentParser):
  """argparse, but a usage error is one line (``PROG: error: ...``, exit code 2), as attndyn's."""

  def error(self, message):
    self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`).\n")


OUTPUTS = ("bench.json", "extra.json", "scaling.png")


def main(argv=None, prog: str = "python -m benchmarks.run") -> int:
  ap = _Parser(prog=prog, description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="directory for bench.json, extra.json, scaling.png")
  ap.add_argument("--quick", action="store_true", help="fewer epochs, S ∈ {1, 8, 64}")
  ap.add_argument("--reps", type=_positive_int, default=3, help="timed calls per point (≥ 3)")
  ap.add_argument("--seeds", type=_positive_int, nargs="*", default=None,
                  help="override the list of S")
  ap.add_argument("--impls", nargs="*", default=None, choices=list(impls.IMPLS),
                  help="subset of implementations")
  ap.add_argument("--no-scaling", action="store_true", help="skip throughput vs M and n_train")
  ap.add_argument("--no-memory", action="store_true", help="skip the chunked 1,024-seed sweep")
  ap.add_argument("--memory-epochs", type=_positive_int, default=None,
                  help="epochs of the 1,024-seed sweep (default 500; 5000 is the full claim)")
  ap.add_argument("--no-ode", action="store_true", help="skip the reduced-ODE timing")
  ap.add_argument("--force", action="store_true",
                  help="write into a non-empty DIR (replaces only bench.json, extra.json, "
                       "scaling.png)")
  args = ap.parse_args(argv)
  reps = max(3, args.reps)
  mode = "quick" if args.quick else "full"
  out = Path(args.out)
  entries = sorted(p.name for p in out.iterdir() if p.name != lock.LOCKFILE) \
      if out.is_dir() else []
  if entries and not args.force:
    ap.error(f"--out {out} is not empty (it holds {', '.join(entries[:3])}"
             f"{', ...' if len(entries) > 3 else ''}): pick a new directory, or pass --force "
             f"to replace only {', '.join(OUTPUTS)} there")
  try:
    out.mkdir(parents=True, exist_ok=True)
  except OSError as err:
    ap.error(f"--out {out}: cannot make a directory there ({err.strerror or err})")
  with lock.hold(out):  # no other attndyn command writes there meanwhile
    return _bench(args, out, mode, reps)


def _bench(args, out: Path, mode: str, reps: int) -> int:
  seeds_list = args.seeds or ([1, 8, 64] if args.quick else [1, 8, 64, 256])
  names = args.impls or list(impls.IMPLS)

  meta = {"cpu": _cpu_name(), "cores": os.cpu_count(), "jax": jax.__version__,
          "devices": [str(d) for d in jax.devices()], "mode": mode, "reps": reps}
  if impls.torch_available():
    import torch
    meta["torch"] = torch.__version__
    meta["torch_threads"] = torch.get_num_threads()
  print(f"# {meta['cpu']}, {meta['cores']} cores; jax {meta['jax']}; "
        f"torch {meta.get('torch', 'absent')}; {mode} mode, median of {reps} runs", flush=True)
  if "torch_loop" in names and not impls.torch_available():
    print(f"# {impls.TORCH_HINT}", flush=True)
    names = [n for n in names if n != "torch_loop"]

  triad = triad_bandwidth()
  meta["triad"] = triad
  print(f"# STREAM-like triad: numpy {triad['numpy_gbs']:.1f} GB/s, jax {triad['jax_gbs']:.1f} GB/s",
        flush=True)

  rows = []
  for n_seeds in seeds_list:
    w = make_workload(n_seeds)
    bytes_per = model_bytes_per_seed_epoch(w)
    for name in names:
      epochs = EPOCHS[mode][name].get(n_seeds)
      if epochs is None:
        epochs = EPOCHS[mode][name][max(EPOCHS[mode][name])]
        if name.startswith("attndyn_generic"):
          continue
      r = time_impl(name, impls.IMPLS[name], w, epochs, reps)
      r["model_bytes_per_seed_epoch"] = bytes_per
      r["bandwidth_fraction"] = bytes_per * r["seed_epochs_per_s"] / (triad["best_gbs"] * 1e9)
      rows.append(r)
      print(f"  {name:16s} S={n_seeds:4d} {r['seed_epochs_per_s']:9.0f} seed·epochs/s "
            f"(compile {r['compile_s']:.2f} s)", flush=True)
  _ratios(rows)
  print()
  print_table(rows, triad["best_gbs"])
  atomic.write_text(out / "bench.json", json.dumps(rows, indent=1))

  extra = {"machine": meta}
  scale_rows = []
  if not args.no_scaling:
    print("\n# scaling (S = 64)", flush=True)
    scale_rows = scaling(mode, reps)
    extra["scaling"] = scale_rows
  if not args.no_memory:
    seeds, chunk = (256, 128) if args.quick else (1024, 256)
    epochs = args.memory_epochs or (100 if args.quick else 500)
    print(f"\n# memory: {seeds} seeds × {epochs} epochs in chunks of {chunk}", flush=True)
    extra["memory"] = mem = memory_claim(seeds, epochs, chunk)
    print(f"  peak RSS {mem['rss_peak_mb']:.0f} MB (rise {mem['rss_rise_mb']:.0f} MB), outputs "
          f"{mem['output_mb']:.0f} MB, {mem['seconds']:.1f} s; projected peak at 5000 epochs "
          f"{mem['projected_5000_epoch_peak_mb']:.0f} MB", flush=True)
  if not args.no_ode:
    print("\n# reduced ODE (Lemma 2), 64 seeds, including trace and compile", flush=True)
    # The joint solve with its own observables first (cold), then vmapped per-seed solves,
    # then the joint solve recording what attndyn run records.
    extra["reduced_ode"] = ode = reduced_ode_timing(64, "sen")
    extra["reduced_ode_vmap"] = vmapped = reduced_ode_timing(64, "sen", solve="vmap")
    extra["reduced_ode_full_observables"] = full = reduced_ode_timing(64, "full")
    for r in (ode, vmapped, full):
      print("  " + ("; ".join(f"{k} {v}" for k, v in r.items())), flush=True)
  atomic.write_text(out / "extra.json", json.dumps(extra, indent=1, default=str))
  plot(rows, scale_rows, out / "scaling.png")
  print(f"\nwrote {out / 'bench.json'}, {out / 'extra.json'}, {out / 'scaling.png'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
