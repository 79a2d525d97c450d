"""Independent jobs in worker processes, one per CPU core: :func:`run_jobs`.

Used by ``attndyn atlas --workers`` (one bucket a job). On a CPU, XLA:CPU splits each kernel of
a program across its threads, but tracing, compiling, making the data and writing files run
on one thread, and small kernels leave the threads waiting on each other; a process held to
each core keeps every core busy with work of its own. What that gains depends on the machine
(``python -m benchmarks.atlas --workers N`` times it against one process).

The workers are fresh interpreters (JAX's threads do not survive a ``fork``), told what to run
by name (``module:function``) and sent jobs and results as JSON, so nothing is unpickled
(attndyn never unpickles: :mod:`analysis.npz`). What the machine
does to one of them is answered as it would be in one process: a worker that raises sends its
exception back, and :func:`run_jobs` raises it with the worker's traceback as its cause; a
worker that dies (``kill -9``, the out-of-memory killer) is named in a
:class:`ChildProcessError`. Either way the other workers are stopped (SIGTERM: each stops
within a chunk, as after Ctrl-C) before it returns, and a worker whose parent dies stops by
itself, so that no orphan keeps writing into a directory whose lock its parent held.
"""
import importlib
import json
import os
import signal
import sys
import threading
import traceback
from typing import Any, Callable, Iterable, Optional

__all__ = ["POLL", "RemoteTraceback", "usable_cores", "parse_workers", "jax_settings",
           "configure_jax", "describe", "rebuild", "report", "run_jobs"]

# How often a worker checks that its parent lives, and the parent that its workers do (s).
POLL = 0.2

_running = None   # in a worker: (its connection, the job it is running)


class RemoteTraceback(Exception):
  """A worker's traceback, as text: the ``__cause__`` of the exception :func:`run_jobs` raises."""

  def __str__(self):
    return self.args[0]


def usable_cores() -> list:
  """The CPU cores this process may run on (all of ``os.cpu_count()`` where the OS does not say)."""
  if hasattr(os, "sched_getaffinity"):
    return sorted(os.sched_getaffinity(0))
  return list(range(os.cpu_count() or 1))


def parse_workers(text: str) -> int:
  """``--workers``: a positive integer, or ``auto``: one per usable CPU core when JAX computes
  on the CPU in one process (on an accelerator, processes would share it), else 1.

  Raises:
    ConfigError: anything else, in one line.
  """
  from attndyn.tasks.errors import ConfigError
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


def jax_settings() -> dict:
  """This process's JAX settings a worker needs to compute as it would (float64 on or off, and
  the compile cache, :mod:`attndyn.compile_cache`: its folder, size bound and threshold), as
  JSON for :func:`configure_jax` in a worker's ``setup``."""
  import jax
  names = ("jax_enable_x64", "jax_compilation_cache_dir",
           "jax_persistent_cache_min_compile_time_secs", "jax_compilation_cache_max_size")
  return {k: getattr(jax.config, k) for k in names}


def configure_jax(values: dict) -> None:
  """Apply :func:`jax_settings` of another process."""
  import jax
  for k, v in values.items():
    jax.config.update(k, v)


def describe(err: BaseException) -> dict:
  """``err`` as JSON: its class (``module.Name``), message and traceback (:func:`rebuild`)."""
  return {"type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err),
          "traceback": "".join(traceback.format_exception(err))}


def rebuild(doc: dict, where: str = "the worker process") -> BaseException:
  """The exception :func:`describe` described: its class made from its message, or a
  RuntimeError naming the class where that cannot be done; its traceback, in ``where``,
  as the cause."""
  module, _, name = doc["type"].rpartition(".")
  try:
    cls = getattr(importlib.import_module(module), name)
    err = cls(doc["message"]) if issubclass(cls, BaseException) else None
  except Exception:
    err = None
  if err is None:
    err = RuntimeError(f"{name}: {doc['message']}")
  err.__cause__ = RemoteTraceback(f"\n\nIn {where}:\n{doc['traceback']}")
  return err


def _named(fn) -> str:
  return f"{fn.__module__}:{fn.__qualname__}"


def _resolve(name: str):
  module, _, qualname = name.partition(":")
  obj = importlib.import_module(module)
  for part in qualname.split("."):
    obj = getattr(obj, part)
  return obj


def _send(conn, doc) -> None:
  conn.send_bytes(json.dumps(doc).encode())


def _recv(conn):
  return json.loads(conn.recv_bytes().decode())


def report(value) -> None:
  """From a job running in a worker of :func:`run_jobs`: send ``value`` (a JSON value, e.g.
  how far the job is) to the parent's ``on_progress(job, value)``. Anywhere else, nothing."""
  if _running is not None:
    conn, job = _running
    _send(conn, {"kind": "progress", "job": job, "value": value})


def _watch_parent(parent: int) -> None:
  """Exit this worker once its parent is gone (its lock on the output directory with it).

  Everything a worker writes is written atomically, so leaving at any point is like the
  ``kill -9`` the commands already survive."""
  while os.getppid() == parent:
    threading.Event().wait(POLL)
  os._exit(1)


