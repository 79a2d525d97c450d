"""``attndyn``: the command line. A thin layer: parse, validate, call the pipeline, write outputs.

Every bad input (a config value, a config file, a results or checkpoint
directory) ends in one line ``attndyn: error: ...`` on stderr and exit code 2,
before anything is computed; so does a failure of the environment (a full
disk, permissions, a read-only mount: the line names the file and what was
kept) and an output directory another attndyn command holds (its lock,
:mod:`attndyn.lock`, names the holder). Ctrl-C is one line saying how to
resume, exit code 130; SIGTERM (a scheduler's, or `kill`) the same with exit
code 143. Running out of memory is exit code 2 with its remedies. An ODE stage
that fails after gradient descent finished still writes what was computed: exit
code 2 when the machine stopped it (memory, disk), saying how ``--resume``
finishes it, else it is a bug. A bug is one line ``attndyn: internal error: ...``
naming the file that holds its traceback, exit code 1 (the only use of 1). No
input or environment prints a traceback.
"""
import argparse
import errno
import importlib
import os
import signal
import sys
import threading
import tomllib

from attndyn import compile_cache
from attndyn.tasks.errors import ConfigError, digits_error, is_environment_failure, too_many_digits

__all__ = ["ERROR_LOG", "main", "console"]

_RUN_EPILOG = """examples:
  attndyn run --preset quick --out results/quick
  attndyn run --preset lu2021-text-tc --out results/text-tc --set sweep.seeds=10
  attndyn run my.toml --out results/lr --set 'sweep.grid={"train.lr"=[0.05,0.1,0.2]}'
  attndyn run --preset quick --out results/f64 --set precision=float64 --set model.classifier=fc
  attndyn run --preset quick --out results/kf --set 'model.freeze=["keys"]' --set ode.form=exact
  attndyn run --preset lu2021-text-tc --out results/big --chunk-size 2   # checkpoint every chunk
  attndyn run --out results/big --resume          # after a kill: continue, same config

--resume continues a killed run from DIR/checkpoints (one entry per finished
chunk, written every --checkpoint-every chunks) with the config it was
started with; the final outputs are bit-identical to an uninterrupted run's.
Give CONFIG.toml/--preset/--set too and attndyn checks they match.

--set takes section.key=value with a TOML value; a bare word is a string
(fc, float64) and `none` unsets an optional key. Tables nest with dots:
--set sweep.grid.train.lr=[0.05,0.1] adds one grid axis. See docs/usage.md for
every key. --distributed calls jax.distributed.initialize() first
(docs/multihost.md); only process 0 writes DIR.
"""

_MAIN_EPILOG = """examples:
  attndyn presets
  attndyn presets --show lu2021-code-tc > code-tc.toml
  attndyn run --preset quick --out results/quick
  attndyn run code-tc.toml --out results/code-tc --set sweep.seeds=3
  attndyn run --out results/code-tc --resume
  attndyn report results/quick
  python -c "import analysis; r = analysis.load('results/quick'); print(r.gd['score'].dims)"
"""

_REPORT_EPILOG = """examples:
  attndyn report results/quick
  attndyn report results/quick --out /tmp/quick-report

Writes report.md (the headline table, every run, diverged runs, ODE deviations)
and the four figures, regenerated from summary.json and trajectories.npz. An OUT
other than DIR must be new or empty (--force: replace only report.md and the
figures there).
"""


