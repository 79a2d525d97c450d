"""Run a paper's experiments, one after the other, and keep each one's claims and figures.

An experiment is a module with ``NAME``, ``TITLE``, ``FULL`` and ``QUICK``
(two instances of its frozen settings dataclass, typed by its annotations:
:mod:`attndyn.settings`) and ``run(ctx, settings) -> Outcome``. Each finished experiment is written at once to
``DIR/experiments/NAME.json`` (settings, seconds, claims, figures, details),
so a run cut short keeps what it finished, and the report
(:mod:`attndyn.reproduce.report`) is rebuilt from every such file present in
``DIR``: experiments run separately (``--only``, on another machine) merge
into one table.
"""
import dataclasses
import datetime
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, List, NamedTuple, Optional, Sequence

from attndyn import atomic
from attndyn import overrides as override_parser
from attndyn import settings as study_settings
from attndyn.reproduce import PAPERS
from attndyn.schema import suggest
from attndyn.tasks.errors import ConfigError, check, is_environment_failure

__all__ = ["EXPERIMENTS_DIR", "STORE", "Outcome", "Context", "paper_module", "experiment_modules",
           "settings_for", "describe_settings", "check_items",
           "select", "write_json", "machine", "run_experiment",
           "experiment_key", "experiment_job", "run_job", "run"]

EXPERIMENTS_DIR = "experiments"


class Outcome(NamedTuple):
  """What one experiment returns.

  Attributes:
    claims: rows from :func:`analysis.replication.claim`.
    figures: file names (relative to the output directory) of the PNGs it wrote.
    details: JSON-ready numbers worth keeping (stopping steps, per-seed values, ...).
  """
  claims: list
  figures: list
  details: dict


@dataclasses.dataclass
class Context:
  """Shared by the experiments of one run.

  Attributes:
    out: the output directory.
    quick: the quick mode (fewer seeds and epochs).
    cache: results one experiment leaves for another (e.g. the SST runs for purity).
    verbose: log progress lines on stderr.
    items: the run's ``--set`` items (an experiment that reuses another's runs
      resolves that one's settings with them).
    resume: ``--resume``: runs on the engine continue from their checkpoints
      (:mod:`attndyn.reproduce.engine`), and finished experiments are kept.
    experiment: the name of the experiment running now.
    ready: the names of the runs on the engine that jobs of this command computed before
      the experiment started (its ``runs``, :class:`attndyn.reproduce.engine.Planned`): read
      back from their checkpoints, as with ``resume``.
  """
  out: Path
  quick: bool
  cache: dict = dataclasses.field(default_factory=dict)
  verbose: bool = True
  items: tuple = ()
  command: Optional[Sequence[str]] = None
  on_partial: Optional[Callable[[Outcome], None]] = None
  resume: bool = False
  experiment: Optional[str] = None
  ready: frozenset = frozenset()

  def partial(self, outcome: Outcome) -> None:
    """Save an unfinished experiment's results so far (``DIR/experiments/NAME.json``, ``partial``)."""
    if self.on_partial is not None:
      self.on_partial(outcome)

  def log(self, message: str) -> None:
    if self.verbose:
      print(f"[reproduce {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

  def path(self, name: str) -> Path:
    return self.out / name


def paper_module(paper: str):
  """The package of ``paper`` (e.g. ``lu2021``)."""
  if paper not in PAPERS:
    raise ConfigError(f"paper {paper!r} is not allowed.{suggest(paper, PAPERS, as_repr=True)} "
                      f"Allowed: {', '.join(sorted(PAPERS))}.")
  return importlib.import_module(PAPERS[paper])


def experiment_modules(paper: str) -> list:
  """The experiment modules of a paper, in the order they run."""
  pkg = paper_module(paper)
  return [importlib.import_module(f"{pkg.__name__}.{name}") for name in pkg.EXPERIMENTS]


def settings_for(module, *, quick: bool, items: Sequence[str] = ()):
  """The experiment's settings (its ``QUICK`` or ``FULL`` dataclass) with its ``--set
  NAME.key=value`` items applied (:func:`attndyn.settings.resolve`)."""
  return study_settings.resolve(module, quick=quick, items=items)


def describe_settings(modules, items: Sequence[str] = ()) -> str:
  """One line per setting: ``NAME.key  kind  quick=VALUE  full=VALUE`` (``--set`` items applied)."""
  return "".join(line + "\n" for m in modules for line in study_settings.describe(m, items))


def check_items(paper: str, items: Sequence[str], *, quick: bool = False) -> None:
  """Every ``--set`` item names a known experiment and one of its settings (before anything runs)."""
  modules = experiment_modules(paper)
  names = [m.NAME for m in modules]
  for item in items:
    path, _ = override_parser.parse(item)
    if path[0] not in names:
      raise ConfigError(f"--set {item!r}: no experiment {path[0]!r}."
                        f"{suggest(path[0], names, as_repr=True)} Experiments: {', '.join(names)}.")
  for module in modules:
    settings_for(module, quick=quick, items=items)


def select(paper: str, only: Optional[Sequence[str]]) -> list:
  """The experiment modules to run: all, or those named in ``only`` (in that order)."""
  modules = experiment_modules(paper)
  if not only:
    return modules
  by_name = {m.NAME: m for m in modules}
  chosen = []
  for name in only:
    if name not in by_name:
      raise ConfigError(f"--only {name!r} is not allowed.{suggest(name, by_name, as_repr=True)} "
                        f"Experiments: {', '.join(by_name)}.")
    chosen.append(by_name[name])
  return chosen


def write_json(path: Path, doc: Any) -> Path:
  """Write ``doc`` as strict JSON, atomically (creating the directory)."""
  atomic.make_dirs(path.parent)
  return atomic.write_json(path, doc)


def machine() -> dict:
  """CPU cores and memory of the machine (wall times mean little without them)."""
  import os
  memory = None
  try:
    memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1)
  except (ValueError, OSError, AttributeError):
    pass
  return {"cpus": os.cpu_count(), "memory_gb": memory}