def _serve(fd: int) -> None:
  """A worker's main (``python -c "...; _serve(FD)"``): jobs in, results out over ``FD``.

  It first receives its core and the parent's ``sys.path``, holds itself to the core before
  anything imports JAX (XLA sizes its thread pool from the cores a process may use), then
  imports the job function by name."""
  from multiprocessing.connection import Connection

  from attndyn.progress import Guarded
  global _running
  # the parent's stderr, inherited: closed or full, it must not fail a bucket (as in the parent)
  sys.stdout, sys.stderr = Guarded(sys.stdout), Guarded(sys.stderr)
  conn = Connection(fd)
  first = _recv(conn)
  if first["core"] is not None:
    os.sched_setaffinity(0, {first["core"]})
  sys.path[:] = first["path"]

  def on_sigterm(signum, frame):   # stop like Ctrl-C: the running chunk is given up
    raise KeyboardInterrupt
  signal.signal(signal.SIGTERM, on_sigterm)
  code = 0
  try:
    what = _recv(conn)
    threading.Thread(target=_watch_parent, args=(what["parent"],), daemon=True).start()
    if what["setup"] is not None:
      _resolve(what["setup"])(what["setup_arg"])
    fn = _resolve(what["fn"])
    while True:
      job = _recv(conn)
      if job is None:
        break
      _running = (conn, job)
      try:
        result = fn(job)
      except KeyboardInterrupt:
        raise
      except BaseException as err:     # sent back whole; this worker stops
        _send(conn, {"kind": "failed", "job": job, "error": describe(err)})
        code = 1
        break
      finally:
        _running = None
      _send(conn, {"kind": "done", "job": job, "result": result})
  except KeyboardInterrupt:
    code = 130
  except EOFError:                     # the parent closed the pipe: nothing more to do
    code = 1
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    # An interrupted chunk may still be computing on XLA's threads: do not wait for it.
    os._exit(code)


def _ended(proc, i: int) -> ChildProcessError:
  code = proc.wait()
  how = (f"was killed by signal {-code} ({signal.Signals(-code).name})" if code < 0
         else f"exited with code {code}")
  return ChildProcessError(f"worker process {i} (pid {proc.pid}) {how} before finishing its "
                           f"job (out of memory? a kill?)")


def _hand_out(conn, left) -> list:
  """Send the worker the next job (``[conn]``: it is busy) or, when none is left, the
  sentinel that ends it (``[]``)."""
  if left:
    _send(conn, left.popleft())
    return [conn]
  _send(conn, None)
  return []


def run_jobs(fn: Callable[[Any], Any], jobs: Iterable[Any], *, workers: int,
             setup: Optional[tuple] = None,
             on_result: Optional[Callable[[Any, Any], None]] = None,
             on_progress: Optional[Callable[[Any, Any], None]] = None) -> list:
  """``[(job, fn(job)), ...]`` in the order they finished, computed in ``workers`` processes.

  Args:
    fn: a module-level function of one job (the worker imports it by name); the jobs and
      what it returns are JSON values (as JSON gives them back: tuples as lists). The
      workers take the jobs in the order given, each the next one as it finishes its last.
    jobs: the jobs.
    workers: processes to start (at most one per job). When they are as many as the usable
      cores, each is held to its own core.
    setup: ``(function, argument)``, run as ``function(argument)`` once in each worker
      before its first job (a module-level function and a JSON value; e.g.
      ``(configure_jax, jax_settings())``).
    on_result: ``on_result(job, result)`` in this process as each job finishes.
    on_progress: ``on_progress(job, value)`` in this process for each :func:`report`
      ``(value)`` a job makes (in the order it made them, before its ``on_result``).

  Raises:
    The exception a worker raised (its traceback as the cause); ``ChildProcessError`` when a
    worker died without one. The other workers are stopped first.
  """
  import subprocess
  from collections import deque
  from multiprocessing.connection import Pipe, wait
  jobs = list(jobs)
  workers = max(1, min(workers, len(jobs)))
  cores = usable_cores()
  pin = hasattr(os, "sched_setaffinity") and workers == len(cores) and workers > 1
  left, finished, procs, conns, clean = deque(jobs), [], [], [], False
  try:
    for i in range(workers):
      mine, theirs = Pipe()
      # A fresh interpreter, not multiprocessing's spawn: that one imports the caller's
      # __main__ again, which a script without an `if __name__ == "__main__"` guard reruns.
      procs.append(subprocess.Popen(
          [sys.executable, "-c", f"from attndyn.processes import _serve; _serve({theirs.fileno()})"],
          pass_fds=(theirs.fileno(),)))
      theirs.close()
      conns.append(mine)
      _send(mine, {"core": cores[i] if pin else None, "path": list(sys.path)})
      _send(mine, {"fn": _named(fn), "setup": None if setup is None else _named(setup[0]),
                   "setup_arg": None if setup is None else setup[1], "parent": os.getpid()})
    busy = []                          # the workers with a job
    for conn in conns:
      busy += _hand_out(conn, left)
    while len(finished) < len(jobs):
      for conn in wait(busy, timeout=POLL):
        i = conns.index(conn)
        try:
          msg = _recv(conn)
        except EOFError:
          raise _ended(procs[i], i) from None
        if msg["kind"] == "failed":
          err = rebuild(msg["error"], f"worker process {i} (pid {procs[i].pid})")
          raise err from err.__cause__
        if msg["kind"] == "progress":
          if on_progress is not None:
            on_progress(msg["job"], msg["value"])
          continue
        busy.remove(conn)
        busy += _hand_out(conn, left)
        finished.append((msg["job"], msg["result"]))
        if on_result is not None:
          on_result(msg["job"], msg["result"])
    clean = True
  finally:
    for p in procs:
      if p.poll() is None and not clean:
        p.terminate()
    for p in procs:
      try:
        p.wait(timeout=None if clean else 10)
      except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for conn in conns:
      conn.close()
  return finished