class _Parser(argparse.ArgumentParser):
  """argparse, but a usage error is one line too (``attndyn: error: ...``, exit code 2)."""

  def error(self, message):
    self.exit(2, f"attndyn: error: {self.prog}: {message} (see `{self.prog} --help`).\n")


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(
      prog="attndyn", epilog=_MAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
      description="Train Lu et al. (2021) attention models over vmapped sweeps and compare "
                  "gradient descent with the paper's ODEs.")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

  run = sub.add_parser("run", help="run a sweep and write summary.json, trajectories.npz, figures",
                       epilog=_RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run gradient descent (and the configured ODEs) over a sweep.")
  run.add_argument("config", nargs="?", metavar="CONFIG.toml", help="a TOML config file")
  run.add_argument("--preset", metavar="NAME", help="a named preset instead of CONFIG.toml "
                   "(see `attndyn presets`)")
  run.add_argument("--out", required=True, metavar="DIR",
                   help="output directory (new or empty, or the one to --resume)")
  run.add_argument("--resume", action="store_true",
                   help="continue the run in DIR from its checkpoints (same config)")
  run.add_argument("--checkpoint-every", type=int, metavar="N",
                   help="write finished chunks to DIR/checkpoints every N chunks "
                        "(default 1; 0: no checkpoints)")
  run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, e.g. train.lr=0.05 (repeatable)")
  run.add_argument("--chunk-size", type=int, metavar="N",
                   help="sweep points per compiled call (default: from a memory estimate)")
  run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
  run.add_argument("--force", action="store_true",
                   help="write into a non-empty DIR, replacing only attndyn's own files")
  run.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() first (multi-host; docs/multihost.md)")

  report = sub.add_parser("report", help="turn a results directory into report.md and figures",
                          epilog=_REPORT_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          description="Read a results directory (analysis.load) and write "
                                      "report.md and the figures.")
  report.add_argument("dir", metavar="DIR", help="a directory written by `attndyn run`")
  report.add_argument("--out", metavar="OUT", help="where to write (default: DIR)")
  report.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
  report.add_argument("--force", action="store_true",
                      help="write into a non-empty OUT, replacing only report.md and the figures")

  presets = sub.add_parser("presets", help="list the named presets",
                           description="List the named presets, or print one as TOML.",
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="examples:\n  attndyn presets\n"
                                  "  attndyn presets --show quick > my.toml\n")
  presets.add_argument("--show", metavar="NAME", help="print this preset as a TOML config")

  from attndyn.reproduce import cli as reproduce_cli
  reproduce_cli.add_parser(sub)
  from attndyn import explain as explain_cli
  explain_cli.add_parser(sub)

  atlas = sub.add_parser("atlas", help="map where Lu et al.'s theory holds over a grid (atlas.md)",
                         description="Run the theory-validity atlas (attndyn.atlas): GD and "
                                     "Lemma 2's ODE over a grid of configurations; write "
                                     "atlas.csv, curves.npz, phase diagrams and atlas.md.")
  atlas.add_argument("--out", required=True, metavar="DIR", help="output directory")
  atlas.add_argument("--quick", action="store_true", help="the small grid (>= 500 configurations)")
  atlas.add_argument("--resume", action="store_true",
                     help="keep DIR's finished buckets (its jobs/ store) and compute the others")
  atlas.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="change an atlas setting, e.g. tau=100 or classifiers='[\"tc\"]'")
  atlas.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
  atlas.add_argument("--force", action="store_true",
                     help="write into a non-empty DIR (replaces only attndyn's own files)")
  atlas.add_argument("--workers", default="auto", metavar="N|auto",
                     help="buckets computed side by side, one Dask worker process each (default "
                          "auto: one per CPU core on a CPU, else 1; 1: in this process)")
  atlas.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                     help="compute the buckets on a running Dask cluster (docs/cluster.md) "
                          "instead of --workers on this machine")

  bench = sub.add_parser("bench", help="run the benchmarks (benchmarks.run)", add_help=False,
                         description="Pass all arguments to benchmarks.run.main.")
  bench.add_argument("args", nargs=argparse.REMAINDER)
  return parser


