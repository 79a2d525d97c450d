"""`attndyn run --distributed` with two processes on this machine (CPU, Gloo collectives).

Each process is the console script, as on two hosts (docs/multihost.md): the coordinator is
process 0 on 127.0.0.1 at a free port; JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
JAX_PROCESS_ID tell each process its place. One module fixture runs everything side by side
(2 cores; each run spends most of its time importing and compiling):

* a two-process run of a tiny config into one shared --out,
* a two-process run of it whose process 1 is SIGKILLed as soon as both have joined
  (``jax.distributed.initialize`` has connected them), so process 0 goes on alone and must
  stop by itself: JAX's coordination service misses process 1's heartbeats,
* meanwhile, in this process (its imports are done), the single-process run of the same
  config (``pipeline.run``, the summary and arrays ``attndyn run`` writes, no figures) that
  the first pair must reproduce.

Every subprocess has a deadline (a thread kills it) and is killed in ``finally``: the tests
cannot hang.
"""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

# test_cli's TINY, fewer steps, GD only: 2 sweep points, one per process.
TINY = ["--set", "task.vocab_size=12", "--set", "task.n_nontopic=3", "--set", "task.n_train=16",
        "--set", "task.n_test=8", "--set", "model.embed_dim=4", "--set", "model.key_dim=4",
        "--set", "train.steps=20", "--set", "train.record_every=10", "--set", "sweep.seeds=2",
        "--set", "train.lr=0.5", "--set", "model.embed_std=0.1", "--set", "ode.kind=none"]
DEADLINE_S = 60        # for every process of the fixture; the whole file takes ~20 s
JOINED = "Connected to distributed JAX controller"  # XLA's log (TF_CPP_MIN_LOG_LEVEL=0)
HEARTBEAT_S = 2        # JAX_HEARTBEAT_TIMEOUT_SECONDS of the run that loses a process
# float32 runs. Sharded over 2 processes each device runs a batch of 1 point instead of
# vmapping 2 on one device, so XLA may order the float32 arithmetic differently; after 20 GD
# steps the recorded arrays differ by a few ulps (seen: <= 3e-8 absolute on values of order
# 0.01-1). rtol 1e-5 is ~80 float32 ulps; atol 1e-6 covers entries that are (near) zero.
# summary.json also holds derived ratios with a difference of float32 numbers in the
# numerator (invariant_drift = max |Q_t - Q_0| / |s_t growth|): the cancellation amplifies
# the ulps (seen: 3.7e-6 relative), hence rtol 1e-4 there.
ARRAY_TOL = {"rtol": 1e-5, "atol": 1e-6}
SUMMARY_TOL = {"rtol": 1e-4, "atol": 1e-6}
# run_id digests the device count, environment lists it: both differ by design. files: the
# reference writes no files (checked on its own).
DIFFERS = {"run_id", "environment", "files"}


def _console_script() -> str:
  return str(Path(sys.executable).with_name("attndyn"))


def _free_port() -> int:
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1]


class _Proc:
  """One ``attndyn run`` in a subprocess, stdout and stderr to files (no pipe can fill up).

  A thread waits for it (killing it after DEADLINE_S) and notes when it ended.
  """

  def __init__(self, out: Path, logs: Path, name: str, env: dict):
    self.name, self.stdout, self.stderr = name, logs / f"{name}.out", logs / f"{name}.err"
    # No --force: the shared --out is new, and only process 0 judges whether it is empty
    # (another process may look after process 0 created its lock and checkpoints there)
    cmd = [_console_script(), "run", "--preset", "quick", "--out", str(out), "--no-progress",
           "--distributed", *TINY]
    with open(self.stdout, "w") as stdout, open(self.stderr, "w") as stderr:
      self.popen = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "JAX_PLATFORMS": "cpu", **env})
    self.ended = None   # time.monotonic() when it ended
    self.watcher = threading.Thread(target=self._watch, daemon=True)
    self.watcher.start()

  def _watch(self):
    try:
      self.popen.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
      self.popen.kill()
      self.popen.wait()
    self.ended = time.monotonic()

  def text(self, which: str = "stderr") -> str:
    return getattr(self, which).read_text(errors="replace")

  def finish(self):
    """Wait for the process (at most DEADLINE_S after its start), kill it if it still runs."""
    self.watcher.join(timeout=DEADLINE_S)
    if self.popen.poll() is None:
      self.popen.kill()
      self.popen.wait(timeout=10)


def _pair(out: Path, logs: Path, name: str, env: dict = None) -> list:
  """Processes 0 and 1 of one two-process run into ``out``."""
  port = _free_port()
  return [_Proc(out, logs, f"{name}{i}", {
      "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2",
      "JAX_PROCESS_ID": str(i), **(env or {})}) for i in (0, 1)]


