"""Hostile machines: links planted where attndyn writes, broken output streams, poisoned compile
caches and absurd numbers never cost a file or a result (docs/integrity.md, cases 29-42).
Mocks, tiny files and tiny runs only."""
import errno
import io
import json
import os
import shutil
import stat
from unittest import mock

import pytest

from attndyn import analysis
from attndyn import atomic, cli, lock, outputs, pipeline
from attndyn.progress import Guarded, ProgressBar
from attndyn.tasks.errors import ConfigError

TINY = ["--preset", "quick", "--no-progress"] + [
    arg for item in ("task.vocab_size=12", "task.n_nontopic=3", "task.n_train=16",
                     "task.n_test=8", "model.embed_dim=4", "model.key_dim=4", "train.steps=40",
                     "train.record_every=10", "sweep.seeds=2")
    for arg in ("--set", item)]


def _one_line(capsys) -> str:
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "Traceback" not in err, err
  return err


@pytest.fixture
def victim(tmp_path):
  """A file outside every directory attndyn is given, which no link may lead it to change."""
  path = tmp_path / "victim.txt"
  path.write_text("mine\n")
  return path


def _copy(results_dir, tmp_path):
  copy = tmp_path / "copy"
  shutil.copytree(results_dir[0], copy, ignore=shutil.ignore_patterns("*.png"))
  return copy


# --- 1. the lock never follows a link ---------------------------------------------------------

@pytest.mark.parametrize("plant", ["symlink", "hardlink", "dangling"])
@pytest.mark.parametrize("argv", [["report", "{d}", "--no-progress"],
                                  ["run", *TINY, "--force", "--out", "{d}"]],
                         ids=["report", "run --force"])
def test_a_link_at_the_lock_is_refused_and_its_target_untouched(
    plant, argv, results_dir, tmp_path, victim, capsys):
  out = _copy(results_dir, tmp_path)
  path = out / lock.LOCKFILE
  if plant == "symlink":
    path.symlink_to(victim)
  elif plant == "hardlink":
    os.link(victim, path)
  else:
    path.symlink_to(tmp_path / "nowhere")
  with mock.patch.object(pipeline, "run", side_effect=AssertionError("ran")):
    code = cli.main([a.format(d=out) for a in argv])
  err = _one_line(capsys)
  assert code == 2 and f"{str(path)!r} is " in err and "attndyn did not make" in err, err
  assert victim.read_text() == "mine\n"
  assert os.path.lexists(path)                      # the link is not attndyn's to remove
  assert not (tmp_path / "nowhere").exists()
  assert not (out / "report.md").exists()


# --- 2. every file kind attndyn writes refuses a link -----------------------------------------

@pytest.mark.parametrize("name", ["summary.json", "trajectories.npz", "config.toml",
                                  "run_info.json", "sen.png", "checkpoints",
                                  "checkpoints/manifest.json", "checkpoints/CHUNK.json",
                                  "checkpoints/CHUNK.npz"])
def test_a_link_where_a_run_writes_is_refused_before_anything_runs(
    name, results_dir, tmp_path, victim, capsys):
  out = _copy(results_dir, tmp_path)
  chunk = min(p.stem for p in (out / "checkpoints").glob("*.npz"))   # a stored chunk's key
  target = out / name.replace("CHUNK", chunk)
  if target.is_dir():
    shutil.rmtree(target)
    os.mkdir(tmp_path / "elsewhere")
    target.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
  else:
    target.unlink(missing_ok=True)
    target.symlink_to(victim)
  with mock.patch.object(pipeline, "run", side_effect=AssertionError("ran")):
    code = cli.main(["run", *TINY, "--force", "--out", str(out)])
  err = _one_line(capsys)
  assert code == 2 and f"{str(target)!r} is a symbolic link" in err, err
  assert victim.read_text() == "mine\n" and target.is_symlink()
  assert not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []


def test_a_link_where_report_writes_is_refused(results_dir, tmp_path, victim, capsys):
  out = tmp_path / "r"
  out.mkdir()
  (out / "report.md").symlink_to(victim)
  assert cli.main(["report", str(results_dir[0]), "--out", str(out), "--no-progress",
                   "--force"]) == 2
  assert f"{str(out / 'report.md')!r} is a symbolic link" in _one_line(capsys)
  assert victim.read_text() == "mine\n" and sorted(p.name for p in out.iterdir()) == ["report.md"]


