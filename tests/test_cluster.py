"""Jobs on a Dask cluster as a cluster has them: separate scheduler and worker processes.

A worker killed mid-job costs nothing (its job is rerun on the other worker); the client
killed with SIGKILL loses only the jobs that were running (``--resume`` reads the rest from
the store); the rows and claims equal a one-process run's.
"""
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from attndyn import atlas, cli, jobs

# Three Attn-TC buckets on a tiny task (m = 3, 4, 5): 2 σ × 2 lr × 2 seeds each, float64.
TINY = ["classifiers=[\"tc\"]", "axes={n_nontopic=[4, 5]}", "crosses=[]", "tc_only=[]",
        "seeds=2", "sigma=[0.001, 0.1]", "tau=5.0", "steps=10", "record_every=5",
        "run_lengths=[10, 5]", "precision=\"float64\"", "ode_rtol=1e-6",
        "base={n_nontopic=3, vocab_size=20, n_topics=2, words_per_topic=2, embed_dim=4, "
        "n_train=16, n_test=8, normaliser=\"softmax\", train_query=false}"]
THEOREM2 = ["--set", "theorem2.run.train.steps=60", "--set", "theorem2.run.train.record_every=20",
            "--set", "theorem2.checkpoints=[20,40,60]", "--set", "theorem2.run.sweep.seeds=2",
            "--set", "theorem2.run.task.vocab_size=40", "--set", "theorem2.run.task.n_train=32",
            "--set", "theorem2.run.task.n_test=16", "--set", "theorem2.run.task.n_nontopic=5"]


def _same(a: list, b: list, rtol: float = 1e-9) -> list:
  """The cells where two atlases' rows differ (float64: to rounding)."""
  assert len(a) == len(b)
  out = []
  for i, (ra, rb) in enumerate(zip(a, b)):
    for k in rb:
      x, y = ra[k], rb[k]
      if isinstance(y, float) and isinstance(x, float):
        if not (math.isnan(x) and math.isnan(y)) and not math.isclose(x, y, rel_tol=rtol,
                                                                       abs_tol=1e-300):
          out.append((i, k, x, y))
      elif x != y:
        out.append((i, k, x, y))
  return out


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
  """The tiny atlas computed in this process (workers=1): the reference."""
  out = tmp_path_factory.mktemp("one")
  return atlas.run_atlas(out, items=TINY, progress=False, findings=False)


def _start_cluster(folder, workers: int):
  """``dask scheduler`` and ``workers`` ``dask worker`` processes on localhost (no nanny: a
  killed worker stays dead): ``(address, [scheduler, *workers])``."""
  import distributed
  file = folder / "scheduler.json"
  quiet = dict(cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                             "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
                            **quiet)]
  try:
    for _ in range(600):
      if file.is_file() and file.read_text().strip():
        break
      time.sleep(0.1)
    address = json.loads(file.read_text())["address"]
    for i in range(workers):
      procs.append(subprocess.Popen(
          [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--no-nanny",
           "--no-dashboard", "--name", f"w{i}", "--local-directory", str(folder)], **quiet))
    with distributed.Client(address, timeout=60) as client:
      client.wait_for_workers(workers, timeout=120)
  except BaseException:
    _stop(procs)
    raise
  return address, procs


def _stop(procs) -> None:
  for p in procs:
    p.kill()
    p.wait()


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
  """A scheduler and two workers, separate processes on localhost."""
  address, procs = _start_cluster(tmp_path_factory.mktemp("dask"), workers=2)
  try:
    yield address, procs
  finally:
    _stop(procs)


def test_a_worker_killed_mid_job_costs_nothing(dask_cluster, one_process, tmp_path):
  import distributed
  address, _ = dask_cluster
  got, killed = {}, []
  runner = threading.Thread(target=lambda: got.update(result=atlas.run_atlas(
      tmp_path, items=TINY, progress=False, findings=False, scheduler=address)))
  runner.start()
  with distributed.Client(address, timeout=60) as client:
    while runner.is_alive() and not killed:
      busy = [w for w, tasks in client.processing().items() if tasks]
      if busy:
        pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        killed.append(busy[0])
      time.sleep(0.05)
  runner.join()
  assert killed, "no bucket was ever seen running"
  result = got["result"]
  assert not result.failures
  assert not _same(result.rows, one_process.rows)
  # every bucket once in the store, none twice
  assert len(jobs.Store(tmp_path / atlas.STORE).keys()) == 3


