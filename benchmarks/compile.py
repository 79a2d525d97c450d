"""Compile counted: programs compiled, compile seconds, points per call and compute seconds of the
README's main job and of the quick atlas, each from a cold compile cache.

``python -m benchmarks.compile --out FILE.json [--what main|atlas|both] [--warm] [--opt-level N]
[--tiny]``

Each workload runs in a fresh Python process (this file run as a script, ``--child``) whose
compile cache (:mod:`attndyn.compile_cache`) is a new, empty folder of its own
(``ATTNDYN_COMPILE_CACHE``; JAX's ``JAX_COMPILATION_CACHE_DIR`` is removed from its
environment, as it would win): every program is compiled, as on a fresh machine, and nothing
compiled by an earlier workload or another command is loaded. The workloads:

* ``main``: ``attndyn reproduce lu2021 --quick`` (one experiment after another in the
  command's own process, the default ``--workers 1``);
* ``atlas``: ``attndyn atlas --quick --workers 1 --no-progress``. ``--workers 1`` runs the
  buckets in the command's own process (Dask's synchronous scheduler), so the listeners below
  see every compile; with worker processes the compiles would happen where no listener is
  installed, and the per-process compile cache would not be cold in the same way. The programs
  and their compile seconds are the same whatever runs them; only the wall time would differ.

In the child, ``jax.monitoring`` listeners count what JAX reports:

* ``/jax/core/compile/backend_compile_duration``: one event per program JAX asks XLA for,
  with its seconds and the traced function's name (``programs``: the same in every run of the
  same code and settings, whatever the load);
* ``/jax/core/compile/jaxpr_trace_duration`` and ``.../jaxpr_to_mlir_module_duration``:
  tracing and lowering;
* ``/jax/compilation_cache/cache_hits``: programs loaded from the cache instead. The cache
  starts empty, but a program asked for twice in one run (the same computation jitted in two
  places) is loaded the second time when the first was written; JAX writes only programs that
  took at least :data:`attndyn.compile_cache.MIN_COMPILE_SECONDS` to compile
  (``cache_misses`` counts those writes), so both depend on the machine's speed and load.
  ``compiled = programs - cache_hits``.

``compile_s`` is the time covered by the union of those three events' spans (a jit traced
inside another's trace would otherwise count twice); ``compute_s = wall_s - compile_s``.
``programs_by_name`` counts the programs per traced function's name: a name compiled
more often than expected is a program compiled again for new shapes, dtypes or weak types.
``programs_by_job`` and ``backend_compile_s_by_job`` count them (and XLA's seconds) per job
that compiled them (an experiment of the main job, a bucket of the atlas; both run their jobs
in this thread): where a cold run's compiling goes.
Points per call: ``dynamics.run_sweep`` is wrapped in the child (nothing in attndyn changes)
to record, per sweep, its points and the points of each compiled call (``chunk_size`` rounded
to the devices; ``dynamics.sweep.chunk_length``); the atlas also reports, from its settings,
the points one bucket's compiled GD program serves (σ × lr × seeds) and one call of it computes
(σ × seeds: one chunk holds one lr's points). ``sweep_calls_timed`` has, per sweep in the order
run, the job running it, its wall seconds and the seconds of each phase above spent inside it
(``trace_s``, ``lower_s``, ``backend_compile_s``): a sweep's compile against its run.

``--opt-level N`` compiles every program the code compiles with its own XLA options (each
sweep's, the topic dataset's: those passed through :func:`dynamics.xla_options.supported`,
replaced in the child) at XLA's backend optimisation level ``N`` instead of the code's choice:
whether a lower level, which compiles faster and runs slower, would pay for the short sweeps
of a workload (compare ``sweep_calls_timed`` of two files).

``python -m benchmarks.compile --compare A.json B.json`` runs nothing: per workload of both
files, it prints the counts that differ (programs, traces, lowerings, sweeps, calls, points per
call, subprocesses, modules imported) and every traced function's name whose count of programs
differs: two versions of attndyn compared by what does not depend on the load.

``--warm`` runs each workload a second time, in another fresh process, with the compile cache
the first run filled (``warm`` in its record: wall, compile and compute seconds, programs and
those loaded from the cache): what the same command costs when XLA compiles almost nothing, so
``1 - warm wall / cold wall`` is the share of the cold run's wall time that compiling cost. A
warm run still traces and lowers every program (the cache is looked up by the lowered module),
and compiles again those that took less than
:data:`attndyn.compile_cache.MIN_COMPILE_SECONDS`, which JAX does not write: the warm wall time
is a floor that no reduction of XLA's compiling alone goes below.

``--tiny`` runs the same code on tiny settings (the main job's ``theorem2`` alone with a few
steps; the atlas's one tiny Attn-TC bucket with its reduced ODE), for a test. Writes
``FILE.json`` (one object per workload) and prints a markdown table. Wall and compute seconds
depend on the machine and its load; the counts of programs do not.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVENTS = {"trace": "/jax/core/compile/jaxpr_trace_duration",
          "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
          "backend_compile": "/jax/core/compile/backend_compile_duration"}
HITS = "/jax/compilation_cache/cache_hits"
MISSES = "/jax/compilation_cache/cache_misses"

# --tiny: the same commands on settings that compile a few programs and compute little.
TINY_MAIN = ["--only", "theorem2", "--set", "theorem2.run.train.steps=20",
             "--set", "theorem2.run.train.record_every=10",
             "--set", "theorem2.checkpoints=[10, 20]", "--set", "theorem2.run.sweep.seeds=2"]
TINY_ATLAS = ['classifiers=["tc"]', "axes={}", "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]",
              "tau=5.0", "steps=10", "record_every=5", "run_lengths=[10, 5]",
              'ode_classifiers=["tc"]',
              "base={n_nontopic=3, vocab_size=20, n_topics=2, words_per_topic=2, embed_dim=4, "
              "n_train=16, n_test=8, normaliser=\"softmax\", train_query=false}"]


def command(what: str, out: str, tiny: bool) -> list:
  """The ``attndyn`` command line (without ``attndyn``) of workload ``what`` into ``out``."""
  if what == "main":
    return ["reproduce", "lu2021", "--quick", "--out", out, "--quiet",
            *(TINY_MAIN if tiny else [])]
  if what == "atlas":
    return ["atlas", "--quick", "--out", out, "--no-progress", "--workers", "1",
            *[a for item in (TINY_ATLAS if tiny else []) for a in ("--set", item)]]
  raise ValueError(f"workload {what!r} is not one of main, atlas")


def _union(spans) -> float:
  """Seconds covered by the union of ``(start, end)`` spans."""
  total, reach = 0.0, float("-inf")
  for start, end in sorted(spans):
    if end > reach:
      total += end - max(start, reach)
      reach = end
  return total


def _atlas_points(out: Path) -> dict:
  """Per bucket of the atlas in ``out``: σ × lr × seeds (one compiled GD program's points) and
  one call's points (the run config's ``chunk_size``: σ × seeds with ``chunk = "lr"``; unset,
  the whole bucket, which the atlas's buckets fit in memory), from its atlas.json settings."""
  from attndyn import atlas
  from attndyn import settings as typed
  doc = json.loads((out / "atlas.json").read_text())
  s = typed.from_json(atlas.Settings, doc["settings"], "atlas")
  program, call = [], []
  for b in atlas.buckets(s):
    sigmas, lengths = atlas.continuous(s, b)
    program.append(len(sigmas) * len(lengths) * s.seeds)
    call.append(atlas.run_config(s, b)["sweep"].get("chunk_size") or program[-1])
  return {"buckets": len(program), "gd_points_per_program": _spread(program),
          "gd_points_per_call": _spread(call)}


def _spread(values) -> dict:
  return {"min": min(values), "mean": sum(values) / len(values), "max": max(values)} \
      if values else {}


def child(what: str, out: str, result: str, tiny: bool, profile: str = None,
          opt_level: int = None) -> int:
  """Runs workload ``what`` in this process with the listeners installed; writes ``result``
  (and, with ``profile``, cProfile's statistics of the command to that file)."""
  import jax.monitoring
  durations = collections.defaultdict(float)
  counts = collections.Counter()
  spans = []
  by_name = collections.Counter()
  seconds_by_name = collections.Counter()
  by_job = collections.Counter()
  seconds_by_job = collections.Counter()
  events = collections.Counter()
  # The command's own setup first, as `attndyn`'s main makes it before anything imports
  # diffrax: the cache, and EQX_ON_ERROR=nan before equinox is imported (the wrapper of
  # run_sweep below imports attndyn.dynamics, hence diffrax, before the command starts). With
  # equinox imported first, its runtime checks are host callbacks in every ODE program, which
  # the command's programs do not hold and JAX never writes to the cache.
  from attndyn import compile_cache
  compile_cache.enable()
  from attndyn import jobs

  def on_duration(event, seconds, **kw):
    for short, name in EVENTS.items():
      if event == name:
        durations[short] += seconds
        counts[short] += 1
        if short == "backend_compile":
          by_name[str(kw.get("fun_name", "?"))] += 1
          seconds_by_name[str(kw.get("fun_name", "?"))] += seconds
          # the job compiling it (an experiment, a bucket), run in this thread (--workers 1)
          job = getattr(jobs._local, "name", None) or "(outside a job)"
          by_job[job] += 1
          seconds_by_job[job] += seconds

  def on_span(event, start, end, **_):
    if event in EVENTS.values():
      spans.append((start, end))

  def on_event(event, **_):
    if event in (HITS, MISSES):
      events[event.rsplit("/", 1)[1]] += 1

  jax.monitoring.register_event_duration_secs_listener(on_duration)
  jax.monitoring.register_event_time_span_listener(on_span)
  jax.monitoring.register_event_listener(on_event)

  from attndyn import cli, dynamics
  if opt_level is not None:
    # every program compiled with the code's own XLA options (the sweeps', the topic dataset's)
    from attndyn.dynamics import xla_options
    supported = xla_options.supported
    xla_options.supported = lambda options: {**(supported(options) or {}),
                                             "xla_backend_optimization_level": opt_level}
  sweep_module = sys.modules[dynamics.run_sweep.__module__]
  original = sweep_module.run_sweep
  sweeps = []

  def counted(fn, inputs, *, chunk_size=None, devices=None, **kw):
    total = jax.tree.leaves(inputs)[0].shape[0]
    n_dev = len(jax.devices() if devices is None else devices)
    chunk = sweep_module.chunk_length(total, chunk_size, n_dev)
    record = {"job": getattr(jobs._local, "name", None) or "(outside a job)",
              "points": int(total), "points_per_call": int(chunk),
              "calls": len(sweep_module.chunk_bounds(total, chunk_size, n_dev))}
    sweeps.append(record)
    before, t0 = dict(durations), time.perf_counter()
    out = original(fn, inputs, chunk_size=chunk_size, devices=devices, **kw)
    record["wall_s"] = round(time.perf_counter() - t0, 3)
    for short in EVENTS:
      record[f"{short}_s"] = round(durations[short] - before.get(short, 0.0), 3)
    return out

  sweep_module.run_sweep = counted
  dynamics.run_sweep = counted

  # subprocesses started (git, for the job keys' code revision) and modules imported
  popen_init = subprocess.Popen.__init__
  started = collections.Counter()

  def counted_popen(self, args, *a, **kw):
    head = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)[:2]
    started[" ".join(Path(str(head[0])).name if i == 0 else str(x)
                     for i, x in enumerate(head))] += 1
    popen_init(self, args, *a, **kw)

  subprocess.Popen.__init__ = counted_popen
  modules_before = len(sys.modules)
  argv = command(what, out, tiny)
  profiler = None
  if profile:
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
  t0 = time.perf_counter()
  code = cli.main(argv)
  wall = time.perf_counter() - t0
  if profiler is not None:
    profiler.disable()
    profiler.dump_stats(profile)
  subprocess.Popen.__init__ = popen_init
  compile_s = _union(spans)
  calls = sum(s["calls"] for s in sweeps)
  doc = {"workload": what, "tiny": tiny, "command": "attndyn " + " ".join(argv),
         "opt_level": opt_level,
         # what equinox's checks in the ODE programs were compiled as (the command's: "nan")
         "eqx_on_error": getattr(sys.modules.get("equinox._config"), "EQX_ON_ERROR", None),
         "exit_code": code, "cache": os.environ.get("ATTNDYN_COMPILE_CACHE"),
         "programs": counts["backend_compile"],
         "programs_compiled": counts["backend_compile"] - events["cache_hits"],
         "cache_hits": events["cache_hits"], "cache_writes": events["cache_misses"],
         "traces": counts["trace"], "lowerings": counts["lower"],
         "wall_s": wall, "compile_s": compile_s, "compute_s": wall - compile_s,
         "seconds_by_phase": {k: durations[k] for k in EVENTS},
         "sweeps": len(sweeps), "sweep_calls": calls,
         "points_per_call": (sum(s["points"] for s in sweeps) / calls) if calls else None,
         "points_per_call_spread": _spread([s["points_per_call"] for s in sweeps]),
         "sweep_calls_timed": sweeps,
         "subprocesses": dict(started.most_common()),
         "modules_imported": len(sys.modules) - modules_before,
         "profiled": bool(profile),
         "programs_by_name": dict(by_name.most_common()),
         "compile_s_by_name": {k: round(v, 3) for k, v in seconds_by_name.most_common()},
         "programs_by_job": dict(by_job.most_common()),
         "backend_compile_s_by_job": {k: round(v, 3) for k, v in seconds_by_job.most_common()}}
  if what == "atlas" and code == 0:
    doc["atlas"] = _atlas_points(Path(out))
  Path(result).write_text(json.dumps(doc, indent=1) + "\n")
  return code


