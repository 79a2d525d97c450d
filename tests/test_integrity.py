"""Nothing lost, nothing mixed (issue 26): one command per output directory, files tied to one
run, damaged results refused, interrupts and write failures as one line. Mocks and tiny files
only: nothing here trains."""
import json
import os
from unittest import mock

import pytest

from attndyn import cli, lock


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