def _initialize_distributed():
  """``jax.distributed.initialize`` with its arguments from the environment (JAX itself reads
  only JAX_COORDINATOR_ADDRESS): JAX_NUM_PROCESSES, JAX_PROCESS_ID and, in seconds,
  JAX_INITIALIZATION_TIMEOUT, JAX_HEARTBEAT_TIMEOUT_SECONDS and JAX_SHUTDOWN_TIMEOUT_SECONDS
  (JAX's defaults, 300, 100 and 300, when unset). A process that dies mid-run is noticed by
  the others after the heartbeat timeout (docs/multihost.md)."""
  import jax
  kwargs = {}
  for env, name in (("JAX_NUM_PROCESSES", "num_processes"), ("JAX_PROCESS_ID", "process_id"),
                    ("JAX_INITIALIZATION_TIMEOUT", "initialization_timeout"),
                    ("JAX_HEARTBEAT_TIMEOUT_SECONDS", "heartbeat_timeout_seconds"),
                    ("JAX_SHUTDOWN_TIMEOUT_SECONDS", "shutdown_timeout_seconds")):
    if os.environ.get(env):
      try:
        kwargs[name] = int(os.environ[env])
      except ValueError:
        raise ConfigError(f"{env} = {os.environ[env]!r} is not allowed: an integer.") from None
      if name.endswith(("timeout", "seconds")) and kwargs[name] < 1:
        raise ConfigError(f"{env} = {os.environ[env]!r} is not allowed: a positive number "
                          f"of seconds.")
  try:
    jax.distributed.initialize(**kwargs)
  except (RuntimeError, ValueError) as err:
    raise ConfigError(
        f"--distributed: jax.distributed.initialize() failed: {str(err).rstrip('.')}. "
        f"Set JAX_COORDINATOR_ADDRESS "
        f"(host:port of process 0), JAX_NUM_PROCESSES and JAX_PROCESS_ID, or run under a "
        f"cluster JAX detects (SLURM, Open MPI, TPU); see docs/multihost.md.") from None


def _load_config(args, resumed: dict = None):
  """The run's config: CONFIG.toml or --preset (or, with --resume alone, DIR's), then --set."""
  from attndyn import config, overrides, presets
  if resumed is not None and args.config is None and args.preset is None:
    raw = resumed
  elif (args.config is None) == (args.preset is None):
    raise ConfigError("give exactly one of CONFIG.toml or --preset NAME "
                      "(see `attndyn presets` for the names), or --resume with an --out DIR "
                      "to continue.")
  else:
    raw = (config.read_toml(args.config) if args.config
           else presets.preset(args.preset, what="--preset"))
  sets = [f"sweep.{key}={value}" for key, value in (
      ("chunk_size", args.chunk_size), ("checkpoint_every", args.checkpoint_every))
          if value is not None]
  return config.RunConfig.from_dict(overrides.apply(overrides.apply(raw, sets), args.overrides))


def _headline(doc) -> None:
  from attndyn import report
  print(report.table([(report.label(doc["config"]), doc["aggregate"])]))
  for line in report.diverged_lines(doc) + report.ode_failed_lines(doc):
    print(line)


def _run(args) -> int:
  """``attndyn run``: :func:`attndyn.api.run` (``ad.run``) into ``--out``, then the headline
  table, the files written and the exit code."""
  if args.distributed:
    _initialize_distributed()
  from attndyn import api, outputs
  res = api.run(lambda resumed: _load_config(args, resumed), out=args.out, force=args.force,
                resume=args.resume, progress=not args.no_progress,
                command=["attndyn"] + list(args.argv))
  out = res.directory
  if outputs.is_writer():
    doc = res.summary
    _headline(doc)
    figs = doc["files"].get("figures", [])
    print(f"wrote {out}/: {outputs.SUMMARY}, {outputs.TRAJECTORIES}, {outputs.CONFIG}, "
          f"{outputs.RUN_INFO}" + (f", {', '.join(figs)}" if figs else ""))
    figure_errors = doc["files"].get("figure_errors", {})
    unwritable = {n: m for n, m in figure_errors.items() if m.startswith("OSError")}
    for name, message in figure_errors.items():
      if name not in unwritable:
        print(f"attndyn: warning: figure {name} failed: {message}", file=sys.stderr)
    if unwritable:  # the environment (a full disk, ...), not a plotting bug: one error line
      print(f"attndyn: error: {len(unwritable)} figure(s) could not be written "
            f"({next(iter(unwritable.values()))}); kept: {outputs.SUMMARY}, "
            f"{outputs.TRAJECTORIES}, {outputs.CONFIG} in {str(out)!r}: make room, then "
            f"`attndyn report {out}` draws them.", file=sys.stderr)
      return 2
  code = _failed_stages(args, out, res)
  if outputs.is_writer() and code == 0:
    code = _no_ode_result(doc, out)
  return code