WARM = ("exit_code", "programs", "programs_compiled", "cache_hits", "wall_s", "compile_s",
        "compute_s", "seconds_by_phase")   # what a record's "warm" keeps of the warm run's


def run_workload(what: str, tiny: bool, keep: str = None, profile: str = None,
                 warm: bool = False, opt_level: int = None) -> dict:
  """Workload ``what`` in a fresh process with an empty, private compile cache; its record.
  ``keep``: a folder to write the workload's outputs into (else a temporary one, removed);
  ``profile``: a folder for cProfile's statistics, ``WORKLOAD.prof``; ``warm``: then again in
  another fresh process with the cache the first filled (the record's ``warm``); ``opt_level``:
  XLA's backend optimisation level of the programs compiled with the code's own options."""
  scratch = Path(tempfile.mkdtemp(prefix=f"compile-{what}-"))
  try:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["ATTNDYN_COMPILE_CACHE"] = str(scratch / "cache")
    # the attndyn `python -m benchmarks.compile` imports from this checkout, unless PYTHONPATH
    # names another (the child runs this file as a script, so its folder, not the checkout's
    # root, heads its sys.path)
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))

    def one(run: str, prof):
      out = Path(keep) / f"{what}{run}" if keep else scratch / f"out{run}"
      result = scratch / f"result{run}.json"
      proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", what,
                             "--out", str(out), "--result", str(result),
                             *(["--tiny"] if tiny else []),
                             *(["--profile", str(prof)] if prof else []),
                             *(["--opt-level", str(opt_level)] if opt_level is not None
                               else [])], env=env)
      if not result.is_file():
        return {"workload": what, "tiny": tiny, "exit_code": proc.returncode,
                "error": f"the workload's {run.strip('-') or 'cold'} process wrote no record"}
      return json.loads(result.read_text())

    record = one("", Path(profile) / f"{what}.prof" if profile else None)
    if warm and "error" not in record:
      again = one("-warm", None)
      record["warm"] = again if "error" in again else {k: again[k] for k in WARM}
    return record
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


