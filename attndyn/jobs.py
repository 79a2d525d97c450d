"""Keyed jobs, one store of finished jobs, executed on Dask distributed.

A long command (``attndyn atlas``, ``attndyn reproduce``) is a study: it turns its
typed settings (:mod:`attndyn.settings`) into :class:`Job` s, each with a key that
digests what decides its result (settings, inputs, the code's revision, the
precision). A :class:`Store` keeps every finished job under its key, written
atomically; ``--resume`` skips every job whose key is in the store, so a command
killed at any point (``kill -9`` included) loses only the jobs that were running.

:func:`execute` runs the jobs with Dask: one after another in the command's own
thread by Dask's synchronous scheduler (``workers = 1``: nothing is gained from more
for a study of a few jobs, and Ctrl-C stops the running job at once), or on a
:func:`cluster`: a :class:`distributed.LocalCluster` of one process per worker, or a
running cluster named by its scheduler's address (``dask scheduler`` and ``dask
worker`` on other machines, docs/cluster.md). The scheduler reruns the
job of a worker that dies; a job that raises is recorded with its traceback and
the others go on. Results travel back to this process, which alone writes the store.
"""
import contextlib
import dataclasses
import hashlib
import io
import json
import math
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional, Sequence

import distributed
import numpy as np

from attndyn import atomic
from attndyn.tasks.errors import ConfigError

__all__ = ["Job", "key_of", "revision", "precision", "Store", "Executed", "cluster", "execute",
           "report", "parse_workers", "usable_cores"]

FORMAT = 1
PROGRESS_TOPIC = "attndyn-progress"
# A local cluster's status pages listen on a free port of this machine only (never a fixed one
# another cluster may hold, nor every interface).
_LOCAL = "127.0.0.1:0"


@dataclasses.dataclass(frozen=True)
class Job:
  """One unit of a study.

  Attributes:
    name: file-safe and unique in its study (``bucket-0003``, ``synthetic``).
    fn: a module-level function (workers import it by name); ``fn(*args)`` returns the
      job's result: a table of JSON values and numpy arrays (:class:`Store`).
    args: its arguments (sent to the worker).
    key: :func:`key_of` what decides the result.
    weight: its share of the study's work, for progress (e.g. its configurations).
    priority: larger runs earlier when workers are free (e.g. the costliest first), among the
      jobs that head equally long chains of jobs waiting for them (``after``): a job others
      wait for goes first, since they cannot start before it ends (:func:`_ranks`).
    after: the names of jobs of the study that must finish before this one starts (it
      reuses what they leave, e.g. runs in its worker's memory); a job it names that is
      not run now (read from the store, not in the study) is not waited for.
  """
  name: str
  fn: Callable
  args: tuple
  key: str
  weight: float = 1.0
  priority: float = 0.0
  after: tuple = ()


_REVISION = {}


def revision() -> Optional[dict]:
  """The git commit of this checkout and whether it has uncommitted changes (``None``
  outside git), read once per process: the jobs are keyed by the code loaded when the
  command started, whatever the checkout becomes later."""
  if "value" not in _REVISION:
    import subprocess
    root = Path(__file__).resolve().parents[1]
    try:
      run = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True,
                                      text=True, timeout=10, check=True).stdout
      _REVISION["value"] = {"commit": run("rev-parse", "HEAD").strip(),
                            "dirty": bool(run("status", "--porcelain",
                                              "--untracked-files=no").strip())}
      # the uncommitted changes themselves key the jobs (two different edits are two codes)
      _REVISION["changes"] = hashlib.sha256(run("diff", "HEAD").encode()).hexdigest() \
          if _REVISION["value"]["dirty"] else None
    except (OSError, ValueError, Exception):   # no git, not a checkout, a timeout
      # outside a checkout the source itself keys the jobs: an installed version number
      # does not change when the files do (a copied tree, an unreleased edit)
      _REVISION["value"], _REVISION["changes"] = None, _source_digest()
  value = _REVISION["value"]
  return None if value is None else dict(value)


def _source_digest() -> str:
  """A digest of the Python source of attndyn and its four library packages, as loaded."""
  import importlib.util
  digest = hashlib.sha256()
  for package in ("attndyn", "attndyn.tasks", "attndyn.models", "attndyn.dynamics",
                  "attndyn.analysis"):
    for folder in importlib.util.find_spec(package).submodule_search_locations:
      for path in sorted(Path(folder).rglob("*.py")):
        digest.update(f"{package}/{path.relative_to(folder)}\0".encode())
        digest.update(path.read_bytes())
  return digest.hexdigest()