def _no_ode_result(doc, out) -> int:
  """2, with one line, when every solve of an ODE stage failed (its columns are all empty:
  the config asks for what the solver cannot do), else 0. Everything was written."""
  from attndyn import report
  failed = report.all_odes_failed(doc)
  if not failed:
    return 0
  ode = doc["config"].get("ode", {})
  print("attndyn: error: every solve of an ODE stage failed, so its columns are empty: " +
        ", ".join(f"{kind} ({reason}: {remedy})" for kind, reason, remedy in failed) +
        f" (ode.max_steps = {ode.get('max_steps')}, ode.rtol = {ode.get('rtol')}, ode.atol = "
        f"{ode.get('atol')}); everything else was written to {str(out)!r}.", file=sys.stderr)
  return 2


def _failed_stages(args, out, result) -> int:
  """One line per ODE stage that raised, after everything else was written; the exit code.

  A stage the machine stopped (out of memory, a full disk) is exit code 2 and says how to
  finish it (``--resume`` solves only what is missing); any other exception is a bug: exit
  code 1 and its traceback in ``--out``'s :data:`ERROR_LOG`.
  """
  code, log = 0, None
  bugs = [e for e in result.exceptions.values() if not is_environment_failure(e)]
  for stage, message in result.summary["errors"].items():
    err = result.exceptions.get(stage)
    if err is not None and is_environment_failure(err):
      print(f"attndyn: error: the {stage} stage could not finish ({message}); everything else "
            f"was written to {str(out)!r}: free memory or disk (or use --chunk-size N), then "
            f"`attndyn run --out {out} --resume` solves the {stage} stage alone.",
            file=sys.stderr)
      code = max(code, 2)
    else:   # every failed stage's traceback in one file
      log = log or _write_traceback(args, *bugs)
      print(f"attndyn: internal error: the {stage} stage failed ({message}); everything else "
            f"was written to {str(out)!r}; traceback in {log}", file=sys.stderr)
      code = 1
  return code


def _report(args) -> int:
  from pathlib import Path

  from attndyn import lock
  out = Path(args.out or args.dir)
  if args.out is None and not out.is_dir():
    return _write_report(args, out)  # analysis.load says what DIR is missing
  # held while DIR is read too when the report goes there: no run rewrites it meanwhile
  with lock.hold(out):
    return _write_report(args, out)


def _write_report(args, out) -> int:
  from pathlib import Path

  from attndyn import analysis
  from attndyn import atomic, outputs, report, schema
  results = analysis.load(args.dir)
  task = results.config.get("task")
  n_nontopic = task.get("n_nontopic") if isinstance(task, dict) else None
  if not (schema.is_int(n_nontopic) and n_nontopic >= 1):
    raise ConfigError(f"{str(Path(args.dir) / outputs.SUMMARY)!r}: config.task.n_nontopic = "
                      f"{n_nontopic!r}, where attndyn writes a positive integer: the file is "
                      f"damaged.")
  _check_report_out(args, out)
  try:
    out.mkdir(parents=True, exist_ok=True)
  except OSError as err:
    raise ConfigError(f"--out {str(out)!r} cannot be created: {err.strerror or err}.") from None
  report_md = out / "report.md"
  for path in [report_md] + [out / name for name in outputs.FIGURES]:
    atomic.refuse_link(path)
  outputs.refuse_wrong_kind(out, report_md, "attndyn writes report.md")
  kinds = sorted(results.stages, key=lambda k: (k != "gd", k))
  trajs = {kind: results.trajectory(kind) for kind in kinds}
  from attndyn import pipeline
  # float64 results are drawn in float64 (the Corollary-1 curve is computed with JAX)
  with pipeline.precision_scope(results.config.get("precision")):
    written, failed = outputs.draw_figures(out, trajs, n_nontopic,
                                           progress=not args.no_progress)
  text = report.markdown(results.summary, figures=written, source=str(args.dir))
  atomic.write_text(report_md, text)
  _headline(results.summary)
  print(f"wrote {out}/: report.md" + (f", {', '.join(written)}" if written else ""))
  for name, message in failed.items():
    print(f"attndyn: warning: figure {name} failed: {message}", file=sys.stderr)
  return 0