def run_experiment(module, ctx: Context, settings: dict) -> dict:
  """Run one experiment; errors are caught and recorded (the others still run).

  Returns:
    The experiment's JSON document (also written to ``DIR/experiments/NAME.json``).
  """
  from attndyn import jobs
  from attndyn.analysis.summary import json_ready
  ctx.log(f"{module.NAME}: start ({'quick' if ctx.quick else 'full'})")
  start = time.perf_counter()
  doc = {"name": module.NAME, "title": module.TITLE, "mode": "quick" if ctx.quick else "full",
         "settings": study_settings.as_json(settings), "partial": False,
         "command": list(ctx.command) if ctx.command else None,
         "finished": None, "seconds": None, "error": None, "claims": [], "figures": [],
         "details": {}, "revision": jobs.revision(), "machine": machine()}
  path = ctx.out / EXPERIMENTS_DIR / f"{module.NAME}.json"

  def save_partial(outcome: Outcome) -> None:
    doc.update(claims=outcome.claims, figures=outcome.figures, details=outcome.details)
    part = dict(doc, claims=outcome.claims, figures=outcome.figures, details=outcome.details,
                partial=True, seconds=time.perf_counter() - start)
    write_json(path, json_ready(part))

  ctx.on_partial = save_partial
  ctx.experiment = module.NAME
  try:
    outcome = module.run(ctx, settings)
    doc.update(claims=outcome.claims, figures=outcome.figures, details=outcome.details)
  except (KeyboardInterrupt, ConfigError):
    raise
  except Exception as err:  # one experiment's failure must not cost the others
    doc["error"] = f"{type(err).__name__}: {err}"   # claims saved by ctx.partial stay
    # the machine's (memory, disk) or a bug; the traceback goes to a file, not the terminal
    doc["error_kind"] = "environment" if is_environment_failure(err) else "bug"
    log = ctx.out / EXPERIMENTS_DIR / f"{module.NAME}.traceback.txt"
    try:
      atomic.make_dirs(log.parent)
      atomic.write_text(log, traceback.format_exc())
      doc["traceback"] = log.name
    except OSError:
      pass
    ctx.log(f"{module.NAME}: FAILED: {' '.join(doc['error'].split())[:300]}"
            + (f" (traceback in {log})" if "traceback" in doc else ""))
  finally:
    ctx.on_partial = None
    ctx.experiment = None
  doc["seconds"] = time.perf_counter() - start
  doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  doc = json_ready(doc)
  write_json(path, doc)
  ctx.log(f"{module.NAME}: done in {doc['seconds']:.1f} s, "
          f"{sum(c['status'] == 'pass' for c in doc['claims'])}/{len(doc['claims'])} claims pass")
  return doc