def table(records: list) -> str:
  """The records as a markdown table."""
  lines = ["| workload | exit | programs (loaded from cache) | compile s | wall s | compute s | "
           "sweep calls | points per call |", "|---|---|---|---|---|---|---|---|"]
  for r in records:
    if "error" in r:
      lines.append(f"| {r['workload']} | {r['exit_code']} | {r['error']} | | | | | |")
      continue
    ppc = "-" if r["points_per_call"] is None else f"{r['points_per_call']:.1f}"
    lines.append(f"| {r['workload']}{' (tiny)' if r['tiny'] else ''} | {r['exit_code']} | "
                 f"{r['programs']} ({r['cache_hits']}) | {r['compile_s']:.1f} | "
                 f"{r['wall_s']:.1f} | "
                 f"{r['compute_s']:.1f} | {r['sweep_calls']} | {ppc} |")
  for r in records:
    w = r.get("warm")
    if w and "error" in w:
      lines.append(f"\n{r['workload']} warm: {w['error']} (exit {w['exit_code']})")
    elif w:
      lines.append(f"\n{r['workload']} warm (the cache the cold run filled): wall "
                   f"{w['wall_s']:.1f} s, compile {w['compile_s']:.1f} s (XLA "
                   f"{w['seconds_by_phase']['backend_compile']:.1f} s), {w['cache_hits']} of "
                   f"{w['programs']} programs loaded; compiling cost the cold run "
                   f"{r['wall_s'] - w['wall_s']:.1f} s of its {r['wall_s']:.1f} s wall "
                   f"({1 - w['wall_s'] / r['wall_s']:.0%})")
  for r in records:
    if "atlas" in r:
      a = r["atlas"]
      lines.append(f"\natlas: {a['buckets']} buckets; GD points per compiled program "
                   f"(σ × lr × seeds) {a['gd_points_per_program']['mean']:.1f} on average, "
                   f"per call (σ × seeds) {a['gd_points_per_call']['mean']:.1f}")
  return "\n".join(lines)