def test_a_reproduction_through_the_scheduler_equals_one_process(dask_cluster, tmp_path):
  address, procs = dask_cluster
  # the test above killed one worker (no nanny restarts it); the other serves this one
  assert any(p.poll() is None for p in procs[1:]), "no dask worker is left alive"
  ours, theirs = tmp_path / "local", tmp_path / "cluster"
  assert cli.main(["reproduce", "lu2021", "--out", str(ours), "--quick", "--quiet",
                   "--only", "theorem2"] + THEOREM2) == 0
  assert cli.main(["reproduce", "lu2021", "--out", str(theirs), "--quick", "--quiet",
                   "--only", "theorem2", "--scheduler", address] + THEOREM2) == 0
  claims = [[(c["id"], c["status"], c["ours"]) for c in json.loads(
      (d / "replication.json").read_text())["claims"]] for d in (ours, theirs)]
  assert claims[0] and claims[0] == claims[1]


def test_a_client_killed_with_sigkill_resumes_to_the_same_rows(one_process, tmp_path):
  out = tmp_path / "atlas"
  cmd = [sys.executable, "-m", "attndyn.cli", "atlas", "--out", str(out), "--workers", "1",
         "--no-progress"] + [a for item in TINY for a in ("--set", item)]
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  store = out / atlas.STORE
  while proc.poll() is None and len(list(store.glob("*.json"))) < 1:
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  kept = len(list(store.glob("*.json")))
  assert 1 <= kept < 3, f"the kill came too late: {kept} buckets finished"
  # resumed as a user would, by the same command: a process of its own (this one computes with
  # float64 on, which the jobs' keys name, so its keys are not the command's)
  again = subprocess.run(cmd + ["--resume"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
  assert again.returncode == 0, again.stderr
  doc = json.loads((out / "atlas.json").read_text())
  assert len(doc["reused"]) == kept
  assert not _same(atlas.read_table(out / "atlas.csv"), atlas.read_table(
      _written(one_process, tmp_path)))


def _written(result, tmp_path):
  """The reference rows as atlas.csv writes them (flags included)."""
  path = tmp_path / "reference.csv"
  atlas.write_table(path, result.rows)
  return path


def test_a_lost_scheduler_is_one_line_and_resume_continues(one_process, tmp_path):
  (tmp_path / "dask").mkdir()
  address, procs = _start_cluster(tmp_path / "dask", workers=1)
  out = tmp_path / "atlas"
  cmd = [sys.executable, "-m", "attndyn.cli", "atlas", "--out", str(out), "--no-progress"] + \
      [a for item in TINY for a in ("--set", item)]
  store = out / atlas.STORE
  try:
    proc = subprocess.Popen(cmd + ["--scheduler", address], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and len(list(store.glob("*.json"))) < 1:
      time.sleep(0.05)
    procs[0].kill()   # the scheduler
    _, err = proc.communicate(timeout=300)
  finally:
    _stop(procs)
  kept = len(list(store.glob("*.json")))
  assert 1 <= kept < 3, f"the kill came too late: {kept} buckets finished"
  lines = err.strip().splitlines()
  assert proc.returncode == 2 and len(lines) == 1, err      # no traceback, no Dask log
  assert "did not finish on the Dask cluster" in lines[0] and "--resume" in lines[0], err
  again = subprocess.run(cmd + ["--workers", "1", "--resume"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
  assert again.returncode == 0, again.stderr
  assert len(json.loads((out / "atlas.json").read_text())["reused"]) == kept
  assert not _same(atlas.read_table(out / "atlas.csv"), atlas.read_table(
      _written(one_process, tmp_path)))
