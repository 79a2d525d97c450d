"""Nothing lost, nothing mixed: one command per output directory, files tied to one
run, damaged results refused, interrupts and write failures as one line. Mocks and tiny files
only: nothing here trains."""
import contextlib
import errno
import json
import os
import shutil
from unittest import mock

import pytest

from attndyn import analysis
from attndyn.analysis import npz
from attndyn import api, checkpoint, cli, lock, outputs, pipeline
from attndyn.tasks.errors import ConfigError


def _one_line(capsys) -> str:
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "Traceback" not in err, err
  return err


# --- 1. an exclusive lock per output directory ------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["run", "--preset", "quick", "--force"],
    ["run", "--resume"],
    ["reproduce", "lu2021", "--quick"],
    ["explain", "--preset", "quick"],
    ["bench", "--quick"],
], ids=["run", "resume", "reproduce", "explain", "bench"])
def test_a_second_command_on_a_locked_directory_is_refused_naming_the_holder(
    tmp_path, capsys, argv):
  out = tmp_path / "out"
  with lock.hold(out):  # another open file description: flock refuses it in this process too
    code = cli.main(argv[:1] + argv[1:] + ["--out", str(out)])
    assert (out / lock.LOCKFILE).is_file()
  err = _one_line(capsys)
  assert code == 2
  assert f"--out {str(out)!r} is in use by attndyn pid {os.getpid()} (started " in err
  assert err.endswith("; wait for it or pick another --out.\n")
  assert not out.exists()  # released, and the directory the lock made is gone again


def test_report_into_a_locked_directory_is_refused(tmp_path, capsys):
  (tmp_path / "summary.json").write_text("{}")
  with lock.hold(tmp_path):
    code = cli.main(["report", str(tmp_path)])
  assert code == 2 and "is in use by attndyn pid" in _one_line(capsys)


