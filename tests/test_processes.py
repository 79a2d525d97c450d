"""attndyn.processes: jobs in worker processes return what they would in one; what goes wrong in
a worker is raised in the parent, and a worker outlives neither its parent nor a failure.

Budget: each test starts two or three bare interpreters (no JAX), about a second in all.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from attndyn import processes


def _square(x):
  return x * x


def _count_to(n):
  for i in range(1, n + 1):
    processes.report(i)
  return n


def _fail_on_three(x):
  if x == 3:
    raise ValueError(f"job {x} is bad")
  return x


def _die_on_two(x):
  if x == 2:
    os.kill(os.getpid(), signal.SIGKILL)
  return x


def _pid_then_sleep(path):
  with open(path, "w") as fh:
    fh.write(str(os.getpid()))
  time.sleep(60)


def test_every_job_once_with_its_result():
  seen = []
  got = processes.run_jobs(_square, range(7), workers=2, on_result=lambda j, r: seen.append(j))
  assert sorted(got) == [(x, x * x) for x in range(7)]
  assert sorted(seen) == list(range(7))


def test_a_jobs_reports_reach_the_parent_in_order_before_its_result():
  events = []
  got = processes.run_jobs(_count_to, [2, 3, 4], workers=2,
                           on_progress=lambda j, v: events.append((j, "progress", v)),
                           on_result=lambda j, r: events.append((j, "done", r)))
  assert sorted(got) == [(2, 2), (3, 3), (4, 4)]
  for n in (2, 3, 4):
    mine = [e[1:] for e in events if e[0] == n]
    assert mine == [("progress", i) for i in range(1, n + 1)] + [("done", n)]
  assert _count_to(2) == 2   # outside a worker, report does nothing


def test_a_worker_exception_is_raised_with_its_traceback():
  with pytest.raises(ValueError, match="job 3 is bad") as info:
    processes.run_jobs(_fail_on_three, range(6), workers=2)
  cause = info.value.__cause__
  assert isinstance(cause, processes.RemoteTraceback)
  assert "_fail_on_three" in str(cause) and "In worker process" in str(cause)


def test_a_killed_worker_is_named():
  with pytest.raises(ChildProcessError, match=r"killed by signal 9 \(SIGKILL\)"):
    processes.run_jobs(_die_on_two, range(4), workers=2)


def test_a_worker_ends_when_its_parent_is_killed(tmp_path):
  """kill -9 of the parent (which held the output directory's lock) stops its workers: none
  is left writing into the directory."""
  pid_file = tmp_path / "worker.pid"
  code = ("import sys; sys.path[:0] = %r; from attndyn import processes; import test_processes;"
          "processes.run_jobs(test_processes._pid_then_sleep, [%r], workers=1)"
          % (sys.path, str(pid_file)))
  parent = subprocess.Popen([sys.executable, "-c", code])
  try:
    deadline = time.monotonic() + 30
    while not (pid_file.is_file() and pid_file.read_text()):
      assert time.monotonic() < deadline and parent.poll() is None, "the worker never started"
      time.sleep(0.05)
    worker = int(pid_file.read_text())
  finally:
    parent.kill()
    parent.wait()
  deadline = time.monotonic() + 10
  while _alive(worker):
    assert time.monotonic() < deadline, f"worker {worker} outlived its parent"
    time.sleep(0.05)


def _alive(pid: int) -> bool:
  if not os.path.isdir("/proc"):
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return False
    return True
  try:
    with open(f"/proc/{pid}/stat") as fh:     # a zombie has ended; only its reaping is left
      return fh.read().split(")")[-1].split()[0] != "Z"
  except FileNotFoundError:
    return False
