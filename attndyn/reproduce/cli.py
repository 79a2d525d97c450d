"""The ``attndyn reproduce`` subcommand: argument parsing and the run → report sequence."""
import argparse
import sys
import time
from pathlib import Path

from attndyn.reproduce import PAPERS
from attndyn.tasks.errors import ConfigError

__all__ = ["EPILOG", "add_parser", "main"]

EPILOG = """examples:
  attndyn reproduce lu2021 --out results/lu2021-quick --quick
  attndyn reproduce lu2021 --out results/lu2021
  attndyn reproduce lu2021 --out results/lu2021 --only sst,purity --force
  attndyn reproduce lu2021 --out results/tiny --quick --set synthetic.run.train.steps=1000 --set sst.seeds=1
  attndyn reproduce lu2021 --out results/lu2021 --report-only
  attndyn reproduce lu2021 --settings --only synthetic        # every setting, its kind, its values
  attndyn reproduce lu2021 --out results/lu2021 --resume       # after a kill
  attndyn reproduce snell --out results/snell --set copying.preset=cpu

Every experiment writes DIR/experiments/NAME.json as soon as it finishes;
replication.md and replication.json are rebuilt from all of them at the end,
so experiments run separately (--only ... --force) merge into one table.
--set NAME.key=value changes one setting of experiment NAME (a TOML value;
nested keys with dots, e.g. --set synthetic.run.task.vocab_size=500). Each
setting has a declared kind (the annotations of the experiment's Settings
dataclass: a count >= 1, an index >= 0, a number >= 0, a string, one of named
values, a list of one of these, or the run table, which the run schema checks);
a value of another kind is refused (--settings lists them).
"""


def add_parser(sub) -> argparse.ArgumentParser:
  """Register ``reproduce`` on the main parser's subparsers."""
  p = sub.add_parser("reproduce", help="rerun a paper's experiments; write replication.md/json",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Run every experiment of a paper (seeds vmapped), write each "
                                 "figure as PNG and a replication table with a verdict per claim "
                                 "(pass / fail / inconclusive from its 95% interval).")
  p.add_argument("paper", metavar="PAPER", help=f"which paper: {', '.join(PAPERS)}")
  p.add_argument("--out", metavar="DIR", help="output directory (new or empty; required unless "
                                              "--settings)")
  p.add_argument("--quick", action="store_true",
                 help="fewer seeds and epochs: minutes on 2 CPU cores (rows the budget cannot "
                      "reach are marked 'quick: not comparable')")
  p.add_argument("--only", metavar="A,B", help="run only these experiments, in this order")
  p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME.KEY=VALUE",
                 help="change one experiment setting (repeatable)")
  p.add_argument("--force", action="store_true",
                 help="write into a non-empty DIR (replaces only attndyn's own files)")
  p.add_argument("--resume", action="store_true",
                 help="continue a reproduction that was killed in DIR: finished experiments with "
                      "the same settings and code are kept (DIR/jobs), runs on the engine "
                      "continue from their checkpoints (DIR/runs/*/checkpoints), the rest run "
                      "again")
  p.add_argument("--report-only", action="store_true",
                 help="run nothing; rebuild replication.md/json from DIR/experiments/*.json")
  p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
  p.add_argument("--workers", default="1", metavar="N|auto",
                 help="experiments run side by side, one Dask worker process each (default 1: "
                      "one after the other in this process)")
  p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                 help="run the experiments on a running Dask cluster whose workers see DIR "
                      "(a shared file system; docs/cluster.md)")
  p.add_argument("--settings", action="store_true",
                 help="run nothing; print every setting of the experiments (with --only: of "
                      "those) with its kind and its quick and full values (with --set applied)")
  return p


