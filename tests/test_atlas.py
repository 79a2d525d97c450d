"""The theory-validity atlas: its rows are `attndyn run`'s numbers, it resumes, bad --set is one line.

Budget: these tests together ≤ 20 s on a loaded 2-core box (one tiny bucket: 4 compiles).
"""
import json
import math
import os

import numpy as np
import pytest

from attndyn import analysis
from attndyn.analysis import atlas as measures
from attndyn import atlas, cli, pipeline
from attndyn.reproduce import engine
from attndyn.tasks.errors import ConfigError

# One Attn-TC bucket on a tiny task: 2 σ × 2 lr × 2 seeds = 8 runs in one compiled program.
# lr = tau / n for n in run_lengths: the lr-1.0 runs are read at step 5 of their 10 (flow time 5),
# the lr-0.5 runs at their last step.
TINY = ["classifiers=[\"tc\"]", "axes={}", "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]", "tau=5.0",
        "steps=10", "record_every=5", "run_lengths=[10, 5]", "precision=\"float64\"",
        "ode_rtol=1e-6", "keep_checkpoints=true",   # the tests below play kills with them
        "base={n_nontopic=3, vocab_size=20, n_topics=2, words_per_topic=2, embed_dim=4, "
        "n_train=16, n_test=8, normaliser=\"softmax\", train_query=false}"]


@pytest.fixture(scope="module")
def tiny_atlas(tmp_path_factory):
  out = tmp_path_factory.mktemp("atlas")
  return out, atlas.run_atlas(out, items=TINY, progress=False, findings=False)


def _single_run(s, sigma, lr, n):
  """The `attndyn run` config of one atlas configuration: its σ, lr and steps = tau / lr."""
  raw = atlas.run_config(s, atlas.buckets(s)[0])
  raw["model"]["embed_std"] = sigma
  raw["train"].update({"lr": lr, "steps": n})
  raw["sweep"] = {"seeds": s["seeds"], "data_seeds": [0]}
  return engine.validate(raw, "test")


def test_rows_equal_attndyn_run_of_the_same_config(tiny_atlas):
  """The truncated (τ-matched) atlas row of lr = tau/5 equals `attndyn run` for 5 steps.

  Tolerance: float64. GD measures rtol 1e-9: the same programs' operations, only vmapped over
  8 points instead of 2. The ODE measure rtol 1e-5: the atlas solves its 4 points without lr
  once, in flow time to τ = 5, as one system with one shared adaptive step (rtol 1e-6, the
  preset's), and reads both lr off it; the run solves its 2 points to t = 5 in steps; so the
  two solutions agree to the solver's tolerance, not to rounding.
  """
  _, result = tiny_atlas
  s = atlas.settings(items=TINY)
  lr, n = atlas.learning_rates(s)[1], s["run_lengths"][1]
  sigma = s["sigma"][1]
  cfg = _single_run(s, sigma, lr, n)
  with pipeline.precision_scope(cfg.precision):
    run = pipeline.run(cfg, progress=False)
  expected = measures.run_rows(run.points, run.gd, run.odes, run.m, lr=np.full(2, lr),
                               start_fraction=atlas.SEN_START_FRACTION,
                               learned_acc=atlas.LEARNED_ACC)
  got = [r for r in result.rows if r["sigma"] == sigma and r["lr"] == lr]
  assert [r["seed"] for r in got] == [p["seed"] for p in run.points]
  assert all(r["tau"] == pytest.approx(s["tau"]) for r in got)
  for row, want in zip(got, expected):
    for key in ("test_acc", "final_loss", "mean_topic_score", "sen_error", "sen_error_final",
                "q_drift", "assumption1_ratio"):
      np.testing.assert_allclose(row[key], want[key], rtol=1e-9, err_msg=key)
    np.testing.assert_allclose(row["ode_rel_dev"], want["ode_rel_dev"], rtol=1e-5)
    assert row["diverged"] == want["diverged"]
  # and the per-run records of `attndyn run`'s summary.json say the same
  for row, rec in zip(got, analysis.run_summaries(run.points, run.gd, run.odes, run.m)):
    np.testing.assert_allclose(row["test_acc"], rec["test_acc"], rtol=1e-9)
    np.testing.assert_allclose(row["q_drift"], max(w["invariant_drift"] for w in rec["topic_words"]),
                               rtol=1e-9)