def _kill_once_joined(p0: _Proc, p1: _Proc, out: Path, killed_at: list):
  """SIGKILL ``p1`` as soon as both processes have joined (unless ``p0`` ended first).

  Joined: ``p0`` logged that it connected to the coordination service (its ``connect``
  returns once every process has registered), or, should that log line change, ``p0`` wrote
  config.toml (it does so after the backend's topology exchange, which waits for every
  process).
  """
  start = time.monotonic()
  while p0.ended is None and time.monotonic() - start < DEADLINE_S:
    if JOINED in p0.text() or (out / "config.toml").exists():
      p1.popen.send_signal(signal.SIGKILL)
      killed_at.append(time.monotonic())
      return
    time.sleep(0.02)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Start the two-process runs, SIGKILL process 1 of one of them once joined, run the
  single-process reference in this process meanwhile, wait for all.

  Returns:
    ``{"single": (summary document, {name: array}), "pair": ([p0, p1], out),
    "killed": ([p0, p1], out, time.monotonic() of the kill or None)}``.
  """
  root = tmp_path_factory.mktemp("multihost")
  logs = root / "logs"
  logs.mkdir()
  outs = {name: root / name for name in ("pair", "killed")}
  procs, killer, killed_at = [], None, []
  try:
    # short timeouts only where a process dies: the good pair keeps JAX's defaults
    killed = _pair(outs["killed"], logs, "killed", env={
        "JAX_HEARTBEAT_TIMEOUT_SECONDS": str(HEARTBEAT_S),
        "JAX_SHUTDOWN_TIMEOUT_SECONDS": str(HEARTBEAT_S), "JAX_INITIALIZATION_TIMEOUT": "30",
        "TF_CPP_MIN_LOG_LEVEL": "0"})
    procs += killed
    killer = threading.Thread(target=_kill_once_joined, daemon=True,
                              args=(*killed, outs["killed"], killed_at))
    killer.start()
    pair = _pair(outs["pair"], logs, "pair")
    procs += pair
    from attndyn import config, outputs, overrides, pipeline, presets
    from attndyn.analysis.results import to_arrays
    sets = [TINY[i + 1] for i in range(0, len(TINY), 2)]
    cfg = config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))
    with pipeline.precision_scope(cfg.precision):
      result = pipeline.run(cfg, progress=False)
      single = (outputs.summary(result, files={}), to_arrays(result))
    for proc in procs:
      proc.finish()
    killer.join(timeout=DEADLINE_S)
    yield {"single": single, "pair": (pair, outs["pair"]),
           "killed": (killed, outs["killed"], killed_at[0] if killed_at else None)}
  finally:
    for proc in procs:
      if proc.popen.poll() is None:
        proc.popen.kill()
        proc.popen.wait(timeout=10)


def _report(procs) -> str:
  return "\n".join(f"--- {p.name}: exit {p.popen.returncode}\n{p.text()[-3000:]}" for p in procs)


def _assert_close(got, want, path="summary"):
  """``got`` equals ``want`` (JSON values): same structure, floats within SUMMARY_TOL."""
  if isinstance(want, dict):
    assert isinstance(got, dict) and set(got) == set(want), (path, set(got) ^ set(want))
    for key in want:
      _assert_close(got[key], want[key], f"{path}.{key}")
  elif isinstance(want, list):
    assert isinstance(got, list) and len(got) == len(want), path
    for i, (g, w) in enumerate(zip(got, want)):
      _assert_close(g, w, f"{path}[{i}]")
  elif isinstance(want, float) and isinstance(got, float) and not math.isnan(want):
    np.testing.assert_allclose(got, want, **SUMMARY_TOL, err_msg=path)
  else:
    assert got == want or (got != got and want != want), (path, got, want)


def test_two_processes_write_what_one_process_writes(runs):
  (want, want_arrays), (pair, out) = runs["single"], runs["pair"]
  assert [p.popen.returncode for p in pair] == [0, 0], _report(pair)
  assert "wrote" in pair[0].text("stdout") and "wrote" not in pair[1].text("stdout")

  got = json.loads((out / "summary.json").read_text())
  want = json.loads(json.dumps(want))   # as summary.json holds it
  assert got["environment"]["process_count"] == 2 and got["environment"]["device_count"] == 2
  assert want["environment"]["process_count"] == 1
  assert got["files"]["trajectories"] == "trajectories.npz" and got["errors"] == {}
  _assert_close({k: v for k, v in got.items() if k not in DIFFERS},
                {k: v for k, v in want.items() if k not in DIFFERS})

  with np.load(out / "trajectories.npz", allow_pickle=False) as arrays:
    assert sorted(arrays.files) == sorted(want_arrays)
    assert want_arrays["gd/score"].shape[0] == 2 and want_arrays["gd/score"].dtype == np.float32
    for name, value in want_arrays.items():
      assert arrays[name].shape == value.shape and arrays[name].dtype == value.dtype, name
      np.testing.assert_allclose(arrays[name], value, **ARRAY_TOL, err_msg=name)


def test_a_dead_process_stops_the_other_without_half_written_outputs(runs):
  (p0, p1), out, t_kill = runs["killed"]
  assert t_kill is not None, _report([p0, p1])
  assert p1.popen.returncode == -signal.SIGKILL, _report([p0, p1])
  assert p0.popen.returncode not in (None, 0), _report([p0, p1])
  # JAX's coordination service notices the missing heartbeats after HEARTBEAT_S and aborts
  # process 0 (SIGABRT: "Terminating process because the JAX distributed service detected
  # fatal errors"); seen 3 s after the kill (JAX's default heartbeat timeout: 100 s).
  assert p0.ended - t_kill < 15, (p0.ended - t_kill, _report([p0]))
  assert not (out / "summary.json").exists() and not (out / "trajectories.npz").exists()
  from attndyn import atomic, config
  assert not [p for p in out.rglob("*") if atomic.leftover(p.name)]
  if (out / "config.toml").exists():
    config.load(out / "config.toml")   # what was written is whole
