"""benchmarks/gpu.py: the budgeted GPU run, on tiny sizes on the CPU (``--tiny``).

One tiny run (the module fixture: every step, each in its own process) is read back; the
budget's enforcement (a step's limit, SIGTERM then SIGKILL, a step skipped when the budget is
spent) and the atlas store's count are checked apart, in this process.
"""
import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from benchmarks import gpu

ROOT = Path(__file__).resolve().parents[1]
STEPS = ["device", "bench", "atlas-quick", "atlas-store", "atlas-full", "atlas-store"]


def _docs_files():
  return sorted(p.relative_to(gpu.SOURCE) for p in gpu.SOURCE.rglob("*"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  out = tmp_path_factory.mktemp("gpu") / "out"
  docs_before = _docs_files()
  assert gpu.main(["--out", str(out), "--tiny", "--budget", "600"]) == 0
  assert _docs_files() == docs_before   # the atlas ran in a copy: docs/ is only read
  return out, json.loads((out / gpu.RESULTS).read_text(encoding="utf-8"))


def test_every_step_ran_in_order_within_the_budget(tiny):
  _, doc = tiny
  assert [s["name"] for s in doc["steps"]] == STEPS
  assert [s["status"] for s in doc["steps"]] == ["ok"] * len(STEPS), doc["steps"]
  assert doc["finished"] and doc["exit"]["code"] == 0
  spent = 0.0
  for step in doc["steps"]:
    # no step is given more than the budget has left when it starts, nor runs past its limit
    assert step["limit_s"] <= doc["budget_s"] - spent + 0.1
    assert 0 < step["wall_s"] <= step["limit_s"] + 1
    assert Path(step["log"]).is_file()
    spent += step["wall_s"]
  assert spent <= doc["elapsed_s"] <= doc["budget_s"]


def test_the_device_is_named_and_its_bandwidth_measured(tiny):
  _, doc = tiny
  device = doc["device"]
  assert device["platform"] == "cpu" and device["device_kind"] and device["device_count"] >= 1
  assert device["memory_bytes"] > 0
  bw = device["bandwidth"]
  assert bw["n"] == gpu.BANDWIDTH["tiny"]["n"]
  assert all(bw[k] > 0 for k in ("triad_gbs", "scale_gbs", "sum_gbs"))


def test_bench_rows_are_the_bench_rows_and_their_share_of_the_bandwidth(tiny):
  from benchmarks.workload import make_workload, model_bytes_per_seed_epoch
  _, doc = tiny
  rows = doc["bench"]
  middle = gpu.SEEDS["tiny"][1]
  assert [(r["seeds"], r["one_tile"]) for r in rows] == \
      [(n, False) for n in gpu.SEEDS["tiny"]] + [(middle, True)]
  # on the CPU the default tile is fast_lu.SEED_TILE (at most the seeds); the extra row one tile
  from attndyn.dynamics.fast_lu import SEED_TILE
  assert [r["seed_tile"] for r in rows] == \
      [min(SEED_TILE, n) for n in gpu.SEEDS["tiny"]] + [middle]
  # the workload's yardstick, computed here apart: the same dataset for every seed count
  bytes_per = model_bytes_per_seed_epoch(make_workload(1, **gpu.WORKLOAD["tiny"]))
  triad = doc["device"]["bandwidth"]["triad_gbs"]
  for r in rows:
    assert r["impl"] == "attndyn" and r["measured_seeds"] == r["seeds"]
    assert r["epochs"] == gpu.EPOCHS["tiny"][r["seeds"]] and len(r["times_s"]) == gpu.REPS
    assert r["seed_epochs_per_s"] > 0 and r["compile_s"] > 0
    assert r["seed_epochs_per_s"] == pytest.approx(r["seeds"] * r["epochs"] / r["median_s"],
                                                   rel=1e-12)
    assert r["median_s"] == pytest.approx(sorted(r["times_s"])[1], rel=1e-12)
    assert r["model_bytes_per_seed_epoch"] == bytes_per
    assert r["bandwidth_gbs"] == triad
    assert r["bandwidth_share"] == pytest.approx(bytes_per * r["seed_epochs_per_s"] / (triad * 1e9),
                                                 rel=1e-12)


def test_the_atlases_ran_and_the_full_one_says_what_it_could_resume(tiny):
  _, doc = tiny
  quick, full = doc["atlas_quick"], doc["atlas_full"]
  # one bucket: 2 σ × 2 lr × 2 seeds; the full grid a second one of the same size
  assert (quick["status"], quick["n_buckets"], quick["n_rows"]) == ("ok", 1, 8)
  assert 0 < quick["computing_s"] <= quick["wall_s"]
  old = len(list((gpu.SOURCE / "buckets").glob("bucket-*.json")))
  before = full["before"]
  assert (before["buckets"], before["done"], before["store_files"]) == (2, 0, 0)
  assert before["old_format_records"] == old > 0
  assert not full["resumed"] and "no bucket is reused" in full["resume_note"]
  assert (full["status"], full["n_rows"], full["reused"]) == ("ok", 16, 0)
  assert (full["buckets"], full["done"], full["left"], full["computed_buckets"]) == (2, 2, 0, 2)
  assert full["after"]["done_indices"] == [0, 1]
  assert full["seconds_if_run_alone"] == full["wall_s"]
  assert full["estimated_total_s"] == pytest.approx(full["after"]["computing_s_done"])
  assert doc["goals"]["full_atlas_s"]["measured"] == full["wall_s"]
  assert doc["goals"]["seed_epochs_per_s_at_4096"]["met"] is None   # no 4,096-seed row here


def test_the_table_holds_the_measured_rows(tiny):
  out, doc = tiny
  text = (out / gpu.TABLE).read_text(encoding="utf-8")
  assert text == gpu.table(doc)
  for r in doc["bench"]:
    if r["one_tile"]:
      assert (f"- {r['seeds']:,} seeds in one tile: {r['seed_epochs_per_s']:,.0f} "
              f"seed·epochs/s, {100 * r['bandwidth_share']:.1f} %") in text
    else:
      assert (f"| {r['seeds']:,} | {r['seed_epochs_per_s']:,.0f} | "
              f"{100 * r['bandwidth_share']:.1f} % |") in text
  assert "- Seeds per tile (seeds: tile): 8: 8, 16: 16, 32: 16." in text
  assert "not measured" not in text
  assert f"2 of 2 buckets done (0 reused" in text


def test_the_store_count_reuses_only_this_codes_keys(tiny, tmp_path):
  """A stored bucket under another key (another revision's) is counted as a file, not as done,
  and what is left is estimated from the bucket done. Counted in a child process, as the run
  counts (this process computes in float64, which the job keys digest)."""
  _, doc = tiny
  atlas_dir = tmp_path / "atlas"
  shutil.copytree(doc["atlas_full"]["dir"], atlas_dir)
  store = atlas_dir / "jobs"
  moved = sorted(store.glob("*.json"))[0]
  moved.rename(store / ("0" * 32 + ".json"))
  result = tmp_path / "count.json"
  cmd = [sys.executable, "-m", "benchmarks.gpu", "--step", "atlas-store", "--result", str(result),
         "--mode", "tiny", "--atlas-dir", str(atlas_dir)]
  entry = gpu._limited(cmd + [a for s in gpu.TINY_SETS["full"] for a in ("--set", s)], 120, 0,
                       tmp_path / "logs" / "count.log")
  assert entry["status"] == "ok", entry["tail"]
  counts = json.loads(result.read_text(encoding="utf-8"))
  assert (counts["store_files"], counts["done"], counts["left"]) == (2, 1, 1)
  assert counts["estimated_left_s"] == pytest.approx(counts["computing_s_done"])  # same kind
  note = gpu._resume_note(atlas_dir, True, counts)
  assert note.startswith("1 of 2 buckets reused") and "1 stored job(s)" in note


def test_a_step_past_its_limit_is_stopped(tmp_path):
  """SIGTERM at the limit less the grace, SIGKILL at the limit for a child that ignores it."""
  stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print('started', flush=True); time.sleep(60)")
  t0 = time.monotonic()
  entry = gpu._limited([sys.executable, "-c", stubborn], 3.0, 1.0, tmp_path / "logs" / "s.log")
  assert entry["status"] == "timeout" and entry["rc"] == -9
  assert 2.5 < time.monotonic() - t0 < 20
  assert "started" in entry["tail"]
  polite = "import time; time.sleep(60)"
  entry = gpu._limited([sys.executable, "-c", polite], 2.0, 1.0, tmp_path / "logs" / "p.log")
  assert entry["status"] == "timeout" and entry["rc"] == -15   # SIGTERM was enough


def test_a_spent_budget_skips_the_step_and_keeps_the_file(tmp_path):
  r = gpu.Run(tmp_path, tmp_path / "work", 0.0, "tiny", ["test"])
  entry, value = r.step("device", [sys.executable, "-c", "raise SystemExit(1)"], 60)
  assert (entry["status"], value) == ("skipped", None)
  doc = json.loads((tmp_path / gpu.RESULTS).read_text(encoding="utf-8"))
  assert [s["name"] for s in doc["steps"]] == ["device"] and not doc["finished"]
  assert "| 8 | not measured | not measured | not measured |" in \
      (tmp_path / gpu.TABLE).read_text(encoding="utf-8")


def test_a_failing_step_is_recorded_with_its_output(tmp_path):
  r = gpu.Run(tmp_path, tmp_path / "work", 60.0, "tiny", ["test"])
  entry, value = r.step("x", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"], 30,
                        result=tmp_path / "none.json")
  assert (entry["status"], entry["rc"], value) == ("failed", 3, None)
  assert "boom" in entry["tail"]


def test_a_platform_jax_cannot_start_ends_the_run_after_the_device_step(tmp_path, monkeypatch,
                                                                          capsys):
  monkeypatch.setenv("JAX_PLATFORMS", "cuda")
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
  out = tmp_path / "out"
  assert gpu.main(["--out", str(out), "--tiny"]) == 1
  assert "the device step failed (JAX_PLATFORMS = 'cuda')" in capsys.readouterr().err
  doc = json.loads((out / gpu.RESULTS).read_text(encoding="utf-8"))
  assert [(s["name"], s["status"]) for s in doc["steps"]] == [("device", "failed")]
  assert doc["environment"]["JAX_PLATFORMS"] == "cuda" and doc["device"] is None
  assert doc["steps"][0]["rc"] not in (0, None) and "Error" in doc["steps"][0]["tail"]


def test_without_an_accelerator_the_full_size_run_stops_after_naming_the_device(tmp_path, capsys):
  out = tmp_path / "out"
  assert gpu.main(["--out", str(out)]) == 2
  assert "JAX found no accelerator (platform cpu)" in capsys.readouterr().err
  doc = json.loads((out / gpu.RESULTS).read_text(encoding="utf-8"))
  assert [(s["name"], s["status"]) for s in doc["steps"]] == [("device", "ok")]
  assert doc["device"]["platform"] == "cpu" and doc["device"]["bandwidth"] is None
  assert doc["bench"] == [] and doc["atlas_full"] is None
  assert "| 1,024 | not measured |" in (out / gpu.TABLE).read_text(encoding="utf-8")


@pytest.mark.parametrize("argv, said", [
    (["--budget", "0"], "--budget 0 is not allowed"),
    (["--atlas-from", "no/such/dir"], "--atlas-from 'no/such/dir' is not a directory"),
    (["--out", "FULL"], "is not a new or empty directory"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, said):
  full = tmp_path / "full"
  full.mkdir()
  (full / "x").write_text("")
  args = ["--out", str(tmp_path / "new"), "--tiny"] + [str(full) if a == "FULL" else a
                                                      for a in argv]
  with pytest.raises(SystemExit) as exit_:
    gpu.main(args)
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and said in err and len(err.strip().splitlines()) == 1
  assert not (tmp_path / "new").exists() or argv[0] == "--out"


def test_skipped_steps_are_recorded_in_their_place(tmp_path):
  out = tmp_path / "out"
  argv = ["--out", str(out), "--tiny", "--skip", "bench", "--skip", "atlas-quick",
          "--skip", "atlas-full"]
  assert gpu.main(argv) == 0
  doc = json.loads((out / gpu.RESULTS).read_text(encoding="utf-8"))
  assert [(s["name"], s["status"]) for s in doc["steps"]] == [
      ("device", "ok"), ("bench", "skipped"), ("atlas-quick", "skipped"),
      ("atlas-full", "skipped")]
  assert doc["finished"] and doc["bench"] == [] and doc["atlas_full"] is None


def test_a_run_stopped_by_sigterm_kills_its_step_and_keeps_the_file(tmp_path):
  """SIGTERM to the run while its first step (JAX starting in a child) runs: exit 130, the
  file says so, and the child's process group is gone."""
  import os
  import signal
  import subprocess
  out = tmp_path / "out"
  proc = subprocess.Popen([sys.executable, "-m", "benchmarks.gpu", "--out", str(out), "--tiny"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          stderr=subprocess.PIPE, text=True)
  logs = out / "work" / "logs"
  deadline = time.monotonic() + 60
  while not any(logs.glob("*.log")) and time.monotonic() < deadline:
    time.sleep(0.1)
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=60) == 130
  assert "interrupted" in proc.stderr.read()
  doc = json.loads((out / gpu.RESULTS).read_text(encoding="utf-8"))
  assert doc["exit"]["code"] == 130 and not doc["finished"]
  # the step's command line names its result file under out/work/steps: no process left has it
  left = subprocess.run(["pgrep", "-f", str(out / "work" / "steps")], capture_output=True,
                        text=True)
  assert left.returncode == 1 and not left.stdout, left.stdout