def test_the_lock_is_released_after_a_failed_command(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  code = cli.main(["run", "--preset", "no-such-preset", "--out", str(out)])
  assert code == 2
  capsys.readouterr()
  assert list(out.iterdir()) == []  # the lock file goes with the lock
  with lock.hold(out):  # and nobody holds it
    pass


def test_a_lock_left_by_a_killed_process_is_taken_over_and_named(tmp_path, capsys):
  (tmp_path / lock.LOCKFILE).write_text(json.dumps(
      {"pid": 999999, "host": "elsewhere", "started": "2026-01-01T00:00:00+00:00"}))
  with lock.hold(tmp_path):
    doc = json.loads((tmp_path / lock.LOCKFILE).read_text())
  assert doc["pid"] == os.getpid()
  err = _one_line(capsys)
  assert "left locked by attndyn pid 999999 on elsewhere (started 2026-01-01" in err
  assert "no longer running" in err


def test_a_lock_file_alone_does_not_make_a_directory_non_empty(tmp_path):
  from attndyn import outputs
  (tmp_path / lock.LOCKFILE).write_text("")
  assert outputs.prepare_out_dir(tmp_path) == tmp_path


# --- 2. a run id in every file; a directory mixing two runs is refused -----------------------

def _copy(results_dir, tmp_path):
  copy = tmp_path / "copy"
  shutil.copytree(results_dir[0], copy, ignore=shutil.ignore_patterns("*.png"))
  return copy


def _rewrite_npz(path, change=lambda arrays: arrays, run_id="same"):
  """Rewrite an .npz with ``change(arrays)`` and its run id (``"same"``: kept)."""
  arrays = change(npz.read(path))
  npz.write(path, arrays, run_id=npz.run_id(path) if run_id == "same" else run_id)


def test_every_file_of_a_run_carries_its_run_id(results_dir):
  out = results_dir[0]
  run = json.loads((out / "summary.json").read_text())["run_id"]
  assert len(run) == 32
  assert json.loads((out / "run_info.json").read_text())["run_id"] == run
  assert json.loads((out / "checkpoints" / "manifest.json").read_text())["run_id"] == run
  assert npz.run_id(out / "trajectories.npz") == run
  # each stored chunk's key digests the run id (with the stage and the chunk's points)
  store = checkpoint.Checkpoints.resume(out)
  with pipeline.precision_scope(store.manifest["config"]["precision"]):
    keys = {store.entry("gd", i, b).key for i, b in enumerate([(0, 3), (3, 4)])}
  assert {p.stem for p in (out / "checkpoints").glob("*.npz")} == keys


FOREIGN = {
    "trajectories.npz": lambda d: _rewrite_npz(d / "trajectories.npz", run_id="f" * 32),
    "summary.json": lambda d: _edit_json(d / "summary.json", run_id="f" * 32),
    "run_info.json": lambda d: _edit_json(d / "run_info.json", run_id="f" * 32),
}


def _edit_json(path, **changes):
  path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize("foreign", list(FOREIGN))
def test_a_directory_mixing_two_runs_is_refused_naming_both_files(
    foreign, results_dir, tmp_path, capsys):
  copy = _copy(results_dir, tmp_path)
  run = json.loads((copy / "summary.json").read_text())["run_id"]
  FOREIGN[foreign](copy)
  with pytest.raises(ConfigError, match="mixes the files of two runs") as err:
    analysis.load(copy)
  assert f"{foreign}' is from run {'f' * 32}" in str(err.value)
  assert f"' is from run {run}" in str(err.value)
  assert cli.main(["report", str(copy), "--no-progress"]) == 2
  assert "mixes the files of two runs" in _one_line(capsys)
  assert not (copy / "report.md").exists()


def test_files_without_run_ids_from_an_older_attndyn_still_load(results_dir, tmp_path):
  copy = _copy(results_dir, tmp_path)
  for name in ("summary.json", "run_info.json"):
    doc = json.loads((copy / name).read_text())
    del doc["run_id"]
    (copy / name).write_text(json.dumps(doc))
  _rewrite_npz(copy / "trajectories.npz", run_id=None)
  assert npz.run_id(copy / "trajectories.npz") is None
  assert analysis.load(copy).n_runs == 4


def test_resume_keeps_the_manifests_run_id(results_dir, tmp_path):
  copy = _copy(results_dir, tmp_path)
  _edit_json(copy / "checkpoints" / "manifest.json", run_id="e" * 32)
  store = checkpoint.Checkpoints.resume(copy)
  assert store.run_id == "e" * 32 and outputs.run_id(None, store) == "e" * 32
  legacy = json.loads((copy / "checkpoints" / "manifest.json").read_text())
  del legacy["run_id"]  # an older attndyn's manifest: the id of its config
  assert checkpoint.Checkpoints(copy, legacy, every=1).run_id == \
      json.loads((results_dir[0] / "summary.json").read_text())["run_id"]


# --- 3. every array summary.json implies: present, numeric, of its shape ----------------------

def _drop(name):
  return lambda arrays: {k: v for k, v in arrays.items() if k != name}


def _set(name, fn):
  return lambda arrays: {**arrays, name: fn(arrays[name])}


DAMAGED_ARRAYS = [
    ("missing observable", _drop("gd/score"), "has no array 'gd/score'"),
    ("missing point coordinate", _drop("points/train.lr"), "has no array 'points/train.lr'"),
    ("times cut short", _set("gd/t", lambda a: a[:, :-1]),
     "array 'gd/t' has shape (4, 4), but summary.json implies (4, 5)"),
    ("observable cut short", _set("gd/loss", lambda a: a[:, :-1]),
     "array 'gd/loss' has shape (4, 4), expected (4, 5) or (4, 5, words)"),
    ("words disagree", _set("gd/emb_norm", lambda a: a[..., :-1]),
     "array 'gd/emb_norm' has 3 word entries, but 'gd/score' has 4"),
    ("text instead of numbers", _set("gd/invariant", lambda a: a.astype(str)),
     "array 'gd/invariant' has dtype <U"),
    ("failed_at with a time axis", _set("gd/failed_at", lambda a: a[:, None]),
     "array 'gd/failed_at' has shape (4, 1), expected 1 axes"),
]


@pytest.mark.parametrize("change,expected", [(c, e) for _, c, e in DAMAGED_ARRAYS],
                         ids=[name for name, _, _ in DAMAGED_ARRAYS])
def test_report_refuses_a_damaged_array_before_drawing_anything(
    change, expected, results_dir, tmp_path, capsys):
  copy = _copy(results_dir, tmp_path)
  _rewrite_npz(copy / "trajectories.npz", change)
  code = cli.main(["report", str(copy), "--no-progress"])
  err = _one_line(capsys)
  assert code == 2 and expected in err, err
  assert not (copy / "report.md").exists() and not list(copy.glob("*.png"))


def test_an_ode_stage_the_summary_says_ran_must_have_its_arrays(results_dir, tmp_path):
  copy = _copy(results_dir, tmp_path)
  # without its run id (an older attndyn's file), so the edited config is not refused first
  _edit_json(copy / "summary.json", run_id=None, config={
      **json.loads((copy / "summary.json").read_text())["config"],
      "ode": {"kind": "reduced"}})
  with pytest.raises(ConfigError, match="has no array 'reduced/t', which summary.json implies"):
    analysis.load(copy)
  _edit_json(copy / "summary.json", errors={"reduced": "RuntimeError: it failed"})
  assert analysis.load(copy).reduced is None  # a stage that failed has no arrays


# --- 4. Ctrl-C stops the run, keeps its checkpoints, says how to resume, exits 130 ------------

TINY_ODE = ["run", "--preset", "quick", "--no-progress", "--chunk-size", "1"] + [
    arg for item in ("task.vocab_size=12", "task.n_nontopic=3", "task.n_train=16",
                     "task.n_test=8", "model.embed_dim=4", "model.key_dim=4", "train.steps=40",
                     "train.record_every=10", "ode.kind=both", "sweep.seeds=2")
    for arg in ("--set", item)]


def _interrupted_in(stage):
  """A stand-in for pipeline._stage: GD returns at once, ``stage`` is Ctrl-C'd; the ODE
  stages reached are recorded."""
  reached = []

  def fake(label, *args, **kwargs):
    reached.append(label)
    if label == stage:
      raise KeyboardInterrupt
    return object()
  return fake, reached


def test_ctrl_c_in_an_ode_stage_stops_the_run_and_exits_130_with_the_resume_hint(
    tmp_path, capsys):
  out = tmp_path / "out"
  fake, reached = _interrupted_in("reduced")
  with mock.patch.object(pipeline, "_stage", fake), \
      mock.patch.object(outputs, "write_all") as write_all:
    code = cli.main(TINY_ODE + ["--out", str(out)])
  err = _one_line(capsys)
  assert code == 130, err
  assert err == (f"attndyn: interrupted; `attndyn run --out {out} --resume` continues from the "
                 f"last checkpoint\n")
  assert reached == ["gd", "reduced"]  # the gradient flow is not started
  write_all.assert_not_called()  # nothing is written as if the run had finished
  assert (out / "checkpoints" / "manifest.json").is_file()
  assert not (out / lock.LOCKFILE).exists()


def test_ctrl_c_without_checkpoints_says_there_is_nothing_to_resume(tmp_path, capsys):
  fake, _ = _interrupted_in("gradient_flow")
  with mock.patch.object(pipeline, "_stage", fake):
    code = cli.main(TINY_ODE + ["--checkpoint-every", "0", "--out", str(tmp_path / "o")])
  assert code == 130
  assert "no checkpoints were written (--checkpoint-every 0?): run it again" in \
      _one_line(capsys)


def test_sigterm_stops_like_ctrl_c_with_exit_143_and_restores_the_handler(tmp_path, capsys):
  import signal
  import time

  def terminated(*args, **kwargs):  # a scheduler's SIGTERM arrives mid-stage
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    raise AssertionError("SIGTERM did not stop the run")

  before = signal.getsignal(signal.SIGTERM)
  with mock.patch.object(pipeline, "_stage", terminated):
    code = cli.main(TINY_GD + ["--checkpoint-every", "0", "--out", str(tmp_path / "o")])
  assert code == 143
  assert _one_line(capsys).startswith("attndyn: terminated (SIGTERM); no checkpoints were written")
  assert signal.getsignal(signal.SIGTERM) is before


class _Alarm(Exception):
  """Raised by SIGALRM inside :func:`_alarm`."""


@contextlib.contextmanager
def _alarm(seconds: float):
  """SIGALRM ``seconds`` after entering raises :class:`_Alarm`; timer and handler restored after."""
  import signal

  def on_alarm(signum, frame):
    raise _Alarm

  previous = signal.signal(signal.SIGALRM, on_alarm)
  try:
    signal.setitimer(signal.ITIMER_REAL, seconds)
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_a_signal_stops_a_sweep_inside_a_chunk_that_xla_runs_to_the_end():
  """A chunk with a host callback (diffrax's checks) is dispatched synchronously; the
  signal must still stop the sweep while the chunk is running, not when it ends."""
  import threading

  import jax
  import jax.numpy as jnp
  import numpy as np
  from attndyn.dynamics import run_sweep

  release = threading.Event()  # lets the abandoned chunk finish at once after the test
  calls = []                   # host callbacks finished so far

  def slow(x):  # 200 host callbacks of 50 ms each: XLA cannot return before all of them
    def step(i, y):
      def host(a):
        release.wait(0.05)
        calls.append(None)
        return a
      return jax.pure_callback(host, jax.ShapeDtypeStruct(y.shape, y.dtype), y,
                               vmap_method="broadcast_all") + 1.0
    return jax.lax.fori_loop(0, 200, step, x)

  try:
    with _alarm(1.0), pytest.raises(_Alarm):
      run_sweep(slow, jnp.zeros((2,)))
    done_at_signal = len(calls)
  finally:
    release.set()
  assert done_at_signal < 200, done_at_signal   # stopped while the chunk was still running
  np.testing.assert_array_equal(run_sweep(slow, jnp.zeros((2,))), [200.0, 200.0])


def test_a_signal_is_not_held_by_an_asynchronous_call():
  """``dynamics.wait_ready`` (used between ``run_segments``' segments, e.g. SST's) waits for a
  compiled call JAX dispatched asynchronously in short sleeps: a signal raises at once while
  the result is still being computed (a fetch would hold it to the end)."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from attndyn.dynamics.sweep import wait_ready

  busy = jax.jit(lambda x: jax.lax.fori_loop(0, 600, lambda i, y: jnp.sin(y) + 1e-3, x))
  x = jnp.ones((100_000,))
  busy(x).block_until_ready()   # compiled: the call below only dispatches

  y = busy(x)
  with _alarm(0.01), pytest.raises(_Alarm):
    wait_ready(y)
  still_running = not y.is_ready()
  assert still_running
  assert np.isfinite(np.asarray(wait_ready(y))).all()


# --- 5. no traceback: write failures and deep inputs are one line (2), bugs one line (1) -------

TINY_GD = [a if a != "ode.kind=both" else "ode.kind=none" for a in TINY_ODE]


@pytest.mark.parametrize("code_name", ["ENOSPC", "EACCES", "EROFS", "EDQUOT"])
def test_a_failed_write_is_one_line_naming_the_file_and_what_was_kept(
    code_name, tmp_path, capsys):
  out = tmp_path / "out"
  code = getattr(errno, code_name)

  def finished_run(*args, **kwargs):  # every chunk computed and checkpointed
    chunk = out / "checkpoints" / "0123abcd.npz"   # a stored chunk's arrays
    chunk.write_bytes(b"")
    return mock.sentinel.result

  failure = OSError(code, os.strerror(code), str(out / ".summary.json.x1y2.tmp"))
  with mock.patch.object(pipeline, "run", finished_run), \
      mock.patch.object(outputs, "write_all", side_effect=failure):
    status = cli.main(TINY_GD + ["--out", str(out)])
  err = _one_line(capsys)
  assert status == 2
  assert err.startswith(f"attndyn: error: {str(out / 'summary.json')!r}: {os.strerror(code)} "
                        f"({code_name}); kept: 1 finished chunk(s) in "), err
  assert f"`attndyn run --out {out} --resume` writes the outputs" in err


def test_a_failed_write_without_checkpoints_says_nothing_was_kept(tmp_path, capsys):
  failure = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "trajectories.npz"))
  with mock.patch.object(pipeline, "run", return_value=mock.sentinel.result), \
      mock.patch.object(outputs, "write_all", side_effect=failure):
    status = cli.main(TINY_GD + ["--checkpoint-every", "0", "--out", str(tmp_path / "o")])
  assert status == 2
  assert "(ENOSPC); no checkpoints were kept (--checkpoint-every 0" in _one_line(capsys)


def test_a_full_disk_costs_no_computed_result(tmp_path, monkeypatch):
  """A chunk's checkpoint that cannot be written is a warning, not a failed stage (its results
  stay in memory); final files that cannot be written go to $TMPDIR/attndyn-rescue-RUNID, which
  the one-line error names and `attndyn report` reads."""
  import tempfile
  out, scratch = tmp_path / "out", tmp_path / "scratch"
  scratch.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(scratch))
  real_npz = outputs.write_npz

  def full_chunk(self, stage, index, *args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", f"chunk_{index:05d}.npz")

  def full_out(where, *args, **kwargs):
    if where == out:
      raise OSError(errno.ENOSPC, "No space left on device", str(out / "trajectories.npz"))
    return real_npz(where, *args, **kwargs)

  with mock.patch.object(checkpoint.Checkpoints, "write", full_chunk), \
      mock.patch.object(outputs, "write_npz", full_out), \
      mock.patch("sys.stderr", new_callable=__import__("io").StringIO) as stderr:
    status = cli.main(TINY_GD + ["--out", str(out)])
  lines = stderr.getvalue().splitlines()
  rescue = next(scratch.glob(outputs.RESCUE_PREFIX + "*"))
  assert status == 2 and "Traceback" not in stderr.getvalue()
  assert lines[0].startswith("attndyn: warning: checkpoint gd chunk 0 could not be written "
                             "(No space left on device); the run goes on")
  assert lines[-1].startswith(f"attndyn: error: {str(out / 'trajectories.npz')!r}: No space left "
                              f"on device; the finished results were saved instead to "
                              f"{str(rescue)!r}")
  assert analysis.load(rescue).trajectory("gd").t.shape[0] == 2


def test_figures_a_full_disk_refused_are_one_error_line_naming_what_was_kept(tmp_path, capsys):
  from types import SimpleNamespace
  doc = {"files": {"figures": ["sen.png"], "figure_errors": {
      "loss.png": "OSError: [Errno 28] No space left on device: 'o/loss.png'",
      "attndyn.dynamics.png": "OSError: [Errno 28] No space left on device: 'o/dynamics.png'"}}}
  out = tmp_path / "o"
  done = SimpleNamespace(directory=out, summary={**doc, "errors": {}}, exceptions={})
  with mock.patch.object(api, "run", return_value=done), mock.patch.object(cli, "_headline"):
    status = cli.main(TINY_GD + ["--checkpoint-every", "0", "--out", str(out)])
  assert status == 2
  assert _one_line(capsys).startswith(
      "attndyn: error: 2 figure(s) could not be written (OSError: [Errno 28] No space left on "
      f"device: 'o/loss.png'); kept: summary.json, trajectories.npz, config.toml in {str(out)!r}")


def test_a_deeply_nested_config_is_one_line(tmp_path, capsys):
  deep = tmp_path / "deep.toml"
  deep.write_text("[train]\nlr = " + "[" * 5000 + "]" * 5000 + "\n")
  assert cli.main(["run", str(deep), "--out", str(tmp_path / "o")]) == 2
  assert "is nested too deeply to read (RecursionError)" in _one_line(capsys)
  assert cli.main(["run", "--preset", "quick", "--out", str(tmp_path / "o"),
                   "--set", "train.lr=" + "[" * 5000 + "]" * 5000]) == 2
  assert "is nested too deeply to read (RecursionError)" in _one_line(capsys)


def test_a_bug_is_one_line_with_the_traceback_in_a_log_and_exit_1(tmp_path, capsys):
  out = tmp_path / "out"
  with mock.patch.object(pipeline, "run", side_effect=ValueError("boom\nsecond line")):
    status = cli.main(TINY_GD + ["--out", str(out)])
  err = _one_line(capsys)
  log = out / cli.ERROR_LOG
  assert status == 1
  assert err == f"attndyn: internal error: ValueError: boom second line; traceback in {log}\n"
  text = log.read_text()
  assert "Traceback (most recent call last)" in text and "ValueError: boom" in text


def test_a_bug_without_an_out_directory_logs_to_a_temporary_file(capsys):
  with mock.patch("benchmarks.run.main", side_effect=TypeError("bad")):
    assert cli.main(["bench", "--quick"]) == 1
  err = _one_line(capsys)
  assert err.startswith("attndyn: internal error: TypeError: bad; traceback in ")
  log = err.rstrip("\n").rsplit(" ", 1)[1]
  try:
    assert "TypeError: bad" in open(log, encoding="utf-8").read()
  finally:
    os.remove(log)


# --- 6. leftovers of killed writes are removed by the next command there; bench's --out -------

LEFTOVERS = [".summary.json.k2j3h4k5.tmp", ".trajectories.npz.a1b2c3d4.tmp",
             "checkpoints/.manifest.json.zz99zz99.tmp", "checkpoints/.0123abcd.npz.q_w_e_r_.tmp"]
NOT_OURS = [".notes.txt.k2j3h4k5.tmp", "mine.tmp", "checkpoints/.x.npz.tmp"]


def _plant(out, names):
  for name in names:
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_text("")


@pytest.mark.parametrize("resume", [False, True], ids=["run --force", "run --resume"])
def test_a_run_or_resume_removes_the_temporary_files_of_killed_writes(
    resume, results_dir, tmp_path, capsys):
  out = _copy(results_dir, tmp_path)
  _plant(out, LEFTOVERS + NOT_OURS)
  argv = ["run", "--out", str(out), "--resume"] if resume else TINY_GD + ["--out", str(out),
                                                                       "--force"]
  with mock.patch.object(pipeline, "run", side_effect=KeyboardInterrupt):
    assert cli.main(argv) == 130
  capsys.readouterr()
  assert [n for n in LEFTOVERS if (out / n).exists()] == []
  assert [n for n in NOT_OURS if (out / n).exists()] == NOT_OURS  # nobody else's file goes


def test_reproduce_removes_leftovers_in_its_experiments_and_each_run(tmp_path):
  from attndyn.reproduce import cli as reproduce_cli
  _plant(tmp_path, [".replication.md.abcdefgh.tmp", "experiments/.sst.json.abcdefgh.tmp",
                    "runs/a/.summary.json.abcdefgh.tmp",
                    "runs/a/checkpoints/.0123abcd.npz.abcdefgh.tmp", "runs/a/keep.txt"])
  reproduce_cli._remove_leftovers(tmp_path)
  assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                if p.is_file()) == ["runs/a/keep.txt"]
  with lock.hold(tmp_path / "runs" / "a"):  # a run someone is writing is not touched
    with pytest.raises(lock.Busy, match="is in use by attndyn pid"):
      reproduce_cli._remove_leftovers(tmp_path)


def test_bench_refuses_a_non_empty_out_without_force_in_one_line(tmp_path, capsys):
  (tmp_path / "bench.json").write_text("[]")
  with pytest.raises(SystemExit) as stop:
    cli.main(["bench", "--out", str(tmp_path), "--quick"])
  err = _one_line(capsys)
  assert stop.value.code == 2
  assert err.startswith(f"attndyn bench: error: --out {tmp_path} is not empty (it holds "
                        f"bench.json): pick a new directory, or pass --force")
  with pytest.raises(SystemExit):
    cli.main(["bench", "--out", str(tmp_path), "--reps", "x"])
  assert "argument --reps: 'x' is not a positive integer" in _one_line(capsys)


def test_a_failed_atomic_write_names_the_file_meant(tmp_path):
  from attndyn import atomic

  def full(tmp):  # as zipfile's writes fail on a full disk: an OSError without a file name
    with open(tmp, "wb") as f:
      f.write(b"x")
    raise OSError(errno.ENOSPC, "No space left on device")
  with pytest.raises(OSError) as err:
    atomic.write(tmp_path / "trajectories.npz", full)
  assert err.value.errno == errno.ENOSPC
  assert err.value.filename == str(tmp_path / "trajectories.npz")
  assert list(tmp_path.iterdir()) == []  # no temporary file left