def precision() -> str:
  """``float64`` when JAX computes in double precision here, else ``float32``."""
  import jax
  return "float64" if jax.config.jax_enable_x64 else "float32"


def key_of(*parts: Any, code: bool = True) -> str:
  """A digest of ``parts`` (JSON values and numeric arrays, by their values), this code's
  revision (its git commit and a digest of the uncommitted changes to tracked files; outside
  a git checkout, a digest of the source files and the installed version) and the precision.
  ``code=False`` leaves the revision out: the chunks of ``attndyn run --resume``, which an
  upgrade has never invalidated."""
  doc = {"parts": parts, "precision": precision()}
  if code:
    from importlib import metadata
    try:
      version = metadata.version("attndyn")
    except metadata.PackageNotFoundError:
      version = None
    doc.update(revision=revision(), changes=_REVISION.get("changes"), version=version)
  arrays = {}
  text = json.dumps(_encode(doc, arrays), sort_keys=True, allow_nan=False)
  digest = hashlib.sha256(text.encode())
  for name in sorted(arrays):   # an array part counts by its dtype, shape and values
    a = np.ascontiguousarray(arrays[name])
    digest.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
    digest.update(a.tobytes())
  return digest.hexdigest()[:32]


def _encode(value, arrays: dict):
  """JSON form: arrays become ``{"$array": name}`` (their data in ``arrays``), tuples lists,
  non-finite floats ``{"$float": "nan"}``."""
  if isinstance(value, Mapping):
    out = {}
    for k, v in value.items():
      if not isinstance(k, str):
        raise TypeError(f"a job result's keys are strings, not {k!r}")
      out[k] = _encode(v, arrays)
    return out
  if isinstance(value, (list, tuple)):
    return [_encode(v, arrays) for v in value]
  if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__") \
      and not isinstance(value, (str, bytes, int, float, bool)):
    a = np.asarray(value)
    if a.ndim == 0 and a.dtype.kind in "biuf":
      return _encode(a.item(), arrays)
    if a.dtype == object:
      raise TypeError("a job result holds an object array; only numeric arrays are stored")
    name = f"a{len(arrays)}"
    arrays[name] = a
    return {"$array": name}
  if isinstance(value, float) and not math.isfinite(value):
    return {"$float": repr(value)}
  if value is None or isinstance(value, (str, bool, int, float)):
    return value
  raise TypeError(f"a job result holds {type(value).__name__}; allowed: tables, lists, "
                  f"strings, numbers, booleans, None and numeric arrays")


def _decode(value, arrays):
  if isinstance(value, dict):
    if set(value) == {"$array"}:
      return arrays[value["$array"]]
    if set(value) == {"$float"}:
      return float(value["$float"])
    return {k: _decode(v, arrays) for k, v in value.items()}
  if isinstance(value, list):
    return [_decode(v, arrays) for v in value]
  return value