def _check_report_out(args, out) -> None:
  """``report --out OUT``: like every command, a non-empty OUT is refused without --force
  (its report.md or figures may be someone's); writing into the results directory itself
  replaces only the report and figures attndyn drew there."""
  from attndyn import outputs
  if args.force or not out.is_dir():
    return
  try:
    if out.samefile(args.dir):
      return
  except OSError:
    pass
  outputs.refuse_nonempty(out, "attndyn never overwrites files it did not write: pick a new "
                          "directory, or pass --force to replace only report.md and the "
                          "figures there.")


def _presets(args) -> int:
  from attndyn import presets, tomlwrite
  if args.show is not None:
    sys.stdout.write(tomlwrite.dumps(presets.preset(args.show, what="--preset")))
    return 0
  width = max(len(n) for n in presets.names())
  for name in presets.names():
    print(f"{name:<{width}}  {presets.describe(name)}")
  return 0


def _bench(args) -> int:
  try:
    bench = importlib.import_module("benchmarks.run")
  except ModuleNotFoundError as err:
    if err.name not in ("benchmarks.run", "benchmarks"):
      raise
    raise ConfigError("`attndyn bench` needs benchmarks/run.py, which this checkout does not "
                      "have.") from None
  return bench.main(args.args, prog="attndyn bench") or 0


def _explain(args) -> int:
  from attndyn import explain as explain_cli
  from attndyn import lock
  with lock.hold(args.out):
    return explain_cli.main(args)


def _atlas(args) -> int:
  from pathlib import Path

  from attndyn import api, atlas, jobs, outputs
  out = Path(args.out)
  atlas.settings(quick=args.quick, items=args.overrides)   # bad --set: before DIR is touched
  workers = jobs.parse_workers(args.workers)
  store = out / atlas.STORE
  if args.resume and not store.is_dir():
    raise ConfigError(f"--resume: {str(out)!r} holds no atlas to continue (no {atlas.STORE}/ "
                      f"folder of finished buckets); run without --resume.")
  outputs.refuse_wrong_kind(out, store, "the atlas keeps each finished bucket", directory=True)
  result = api.atlas(out=out, quick=args.quick, settings=args.overrides, resume=args.resume,
                     force=args.force, workers=workers, scheduler=args.scheduler,
                     progress=not args.no_progress, command=["attndyn"] + args.argv)
  files = [f"atlas.csv ({len(result.rows)} rows)", "atlas.md", "curves.npz",
           *result.findings.get("figures", [])]
  print(f"wrote {args.out}/: {', '.join(files)} in {result.seconds['total']:.0f} s")
  # a failed ODE stage leaves its bucket's rows without ode_rel_dev: the exit code says so
  # (2: the machine's failure, --resume solves it again; 1: a bug, its traceback in a file)
  errs = [e for stages in result.failures.values() for e in stages.values()]
  if not errs:
    return 0
  jobs_failed = sorted(k for k, v in result.failures.items() if "job" in v)
  if jobs_failed:
    print(f"attndyn: error: {len(jobs_failed)} bucket(s) failed ({', '.join(jobs_failed)}); "
          f"their rows are missing, the others are kept: {result.failures[jobs_failed[0]]['job']}; "
          f"`attndyn atlas --out {args.out} --resume` (same options) computes only them again.",
          file=sys.stderr)
    return 1
  buckets = ", ".join(sorted(result.failures))
  bugs = [e for e in errs if not is_environment_failure(e)]
  if bugs:
    print(f"attndyn: internal error: an ODE stage failed in {buckets} (their rows have no "
          f"ode_rel_dev; see atlas.json's errors); traceback in "
          f"{_write_traceback(args, *bugs)}", file=sys.stderr)
    return 1
  print(f"attndyn: error: an ODE stage could not finish in {buckets} ({errs[0]}); their rows "
        f"have no ode_rel_dev: free memory or disk, then `attndyn atlas --out {args.out} "
        f"--resume` (same options) solves them again.", file=sys.stderr)
  return 2


def _reproduce(args) -> int:
  from attndyn.reproduce import cli as reproduce_cli
  return reproduce_cli.main(args)


EQX_ON_ERROR_VALUES = ("raise", "breakpoint", "nan", "off")   # equinox's own list
_FLAGS_CHECKED = set()   # XLA_FLAGS values a child process has started JAX with


