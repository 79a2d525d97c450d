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

import analysis
from attndyn import atomic, cli, lock, outputs, pipeline
from attndyn.progress import Guarded, ProgressBar
from tasks.errors import ConfigError

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
                                  "checkpoints/manifest.json", "checkpoints/gd"])
def test_a_link_where_a_run_writes_is_refused_before_anything_runs(
    name, results_dir, tmp_path, victim, capsys):
  out = _copy(results_dir, tmp_path)
  target = out / name
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


# --- 6. atlas --resume with other settings is refused, naming them ----------------------------

ATLAS = ['classifiers=["tc"]', "axes={}", "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]",
         "tau=5.0", "steps=40", "record_every=10", "run_lengths=[40, 20]"]


@pytest.mark.parametrize("where", ["atlas.json", "buckets/bucket-0000.json"])
def test_atlas_resume_with_other_settings_is_refused_naming_them(where, tmp_path, capsys):
  from attndyn import atlas
  out = tmp_path / "a"
  (out / "buckets").mkdir(parents=True)
  (out / where).write_text(json.dumps({"settings": atlas.settings(items=ATLAS)}))
  code = cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", "--workers", "1",
                   *[a for item in ATLAS[:-4] + ["tau=10.0", "steps=40", "record_every=10",
                                                 "run_lengths=[40, 20]"]
                     for a in ("--set", item)]])
  err = _one_line(capsys)
  assert code == 2 and "the atlas settings differ from the ones" in err, err
  assert "tau = 5.0 there, 10.0 now" in err and "steps" not in err.split("):")[1].split(".")[0]
  assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == sorted(
      ["buckets", where])                       # nothing computed or replaced
  # what only changes what is kept may change
  atlas.check_resumed_settings(out, atlas.settings(items=ATLAS + ["keep_checkpoints=true"]))


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
