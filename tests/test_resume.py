"""Kill-and-resume: a sweep killed (SIGKILL) mid-run and resumed ends bit-identical to an
uninterrupted one; a resume with another config, or without checkpoints, is refused."""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from attndyn import checkpoint, cli, pipeline

# GD only, 3 seeds in chunks of 1: three chunks, a checkpoint after each.
ARGS = ["run", "--preset", "quick", "--no-progress", "--chunk-size", "1"] + [
    arg for item in ("task.vocab_size=12", "task.n_nontopic=3", "task.n_train=16",
                     "task.n_test=8", "model.embed_dim=4", "model.key_dim=4",
                     "model.embed_std=0.1", "train.lr=0.5", "train.steps=40",
                     "train.record_every=10", "ode.kind=none", "sweep.seeds=3")
    for arg in ("--set", item)]

# The CLI, except that it stops (sleeps) right after writing gd's first checkpoint, so that
# the kill below lands mid-sweep however fast the chunks are.
_STALL = """
import sys, time
from attndyn import checkpoint, cli
write = checkpoint.Checkpoints.write
def stalling(self, stage, index, bounds, out, **kwargs):
  write(self, stage, index, bounds, out, **kwargs)
  print("checkpointed", stage, index, flush=True)
  time.sleep(3600)
checkpoint.Checkpoints.write = stalling
sys.exit(cli.main(sys.argv[1:]))
"""
OUTPUTS = ("summary.json", "trajectories.npz")