def check_environment(*, distributed: bool = False) -> None:
  """The environment variables JAX, XLA and equinox read, before any of them acts on one.

  A bad one would otherwise end the command as a bug (equinox's ValueError, JAX's empty
  AssertionError) or kill it outright (XLA exits on an unknown flag in ``XLA_FLAGS``, so a
  child process starts JAX with them first, once per value and process: about half a second).

  Raises:
    ConfigError: naming the variable, its value and what is allowed.
  """
  import subprocess
  eqx = os.environ.get("EQX_ON_ERROR")
  if eqx is not None and eqx not in EQX_ON_ERROR_VALUES and "equinox" not in sys.modules:
    raise ConfigError(f"EQX_ON_ERROR = {eqx!r} is not allowed: one of "
                      f"{', '.join(EQX_ON_ERROR_VALUES)} (unset, attndyn uses nan).")
  flags = os.environ.get("XLA_FLAGS", "").strip()
  backend_started = "jax" in sys.modules and _backend_started()
  if flags and flags not in _FLAGS_CHECKED and not backend_started:
    try:
      child = subprocess.run([sys.executable, "-c", "import jax; jax.devices('cpu')"],
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})
    except (OSError, subprocess.SubprocessError):
      child = None
    unknown = [line.split("XLA_FLAGS:", 1)[1].strip() for line in
               (child.stderr.splitlines() if child is not None else [])
               if "Unknown flag" in line and "XLA_FLAGS:" in line]
    if unknown:
      raise ConfigError(f"XLA_FLAGS = {flags!r} is not allowed: XLA does not know "
                        f"{', '.join(unknown)}; it takes its own flags, --xla_NAME=VALUE "
                        f"(unset XLA_FLAGS, or fix it).")
    _FLAGS_CHECKED.add(flags)
  platforms = os.environ.get("JAX_PLATFORMS", "").strip()
  if platforms and not distributed and not backend_started:
    # (a --distributed run starts its backend in jax.distributed.initialize, which says what
    # went wrong itself)
    import jax
    try:
      jax.devices()
    except (RuntimeError, AssertionError) as err:
      why = " ".join(str(err).split())[:200] or "no such backend on this machine"
      raise ConfigError(f"JAX_PLATFORMS = {platforms!r} is not allowed here: JAX could not start "
                        f"it ({why}); a platform this machine has, e.g. cpu, or unset "
                        f"JAX_PLATFORMS to let JAX choose.") from None


def _backend_started() -> bool:
  """Whether this process's JAX has started a backend (its environment was read then)."""
  try:
    from jax._src import xla_bridge
    return bool(getattr(xla_bridge, "_backends", None))
  except ImportError:
    return False


ERROR_LOG = "attndyn-error.log"


def _write_traceback(args, *errs: BaseException) -> str:
  """Write ``errs`` (by default the exception being handled), with their tracebacks, to
  ``--out``'s :data:`ERROR_LOG` (or a new temporary file when there is no such directory, or
  a link stands there); return its path. Never raises: it runs in the last-resort handler."""
  import traceback
  trace = ("\n".join("".join(traceback.format_exception(e)) for e in errs) if errs
           else traceback.format_exc())
  return _write_log(args, f"attndyn {' '.join(getattr(args, 'argv', []) or [])}\n{trace}")


def _write_log(args, text: str, *, append: bool = False) -> str:
  """Write ``text`` to ``--out``'s :data:`ERROR_LOG` (``append``: after what this command
  already wrote there), else to a new temporary file; return its path. Never raises."""
  import tempfile
  from attndyn import atomic
  out = getattr(args, "out", None)
  before = getattr(args, "error_log_text", "") if append else ""
  text = before + ("\n" if before else "") + text
  args.error_log_text = text
  try:
    if out and os.path.isdir(out):
      return str(atomic.write_text(os.path.join(out, ERROR_LOG), text))
  except (OSError, ValueError):   # a full or read-only --out, a link there, a name too long
    pass
  try:
    fd, path = tempfile.mkstemp(prefix="attndyn-error-", suffix=".log")   # O_EXCL, mode 0600
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
    return path
  except OSError as err:
    return f"no file (it could not be written: {err.strerror or err})"


