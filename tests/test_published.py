"""The replication tables committed under docs/replication agree with the code that defines the claims."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from attndyn.reproduce import publish, report
from attndyn.tasks.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
# docs/replication/PAPER.json: the largest run of a paper; docs/replication/full/PAPER.json:
# the experiments run in full mode, where the largest run of the paper is not.
PUBLISHED = sorted([*(ROOT / "docs" / "replication").glob("*.json"),
                    *(ROOT / "docs" / "replication" / "full").glob("*.json")])


def _module(tmp_path, source: str):
  path = tmp_path / "fake_experiment.py"
  path.write_text(source, encoding="utf-8")
  spec = importlib.util.spec_from_file_location("fake_experiment", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_claim_ids_are_read_from_the_code(tmp_path):
  module = _module(tmp_path, '''
NAME = "synthetic"
def claim(*a, **k): pass
def run(rep, c, lr):
  cid = f"{NAME}.{c}.test_acc"
  rep.claim(f"{NAME}.{c}.corollary1", "text")
  rep.claim("synthetic.capacity_order", "text")
  rep.claim(cid, "text")
  rep.claim(f"{NAME}.lr_{lr:g}.slope", "text")
''')
  patterns = publish.claim_patterns(module)
  assert len(patterns) == 4
  ids = ["synthetic.fc.corollary1", "synthetic.capacity_order", "synthetic.tl.test_acc",
         "synthetic.lr_0.5.slope"]
  assert publish.missing(module, ids) == []
  assert publish.missing(module, ids[:2]) == [patterns[2], patterns[3]]
  # The experiment's NAME is literal: another experiment's row does not match.
  assert publish.missing(module, ["ablation.fc.corollary1"] + ids[1:]) == [patterns[0]]
  unreadable = _module(tmp_path, 'NAME = "x"\ndef run(rep, ids):\n  rep.claim(ids[0], "t")\n')
  with pytest.raises(ValueError, match="claim id ids"):
    publish.claim_patterns(unreadable)


def test_every_experiment_module_has_readable_claim_ids():
  from attndyn.reproduce import PAPERS, runner
  for paper in PAPERS:
    for module in runner.experiment_modules(paper):
      assert publish.claim_patterns(module), f"{paper}.{module.NAME} defines no claim"


def test_id_drift_names_rows_the_code_cannot_make_and_claims_with_no_row():
  rows = [{"id": "theorem2.loss_at_5k", "experiment": "theorem2"},
          {"id": "theorem2.renamed_row", "experiment": "theorem2"}]
  drift = publish.id_drift("lu2021", rows, ["theorem2"], complete=True)
  assert any("'theorem2.renamed_row' is not a claim of the code" in d for d in drift)
  assert any("attends_every_sentence" in d and "no published row" in d for d in drift)
  quick = publish.id_drift("lu2021", rows, ["theorem2"], complete=False)
  assert quick == [d for d in drift if "is not a claim" in d]
  assert publish.id_drift("lu2021", [], ["no_such"]) == \
      ["lu2021: experiment 'no_such' is published but the code has none"]


def test_publish_writes_the_page_the_rows_and_small_figures(tmp_path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  out = tmp_path / "run"
  (out / "runs" / "x").mkdir(parents=True)
  fig, ax = plt.subplots(figsize=(30, 3), dpi=100)   # 3000 px wide: must come back narrower
  ax.plot(np.sin(np.linspace(0, 20, 500)))
  fig.savefig(out / "runs" / "x" / "fig.png")
  plt.close(fig)
  row = {"id": "theorem2.loss_at_5k", "text": "loss", "status": "pass", "paper": 0.0,
         "ours": {"mean": 0.001, "ci95": 0.0, "n": 3, "kind": "mean", "lo": 0.001, "hi": 0.001,
                  "values": [0.001] * 3},
         "tolerance": {"kind": "at_most", "value": 0.01, "text": "≤ 0.01", "source": "ours: x"},
         "experiment": "theorem2"}
  exp = {"name": "theorem2", "title": "Theorem 2", "mode": "quick", "partial": False,
         "command": ["attndyn", "reproduce", "lu2021", "--quick"], "seconds": 90.0,
         "finished": "2026-11-25T10:00:00+00:00", "error": None, "figures": ["runs/x/fig.png"],
         "settings": {}, "details": {"notes": []},
         "revision": {"commit": "0123456789abcdef", "dirty": False},
         "machine": {"cpus": 2, "memory_gb": 23.5}}
  doc = {"paper": "lu2021", "title": "t", "modes": ["quick"], "environment": {"backend": "cpu"},
         "counts": report.counts([row]), "claims": [row], "experiments": [exp]}
  (out / report.JSON).write_text(json.dumps(doc), encoding="utf-8")
  to = tmp_path / "docs"
  published = publish.publish(out, to, note="Full mode not run: why.")
  page = (to / "lu2021.md").read_text(encoding="utf-8")
  assert "commit 0123456789ab" in page and "2 CPU cores" in page and "1.5 min" in page
  assert "Full mode not run: why." in page
  assert "![runs/x/fig.png](lu2021/runs-x-fig.png)" in page
  assert "attends_every_sentence" in page        # the quick run did not make these rows
  from PIL import Image
  with Image.open(to / "lu2021" / "runs-x-fig.png") as img:
    assert img.width == publish.MAX_WIDTH and img.mode == "P"
  assert json.loads((to / "lu2021.json").read_text())["claims"][0]["id"] == row["id"]
  assert published["counts"]["pass"] == 1
  doc["modes"] = ["full"]
  exp["mode"] = "full"
  (out / report.JSON).write_text(json.dumps(doc), encoding="utf-8")
  with pytest.raises(ConfigError, match="other code than this checkout's"):
    publish.publish(out, to)
  with pytest.raises(ConfigError, match="holds no replication.json"):
    publish.publish(tmp_path / "empty", to)


def _run(path: Path, rows: list, experiments: list, mode: str = "quick") -> Path:
  """A hand-made reproduction directory: replication.json with these rows and experiments."""
  path.mkdir(parents=True)
  doc = {"paper": "lu2021", "title": "t", "modes": [mode], "environment": {"backend": "cpu"},
         "counts": report.counts(rows), "claims": rows, "experiments": experiments}
  (path / report.JSON).write_text(json.dumps(doc), encoding="utf-8")
  return path


def _row(cid: str, mean: float, status: str, kind: str = "at_most") -> dict:
  return {"id": cid, "text": f"text of {cid}", "status": status, "paper": 0.0,
          "ours": {"mean": mean, "ci95": 0.0, "n": 3, "kind": "mean", "lo": mean, "hi": mean,
                   "values": [mean] * 3},
          "tolerance": {"kind": kind, "value": 0.01, "text": "≤ 0.01", "source": "ours: x"},
          "experiment": cid.split(".")[0]}


def _exp(name: str, commit: str, finished: str, note: str) -> dict:
  return {"name": name, "title": f"title of {name}", "mode": "quick", "partial": False,
          "command": ["attndyn", "reproduce", "lu2021", "--only", name], "seconds": 60.0,
          "finished": finished, "error": None, "figures": [], "settings": {},
          "details": {"notes": [note]}, "revision": {"commit": commit, "dirty": False},
          "machine": {"cpus": 2, "memory_gb": 23.5}}


def test_merge_republishes_only_the_rerun_experiments(tmp_path, capsys):
  to = tmp_path / "docs"
  first = _run(tmp_path / "first",
               [_row("theorem2.loss_at_5k", 0.001, "pass"), _row("cnn.test_acc", 0.5, "fail")],
               [_exp("theorem2", "a" * 40, "2026-11-25T10:00:00+00:00", "theorem2's first run"),
                _exp("cnn", "b" * 40, "2026-11-25T11:00:00+00:00", "cnn's only run")])
  publish.publish(first, to, note="First note.")
  before = json.loads((to / "lu2021.json").read_text(encoding="utf-8"))
  page = (to / "lu2021.md").read_text(encoding="utf-8")
  cnn_line = next(line for line in page.split("\n") if line.startswith("| cnn.test_acc |"))
  cnn_section = page[page.index("## cnn:"):].rstrip("\n")
  second = _run(tmp_path / "second",
                [_row("theorem2.loss_at_5k", 0.5, "fail"),
                 _row("theorem2.final_attention", 0.9, "info", kind="info")],
                [_exp("theorem2", "c" * 40, "2026-11-28T10:00:00+00:00", "theorem2's rerun")])
  merged = publish.publish(second, to, note="Rerun theorem2.", merge_into=True)
  assert merged == json.loads((to / "lu2021.json").read_text(encoding="utf-8"))
  assert [e["name"] for e in merged["experiments"]] == ["theorem2", "cnn"]
  assert merged["experiments"][0]["revision"]["commit"] == "c" * 40
  assert merged["experiments"][1] == before["experiments"][1]
  assert [r["id"] for r in merged["claims"]] == ["theorem2.loss_at_5k", "theorem2.final_attention",
                                                 "cnn.test_acc"]
  assert merged["claims"][0]["ours"]["mean"] == 0.5 and merged["claims"][2] == before["claims"][1]
  assert merged["counts"] == report.counts(merged["claims"]) == \
      {"pass": 0, "fail": 2, "inconclusive": 0, "quick": 0, "info": 1}
  page = (to / "lu2021.md").read_text(encoding="utf-8")
  assert cnn_line in page   # the kept lines and section come from the page: the JSON lacks them
  assert cnn_section in page and "theorem2's rerun" in page and "theorem2's first run" not in page
  assert "commit cccccccccccc, bbbbbbbbbbbb" in page and "Ran: 2026-11-25 to 2026-11-28" in page
  assert "Rerun theorem2." in page and "First note." in page
  assert "**0 pass, 2 fail" in page
  # Refused, one line, exit 2: no table to merge into; a full run into a quick table.
  assert publish.main([str(second), "--to", str(tmp_path / "none"), "--merge"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "holds no lu2021.json and lu2021.md to merge into" in err
  full = _run(tmp_path / "full", [_row("theorem2.loss_at_5k", 0.5, "fail")],
              [_exp("theorem2", "d" * 40, "2026-11-28T12:00:00+00:00", "full")], mode="full")
  with pytest.raises(ConfigError, match="one table holds one mode"):
    publish.publish(full, to, merge_into=True)


@pytest.mark.parametrize("path", PUBLISHED,
                         ids=[str(p.relative_to(ROOT / "docs" / "replication")) for p in PUBLISHED])
def test_committed_tables_match_the_claims_the_code_defines(path):
  doc = json.loads(path.read_text(encoding="utf-8"))
  rows = doc["claims"]
  names = [e["name"] for e in doc["experiments"]]
  assert publish.id_drift(doc["paper"], rows, names, complete=doc["modes"] == ["full"]) == []
  assert doc["counts"] == report.counts(rows)
  for row in rows:
    judged = row["tolerance"]["kind"] != "info"
    assert not judged or row["tolerance"].get("source"), f"{row['id']}: tolerance without a source"
  page = path.with_suffix(".md").read_text(encoding="utf-8")
  for row in rows:
    assert f"| {row['id']} |" in page
  for name in names:
    figures = [e for e in doc["experiments"] if e["name"] == name][0]
    assert figures["revision"] and figures["seconds"] is not None
