"""``attndyn report DIR``: report.md and the figures from a results directory, and one-line
errors for a missing or damaged one."""
import json
import shutil

import numpy as np

import pytest

from attndyn import cli

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_writes_markdown_and_figures(results_dir, tmp_path, capsys):
  out = tmp_path / "report"
  assert cli.main(["report", str(results_dir[0]), "--out", str(out), "--no-progress"]) == 0
  printed = capsys.readouterr().out
  text = (out / "report.md").read_text()
  assert text.startswith("# attndyn report: Attn-TC")
  assert "| Attn-TC | 4 | 2 | " in text                           # runs, diverged
  # The step is the run's own failed_at (the fast path flags the step whose factored
  # softmax underflows, which can come before the autodiff path's overflow).
  failed_at = np.load(results_dir[0] / "trajectories.npz")["gd/failed_at"]
  assert list(failed_at[:2]) == [-1, -1] and failed_at[2] >= 1 and failed_at[3] >= 1
  step = int(failed_at[2])
  assert f"| 2 | 0 | 0 | 1e+06 | diverged at step {step} | - | - |" in text     # the run table
  assert f"- run 3 (seed=1, data_seed=0, train.lr=1e+06) at step {int(failed_at[3])}" in text
  assert "No ODE was run" in text and "![loss.png](loss.png)" in text
  for name in ("sen.png", "attndyn.dynamics.png", "loss.png", "invariant.png"):
    assert (out / name).read_bytes()[:8] == PNG
  assert "diverged: run 2" in printed and "report.md" in printed


def _edit_summary(directory, edit):
  doc = json.loads((directory / "summary.json").read_text())
  edit(doc)
  (directory / "summary.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("damage,expected", [
    (lambda d: shutil.rmtree(d), "does not exist"),
    (lambda d: (d / "summary.json").write_text("{"), "is not valid JSON"),
    (lambda d: (d / "trajectories.npz").write_bytes(b"PK\x03\x04 cut"), "truncated or corrupt"),
    # (without its run id, an older attndyn's file: else the edited config is refused first)
    (lambda d: _edit_summary(d, lambda doc: (doc["config"].pop("task"), doc.pop("run_id"))),
     "config.task.n_nontopic = None, where attndyn writes a positive integer"),
    (lambda d: (d / "report.md").mkdir(), "report.md' is not a file"),
])
def test_report_on_a_missing_or_damaged_dir_is_one_line(damage, expected, results_dir, tmp_path,
                                                        capsys):
  copy = tmp_path / "copy"
  shutil.copytree(results_dir[0], copy, ignore=shutil.ignore_patterns("*.png", "checkpoints"))
  damage(copy)
  assert cli.main(["report", str(copy), "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("attndyn: error: ") and err.count("\n") == 1 and expected in err, err


def test_report_out_that_cannot_be_created_is_one_line(results_dir, tmp_path, capsys):
  (tmp_path / "afile").write_text("")
  assert cli.main(["report", str(results_dir[0]), "--out", str(tmp_path / "afile" / "x"),
                   "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "afile/x' cannot be created: Not a directory" in err, err