def _os_error(err: OSError) -> str:
  """``'PATH': No space left on device (ENOSPC)``: the file meant (not the temporary one an
  atomic write failed on) and the reason."""
  import re
  path = err.filename
  if isinstance(path, str) and len(path) > 200:
    path = path[:100] + "..." + path[-60:]
  if isinstance(path, str):
    head, name = os.path.split(path)
    match = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", name)  # attndyn.atomic's temporary file
    path = os.path.join(head, match.group(1)) if match else path
  code = errno.errorcode.get(err.errno, "")
  reason = f"{err.strerror or err}" + (f" ({code})" if code else "")
  return f"{path!r}: {reason}" if path else reason


def _kept(args) -> str:
  """What an interrupted write left, and how to go on from it, for the one-line error."""
  from pathlib import Path
  out = getattr(args, "out", None)
  if args.command == "run" and out:
    chunks = list(Path(out).glob("checkpoints/*.npz"))   # one per stored chunk
    if (Path(out) / "checkpoints" / "manifest.json").is_file() and chunks:
      return (f"; kept: {len(chunks)} finished chunk(s) in {str(Path(out) / 'checkpoints')!r} "
              f"(every file in --out is whole, old or new): make room or fix the permissions, "
              f"then `attndyn run --out {out} --resume` writes the outputs without recomputing "
              f"what they hold.")
    return ("; no checkpoints were kept (--checkpoint-every 0, or none was finished): make "
            "room or fix the permissions, then run it again.")
  if args.command == "reproduce" and out:
    return (f"; kept: the finished experiments and the engine runs' checkpoints in {out!r}: "
            f"`attndyn reproduce {args.paper} --out {out} --resume` continues from them.")
  if args.command == "atlas" and out:
    return (f"; kept: the finished buckets in {out!r}/jobs: `attndyn atlas "
            f"--out {out} --resume` computes only the others.")
  return "; files attndyn had written are whole (each is written atomically)."


def _guarded(hint, args) -> str:
  """``hint(args)`` (:func:`_kept`, :func:`_resume_hint`), or ``""`` when looking at ``--out``
  fails as the command did (a path too long, a permission): the last-resort handler never
  raises."""
  try:
    return hint(args)
  except (OSError, ValueError):
    return ""


def _resume_hint(args) -> str:
  """How to continue an interrupted command, for its one-line message."""
  from pathlib import Path
  out = getattr(args, "out", None)
  if args.command == "run":
    if out and (Path(out) / "checkpoints" / "manifest.json").is_file():
      return f"; `attndyn run --out {out} --resume` continues from the last checkpoint"
    return "; no checkpoints were written (--checkpoint-every 0?): run it again"
  if args.command == "reproduce":
    return (f"; `attndyn reproduce {args.paper} --out {out} --resume` (same options) keeps the "
            f"finished experiments and continues from the last checkpoint")
  if args.command == "atlas":
    return (f"; `attndyn atlas --out {out} --resume` (same options) keeps the finished buckets "
            f"and computes the others")
  return ""


def _install(signum, handler):
  """Set a signal handler where Python allows it (the main thread); returns the previous one."""
  if threading.current_thread() is not threading.main_thread():
    return None
  return signal.signal(signum, handler)


def main(argv=None) -> int:
  """Entry point of the ``attndyn`` console script; returns the exit code."""
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv[:1] == ["bench"]:
    # benchmarks.run parses its own options: argparse's REMAINDER would refuse a leading --out.
    args = argparse.Namespace(command="bench", args=argv[1:])
  else:
    args = _parser().parse_args(argv)
  args.argv = argv
  from attndyn.progress import guarded_streams
  with guarded_streams() as (stdout, stderr):   # output streams are not the computation
    code = _dispatch(args)
    stdout.flush()
    stderr.flush()
    code = _streams_outcome(args, code, stdout, stderr)
  stdout.silence()
  stderr.silence()
  return code