def test_table_and_curves_are_written_and_read_back(tiny_atlas):
  out, result = tiny_atlas
  back = atlas.read_table(out / "atlas.csv")
  assert len(back) == len(result.rows) == 2 * 2 * 2
  for a, b in zip(back, result.rows):
    for key, value in b.items():
      if isinstance(value, float) and math.isnan(value):
        assert math.isnan(a[key])
      elif isinstance(value, float):
        assert a[key] == pytest.approx(value, rel=1e-12)
      else:
        assert a[key] == value
  axes = json.loads((out / "curves.json").read_text())["axes"]
  with np.load(out / "curves.npz") as z:
    for name, names in axes.items():
      assert z[name].ndim == len(names) and z[name].shape[0] == len(back)


def test_resume_gives_the_same_table(tiny_atlas):
  out, result = tiny_atlas
  first = json.loads((out / "atlas.json").read_text())["seconds"]
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  # every bucket was read back: its computing time is the first process's, not the read-back's
  buckets = [k for k in first if k.startswith("bucket-")]
  assert buckets and {k: again.seconds[k] for k in buckets} == {k: first[k] for k in buckets}
  assert again.seconds["computing"] == first["computing"] == sum(first[k] for k in buckets)
  assert len(again.rows) == len(result.rows)
  differ = [(i, k, ra[k], rb[k]) for i, (ra, rb) in enumerate(zip(again.rows, result.rows))
            for k in rb if not (ra[k] == rb[k] or (isinstance(rb[k], float) and math.isnan(rb[k])
                                                   and math.isnan(ra[k])))]
  assert not differ, differ[:5]