class Store:
  """A directory of finished jobs: ``KEY.json`` (name, key, result) and ``KEY.npz`` (its
  arrays, no pickles), the arrays written first and named by their digest in the JSON,
  which is written last: a job is in the store once its JSON is, and a file that does
  not verify (cut short, edited, another job's) is not read back.
  """

  def __init__(self, root):
    self.root = Path(root)

  def _paths(self, key: str):
    return self.root / f"{key}.json", self.root / f"{key}.npz"

  def keys(self) -> set:
    if not self.root.is_dir():
      return set()
    return {p.stem for p in self.root.glob("*.json") if not atomic.leftover(p.name)}

  def __contains__(self, key: str) -> bool:
    return self._paths(key)[0].is_file()

  def check(self, job: Job) -> None:
    """``job``'s files, where they exist, are regular files and no links (else one line)."""
    atomic.refuse_link(self.root)
    for path in self._paths(job.key):
      atomic.refuse_link(path)
      if os.path.lexists(path) and not path.is_file():
        raise ConfigError(f"{str(path)!r} is not a regular file, and the store keeps job "
                          f"{job.name} there: remove it, or pick another output directory.")

  def put(self, job: Job, result: Mapping) -> None:
    """Keep ``result`` as ``job``'s, atomically (a rerun job replaces its earlier copy)."""
    arrays = {}
    doc = {"format": FORMAT, "name": job.name, "key": job.key,
           "result": _encode(result, arrays), "arrays": None}
    atomic.make_dirs(self.root)
    doc_path, npz_path = self._paths(job.key)
    if arrays:
      buf = io.BytesIO()
      np.savez(buf, **arrays)
      data = buf.getvalue()
      atomic.write(npz_path, lambda tmp: Path(tmp).write_bytes(data))
      doc["arrays"] = hashlib.sha256(data).hexdigest()
    atomic.write_text(doc_path, json.dumps(doc, allow_nan=False) + "\n")

  def get(self, job: Job, *, warn: bool = True) -> Optional[dict]:
    """``job``'s stored result, or ``None`` when there is none or it does not verify."""
    doc_path, npz_path = self._paths(job.key)
    if not doc_path.is_file():
      return None
    try:
      atomic.refuse_link(doc_path)
      doc = json.loads(doc_path.read_text(encoding="utf-8"))
      ok = isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("key") == job.key \
          and doc.get("name") == job.name
      arrays = {}
      if ok and doc.get("arrays") is not None:
        atomic.refuse_link(npz_path)
        data = npz_path.read_bytes()
        ok = hashlib.sha256(data).hexdigest() == doc["arrays"]
        if ok:
          with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
      if ok:
        return _decode(doc["result"], arrays)
    except atomic.LinkRefused:
      raise
    except (OSError, ValueError, KeyError, TypeError):
      pass
    if warn:
      print(f"attndyn: {doc_path} does not verify (cut short, edited or another job's): "
            f"job {job.name} is computed again", file=sys.stderr)
    return None

  def discard(self, keep: Sequence[str]) -> list:
    """Remove the stored jobs whose key is not in ``keep`` (a ``--force`` run's leftovers)."""
    gone = []
    for key in sorted(self.keys() - set(keep)):
      for p in self._paths(key):
        p.unlink(missing_ok=True)
      gone.append(key)
    return gone


def usable_cores() -> list:
  """The CPU cores this process may run on."""
  return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
      else list(range(os.cpu_count() or 1))


def parse_workers(text) -> int:
  """``--workers``: a positive integer, or ``auto`` (one per usable core on a CPU; one on an
  accelerator, whose chunks already fill it)."""
  if str(text).strip() == "auto":
    import jax
    if jax.default_backend() != "cpu" or jax.process_count() > 1:
      return 1
    return len(usable_cores())
  try:
    n = int(str(text).strip())
  except ValueError:
    n = 0
  if n < 1:
    raise ConfigError(f"--workers {text!r} is not allowed: a positive integer (processes "
                      f"computing side by side) or auto (one per CPU core).")
  return n


def _jax_settings() -> dict:
  """This process's JAX settings a worker needs to compute as it would."""
  import jax
  names = ("jax_enable_x64", "jax_compilation_cache_dir",
           "jax_persistent_cache_min_compile_time_secs", "jax_compilation_cache_max_size")
  return {k: getattr(jax.config, k) for k in names}


class _Setup(distributed.WorkerPlugin):
  """The worker plugin: each worker takes this process's JAX settings and code revision
  before it imports anything that computes, and (one worker per core) holds its
  threads to its own core, since XLA sizes its thread pool from the cores it may use."""

  name = "attndyn-setup"

  def __init__(self, jax_settings: dict, rev, cache: bool, cores: Optional[list]):
    self.jax_settings, self.rev, self.cache, self.cores = jax_settings, rev, cache, cores

  def setup(self, worker):
    import logging
    # a job's failure is recorded by the command (its traceback in the errors folder)
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    if self.cores and isinstance(worker.name, int) and hasattr(os, "sched_setaffinity"):
      core = {self.cores[worker.name % len(self.cores)]}
      for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
          os.sched_setaffinity(int(tid), core)
    import importlib

    import jax
    for k, v in self.jax_settings.items():
      jax.config.update(k, v)
    # what every job imports, now, before the first job's clock starts (and while the
    # checkout is the command's)
    for module in ("attndyn.pipeline", "attndyn.analysis.atlas", "attndyn.reproduce.engine"):
      importlib.import_module(module)
    if self.cache:
      from attndyn import compile_cache
      compile_cache.enable_in_worker()
    _REVISION["value"] = self.rev

  def teardown(self, worker):
    pass


def _check_address(address: str) -> None:
  """A scheduler address is ``PROTOCOL://HOST:PORT`` (one line before any connection)."""
  from distributed.comm import get_address_host_port, parse_address
  try:
    protocol, _ = parse_address(address, strict=True)
    get_address_host_port(address)
  except (ValueError, TypeError) as err:
    raise ConfigError(f"--scheduler {address!r} is not allowed ({err}): the address a running "
                      f"`dask scheduler` prints, e.g. tcp://10.0.0.5:8786.") from None