def test_an_atomic_write_refuses_a_link_planted_at_its_path(tmp_path, victim):
  link = tmp_path / "summary.json"
  link.symlink_to(victim)
  with pytest.raises(atomic.LinkRefused, match="is a symbolic link") as err:
    atomic.write_text(link, "x")
  assert isinstance(err.value, OSError) and isinstance(err.value, ConfigError)
  assert victim.read_text() == "mine\n" and link.is_symlink()
  assert list(tmp_path.iterdir()) == [link, victim] or sorted(tmp_path.iterdir()) == sorted(
      [link, victim])                                  # no temporary file left


def test_folders_attndyn_makes_refuse_a_link(tmp_path):
  (tmp_path / "elsewhere").mkdir()
  (tmp_path / "runs").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
  with pytest.raises(atomic.LinkRefused):
    atomic.make_dirs(tmp_path / "runs")
  assert atomic.make_dirs(tmp_path / "a" / "b").is_dir()


def test_a_link_at_the_error_log_sends_the_traceback_to_a_new_temporary_file(
    tmp_path, victim, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / cli.ERROR_LOG).symlink_to(victim)
  with mock.patch.object(pipeline, "run", side_effect=ValueError("boom")):
    code = cli.main(["run", *TINY, "--set", "ode.kind=none", "--force", "--out", str(out)])
  err = _one_line(capsys)
  log = err.rstrip("\n").rsplit(" ", 1)[1]
  try:
    assert code == 1 and victim.read_text() == "mine\n"
    assert log != str(out / cli.ERROR_LOG) and "ValueError: boom" in open(log).read()
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
  finally:
    os.remove(log)


def test_the_compile_cache_probe_refuses_a_link(tmp_path, victim, monkeypatch):
  from attndyn import compile_cache
  monkeypatch.setattr(compile_cache, "host_folder", lambda: "cpu-test")
  folder = tmp_path / "cc" / "cpu-test"
  folder.mkdir(parents=True)
  (folder / f".probe-{os.getpid()}").symlink_to(victim)
  assert compile_cache._writable(folder) is False
  assert victim.read_text() == "mine\n"


# --- 3. the rescue folder: new, private, unpredictable ----------------------------------------

def test_the_rescue_folder_is_new_private_and_not_the_planted_link(tmp_path, monkeypatch):
  import tempfile
  out, scratch = tmp_path / "out", tmp_path / "scratch"
  (scratch / "planted").mkdir(parents=True)
  monkeypatch.setattr(tempfile, "tempdir", str(scratch))
  real_npz = outputs.write_npz

  def full_out(where, *args, **kwargs):
    if where == out:
      raise OSError(errno.ENOSPC, "No space left on device", str(out / "trajectories.npz"))
    return real_npz(where, *args, **kwargs)

  cfg = cli._load_config(cli._parser().parse_args(["run", *TINY, "--set", "ode.kind=none",
                                                    "--out", str(out)]))
  predictable = scratch / f"{outputs.RESCUE_PREFIX}{pipeline_run_id(cfg)}"
  predictable.symlink_to(scratch / "planted", target_is_directory=True)
  with mock.patch.object(outputs, "write_npz", full_out), \
      mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
    code = cli.main(["run", *TINY, "--set", "ode.kind=none", "--checkpoint-every", "0",
                     "--out", str(out)])
  assert code == 2, stderr.getvalue()
  assert list((scratch / "planted").iterdir()) == []
  rescue = [p for p in scratch.iterdir() if p.name.startswith(predictable.name + "-")]
  assert len(rescue) == 1 and stat.S_IMODE(rescue[0].stat().st_mode) == 0o700
  assert f"saved instead to {str(rescue[0])!r}" in stderr.getvalue()
  assert analysis.load(rescue[0]).n_runs == 2


def pipeline_run_id(cfg) -> str:
  from attndyn import checkpoint
  return checkpoint.run_id(cfg.to_dict())


# --- 4. output streams are not the computation ------------------------------------------------

class _Broken(io.StringIO):
  """A stream whose reader went away: every write and flush raises (``errno``)."""

  def __init__(self, code=errno.EPIPE):
    super().__init__()
    self.code = code

  def write(self, text):
    raise OSError(self.code, os.strerror(self.code))

  def flush(self):
    raise OSError(self.code, os.strerror(self.code))


