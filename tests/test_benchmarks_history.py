"""benchmarks.history: a benchmark's timings appended, dated, to one generated markdown file.

Fake measurements only (nothing is timed): the writer's format, its refusals, and that
``python -m benchmarks.atlas --write-history`` hands the benchmark's numbers to it.
"""
import datetime
import os

import pytest

from attndyn.tasks.errors import ConfigError
from benchmarks import history

WHEN = [datetime.datetime(2026, 11, 27, 14, 58, tzinfo=datetime.timezone.utc),
        datetime.datetime(2026, 11, 28, 9, 5, tzinfo=datetime.timezone.utc)]
MACHINE = {"cpus": 2, "memory_gb": 23.5, "cpu": "AMD EPYC (fake)", "backend": "cpu",
           "devices": ["cpu"], "device_count": 1, "jax": "0.0.fake", "load_before": 0.5,
           "load_after": 1.25}


def _append(path, seconds, when, **kw):
  return history.append(path, "fake sample", f"python -m benchmarks.fake --n {seconds}",
                        [f"- bucket 0: {seconds} s"], title="Fake timings",
                        generated_by="python -m benchmarks.fake --write-history PATH",
                        when=when, **kw)


def test_sections_appended_in_order_under_one_generated_header(tmp_path):
  path = tmp_path / "speed.md"
  _append(path, 12.5, WHEN[0], commit_id="ad1f502", machine_doc=MACHINE)
  _append(path, 7.25, WHEN[1], commit_id="4a91eda+dirty", machine_doc=MACHINE)
  text = path.read_text()
  assert text.startswith("# Fake timings\n\nGenerated: ")
  assert text.count("python -m benchmarks.fake --write-history PATH") == 1   # the header, once
  first = text.index("## 2026-11-27 14:58 UTC · fake sample\n")
  second = text.index("## 2026-11-28 09:05 UTC · fake sample\n")
  assert first < second and text.count("\n## ") == 2
  one, two = text[first:second], text[second:]
  assert "- commit: ad1f502\n" in one and "- bucket 0: 12.5 s" in one
  assert "- commit: 4a91eda+dirty\n" in two and "- bucket 0: 7.25 s" in two
  assert ("- machine: 2 CPU cores (AMD EPYC (fake)); 23.5 GiB memory; JAX 0.0.fake on cpu "
          "(1 × cpu); load average before 0.5, after 1.25") in two
  assert "- command: `python -m benchmarks.fake --n 7.25`" in two
  assert sorted(p.name for p in tmp_path.iterdir()) == ["speed.md"]   # no temporary file left


def test_an_existing_history_keeps_its_text(tmp_path):
  """Sections moved in by hand stay as they are; the new one goes after them."""
  path = tmp_path / "speed.md"
  path.write_text("# Old\n\n## 2026-11-25 · moved by hand\n\n31.5 min.\n")
  _append(path, 1.0, WHEN[0], commit_id="abc", machine_doc=MACHINE)
  text = path.read_text()
  assert text.startswith("# Old\n\n## 2026-11-25 · moved by hand\n\n31.5 min.\n\n## 2026-11-27 ")


def test_this_machine_and_commit_are_named(tmp_path):
  path = _append(tmp_path / "speed.md", 1.0, None)
  section = path.read_text().split("\n## ", 1)[1]
  machine = next(line for line in section.splitlines() if line.startswith("- machine: "))
  assert f"{os.cpu_count()} CPU cores" in machine and " on cpu " in machine
  commit = next(line for line in section.splitlines() if line.startswith("- commit: "))
  assert commit != "- commit: "


@pytest.mark.parametrize("make", ["link", "folder", "missing_parent"])
def test_bad_paths_are_one_line_before_anything_is_written(tmp_path, make):
  target = tmp_path / "elsewhere.md"
  target.write_text("someone's file\n")
  path = tmp_path / "speed.md"
  if make == "link":
    path.symlink_to(target)
  elif make == "folder":
    path.mkdir()
  else:
    path = tmp_path / "no" / "speed.md"
  with pytest.raises(ConfigError) as err:
    _append(path, 1.0, WHEN[0], commit_id="abc", machine_doc=MACHINE)
  assert "--write-history" in str(err.value) and "\n" not in str(err.value)
  assert target.read_text() == "someone's file\n"


def test_benchmark_atlas_appends_its_numbers(tmp_path, monkeypatch, capsys):
  """``--write-history`` turns atlas_bench.json's numbers into a section; a bad path is refused
  before any bucket is run. The atlas itself is replaced by a stand-in: nothing is computed."""
  from attndyn import atlas
  from benchmarks import atlas as bench
  calls = []
  monkeypatch.setattr(atlas, "run_atlas", lambda out, **kw: calls.append(kw["only"]))
  path = tmp_path / "atlas-speed.md"
  argv = ["--out", str(tmp_path / "out"), "--quick", "--buckets", "4,9",
          "--write-history", str(path)]
  assert bench.main(argv) == 0 and calls == [[4], [9]]
  text = path.read_text()
  assert text.startswith(f"# {bench.HISTORY_TITLE}\n") and bench.HISTORY_COMMAND in text
  assert "· benchmarks.atlas, the quick grid's buckets 4, 9\n" in text
  assert f"- command: `python -m benchmarks.atlas {' '.join(argv)}`" in text
  assert "| 4 | tc/fast+reduced |" in text and "| 9 | tc/" in text
  assert "80 configurations in " in text and "the quick grid (14 buckets" in text

  calls.clear()
  bad = ["--out", str(tmp_path / "out2"), "--quick", "--buckets", "4",
         "--write-history", str(tmp_path / "missing" / "atlas-speed.md")]
  assert bench.main(bad) == 2 and calls == []
  assert capsys.readouterr().err.count("\n") == 1