CONNECT_SECONDS = 30   # how long a --scheduler address has to answer


def _handshake(address: str) -> None:
  """Connect to ``address`` and complete Dask's handshake within :data:`CONNECT_SECONDS`:
  the client's own ``timeout`` bounds the connection but not the handshake, so a port that
  accepts and never answers would hold the command for ever."""
  import asyncio

  from distributed.comm import connect

  async def probe():
    comm = await connect(address, timeout=CONNECT_SECONDS)
    await comm.close()

  try:
    asyncio.run(asyncio.wait_for(probe(), CONNECT_SECONDS))
  except asyncio.TimeoutError:
    raise TimeoutError(f"no answer within {CONNECT_SECONDS} s") from None


@contextlib.contextmanager
def cluster(*, workers: int = 2, scheduler: Optional[str] = None, client=None) -> Iterator:
  """A :class:`distributed.Client` to run jobs on (:func:`execute` runs ``workers = 1`` in
  this process, without one).

  Args:
    workers: with neither ``scheduler`` nor ``client``, a local cluster of that many worker
      processes (each held to its core when they are one per usable core).
    scheduler: the address of a running Dask scheduler (``tcp://HOST:PORT``).
    client: a client the caller made (used as it is, not closed).

  Raises:
    ConfigError: the scheduler cannot be reached.
  """
  import logging

  from attndyn import compile_cache
  setup = lambda cores: _Setup(_jax_settings(), revision(), compile_cache.enabled_here(), cores)
  if client is not None:
    client.register_plugin(setup(None), name=_Setup.name)
    yield client
    return
  import dask
  # a job's failure, or a lost scheduler, is the command's one line, not Dask's log (whose
  # modules' loggers have levels of their own: distributed.client logs a lost connection)
  loggers = [logging.getLogger(name) for name in ["distributed", *logging.root.manager.loggerDict]
             if name == "distributed" or name.startswith("distributed.")]
  levels = [(logger, logger.level) for logger in loggers]
  for logger in loggers:
    logger.setLevel(logging.CRITICAL)
  try:
    with contextlib.ExitStack() as stack:
      # A job holds its core for minutes: the workers' sampling profiler (every 10 ms) and
      # system monitor would take their share of it, and nothing here reads them.
      stack.enter_context(dask.config.set({"distributed.worker.profile.enabled": False,
                                           "distributed.admin.system-monitor.interval": "5s",
                                           **SCHEDULER_CONFIG}))
      cores = None
      if scheduler is not None:
        _check_address(scheduler)
        try:
          _handshake(scheduler)
          made = stack.enter_context(distributed.Client(scheduler, timeout=CONNECT_SECONDS,
                                                        set_as_default=False))
        except Exception as err:   # refused, timed out, not a Dask scheduler at all
          raise ConfigError(f"--scheduler {scheduler!r}: no Dask scheduler answers there "
                            f"({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                            f"start one with `dask scheduler` (docs/cluster.md).") from None
      else:
        local = stack.enter_context(distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=_LOCAL,
            worker_dashboard_address=_LOCAL))
        made = stack.enter_context(distributed.Client(local, set_as_default=False))
        cores = usable_cores() if workers == len(usable_cores()) else None
      made.register_plugin(setup(cores), name=_Setup.name)
      yield made
  finally:
    for logger, level in levels:
      logger.setLevel(level)


_READY, _WAITING = "attndyn-job", "attndyn-job-after"   # Dask task groups (:func:`_run`)
# The local cluster's scheduler: one job at a time per worker thread (saturation 1.0, not
# Dask's 1.1, which hands a one-thread worker a second job to queue), so the scheduler keeps
# the rest and gives the next to whichever worker frees first, instead of one idling while a
# job waits in another's queue. A remote scheduler takes it where it starts (docs/cluster.md).
SCHEDULER_CONFIG = {"distributed.scheduler.worker-saturation": 1.0}
_local = threading.local()   # the job running in this thread: its name, topic and report hook


def report(value) -> None:
  """From inside a job: send ``value`` (JSON) to the command's ``on_report`` (a chunk done)."""
  hook = getattr(_local, "hook", None)
  if hook is not None:     # the job runs in the command's own process
    hook(_local.name, value)
    return
  topic = getattr(_local, "topic", None)
  if topic is None:
    return
  try:
    from distributed import get_worker
    get_worker().log_event(topic, {"job": _local.name, "value": value})
  except ValueError:   # not on a worker
    pass