def test_a_progress_bar_on_a_broken_stream_falls_silent():
  bar = ProgressBar("gd", 4, stream=_Broken())
  bar.update(2)
  bar.close()
  assert isinstance(bar.stream, Guarded) and bar.stream.broken_pipe
  assert bar.stream.lost   # kept for the error log


def test_a_broken_stderr_changes_nothing_a_run_computes_or_writes(tmp_path, monkeypatch, capsys):
  out = tmp_path / "out"
  monkeypatch.setattr("sys.stderr", _Broken())
  argv = ["run", *[a for a in TINY if a != "--no-progress"], "--set", "ode.kind=reduced",
          "--out", str(out)]
  assert cli.main(argv) == 0
  doc = json.loads((out / "summary.json").read_text())
  assert doc["errors"] == {} and "reduced" in doc["aggregate"]["ode_max_abs_score_dev"]
  assert analysis.load(out).reduced is not None


def test_a_broken_stderr_keeps_a_failed_commands_message_in_the_error_log(tmp_path, monkeypatch):
  out = tmp_path / "out"
  out.mkdir()
  (out / "mine.txt").write_text("x")
  monkeypatch.setattr("sys.stderr", _Broken(errno.ENOSPC))
  assert cli.main(["run", *TINY, "--out", str(out)]) == 2
  text = (out / cli.ERROR_LOG).read_text()
  assert "could not print on stderr" in text and "is not empty (it holds mine.txt)" in text


@pytest.mark.parametrize("code,status", [(errno.EPIPE, 141), (errno.ENOSPC, 2)])
def test_a_closed_stdout_after_everything_is_written_says_only_that(code, status, monkeypatch,
                                                                    capsys):
  monkeypatch.setattr("sys.stdout", _Broken(code))
  assert cli.main(["presets"]) == status
  err = capsys.readouterr().err
  assert err == (f"attndyn: error: standard output could not be written ([Errno {code}] "
                 f"{os.strerror(code)}); nothing else failed.\n")


# --- 5. report refuses a non-empty directory, as every command does ---------------------------

def test_report_refuses_a_non_empty_out_without_force(results_dir, tmp_path, capsys):
  user = tmp_path / "U"
  user.mkdir()
  (user / "report.md").write_text("mine\n")
  assert cli.main(["report", str(results_dir[0]), "--out", str(user), "--no-progress"]) == 2
  assert "is not empty (it holds report.md)" in _one_line(capsys)
  assert sorted(p.name for p in user.iterdir()) == ["report.md"]
  assert (user / "report.md").read_text() == "mine\n"
  assert cli.main(["report", str(results_dir[0]), "--out", str(user), "--no-progress",
                   "--force"]) == 0
  assert (user / "report.md").read_text().startswith("# attndyn report")


# --- 6. atlas --resume with other settings says what changed and computes it again ------------

ATLAS = ['classifiers=["tc"]', "axes={}", "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]",
         "tau=5.0", "steps=40", "record_every=10", "run_lengths=[40, 20]"]


def test_atlas_resume_with_other_settings_says_what_changed_and_computes_it_again(
    tmp_path, capsys, monkeypatch):
  """An atlas started with tau = 5 and resumed with tau = 10: one line names the change and
  how many buckets it computes again, then the bucket runs (made to raise here, so that it
  costs nothing: its traceback in errors/ shows it ran, and the command exits 1 naming it)."""
  from attndyn import atlas
  from attndyn.settings import as_json
  out = tmp_path / "a"
  (out / atlas.STORE).mkdir(parents=True)
  (out / "atlas.json").write_text(json.dumps({"settings": as_json(atlas.settings(items=ATLAS))}))

  def computed(settings_json, index):
    raise RuntimeError(f"bucket {index} was computed")
  monkeypatch.setattr(atlas, "bucket_job", computed)
  now = [i for i in ATLAS if not i.startswith("tau")] + ["tau=10.0"]
  code = cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", "--workers", "1",
                   *[a for item in now for a in ("--set", item)]])
  said, failed = capsys.readouterr().err.splitlines()
  assert code == 1, (said, failed)
  assert said.startswith(f"atlas --resume: the settings differ from the ones {str(out)!r} was "
                         f"started with (tau = 5.0 there, 10.0 now): 1 of 1 buckets are "
                         f"computed (again)"), said
  assert failed.startswith("attndyn: error: 1 bucket(s) failed (bucket-0000)"), failed
  assert "bucket 0 was computed" in (out / atlas.ERRORS / "bucket-0000.txt").read_text()
  assert json.loads((out / "atlas.json").read_text())["settings"]["tau"] == 10.0