STORE = "jobs"    # DIR/jobs: the finished experiments' documents (:class:`attndyn.jobs.Store`)
_CACHES = {}      # output directory -> Context.cache, shared by the experiments run in a process


def experiment_key(module, quick: bool, settings, items: Sequence[str] = ()) -> str:
  """The key of an experiment's job: what decides its document (name, mode, settings, and the
  settings of the experiments whose runs it reuses, its ``USES``; the code revision and
  precision are added by :func:`attndyn.jobs.key_of`)."""
  from attndyn import jobs
  paper = module.__name__.rsplit(".", 2)[-2]
  used = [study_settings.as_json(settings_for(m, quick=quick, items=items))
          for m in select(paper, list(getattr(module, "USES", ())))]
  return jobs.key_of("experiment", module.NAME, "quick" if quick else "full",
                     study_settings.as_json(settings), used)


def _worker_context(out: str, quick: bool, items: list, command, resume: bool,
                    verbose: bool, **fields) -> Context:
  """The :class:`Context` of a job on a worker, which must see ``out`` (its ``jobs/``)."""
  out = Path(out)
  if not (out / STORE).is_dir():
    raise ConfigError(f"this worker does not see the output directory {str(out)!r} (no "
                      f"{STORE}/ folder there): a reproduction's workers need it on a shared "
                      f"file system (docs/cluster.md).")
  return Context(out=out, quick=quick, verbose=verbose, items=tuple(items), command=command,
                 resume=resume, cache=_CACHES.setdefault(str(out.resolve()), {}), **fields)


def experiment_job(module_name: str, out: str, quick: bool, items: list, command,
                   resume: bool, verbose: bool, ready: Sequence[str] = ()) -> dict:
  """One experiment as a job (on a Dask worker): its document (:func:`run_experiment`).

  The experiment writes its figures and ``experiments/NAME.json`` into ``out`` itself, so a
  worker on another machine needs ``out`` on a shared file system (docs/cluster.md); it
  says so in one line when it cannot see it. ``ready``: its runs that jobs of this command
  computed (:func:`run_job`), read back from their checkpoints."""
  module = importlib.import_module(module_name)
  settings = settings_for(module, quick=quick, items=items)
  ctx = _worker_context(out, quick, items, command, resume, verbose, ready=frozenset(ready))
  return run_experiment(module, ctx, settings)


def run_job(experiment: str, out: str, quick: bool, items: list, command, resume: bool,
            verbose: bool, planned) -> dict:
  """One run an experiment declared ahead (:class:`attndyn.reproduce.engine.Planned`), as a
  job: computed into the checkpoints under ``DIR/runs/NAME``, which the experiment's job
  reads back (it starts after this one). Its figures are left to the experiment's call.

  A failure is returned (``error``), not raised: the experiment's job still starts, runs it
  itself and records the failure in its own document, as it does when it runs alone.
  """
  from attndyn.reproduce import engine
  ctx = _worker_context(out, quick, items, command, resume, verbose, experiment=experiment)
  start = time.perf_counter()
  try:
    engine.run(ctx, planned.name, planned.raw, gd=planned.gd, figures=False)
  except Exception as err:   # noqa: BLE001 -- the experiment meets it again and records it
    ctx.log(f"{planned.name}: failed ({type(err).__name__}); {experiment} runs it again itself")
    return {"name": planned.name, "error": f"{type(err).__name__}: {err}"}
  return {"name": planned.name, "seconds": time.perf_counter() - start}