def _streams_outcome(args, code: int, stdout, stderr) -> int:
  """The exit code once the command ended with ``code``, given what happened to its streams.

  A stream that failed (a closed pipe, a full disk) changed nothing that was computed or
  written. What stderr could not say of a failed command goes to the error log in ``--out``;
  a command that succeeded but whose stdout failed exits ``128 + SIGPIPE`` (141, as a
  pipeline's reader that stopped reading expects) or, for any other failure, 2, saying so on
  stderr in one line: the exit code says only what happened to the stream.
  """
  if stderr.failed is not None and code != 0 and stderr.lost:
    _write_log(args, "what attndyn could not print on stderr "
                     f"({stderr.failed}):\n" + "".join(stderr.lost), append=True)
  if stdout.failed is None or code != 0:
    return code
  out = getattr(args, "out", None) or getattr(args, "dir", None)
  print(f"attndyn: error: standard output could not be written ({stdout.failed}); nothing else "
        f"failed" + (f": every output is in {str(out)!r}." if out else "."), file=sys.stderr)
  return 128 + signal.SIGPIPE if stdout.broken_pipe else 2


def _dispatch(args) -> int:
  """Run ``args.command``; every way it can end is an exit code (see the module docstring)."""
  commands = {"run": _run, "report": _report, "presets": _presets, "bench": _bench,
              "reproduce": _reproduce, "explain": _explain, "atlas": _atlas}
  terminated = []

  def on_sigterm(signum, frame):  # a scheduler's or `kill`'s SIGTERM stops like Ctrl-C
    terminated.append(signum)
    raise KeyboardInterrupt

  previous = _install(signal.SIGTERM, on_sigterm)
  try:
    if args.command != "presets":   # every other command starts JAX
      check_environment(distributed=getattr(args, "distributed", False))
    if args.command in ("run", "reproduce", "explain", "atlas"):   # the commands that compile
      compile_cache.enable()
    return commands[args.command](args)
  except (ConfigError, FileNotFoundError, tomllib.TOMLDecodeError) as err:
    print(f"attndyn: error: {err}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    what = "terminated (SIGTERM)" if terminated else "interrupted"
    print(f"attndyn: {what}" + _guarded(_resume_hint, args), file=sys.stderr)
    return 128 + signal.SIGTERM if terminated else 130
  except OSError as err:  # the environment (a full disk, permissions, a read-only mount)
    if err.errno == errno.ENAMETOOLONG:   # bad input: nothing was written, nothing is kept
      print(f"attndyn: error: {_os_error(err)}: a name in that path is longer than the file "
            f"system allows (NAME_MAX, 255 bytes on most); pick a shorter one.", file=sys.stderr)
      return 2
    print(f"attndyn: error: {_os_error(err)}{_guarded(_kept, args)}", file=sys.stderr)
    return 2
  except RecursionError:
    print("attndyn: error: an input (a TOML config, a --set value or a JSON file) is nested "
          "too deeply to read (RecursionError); attndyn's own files nest a few levels at most.",
          file=sys.stderr)
    return 2
  except Exception as err:
    if too_many_digits(err):   # a reader this command reached that does not name its file
      print(f"attndyn: error: {digits_error('an input (a TOML config, a --set value or a JSON file)')}",
            file=sys.stderr)
      return 2
    if is_environment_failure(err):   # out of memory (OSError is answered above)
      print("attndyn: error: out of memory; run the sweep in smaller chunks (--chunk-size N) "
            "or with fewer points, or, if one point alone does not fit, make it smaller "
            "(task.vocab_size, task.n_train, model.embed_dim, or fewer recorded steps: "
            "train.steps / train.record_every).", file=sys.stderr)
      return 2
    # a bug: one line, and the traceback in a file for the bug report
    try:
      message = " ".join(str(err).split())
    except Exception:   # an exception that cannot say what it is
      message = "(its message could not be printed)"
    if len(message) > 300:
      message = message[:300] + " ..."
    print(f"attndyn: internal error: {type(err).__name__}: {message}; traceback in "
          f"{_write_traceback(args)}", file=sys.stderr)
    return 1
  finally:
    if previous is not None:
      signal.signal(signal.SIGTERM, previous)


def console() -> None:
  """The ``attndyn`` console script: :func:`main`, then exit with its code.

  After Ctrl-C or SIGTERM, XLA may still be computing the interrupted chunk on
  its own threads, and a normal interpreter exit waits for it (minutes inside a
  long ODE solve). Everything kept is on disk by then and the lock is released,
  so an interrupted command leaves at once.
  """
  code = main()
  if code in (130, 128 + signal.SIGTERM):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  sys.exit(code)


if __name__ == "__main__":
  console()