def _remove_leftovers(out: Path) -> None:
  """Remove the temporary files killed writes left under ``out`` (whose lock the caller holds):
  in experiments/ and in each runs/NAME, under that run's own lock."""
  from attndyn import atomic, lock
  from attndyn.reproduce import engine, runner
  atomic.remove_leftovers(out)
  atomic.remove_leftovers(out / runner.EXPERIMENTS_DIR)
  atomic.remove_leftovers(out / runner.STORE)
  runs = out / engine.RUNS_DIR
  for run_dir in sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []:
    with lock.hold(run_dir, create=False):
      atomic.remove_leftovers(run_dir, recursive=True)


def main(args) -> int:
  """Run ``attndyn reproduce``; returns the exit code (1 if an experiment failed to run)."""
  from attndyn import outputs
  from attndyn.reproduce import engine, report, runner
  runner.paper_module(args.paper)
  only = None if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
  if only == []:
    raise ConfigError(f"--only {args.only!r} names no experiment: give a comma-separated list, "
                      f"e.g. --only sst,purity.")
  if args.settings:
    runner.check_items(args.paper, args.overrides)
    print(runner.describe_settings(runner.select(args.paper, only), args.overrides), end="")
    return 0
  if args.out is None:
    raise ConfigError("--out DIR is required (the directory to write the reproduction into).")
  out = Path(args.out)
  command = ["attndyn"] + list(getattr(args, "argv", []) or [])
  if args.report_only:
    from attndyn import lock
    # the whole DIR, its runs/NAME included; a missing DIR is not created (the command says
    # there is nothing there)
    with lock.hold(out, create=False):
      if not (out / runner.EXPERIMENTS_DIR).is_dir():
        raise ConfigError(f"--report-only: {str(out)!r} has no {runner.EXPERIMENTS_DIR}/ folder "
                          "to build the report from.")
      _remove_leftovers(out)
      doc = report.write(args.paper, out, command=command, environment=outputs.environment())
    docs = []
  else:   # ad.reproduce locks DIR
    from attndyn import jobs
    jobs.revision()   # the code this process runs: read before the first experiment starts
    workers = jobs.parse_workers(args.workers)
    runner.check_items(args.paper, args.overrides, quick=args.quick)
    runner.select(args.paper, only)
    if args.resume and not any((out / d).is_dir() for d in (
        runner.STORE, runner.EXPERIMENTS_DIR, engine.RUNS_DIR)):
      raise ConfigError(f"--resume: {str(out)!r} holds no reproduction to continue (no "
                        f"{runner.STORE}/, {runner.EXPERIMENTS_DIR}/ or {engine.RUNS_DIR}/ "
                        f"folder); run without --resume.")
    start = time.perf_counter()
    from attndyn import api
    result = api.reproduce(args.paper, out=out, quick=args.quick, only=only,
                           settings=args.overrides, resume=args.resume, force=args.force,
                           workers=workers, scheduler=args.scheduler, progress=not args.quiet,
                           command=command)
    docs, doc = result.experiments, {"counts": result.counts}
    if not args.quiet:
      print(f"[reproduce] all experiments done in {time.perf_counter() - start:.0f} s",
            flush=True)
  c = doc["counts"]
  print(f"wrote {out}/{report.MARKDOWN} and {report.JSON}: {report.summary(c)}")
  failed = [d for d in docs if d.get("error")]
  for d in failed:
    bug = d.get("error_kind") != "environment"
    where = (f"; traceback in {out / runner.EXPERIMENTS_DIR / d['traceback']}"
             if d.get("traceback") else "")
    print(f"attndyn: {'internal error' if bug else 'error'}: experiment {d['name']} failed "
          f"({' '.join(d['error'].split())[:200]}){where}; the other experiments were written "
          f"(see {report.MARKDOWN})" + ("" if bug else "; free memory or disk, then "
                                       "--resume reruns it alone") + ".", file=sys.stderr)
  # exit code 1 is a bug's; a failure of the machine alone is 2
  if any(d.get("error_kind") != "environment" for d in failed):
    return 1
  return 2 if failed else 0