def run(paper: str, out: Path, *, quick: bool, only: Optional[Sequence[str]] = None,
        items: Sequence[str] = (), verbose: bool = True,
        command: Optional[Sequence[str]] = None, resume: bool = False, workers: int = 1,
        scheduler: Optional[str] = None, client=None) -> List[dict]:
  """Run the selected experiments of ``paper`` into ``out`` (settings resolved first), each
  a job (:mod:`attndyn.jobs`) whose document is kept in ``DIR/jobs``.

  With ``resume``, an experiment whose job (same mode, settings and code) finished in
  ``out`` is kept as it is, and the others continue from the checkpoints of their runs on
  the engine (:mod:`attndyn.reproduce.engine`). An experiment that failed is not kept.
  ``workers``, ``scheduler``, ``client``: where the experiments run
  (:func:`attndyn.jobs.cluster`; default: this process, one after the other). There, the runs
  an experiment declares ahead (its ``runs``) are jobs of their own (:func:`run_job`).

  Returns:
    The experiment documents, in the order given.
  """
  from attndyn import jobs
  check_items(paper, items, quick=quick)
  modules = select(paper, only)
  out = Path(out).resolve()   # the workers of a cluster see the same absolute path
  store = jobs.Store(out / STORE)
  parallel = workers > 1 or scheduler is not None or client is not None
  work, runs = [], []
  for i, m in enumerate(modules):
    s = settings_for(m, quick=quick, items=items)
    key = experiment_key(m, quick, s, items)
    where = (str(out), quick, list(items), command, resume, verbose)
    # On several workers the runs an experiment declares (its `runs`, the longest first) are
    # jobs of their own, ahead of it and of the next experiment, so that they spread over the
    # workers instead of running one after another inside the experiment's job. In one
    # process they would only add a read-back, so the experiment computes them itself; and
    # an experiment kept from before (--resume) needs none of them.
    planned = (list(m.runs(s)) if parallel and hasattr(m, "runs")
               and not (resume and key in store) else [])
    for j, p in enumerate(planned):
      runs.append(jobs.Job(p.name, run_job, (m.NAME, *where, p),
                           jobs.key_of("run", p.name, p.raw, p.gd),
                           priority=-i + 0.5 + (len(planned) - j) / (2 * len(planned))))
    # in the paper's order; an experiment that reuses another's runs (its USES) starts after
    # it, so that it finds them rather than computing them again beside it (in the same folders)
    work.append(jobs.Job(m.NAME, experiment_job,
                         (m.__name__, *where, [p.name for p in planned]),
                         key, priority=-i,
                         after=tuple(getattr(m, "USES", ())) + tuple(p.name for p in planned)))
  atomic.make_dirs(store.root)

  def on_done(job, doc, reused):
    if reused and job.fn is experiment_job:
      write_json(out / EXPERIMENTS_DIR / f"{job.name}.json", doc)
      if verbose:
        print(f"[reproduce {time.strftime('%H:%M:%S')}] {job.name}: finished before, kept "
              f"({STORE}/{job.key}.json)", file=sys.stderr, flush=True)

  try:
    done = jobs.execute(runs + work, store, workers=workers, scheduler=scheduler, client=client,
                        resume=resume, errors=out / EXPERIMENTS_DIR, on_done=on_done,
                        keep=lambda doc: not doc.get("error") and not doc.get("partial"))
  finally:
    _CACHES.pop(str(out), None)   # the runs experiments share live as long as the command
  for err in done.exceptions.values():   # bad input found by an experiment: one line, exit 2
    if isinstance(err, ConfigError):
      raise ConfigError(str(err)) from None
  for name, line in done.failed.items():   # a job that raised outside run_experiment
    if name not in {job.name for job in work}:
      continue   # a run's job: its experiment's job failed with it, or ran it itself
    done.results[name] = {"name": name, "error": line, "error_kind": "bug",
                          "traceback": f"{name}.txt", "claims": [], "figures": []}
  return [done.results[job.name] for job in work]