def _call(name: str, topic: Optional[str], fn: Callable, args: tuple, hook=None):
  """Run ``fn(*args)`` as job ``name`` (what :func:`report` tells the command, on ``topic``
  or through ``hook``)."""
  _local.name, _local.topic, _local.hook = name, topic, hook
  try:
    return fn(*args)
  finally:
    _local.name = _local.topic = _local.hook = None


def _call_after(after: list, name: str, topic: Optional[str], fn: Callable, args: tuple):
  """:func:`_call`, on a cluster, once the jobs ``after`` (their results, unused) are done."""
  return _call(name, topic, fn, args)


def _in_order(pending: Sequence[Job]) -> list:
  """``pending`` with every job after the pending jobs it names in ``after``.

  Raises:
    ConfigError: jobs that wait for each other."""
  names = {job.name for job in pending}
  out, placed, left = [], set(), list(pending)
  while left:
    ready = [job for job in left if all(n in placed or n not in names for n in job.after)]
    if not ready:
      raise ConfigError(f"jobs {', '.join(job.name for job in left)} wait for each other "
                        f"(their 'after'): a study's jobs may not.")
    out += ready
    placed.update(job.name for job in ready)
    left = [job for job in left if job.name not in placed]
  return out


def _ranks(pending: Sequence[Job]) -> dict:
  """Job name -> its rank in the order jobs start when workers are free (larger first).

  First the jobs heading the longest chains of pending jobs that wait for them (``after``),
  counting each job as one: what waits cannot start before they end, so on two workers a
  long job that one short job waits for, started last, would keep that one waiting beyond
  everything else. Among equal chains, the larger ``priority`` first; then the given order.
  ``pending`` holds no jobs that wait for each other (:func:`_in_order` refuses them).
  """
  names = {job.name for job in pending}
  waiting = {job.name: [] for job in pending}
  for job in pending:
    for name in job.after:
      if name in names:
        waiting[name].append(job.name)
  chain = {}

  def length(name):   # the jobs on the longest chain that starts with `name`
    if name not in chain:
      chain[name] = 1 + max((length(w) for w in waiting[name]), default=0)
    return chain[name]

  order = sorted(range(len(pending)), key=lambda i: (-length(pending[i].name),
                                                      -pending[i].priority, i))
  return {pending[i].name: len(pending) - r for r, i in enumerate(order)}


class Executed(NamedTuple):
  """What :func:`execute` did.

  Attributes:
    results: job name -> result, for every job finished (now or read from the store).
    reused: names of the jobs read from the store.
    failed: job name -> one line (its traceback is in the errors folder).
    exceptions: job name -> the exception it raised.
  """
  results: dict
  reused: list
  failed: dict
  exceptions: dict


def execute(jobs: Sequence[Job], store: Store, *, workers: int = 1,
            scheduler: Optional[str] = None, client=None, resume: bool = False,
            errors: Optional[Path] = None,
            on_done: Optional[Callable[[Job, Any, bool], None]] = None,
            on_report: Optional[Callable[[str, Any], None]] = None,
            keep: Callable[[Any], bool] = lambda result: True) -> Executed:
  """Run ``jobs`` on Dask, keeping each result in ``store``.

  With ``workers = 1`` (and no ``scheduler`` or ``client``) the jobs run one after another in
  this process's main thread, by Dask's synchronous scheduler: Ctrl-C stops the running job
  at once. Otherwise on :func:`cluster`'s client, started only when a job is left to run.

  Args:
    jobs: the study's jobs (names unique).
    store: where finished jobs are kept (by key).
    workers, scheduler, client: where they run (:func:`cluster`).
    resume: read every job whose key is in ``store`` instead of running it.
    errors: the folder where a failed job's traceback goes (``NAME.txt``).
    on_done: ``on_done(job, result, reused)`` in this thread as each job finishes.
    on_report: ``on_report(job_name, value)`` in this thread for each :func:`report` a job
      makes.
    keep: whether a result is kept in ``store`` (a result that records its own failure is
      returned but not kept, so ``resume`` runs its job again).

  Returns:
    An :class:`Executed`. A job that raised is in ``failed``; the others still ran.

  Raises:
    ConfigError: a store file that is a link or not a regular file (before anything runs).
  """
  if not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1):
    raise ConfigError(f"workers = {workers!r} is not allowed: a positive integer (processes "
                      f"computing side by side).")
  for job in jobs:   # a planted link or folder: refused now, not after computing the job
    store.check(job)
  done = Executed({}, [], {}, {})
  pending = []
  for job in jobs:
    got = store.get(job) if resume and job.key in store else None
    if got is not None:
      done.results[job.name] = got
      done.reused.append(job.name)
      if on_done is not None:
        on_done(job, got, True)
    else:
      pending.append(job)

  def finish(job, result=None, err=None, tb=None):
    if err is not None:
      done.exceptions[job.name] = err
      done.failed[job.name] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
      if errors is not None and not isinstance(err, ConfigError):   # bad input: its line says all
        atomic.make_dirs(errors)
        atomic.write_text(errors / f"{job.name}.txt",
                          "".join(traceback.format_exception(type(err), err, tb)))
      return
    done.results[job.name] = result
    if keep(result):
      try:
        store.put(job, result)
      except (OSError, TypeError, ValueError) as why:   # computed all the same: returned, said
        print(f"attndyn: job {job.name} could not be stored ({why}); its result is used but "
              f"--resume computes it again", file=sys.stderr)
    if on_done is not None:
      on_done(job, result, False)

  if not pending:
    return done
  if workers == 1 and scheduler is None and client is None:
    import dask
    for job in _in_order(pending):
      task = dask.delayed(_call, pure=False)(job.name, None, job.fn, job.args, on_report)
      try:
        (result,) = dask.compute(task, scheduler="synchronous")
      except Exception as err:   # the job's failure; KeyboardInterrupt stops the study
        finish(job, err=err, tb=err.__traceback__)
      else:
        finish(job, result)
    return done
  with cluster(workers=workers, scheduler=scheduler, client=client) as dask_client:
    _run(pending, dask_client, on_report, finish)
  return done