def _attndyn(*args):
  return [str(Path(sys.executable).with_name("attndyn")), *args]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """A run killed mid-sweep, then side by side its resume and an uninterrupted run."""
  root = tmp_path_factory.mktemp("resume")
  whole, killed = root / "whole", root / "killed"
  # JAX's persistent compilation cache: the killed run compiles, and the two runs after it
  # load the same executables instead of compiling them again (CI has 2 cores).
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": str(root / "cache"),
         "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
         "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
  stall = subprocess.Popen([sys.executable, "-c", _STALL, *ARGS, "--out", str(killed)],
                           env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  plain = None
  try:
    line = stall.stdout.readline()                  # blocks until the first checkpoint
    assert line.strip() == "checkpointed gd 0", (line, stall.stderr.read())
    stall.send_signal(signal.SIGKILL)
    stall.wait(timeout=60)
    state = sorted(p.relative_to(killed).as_posix() for p in killed.rglob("*") if p.is_file())
    plain = subprocess.Popen(_attndyn(*ARGS, "--out", str(whole)), env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    resumed = subprocess.run(_attndyn("run", "--out", str(killed), "--resume", "--no-progress"),
                             env=env, text=True, capture_output=True, timeout=600)
    _, stderr = plain.communicate(timeout=600)
  finally:
    for proc in (plain, stall):
      if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()
  assert plain.returncode == 0, stderr
  return whole, killed, state, resumed


def test_a_killed_run_leaves_only_whole_checkpoints(runs):
  _, _, state, _ = runs
  (chunk,) = [name for name in state if name.startswith("checkpoints/") and name.endswith(".npz")]
  assert chunk[:-len(".npz")] + ".json" in state           # the store's entry of gd's chunk 0
  assert "summary.json" not in state and "trajectories.npz" not in state
  assert not [name for name in state if name.endswith(".tmp")]


def test_resume_finishes_bit_identical_to_an_uninterrupted_run(runs):
  whole, killed, _, resumed = runs
  assert resumed.returncode == 0, resumed.stderr
  for name in OUTPUTS:
    assert (killed / name).read_bytes() == (whole / name).read_bytes(), name
  info = json.loads((killed / "run_info.json").read_text())
  assert info["resumed"] is True
  seconds = info["chunks"].pop("loaded_seconds")   # of the chunk the killed process wrote
  assert info["chunks"] == {"chunk_size": 1, "loaded": {"gd": 1}, "computed": {"gd": 2}}
  assert set(seconds) == {"gd"} and seconds["gd"] > 0


def test_resume_with_another_config_is_refused_naming_the_fields(runs, capsys):
  _, killed, _, _ = runs
  before = (killed / "summary.json").read_bytes()
  code = cli.main([*ARGS, "--set", "train.lr=0.25", "--set", "sweep.seeds=2", "--out",
                   str(killed), "--resume"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
  assert "train.lr = 0.5 in the checkpoints, 0.25 now" in err
  assert "sweep.seeds = [0, 1, 2] in the checkpoints, [0, 1] now" in err
  assert (killed / "summary.json").read_bytes() == before


def test_checkpoint_every_may_change_on_resume():
  old = {"sweep": {"seeds": [0], "checkpoint_every": 1}, "train": {"lr": 0.1}}
  new = {"sweep": {"seeds": [0], "checkpoint_every": 5}, "train": {"lr": 0.1}}
  assert checkpoint.differences(old, new) == []
  assert checkpoint.config_hash(old) == checkpoint.config_hash(new)


@pytest.mark.parametrize("setup,expected", [
    (lambda d: None, "does not exist, so there is nothing to resume"),
    (lambda d: d.mkdir(), "has no checkpoints"),
    (lambda d: (d / "checkpoints" / "manifest.json").mkdir(parents=True),
     "manifest.json' is not a file"),
    (lambda d: (d / "checkpoints").mkdir(parents=True)
     or (d / "checkpoints" / "manifest.json").write_text('{"format": 1, "config": '),
     "manifest.json' line 1 column 25 is not valid JSON"),
    (lambda d: (d / "checkpoints").mkdir(parents=True)
     or (d / "checkpoints" / "manifest.json").write_text('{"format": 99}'),
     "has format 99, newer than this attndyn reads"),
])
def test_resume_without_usable_checkpoints_is_one_line_error(setup, expected, tmp_path, capsys):
  out = tmp_path / "out"
  setup(out)
  code = cli.main(["run", "--out", str(out), "--resume"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
  assert expected in err, err


def test_a_manifest_without_keys_an_older_attndyn_did_not_write_resumes(runs, tmp_path, capsys):
  """Keys missing from the first run's config are read as their defaults, so `--resume` alone
  is not refused over them (it was, with advice to run `--resume` alone)."""
  _, killed, _, _ = runs
  manifest = json.loads((killed / "checkpoints" / "manifest.json").read_text())
  del manifest["config"]["train"]["sampling"], manifest["config"]["ode"]["dtmin"]
  manifest["config_hash"] = checkpoint.config_hash(manifest["config"])
  (tmp_path / "checkpoints").mkdir()
  (tmp_path / "checkpoints" / "manifest.json").write_text(json.dumps(manifest))
  with mock.patch.object(pipeline, "run", side_effect=KeyboardInterrupt):
    code = cli.main(["run", "--out", str(tmp_path), "--resume", "--no-progress"])
  err = capsys.readouterr().err
  assert code == 130 and "interrupted" in err and "differs" not in err, err


@pytest.mark.parametrize("size", ["abc", 1.5, 0, -1, True, 10**30])
def test_a_damaged_chunk_size_in_the_manifest_is_named_on_resume(size, runs, tmp_path, capsys):
  """chunk_size is not in the config hash, so it is checked on its own (it was a TypeError
  traceback, or blamed a chunk file)."""
  _, killed, _, _ = runs
  manifest = json.loads((killed / "checkpoints" / "manifest.json").read_text())
  (tmp_path / "checkpoints").mkdir()
  (tmp_path / "checkpoints" / "manifest.json").write_text(json.dumps({**manifest,
                                                                      "chunk_size": size}))
  code = cli.main(["run", "--out", str(tmp_path), "--resume", "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
  assert f"has chunk_size = {size!r}" in err and "manifest.json" in err, err


def test_a_damaged_checkpoint_is_named_on_resume_and_computed_again(runs, tmp_path, capsys):
  _, killed, _, _ = runs
  copy = tmp_path / "copy" / "checkpoints"
  shutil.copytree(killed / "checkpoints", copy)
  store = checkpoint.Checkpoints.resume(copy.parent)
  with pipeline.precision_scope(store.manifest["config"]["precision"]):
    chunk = copy / f"{store.entry('gd', 0, (0, 1)).key}.npz"
    chunk.write_bytes(chunk.read_bytes()[:200])          # truncated
    done = store.completed("gd", [(0, 1), (1, 2), (2, 3)], like=lambda: pytest.fail("read"))
  err = capsys.readouterr().err
  assert done == [] and err.count("\n") == 1
  assert f"{chunk.with_suffix('.json')} does not verify" in err
  assert "job gd-chunk-00000 is computed again" in err


def test_a_resumed_progress_bar_logs_what_it_read_back_once():
  """Not on a terminal, a bar whose points all came from checkpoints writes one line (it wrote
  two identical ones), and a partly resumed bar a line per newly finished chunk."""
  import io

  from attndyn.progress import ProgressBar

  log = io.StringIO()
  bar = ProgressBar("gd", 2, initial=2, stream=log)
  bar.update(2)
  bar.close()
  assert log.getvalue().count("\n") == 1 and "(2 from checkpoints)" in log.getvalue()
  log = io.StringIO()
  bar = ProgressBar("gd", 3, initial=1, stream=log)
  bar.update(2)
  bar.update(3)
  bar.close()
  lines = log.getvalue().splitlines()
  assert [line.split("]")[1].split()[0] for line in lines] == ["2/3", "3/3"]


def test_a_progress_bar_leaves_read_back_units_out_of_its_eta():
  """Units read back from checkpoints midway (a resumed atlas's finished buckets) count
  neither in the rate nor in the ETA: reading 2 of 4 buckets back took 100 s, computing the
  third 10 s, so the fourth is due in 10 s (not 110 · 1/3)."""
  import io

  from attndyn import progress

  now = [0.0]
  log = io.StringIO()
  bar = progress.ProgressBar("atlas", 4, steps_per_point=None, stream=log, unit="buckets",
                             clock=lambda: now[0])
  now[0] = 100.0
  bar.read_back(2)
  now[0] = 110.0
  bar.update(3)
  assert log.getvalue().splitlines()[-1].endswith("(2 from checkpoints)  ETA 10s"), log.getvalue()


def test_a_progress_bar_weighs_its_eta_by_the_units_cost():
  """Units of unequal cost (the atlas's buckets): the first of 3 units, costing 1, took 10 s;
  the two left cost 4 more, so they are due in 40 s, not 20 s."""
  import io

  from attndyn import progress

  now = [0.0]
  log = io.StringIO()
  bar = progress.ProgressBar("atlas", 3, steps_per_point=None, stream=log, unit="buckets",
                             clock=lambda: now[0], cost=lambda done: [0.0, 1.0, 3.0, 5.0][done])
  now[0] = 10.0
  bar.update(1)
  assert log.getvalue().splitlines()[-1].endswith("ETA 40s"), log.getvalue()
  now[0] = 30.0
  bar.update(2)       # 3 units of cost in 30 s: the last 2 in 20 s
  assert log.getvalue().splitlines()[-1].endswith("ETA 20s"), log.getvalue()