# --- 7. an integer too long to read is bad input (exit 2), wherever it is ---------------------

BIG = "9" * 5000


@pytest.mark.parametrize("where", ["toml", "set", "hex", "atlas"])
def test_an_integer_of_5000_digits_is_one_line_exit_2(where, tmp_path, capsys):
  out = str(tmp_path / "o")
  argv = {"toml": ["run", str(tmp_path / "big.toml"), "--out", out],
          "set": ["run", "--preset", "quick", "--set", f"train.steps={BIG}", "--out", out],
          "hex": ["run", "--preset", "quick", "--set", f"train.steps=0x{'f' * 5000}", "--out",
                  out],
          "atlas": ["atlas", "--out", out, "--set", f"tau={BIG}"]}[where]
  (tmp_path / "big.toml").write_text(f"[train]\nsteps = {BIG}\n")
  assert cli.main(argv) == 2
  err = _one_line(capsys)
  assert "internal error" not in err and ("more than 4300 digits" in err or
                                          "an integer of about 6021 digits" in err), err
  assert len(err) < 400


@pytest.mark.parametrize("name", ["summary.json", "checkpoints/manifest.json"])
def test_a_results_file_with_an_integer_of_5000_digits_is_a_config_error(
    name, results_dir, tmp_path, capsys):
  out = _copy(results_dir, tmp_path)
  path = out / name
  path.write_text(path.read_text().replace('"schema_version": 2', f'"schema_version": {BIG}')
                  .replace('"chunk_size": 3', f'"chunk_size": {BIG}'))
  if name == "summary.json":
    with pytest.raises(ConfigError, match="holds an integer of more than 4300 digits"):
      analysis.load(out)
    argv = ["report", str(out), "--no-progress"]
  else:
    argv = ["run", "--out", str(out), "--resume", "--no-progress"]
  assert cli.main(argv) == 2
  assert f"{str(path)!r} holds an integer of more than 4300 digits" in _one_line(capsys)


# --- 8. a path too long is one line; the last-resort handler never raises ---------------------

def test_an_out_path_too_long_is_one_line_exit_2(tmp_path, capsys):
  out = tmp_path / ("x" * 300)
  assert cli.main(["run", *TINY, "--out", str(out)]) == 2
  err = _one_line(capsys)
  assert "File name too long (ENAMETOOLONG): a name in that path is longer" in err and \
      len(err) < 500, err


def test_the_last_resort_handler_survives_a_failing_hint_and_message(tmp_path, capsys):
  class Unprintable(Exception):
    def __str__(self):
      raise RuntimeError("no")
  with mock.patch.object(pipeline, "run", side_effect=OSError(errno.EIO, "I/O error")), \
      mock.patch.object(cli, "_kept", side_effect=OSError(errno.ENAMETOOLONG, "too long")):
    assert cli.main(["run", *TINY, "--out", str(tmp_path / "o")]) == 2
  assert _one_line(capsys).startswith("attndyn: error: I/O error (EIO)")
  with mock.patch.object(pipeline, "run", side_effect=Unprintable()):
    assert cli.main(["run", *TINY, "--out", str(tmp_path / "p")]) == 1
  assert "Unprintable: (its message could not be printed)" in _one_line(capsys)


# --- 9. the compile cache heals ---------------------------------------------------------------