def _run(pending, client, on_report, finish) -> None:
  """The jobs on ``client``; the reports of this study's jobs (its own topic) are queued by
  Dask's event thread and handed to ``on_report`` here, between results."""
  import queue
  import uuid
  topic = f"{PROGRESS_TOPIC}-{uuid.uuid4().hex}"
  reports = queue.SimpleQueue()
  if on_report is not None:
    client.subscribe_topic(topic, lambda event: reports.put(event[1]))
  by_future = {}

  def drain():
    while not reports.empty():
      got = reports.get()
      if got["job"] in names_running:
        on_report(got["job"], got["value"])

  names_running = {job.name for job in pending}
  import dask
  try:
    order = _in_order(pending)   # first: it refuses jobs that wait for each other
    tasks, ranks = {}, _ranks(pending)
    for job in order:
      # Dask starts a job once the tasks among its arguments are done (a failed one fails
      # it). The jobs that wait for none are one task group (the key's first part), sent in
      # one graph, so Dask's scheduler holds them as root tasks in its queue and hands them
      # out by priority as workers free, rather than placing each on a worker as it arrives,
      # on durations it cannot know. (It queues a group larger than twice the cluster's
      # threads; the waiting jobs go where their inputs are.)
      after = [tasks[name] for name in job.after if name in tasks]
      with dask.annotate(priority=ranks[job.name]):
        tasks[job.name] = dask.delayed(_call_after, pure=False)(
            after, job.name, topic, job.fn, job.args,
            dask_key_name=(_WAITING if after else _READY, f"{job.name}-{job.key}"))
    futures = client.compute([tasks[job.name] for job in pending])
    by_future = dict(zip(futures, pending))
    finished = distributed.as_completed(futures, loop=client.loop)
    while not finished.is_empty():
      batch = finished.next_batch(block=False)
      drain()
      if not batch:
        time.sleep(0.05)
        continue
      for future in batch:
        job = by_future.pop(future)
        names_running.discard(job.name)
        if future.status == "cancelled":   # the scheduler was lost, or someone cancelled it
          try:
            future.result()
            why = "cancelled"
          except BaseException as err:
            why = " ".join(str(err).split())[:200]
          raise ConfigError(f"job {job.name} did not finish on the Dask cluster ({why}); the "
                            f"jobs that finished are kept in the store: once the scheduler "
                            f"answers again, run the same command with --resume.")
        if future.status == "error":
          finish(job, err=future.exception(), tb=future.traceback())
        else:
          finish(job, future.result())
  finally:
    if by_future:   # interrupted: nothing more is started; what finished is in the store
      with contextlib.suppress(Exception):   # the scheduler may be gone
        client.cancel(list(by_future), force=True)
    if on_report is not None:
      with contextlib.suppress(Exception):
        client.unsubscribe_topic(topic)