def test_worker_processes_compute_the_rows_one_process_does(tiny_atlas, tmp_path, capsys,
                                                           monkeypatch):
  """``workers=2``: the Attn-TC bucket (tiny_atlas's) and an Attn-FC one, each computed in a
  process of its own and read back here from its record.

  Tolerance: rtol 1e-9 (float64), as test_rows_equal's: the same programs, but a worker held
  to one core sums the ODE solver's reductions on one thread, in another order, and the
  relative deviation's small denominator magnifies that rounding. Both buckets' times reach
  atlas-seconds.json, which each worker updates with its own bucket under a lock. The
  progress bar moves as the workers finish chunks, not only buckets: each bucket's run
  reports its 4 configurations as its stages' chunks finish, in steps of at most 2, so the
  bar passes a count other than 0, 4 and 8. The records name the code this process started
  with (its commit), though the workers import it later.
  """
  import re

  from attndyn.reproduce import runner
  _, one = tiny_atlas
  items = [i for i in TINY if not i.startswith("classifiers")] + ['classifiers=["tc", "fc"]']
  # the commit this process started with, which the workers' records must name whatever the
  # checkout holds when they read it
  monkeypatch.setitem(runner._REVISION, "value", {"commit": "f" * 40, "dirty": False})
  got = atlas.run_atlas(tmp_path, items=items, progress=True, findings=False, workers=2)
  for record in (tmp_path / atlas.RECORDS).glob("*.json"):
    assert json.loads(record.read_text())["commit"] == "f" * 40
  shown = {int(n) for n in re.findall(r" (\d+)/8 configurations", capsys.readouterr().err)}
  assert shown - {0, 4, 8} and max(shown) == 8, shown
  assert json.loads((tmp_path / "atlas.json").read_text())["workers"] == 2
  assert {r["classifier"] for r in got.rows} == {"tc", "fc"}
  tc = [r for r in got.rows if r["classifier"] == "tc"]
  assert len(tc) == len(one.rows)
  for ra, rb in zip(tc, one.rows):
    for k, v in rb.items():
      if isinstance(v, float):
        np.testing.assert_allclose(ra[k], v, rtol=1e-9, atol=0, err_msg=k)
      else:
        assert ra[k] == v, k
  times = json.loads((tmp_path / atlas.TIMES).read_text())
  assert set(times) == {"bucket-0000", "bucket-0001"}
  assert all(len(v) == 1 and v[0] > 0 for v in times.values())


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bad_workers_is_one_line(value, tmp_path, capsys):
  code = cli.main(["atlas", "--out", str(tmp_path / "a"), "--workers", value, "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "--workers" in err and "auto" in err, err
  assert not (tmp_path / "a").exists()


def test_a_worker_killed_mid_atlas_is_one_line_naming_the_resume(tmp_path, capsys):
  from unittest import mock
  died = ChildProcessError("worker process 1 (pid 4242) was killed by signal 9 (SIGKILL) "
                           "before finishing its job (out of memory? a kill?)")
  with mock.patch.object(atlas, "run_atlas", side_effect=died):
    code = cli.main(["atlas", "--out", str(tmp_path / "a"), "--quick", "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
  assert "killed by signal 9" in err and "--resume" in err


def test_auto_workers_are_the_cores_on_a_cpu():
  from attndyn import processes
  assert processes.parse_workers("auto") == len(processes.usable_cores())
  assert processes.parse_workers("3") == 3


def _same_rows(a: list, b: list) -> list:
  """The (row, column, value, value) where two tables differ (NaN equals NaN)."""
  return [(i, k, ra.get(k), rb[k]) for i, (ra, rb) in enumerate(zip(a, b)) for k in rb
          if not (ra.get(k) == rb[k] or (isinstance(rb[k], float) and math.isnan(rb[k])
                                         and math.isnan(ra[k])))] + (
      [("rows", len(a), len(b))] if len(a) != len(b) else [])


def test_a_bucket_is_read_back_from_its_record_without_its_checkpoints(tiny_atlas, tmp_path):
  """DIR/buckets keeps each finished bucket's rows, curves and computing time: with runs/
  (the checkpoints) gone, --resume gives the same table and curves, and the same time."""
  import shutil
  out = tmp_path / "records"
  shutil.copytree(tiny_atlas[0], out)
  shutil.rmtree(out / "runs")
  first = json.loads((out / "atlas.json").read_text())["seconds"]
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  assert not (out / "runs").exists()          # nothing was computed
  assert not _same_rows(again.rows, tiny_atlas[1].rows)
  for name, curve in tiny_atlas[1].curves.items():
    np.testing.assert_array_equal(again.curves[name], curve)
  bucket = next(k for k in first if k.startswith("bucket-"))
  assert again.seconds[bucket] == first[bucket]
  # the code that computed each bucket, kept from its record: a git commit (the checkout this
  # test runs in), or "unknown" outside git
  commits = json.loads((tiny_atlas[0] / "atlas.json").read_text())["commits"]
  (commit, names), = commits.items()
  assert names == [bucket] and (commit == "unknown" or len(commit.split("+")[0]) == 40)
  assert json.loads((out / "atlas.json").read_text())["commits"] == commits
  # and `attndyn atlas --resume` takes a DIR that holds the records alone
  sets = [a for item in TINY for a in ("--set", item)]
  assert cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", *sets]) == 0
  assert not (out / "runs").exists()
  assert not _same_rows(atlas.read_table(out / "atlas.csv"), again.rows)
  assert "phase_sigma_lr.png" in json.loads((out / "atlas.json").read_text())["findings"]["figures"]
  # a record file a kill cut short (atomic.write's temporary) is removed on --resume
  cut = out / atlas.RECORDS / f".{bucket}.csv.abcd1234.tmp"
  cut.write_text("config,bu")
  assert cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", *sets]) == 0
  assert not cut.exists()
  # the rows alone (the part kept in the repository): the same table, the curves NaN, and
  # atlas.json says which bucket has none
  (record,) = (out / atlas.RECORDS).glob("*-curves.npz")
  record.unlink()
  rows_only = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  assert not _same_rows(rows_only.rows, tiny_atlas[1].rows)
  assert all(np.isnan(c).all() for c in rows_only.curves.values())
  assert json.loads((out / "atlas.json").read_text())["buckets_without_curves"] == [bucket]


def test_a_finished_buckets_checkpoints_go_once_its_record_is_written(tiny_atlas, tmp_path):
  """By default (keep_checkpoints = false) a bucket's checkpoints are deleted after its record
  is written, and a resume reads the bucket from the record: the same rows."""
  import shutil
  out = tmp_path / "dropped"
  shutil.copytree(tiny_atlas[0], out)
  shutil.rmtree(out / atlas.RECORDS)           # as if killed after the chunks, before the record
  run = next((out / "runs").iterdir())
  assert (run / "checkpoints" / "gd").is_dir()
  items = [i for i in TINY if not i.startswith("keep_checkpoints")]
  again = atlas.run_atlas(out, items=items, progress=False, findings=False, resume=True)
  assert not (run / "checkpoints").exists()
  assert (run / "trajectories.npz").is_file() and (run / "run_info.json").is_file()
  assert not _same_rows(again.rows, tiny_atlas[1].rows)
  assert not _same_rows(atlas.run_atlas(out, items=items, progress=False, findings=False,
                                        resume=True).rows, tiny_atlas[1].rows)


def test_a_damaged_or_foreign_record_is_recomputed_not_trusted(tiny_atlas, tmp_path, capsys):
  import shutil
  out = tmp_path / "damaged"
  shutil.copytree(tiny_atlas[0], out)
  (table,) = (out / atlas.RECORDS).glob("*.csv")
  text = table.read_text()
  table.write_text(text[: len(text) // 2])    # cut mid-row: fewer rows than its .json says
  again = atlas.run_atlas(out, items=TINY, progress=True, findings=False, resume=True)
  err = capsys.readouterr().err
  assert "unreadable" in err and "redoing the bucket" in err
  assert not _same_rows(again.rows, tiny_atlas[1].rows)
  assert table.read_text() == text            # rewritten whole from the checkpoints
  meta = table.with_suffix(".json")
  doc = json.loads(meta.read_text())
  meta.write_text(json.dumps({**doc, "digest": "0" * 64}))   # another grid's record
  atlas.run_atlas(out, items=TINY, progress=True, findings=False, resume=True)
  assert "made with other settings" in capsys.readouterr().err
  assert json.loads(meta.read_text())["digest"] == doc["digest"]


def _drop_seconds(chunk) -> None:
  """Make a checkpoint chunk an older attndyn's: its zip comment without the seconds."""
  import zipfile

  from attndyn.analysis import npz
  run_id = npz.run_id(chunk)
  with zipfile.ZipFile(chunk, "a") as zf:
    zf.comment = json.dumps({"run_id": run_id}).encode()


def test_a_bucket_finished_by_a_second_process_counts_both_processes_time(tiny_atlas, tmp_path):
  """A process killed midway through a bucket leaves chunks whose files record their
  computing seconds; the process that finishes the bucket adds them to its own. A chunk of an
  older attndyn (no seconds) leaves its time out, and atlas.json says the time is partial."""
  import shutil

  from attndyn.analysis import npz
  out = tmp_path / "killed"
  shutil.copytree(tiny_atlas[0], out)
  for gone in (out / atlas.RECORDS, out / atlas.TIMES):   # as if killed before the bucket's end
    shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
  gd = next((out / "runs").iterdir()) / "checkpoints" / "gd"
  (gd / "chunk_00001.npz").unlink()
  kept = sum(npz.comment(f)["seconds"] for f in gd.parent.glob("*/chunk_*.npz"))  # gd, reduced
  assert kept > 0
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  name = gd.parent.parent.name
  (mine, earlier), = [json.loads((out / atlas.TIMES).read_text())[name]]
  assert earlier == kept and again.seconds[name] == pytest.approx(mine + kept)
  assert json.loads((out / "atlas.json").read_text())["buckets_with_partial_times"] == []
  assert not _same_rows(again.rows, tiny_atlas[1].rows)
  # the same with a chunk file that recorded no seconds
  for gone in (out / atlas.RECORDS, out / atlas.TIMES):
    shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
  (gd / "chunk_00001.npz").unlink()
  _drop_seconds(gd / "chunk_00000.npz")
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  reduced = npz.comment(gd.parent / "reduced" / "chunk_00000.npz")["seconds"]
  assert json.loads((out / atlas.TIMES).read_text())[name][1] == reduced   # gd's chunk 0 unknown
  assert json.loads((out / "atlas.json").read_text())["buckets_with_partial_times"] == [name]
  assert json.loads((out / atlas.RECORDS / f"{name}.json").read_text())["partial_time"] is True


def test_the_table_keeps_infinities_and_nan(tmp_path):
  rows = [{"a": math.inf, "b": -math.inf, "c": math.nan, "d": True, "e": "fc", "f": 3, "g": 0.1}]
  atlas.write_table(tmp_path / "t.csv", rows)
  (back,) = atlas.read_table(tmp_path / "t.csv")
  assert back["a"] == math.inf and back["b"] == -math.inf and math.isnan(back["c"])
  assert (back["d"], back["e"], back["f"], back["g"]) == (True, "fc", 3, 0.1)


def test_a_non_empty_out_needs_force_and_an_interrupt_names_the_resume(tmp_path, capsys):
  out = tmp_path / "a"
  out.mkdir()
  (out / "mine.txt").write_text("not attndyn's")
  assert cli.main(["atlas", "--out", str(out), "--quick", "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"attndyn: error: --out {str(out)!r} is not empty (it holds mine.txt)")
  assert cli.main(["atlas", "--out", str(tmp_path / "none"), "--resume"]) == 2
  assert "holds no atlas to continue" in capsys.readouterr().err
  assert not (tmp_path / "none").exists()
  args = cli._parser().parse_args(["atlas", "--out", "d"])
  assert cli._resume_hint(args) == ("; `attndyn atlas --out d --resume` (same options) keeps the "
                                    "finished buckets and continues from the last checkpoint")


def test_a_records_path_that_is_a_file_is_one_line(tmp_path, capsys):
  out = tmp_path / "a"
  out.mkdir()
  (out / atlas.RECORDS).write_text("not a folder")
  assert cli.main(["atlas", "--out", str(out), "--force", "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "is not a directory" in err and atlas.RECORDS in err


@pytest.mark.parametrize("raised, code, first", [
    (RuntimeError("reduced solver exploded"), 1, "attndyn: internal error: an ODE stage failed"),
    (MemoryError(), 2, "attndyn: error: an ODE stage could not finish")])
def test_a_failed_ode_stage_is_not_exit_0(raised, code, first, tmp_path, capsys, monkeypatch):
  """Rows without ode_rel_dev are said, with exit 1 (a bug, traceback in a file) or 2."""
  import tempfile
  from unittest import mock

  from attndyn import atlas
  # The mocked atlas writes nothing, so DIR is gone and the traceback goes to a temporary
  # file: keep it in tmp_path, not the machine's /tmp.
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  done = atlas.AtlasResult([], {}, {}, {"total": 1.0}, {"bucket-0003": {"reduced": raised}})
  with mock.patch.object(atlas, "run_atlas", return_value=done):
    got = cli.main(["atlas", "--out", str(tmp_path / "a"), "--quick", "--no-progress"])
  err = capsys.readouterr().err
  assert got == code and err.count("\n") == 1 and err.startswith(first), err
  assert "bucket-0003" in err and "Traceback" not in err
  assert ("traceback in " in err) == (code == 1) and ("--resume" in err) == (code == 2)
  if code == 1:
    assert f"traceback in {tmp_path}{os.sep}attndyn-error-" in err, err


@pytest.mark.parametrize("item, names", [
    ("tau=-1", "tau"), ("colour=3", "colour"), ("axes={m=[2]}", "axes.m"),
    ("run_lengths=[7]", "run_lengths"), ("classifiers=[\"cnn\"]", "classifiers"),
    ("sigma=[0]", "sigma"), ("tau", "tau"), ("keep_checkpoints=1", "keep_checkpoints")])
def test_bad_set_is_one_line(item, names, tmp_path, capsys):
  with pytest.raises(ConfigError, match=names.split(".")[0]):
    atlas.settings(items=[item])
  code = cli.main(["atlas", "--out", str(tmp_path / "a"), "--set", item, "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and err.startswith("attndyn: error:")


def test_theory_flags_name_the_broken_assumption():
  tol = dict(atlas.TOLERANCES)
  ok = {"sen_error": 0.001, "q_drift": 0.001, "assumption1_ratio": 0.001, "ode_rel_dev": None}
  assert measures.theory_flags(ok, tol) == []
  bad = {**ok, "assumption1_ratio": 0.24}
  (flag,) = measures.theory_flags(bad, tol)
  assert flag[0].startswith("Assumption 1") and flag[2] == 0.24 and flag[3] == tol["assumption1_ratio"]


def test_a_tie_for_the_most_broken_measure_names_every_tied_measure():
  # Two measures broken in every run of a group: both are named, in the tolerances' order (a
  # max over a set named one of them, which one depending on the process's string hashing).
  base = {a: 0 for a in measures.AXES if a not in ("sigma", "lr", "n_nontopic")}
  rows = [{**base, "sigma": 0.1, "lr": 1.0, "n_nontopic": m, "holds": False,
           "broken": "sen_error;q_drift" if m == 2 else "q_drift"} for m in (2, 2, 20)]
  entries = measures._by_axis(rows, {**base, "n_nontopic": 2}, {})["n_nontopic"]
  by_m = {e["value"]: e for e in entries}
  assert by_m[2]["most_broken"] == "sen_error and q_drift" and by_m[2]["most_broken_share"] == 1.0
  assert by_m[20]["most_broken"] == "q_drift"


def test_the_tl_drift_median_by_lr_leaves_out_an_undefined_drift():
  run = {"classifier": "tl", "diverged": False, "min_topic_score": 1.0, "mean_topic_score": 2.0,
         "lr": 0.5, "broken": "q_drift"}
  rows = [{**run, "q_drift": d} for d in (0.02, 0.04, math.nan)]
  assert measures._tl_failures(rows)["median_drift_by_lr"] == {0.5: pytest.approx(0.03)}


def test_the_holding_region_counts_up_from_the_smallest_sigma_per_lr():
  base = {a: 0 for a in measures.AXES if a not in ("sigma", "lr", "classifier")}
  holds = {(0.1, 1e-3): (True, True), (0.1, 1e-2): (True, True), (0.1, 1e-1): (True, False),
           (1.0, 1e-3): (False, True), (1.0, 1e-2): (True, True), (1.0, 1e-1): (False, False)}
  rows = [{**base, "classifier": "fc", "lr": lr, "sigma": sigma, "holds": h}
          for (lr, sigma), hs in holds.items() for h in hs]
  region = measures._holding_region(rows, {**base, "classifier": "tc"})["fc"]
  # lr 1.0's σ = 1e-2 holds in every seed but lies above a σ that does not: no region there
  assert region == {"sigma_max_by_lr": {0.1: 1e-2, 1.0: None}, "cells": 6, "cells_every_seed": 3}
  assert measures._region_text(region["sigma_max_by_lr"]) == "σ ≤ 0.01 at lr 0.1; at no σ at lr 1"


def test_fit_recovers_a_power_law():
  rng = np.random.default_rng(0)
  rows = [{"sigma": s, "lr": l, "n_nontopic": m, "vocab_size": 100, "y": 0.3 * s**0.5 * l**-1 * m}
          for s in (1e-3, 1e-2, 1e-1) for l in (0.1, 0.5, 1.0) for m in (2, 20)]
  for r in rows:
    r["y"] *= math.exp(rng.normal(0, 1e-3))
  fit = measures.fit_scaling(rows, "y", ("sigma", "lr", "n_nontopic"))
  assert fit.exponents["sigma"] == pytest.approx(0.5, abs=0.01)
  assert fit.exponents["lr"] == pytest.approx(-1.0, abs=0.01)
  assert fit.r2 > 0.999


def test_headline_table_flags_a_run_outside_the_theory():
  from attndyn import report
  agg = {"n_runs": 3, "n_diverged": 0, "max_sen_rel_error": {"max": 0.01},
         "max_invariant_drift": {"max": 0.005}, "nontopic_to_topic_score_ratio": {"max": 0.24},
         "mean_final_topic_score": {"mean": 2.0},
         "ode_max_abs_score_dev": {"reduced": {"max": 0.02}}}
  text = report.table([("Attn-TC", agg)])
  (line,) = [l for l in text.splitlines() if l.startswith("outside the theory")]
  assert "Assumption 1" in line and "0.24 > 0.01" in line and "Lemma 2" not in line
  inside = {**agg, "nontopic_to_topic_score_ratio": {"max": 0.001}}
  assert "outside the theory" not in report.table([("Attn-TC", inside)])
  # a broken Lemma 2 names what the reduced ODE holds fixed and how far it moved
  off = {**inside, "ode_max_abs_score_dev": {"reduced": {"max": 0.3}},
         "nontopic_to_topic_norm_ratio": {"max": 0.0123}}
  (line,) = [l for l in report.table([("Attn-TC", off)]).splitlines()
             if l.startswith("outside the theory")]
  assert "Lemma 2" in line and "0.15 > 0.02" in line and "norm change 0.0123" in line


def test_an_atlas_without_its_times_file_trusts_only_a_run_info_that_computed_everything(
    tiny_atlas, tmp_path):
  """An atlas that predates atlas-seconds.json: a bucket read back keeps the stage seconds of a
  run_info.json written by the process that computed all of it; one rewritten by a resume
  (its read-back time) gives an unknown time, not a wrong one."""
  import shutil
  out = tmp_path / "legacy"
  shutil.copytree(tiny_atlas[0], out)
  (out / atlas.TIMES).unlink()
  shutil.rmtree(out / atlas.RECORDS)    # and before the buckets' records
  for chunk in (out / "runs").glob("*/checkpoints/*/chunk_*.npz"):   # and the chunks' seconds
    _drop_seconds(chunk)
  info_path = next((out / "runs").iterdir()) / "run_info.json"
  info = json.loads(info_path.read_text())
  # as the process that computed the whole bucket wrote it
  info_path.write_text(json.dumps({**info, "resumed": False, "seconds": {"gd": 12.5,
                                                                         "reduced": 0.5}}))
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  name = info_path.parent.name
  assert again.seconds[name] == 13.0 and json.loads(info_path.read_text())["resumed"] is True
  (out / atlas.TIMES).unlink()          # and again, now that a resume rewrote run_info.json
  shutil.rmtree(out / atlas.RECORDS)
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  assert math.isnan(again.seconds[name]) and math.isnan(again.seconds["computing"])
  assert json.loads((out / atlas.TIMES).read_text())[name] == [None]


def test_ode_predictors_correlate_the_deviation_with_each_motion_measure():
  """Per classifier, r of log ode_rel_dev with each non-topic motion measure, over finite,
  undiverged runs only (all, and σ < 0.01 apart)."""
  rng = np.random.default_rng(0)
  rows = []
  for i in range(40):
    norm, score = 10 ** rng.uniform(-4, -1), 10 ** rng.uniform(-4, -1)
    rows.append({"classifier": "tc", "diverged": False, "sigma": 10 ** rng.uniform(-4, 0),
                 "assumption1_norm_ratio": norm, "assumption1_ratio": score,
                 "ode_rel_dev": 3.0 * norm ** 0.5})
  rows.append({**rows[0], "diverged": True, "ode_rel_dev": 1e9})      # left out
  rows.append({**rows[1], "ode_rel_dev": math.nan})                   # left out
  rows.append({**rows[2], "classifier": "tl", "ode_rel_dev": None})   # no ODE: no entry
  got = measures._ode_predictors(rows)
  assert set(got) == {"tc"} and got["tc"]["all"]["n"] == 40
  assert got["tc"]["all"]["assumption1_norm_ratio"] == pytest.approx(1.0)
  assert abs(got["tc"]["all"]["assumption1_ratio"]) < 0.5
  assert got["tc"]["sigma<0.01"]["n"] == sum(r["sigma"] < 0.01 for r in rows[:40])


def test_atlas_fast_path_is_the_path_each_bucket_runs_on():
  """atlas.fast_path (which buckets are thinned and which start first), asked of the bucket's
  model and training, is the path its run takes (pipeline.plan over the bucket's whole config,
  grid and data seeds included, with `gd_path = "auto"`); over the full grid both agree, a
  trainable query and both paths included."""
  s = atlas.settings()
  paths = set()
  for b in atlas.buckets(s):
    cfg = engine.validate(atlas.run_config(s, b), f"bucket {b.index}")
    gd = pipeline.plan(cfg).gd
    assert bool(atlas.fast_path(b)) == (gd.path == "fast"), (b.index, gd.reason)
    paths.add(gd.path)
  assert paths == {"fast", "generic"}


def test_the_eta_cost_model_orders_buckets_by_their_work():
  """bucket_cost (the atlas ETA's weights) grows with the tokens GD gathers: m, n_train, TL's
  wider gather; an autodiff bucket costs more per configuration than a fast-path one, and a
  trained query's (fast path, no reduced ODE) less than the base's."""
  s = atlas.settings()
  by = {json.dumps(b.values, sort_keys=True): b for b in atlas.buckets(s)}
  cost = lambda classifier, **change: atlas.bucket_cost(s, by[json.dumps(
      {"classifier": classifier, **atlas.BASE, **change}, sort_keys=True)])
  per_config = lambda classifier, **change: cost(classifier, **change) / atlas.n_configurations(
      s, by[json.dumps({"classifier": classifier, **atlas.BASE, **change}, sort_keys=True)])
  assert cost("tc", n_nontopic=2) < cost("tc", n_nontopic=20) < cost("tc", n_nontopic=100)
  assert cost("tc", n_train=200) < cost("tc") < cost("tl")
  assert per_config("tc", train_query=True) < per_config("tc") < per_config(
      "tc", normaliser="sparsemax")


def test_the_cost_check_compares_measured_buckets_with_the_model(tmp_path, capsys):
  """benchmarks.atlas --cost-check: measured / modelled seconds per finished bucket, partial
  times left out, and the grid's time scaled by the median ratio."""
  from benchmarks import atlas as bench
  s = atlas.settings()
  grid = atlas.buckets(s)
  model = [atlas.bucket_cost(s, b) for b in grid[:3]]
  (tmp_path / atlas.TIMES).write_text(json.dumps({
      "bucket-0000": [2 * model[0]], "bucket-0001": [model[1], model[1]],
      "bucket-0002": [1.0, None]}))      # an unknown part: left out
  (tmp_path / atlas.RECORDS).mkdir()
  (tmp_path / atlas.RECORDS / "bucket-0001.json").write_text(json.dumps(
      {"seconds": [1.0], "partial_time": True}))
  doc = bench.cost_check(tmp_path)
  assert [r["bucket"] for r in doc["rows"]] == ["bucket-0000"]
  assert doc["rows"][0]["ratio"] == pytest.approx(2.0) and doc["median_ratio"] == pytest.approx(2.0)
  assert doc["grid_predicted_seconds"] == pytest.approx(2 * sum(atlas.bucket_cost(s, b)
                                                                for b in grid))
  assert "ratio 2.00" in capsys.readouterr().out


def test_the_comparison_of_two_atlases_matches_rows_and_names_each_changed_verdict(tmp_path, capsys):
  """benchmarks.atlas --compare: rows matched by (σ, lr, seed) within each common bucket, a run
  that holds in one atlas and not the other reported with the measure that crossed its bound,
  relative differences per measure, and B's computing seconds over A's."""
  from benchmarks import atlas as bench

  def row(sigma, seed, **change):
    r = {"sigma": sigma, "lr": 0.25, "seed": seed, "diverged": False, "sen_error": 0.01,
         "q_drift": 0.005, "assumption1_ratio": 0.005, "ode_rel_dev": 0.019, "test_acc": 1.0,
         "mean_topic_score": 4.0, "time_to_learn": 6.25}
    return {**r, **change}

  def write(directory, rows, seconds, name="bucket-0000"):
    (directory / atlas.RECORDS).mkdir(parents=True, exist_ok=True)
    atlas.write_table(directory / atlas.RECORDS / f"{name}.csv", rows)
    (directory / atlas.RECORDS / f"{name}.json").write_text(json.dumps({"seconds": [seconds]}))

  nan = float("nan")
  a, b = tmp_path / "a", tmp_path / "b"
  diverged = row(2e-3, 0, diverged=True, sen_error=nan, q_drift=nan, assumption1_ratio=nan,
                 ode_rel_dev=nan)
  write(a, [row(1e-3, 0), row(1e-3, 1), diverged], 10.0)
  write(a, [row(1e-3, 0)], 5.0, name="bucket-0001")      # not in b: left out
  # b's rows in another order; seed 1 crosses Lemma 2's bound, seed 0 moves inside every bound,
  # and the run that diverged in a holds in b.
  write(b, [row(1e-3, 1, ode_rel_dev=0.021), row(2e-3, 0), row(1e-3, 0, sen_error=0.011)], 2.0)
  doc = bench.compare(a, b)
  assert doc["rows"] == 3 and [r["bucket"] for r in doc["buckets"]] == ["bucket-0000"]
  flip, gone = doc["holds_differ"]
  assert (flip["seed"], flip["holds_a"], flip["measure"]) == (1, True, "ode_rel_dev")
  assert (flip["a"], flip["b"], flip["bound"]) == (0.019, 0.021, atlas.TOLERANCES["ode_tolerance"])
  assert (gone["sigma"], gone["holds_a"], gone["measure"]) == (2e-3, False, "diverged / ")
  assert doc["relative_difference"]["sen_error"]["max"] == pytest.approx(0.1)
  assert doc["relative_difference"]["ode_rel_dev"]["max"] == pytest.approx(0.002 / 0.019)
  assert doc["seconds_b"] / doc["seconds_a"] == pytest.approx(0.2)
  assert "holds differs in 2" in capsys.readouterr().out
