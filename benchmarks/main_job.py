"""The README's main job, timed: ``attndyn reproduce lu2021 --quick``, per experiment.

``python -m benchmarks.main_job --out DIR [--only synthetic,theorem2,ablation,cnn] [--target 120]
[--cache off|DIR] [--set KEY=VALUE ...]``

Runs the reproduction in one process into ``DIR`` (new or empty) and prints, per
experiment, its wall seconds (from ``DIR/experiments/NAME.json``) and its rows by
result, then the whole job's wall seconds, the seconds XLA spent compiling
(``jax.monitoring``'s backend-compile events: what a faster machine would not
remove; loading a program from the compile cache counts there too) and the ratio of the wall time to ``--target`` (the aim asks for the
synthetic section, Fig 3's ordering, Theorem 2's trend and App. A within about
2 minutes on 2 CPU cores: below 1 meets it). By default the compile cache is off, so every
program is compiled, as on a fresh machine; ``--cache DIR`` twice with the same ``DIR`` times
a rerun that loads them (:mod:`attndyn.compile_cache`). ``--set`` hands a setting to the
reproduction (as ``attndyn reproduce --set``), to time the job with it changed. Writes
``DIR/main_job.json``.
Run it on otherwise idle cores: the numbers are this machine's, not constants.
"""
import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

import jax.monitoring

# The experiments the 2-minute aim names.
AIM = ("synthetic", "theorem2", "ablation", "cnn")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.main_job",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="a new or empty directory for the reproduction")
  ap.add_argument("--only", default=None,
                  help=f"experiments to run (default: all; the 2-minute aim names {','.join(AIM)})")
  ap.add_argument("--target", type=float, default=120.0, help="seconds the aim allows")
  ap.add_argument("--cache", default="off",
                  help="the compile cache (attndyn.compile_cache): off (default: a fresh "
                       "machine, every program compiled) or a directory; run twice with the "
                       "same directory to time a rerun")
  ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                  help="a reproduction setting, as `attndyn reproduce --set` (repeatable)")
  args = ap.parse_args(argv)
  from attndyn import compile_cache
  os.environ[compile_cache.ENV] = args.cache
  os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
  cached = (0 if args.cache == "off" or not Path(args.cache).is_dir()
            else sum(1 for _ in Path(args.cache).rglob("*-cache")))
  loaded = collections.Counter()

  def on_event(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":
      loaded["programs"] += 1
  compile_s = collections.Counter()

  def on_duration(event: str, seconds: float, **_) -> None:
    if "backend_compile" in event:
      compile_s["backend_compile"] += seconds

  jax.monitoring.register_event_duration_secs_listener(on_duration)
  jax.monitoring.register_event_listener(on_event)
  from attndyn import cli
  command = ["reproduce", "lu2021", "--quick", "--out", args.out, "--quiet"]
  if args.only:
    command += ["--only", args.only]
  for item in args.set:
    command += ["--set", item]
  t0 = time.perf_counter()
  code = cli.main(command)
  wall = time.perf_counter() - t0
  out = Path(args.out)
  rows = []
  for path in sorted((out / "experiments").glob("*.json")):
    doc = json.loads(path.read_text())
    counts = collections.Counter(c["status"] for c in doc.get("claims", []))
    rows.append({"experiment": doc["name"], "seconds": doc.get("seconds"),
                 "results": dict(counts)})
  rows.sort(key=lambda r: r["seconds"] or 0, reverse=True)
  for r in rows:
    results = ", ".join(f"{n} {k}" for k, n in sorted(r["results"].items()))
    print(f"{r['experiment']:16s} {r['seconds'] or float('nan'):7.1f} s   {results}")
  aim = sum(r["seconds"] or 0 for r in rows if r["experiment"] in AIM)
  doc = {"command": "attndyn " + " ".join(command), "exit_code": code, "wall_s": wall,
         "backend_compile_s": compile_s["backend_compile"], "cache": args.cache,
         "cached_programs_at_start": cached, "programs_loaded_from_cache": loaded["programs"],
         "experiments": rows,
         "aim_experiments_s": aim, "target_s": args.target, "aim_ratio": aim / args.target}
  print(f"wall {wall:.1f} s (exit {code}); XLA compiling {compile_s['backend_compile']:.1f} s; "
        f"compile cache {args.cache} ({cached} programs at the start, {loaded['programs']} "
        f"loaded); "
        f"{'+'.join(AIM)}: {aim:.1f} s = {aim / args.target:.2f} × the {args.target:g} s aim")
  (out / "main_job.json").write_text(json.dumps(doc, indent=1) + "\n")
  return code


if __name__ == "__main__":
  sys.exit(main())