COUNTS = ("programs", "traces", "lowerings", "sweeps", "sweep_calls", "points_per_call",
          "subprocesses", "modules_imported")


def compare(a: list, b: list) -> list:
  """Lines naming what differs between two files' records of the same workloads: the counts of
  :data:`COUNTS`, then each name whose programs differ, as ``name: A -> B``."""
  lines = []
  by_b = {r["workload"]: r for r in b}
  for ra in a:
    rb = by_b.get(ra["workload"])
    if rb is None:
      continue
    lines.append(f"{ra['workload']}:")
    for k in COUNTS:
      if ra.get(k) != rb.get(k):
        lines.append(f"  {k}: {ra.get(k)} -> {rb.get(k)}")
    pa, pb = ra.get("programs_by_name", {}), rb.get("programs_by_name", {})
    for name in sorted(set(pa) | set(pb), key=lambda n: -abs(pb.get(n, 0) - pa.get(n, 0))):
      if pa.get(name, 0) != pb.get(name, 0):
        lines.append(f"  programs of {name}: {pa.get(name, 0)} -> {pb.get(name, 0)}")
    if len(lines) > 0 and lines[-1].endswith(":"):
      lines.append("  no count differs")
  return lines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.compile",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--out", help="the JSON file to write (one object per workload)")
  ap.add_argument("--what", choices=("main", "atlas", "both"), default="both")
  ap.add_argument("--tiny", action="store_true", help="tiny settings (a test's)")
  ap.add_argument("--warm", action="store_true",
                  help="run each workload again with the compile cache its cold run filled")
  ap.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=None,
                  help="XLA's backend optimisation level of every program the code compiles "
                       "with its own options (the sweeps', the topic dataset's) instead of "
                       "the code's choice")
  ap.add_argument("--keep", default=None,
                  help="a folder to keep the workloads' outputs in (default: removed)")
  ap.add_argument("--profile", default=None, metavar="DIR",
                  help="write cProfile's statistics of each workload to DIR/WORKLOAD.prof "
                       "(its call counts; profiling slows the Python parts, so the seconds "
                       "are not comparable with an unprofiled run's)")
  ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                  help="run nothing: print the counts that differ between two files")
  ap.add_argument("--child", choices=("main", "atlas"), help=argparse.SUPPRESS)
  ap.add_argument("--result", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child:
    return child(args.child, args.out, args.result, args.tiny, args.profile, args.opt_level)
  if args.compare:
    a, b = (json.loads(Path(f).read_text()) for f in args.compare)
    print("\n".join(compare(a, b)))
    return 0
  if not args.out:
    ap.error("--out FILE.json is required")
  whats = ("main", "atlas") if args.what == "both" else (args.what,)
  if args.profile:
    Path(args.profile).mkdir(parents=True, exist_ok=True)
  records = [run_workload(w, args.tiny, args.keep, args.profile, args.warm, args.opt_level)
             for w in whats]
  Path(args.out).write_text(json.dumps(records, indent=1) + "\n")
  print(table(records))
  return 0 if all(r.get("exit_code") == 0 and r.get("warm", {}).get("exit_code", 0) == 0
                  for r in records) else 1


if __name__ == "__main__":
  # run as a script (the child): benchmarks/ itself must not shadow modules of the same name
  if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]
  sys.exit(main())