def test_a_damaged_or_foreign_cache_entry_is_deleted_once_with_one_warning(tmp_path, capsys):
  from attndyn import compile_cache
  compile_cache._warned.clear()
  cache = compile_cache._healing_class()(str(tmp_path), max_size=compile_cache.MAX_BYTES)
  cache.put("a", b"program a" * 100)
  cache.put("b", b"program b" * 100)
  assert cache.get("a") == b"program a" * 100
  entry_a, entry_b = tmp_path / "a-cache", tmp_path / "b-cache"
  assert entry_a.read_bytes().startswith(compile_cache._MAGIC)
  entry_a.write_bytes(entry_a.read_bytes()[:50])          # truncated by a full disk
  shutil.copy(tmp_path / "a-cache", tmp_path / "x")
  shutil.copy(entry_b, tmp_path / "b-copy")
  (tmp_path / "b-copy").replace(tmp_path / "c-cache")      # another key's file under key c
  assert cache.get("a") is None and not entry_a.exists()
  assert cache.get("c") is None and not (tmp_path / "c-cache").exists()
  (tmp_path / "d-cache").write_bytes(b"garbage")           # written without the digest
  assert cache.get("d") is None
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and f"the compile cache {str(tmp_path)!r} held a damaged" in err
  cache.put("a", b"program a" * 100)                         # compiled again, stored again
  assert cache.get("a") == b"program a" * 100 and cache.get("b") == b"program b" * 100
  (tmp_path / "e-cache").symlink_to(tmp_path / "x")
  assert cache.get("e") is None and (tmp_path / "x").exists()   # a link is never read


def test_a_run_on_a_damaged_compile_cache_heals_it(tmp_path):
  """Two real `attndyn run`s: the first fills the cache; one entry is then truncated and
  another replaced by a third program's file (before, JAX kept the first for ever and loaded
  the second, failing inside JAX with an AssertionError on every run); the second run exits 0
  with one warning naming the cache, and leaves every entry whole and its own key's."""
  import subprocess
  import sys
  from pathlib import Path

  from attndyn import compile_cache
  env = {k: v for k, v in os.environ.items()
         if k not in ("JAX_COMPILATION_CACHE_DIR", "EQX_ON_ERROR")}
  env.update(JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             **{compile_cache.ENV: str(tmp_path / "cache")})
  argv = [sys.executable, "-m", "attndyn.cli", "run", *TINY, "--set", "ode.kind=none"]
  runs = []
  for i in range(2):
    runs.append(subprocess.run(argv + ["--out", str(tmp_path / f"run{i}")], env=env, text=True,
                               capture_output=True, timeout=600))
    assert runs[-1].returncode == 0, runs[-1].stderr
    entries = sorted(Path(tmp_path / "cache").rglob("*-cache"), key=lambda p: -p.stat().st_size)
    if i == 0:
      assert "warning" not in runs[0].stderr and len(entries) >= 3
      entries[0].write_bytes(entries[0].read_bytes()[:100])
      shutil.copy(entries[2], entries[1])
  assert runs[1].stderr.count("the compile cache") == 1, runs[1].stderr
  assert "held a damaged entry" in runs[1].stderr and "Traceback" not in runs[1].stderr
  for entry in entries:
    key = entry.name[:-len("-cache")]
    assert compile_cache._unseal(key, entry.read_bytes()) is not None, entry.name


# --- 10. a bad environment is bad input: exit 2 naming the variable ---------------------------

@pytest.mark.parametrize("name,value,expected", [
    ("EQX_ON_ERROR", "x", "EQX_ON_ERROR = 'x' is not allowed: one of raise, breakpoint, nan, off"),
    ("XLA_FLAGS", "--bogus", "XLA_FLAGS = '--bogus' is not allowed: XLA does not know --bogus"),
])
def test_a_bad_environment_variable_is_one_line_exit_2(name, value, expected, tmp_path,
                                                       monkeypatch, capsys):
  import sys
  monkeypatch.setenv(name, value)
  monkeypatch.delitem(sys.modules, "equinox", raising=False)   # as before equinox is imported
  monkeypatch.setattr(cli, "_backend_started", lambda: False)  # as before JAX started
  monkeypatch.setattr(cli, "_FLAGS_CHECKED", set())
  with mock.patch.object(pipeline, "run", side_effect=AssertionError("ran")):
    assert cli.main(["run", *TINY, "--out", str(tmp_path / "o")]) == 2
  assert expected in _one_line(capsys)
  assert not (tmp_path / "o").exists()


def test_a_platform_jax_cannot_start_is_one_line_exit_2(results_dir, tmp_path):
  import subprocess
  import sys
  env = {**os.environ, "JAX_PLATFORMS": "cuda", "CUDA_VISIBLE_DEVICES": ""}
  done = subprocess.run([sys.executable, "-m", "attndyn.cli", "report", str(results_dir[0]),
                         "--out", str(tmp_path / "r"), "--no-progress"], env=env, text=True,
                        capture_output=True, timeout=300)
  if done.returncode == 0:
    pytest.skip("this machine has a CUDA backend")
  assert done.returncode == 2, done.stderr
  assert done.stderr.startswith("attndyn: error: JAX_PLATFORMS = 'cuda' is not allowed here: "
                                "JAX could not start it") and done.stderr.count("\n") == 1


# --- 12. ODE solves that fail get a line each; all of a stage failing is not exit 0 ------------

def test_every_ode_solve_failing_is_a_line_per_run_and_exit_2(tmp_path, capsys):
  out = tmp_path / "o"
  code = cli.main(["run", *TINY, "--set", "ode.kind=reduced", "--set", "ode.max_steps=1",
                   "--out", str(out)])
  captured = capsys.readouterr()
  assert code == 2
  lines = [l for l in captured.out.splitlines() if l.startswith("ode failed: ")]
  assert lines == [f"ode failed: reduced of run {i} (seed={i}, data_seed=0) at t=10 (max_steps); "
                   f"its deviation from GD is left out" for i in range(2)]
  assert captured.err.count("\n") == 1 and captured.err.startswith(
      "attndyn: error: every solve of an ODE stage failed, so its columns are empty: reduced "
      "(max_steps: raise ode.max_steps) (ode.max_steps = 1")
  assert analysis.load(out).reduced is not None      # everything was written


def test_ode_failure_lines_are_counted_past_ten_per_stage():
  from attndyn import report
  runs = [{"ode_failed_at": {"reduced": 5.0 if i % 2 else None},
           "ode_failure_reason": {"reduced": "max_steps" if i % 2 else None}} for i in range(30)]
  doc = {"runs": runs, "points": [{"seed": i} for i in range(30)],
         "aggregate": {"ode_n_failed": {"reduced": 15}}}
  lines = report.ode_failed_lines(doc)
  assert len(lines) == 11 and lines[0].startswith("ode failed: reduced of run 1 (seed=1) at t=5")
  assert lines[-1] == "ode failed: reduced of 5 more run(s)"
  assert report.all_odes_failed(doc) == []


# --- 13. readers check the run id against the config they read --------------------------------

def test_an_edited_config_in_summary_json_is_refused(results_dir, tmp_path, capsys):
  out = _copy(results_dir, tmp_path)
  doc = json.loads((out / "summary.json").read_text())
  doc["config"]["train"]["lr"] = 0.5
  (out / "summary.json").write_text(json.dumps(doc))
  with pytest.raises(ConfigError, match="its config is not the one run .* ran"):
    analysis.load(out)
  assert cli.main(["report", str(out), "--no-progress"]) == 2
  assert "the file was edited or damaged" in _one_line(capsys)
  assert not (out / "report.md").exists()


def test_the_run_id_readers_check_is_the_one_checkpoints_write(results_dir):
  import jax

  from attndyn.analysis import results
  from attndyn import checkpoint
  doc = json.loads((results_dir[0] / "summary.json").read_text())
  assert checkpoint.config_hash is results.config_hash and checkpoint.flatten is results.flatten
  assert doc["run_id"] == checkpoint.run_id(doc["config"]) == results.run_id_of(
      doc["config"], jax.default_backend(), jax.device_count())


# --- 14. no numpy warnings on stderr; float64 results stay float64 ----------------------------

def test_absurd_numbers_give_lines_not_runtime_warnings(tmp_path, capsys):
  import warnings
  out = tmp_path / "o"
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    code = cli.main(["run", *TINY, "--set", "model.embed_std=1e30", "--set", "ode.kind=reduced",
                     "--out", str(out)])
    assert code == 2   # every reduced solve failed (non-finite): the one error line says so
    assert cli.main(["report", str(out), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
  assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
  assert "Warning" not in capsys.readouterr().err


def test_report_draws_float64_results_in_float64(tmp_path, capsys):
  import numpy as np

  from attndyn.analysis import figures
  out = tmp_path / "o"
  assert cli.main(["run", *TINY, "--set", "precision=float64", "--set", "ode.kind=none",
                   "--out", str(out)]) == 0
  dtypes = []
  real = figures.sen_norm

  def recorded(score, m):
    value = real(score, m)
    dtypes.append(np.asarray(value).dtype)
    return value
  with mock.patch.object(figures, "sen_norm", recorded):
    assert cli.main(["report", str(out), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
  assert dtypes == [np.float64]
  assert analysis.load(out).gd["score"].data.dtype == np.float64
