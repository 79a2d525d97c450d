"""The theory-validity atlas: its rows are `attndyn run`'s numbers; its buckets are jobs kept in one
store, read back on --resume only when they verify, computed in worker processes to the same rows;
a bucket that raises costs only its own rows; bad input is one line.

Budget: one tiny bucket computed in this process (the module fixture), computed again four
times (in a worker process beside an Attn-FC bucket, after its store file is damaged or
linked, and beside a bucket that raises); every other test reads the store back or runs no
bucket.
"""
import json
import math
import os
import shutil

import numpy as np
import pytest

from attndyn import analysis
from attndyn.analysis import atlas as measures
from attndyn import atlas, atomic, cli, jobs, pipeline
from attndyn.reproduce import engine
from attndyn.tasks.errors import ConfigError

# One Attn-TC bucket on a tiny task: 2 σ × 2 lr × 2 seeds = 8 runs in one compiled program.
# lr = tau / n for n in run_lengths: the lr-1.0 runs are read at step 5 of their 10 (flow time 5),
# the lr-0.5 runs at their last step.
TINY = ["classifiers=[\"tc\"]", "axes={}", "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]", "tau=5.0",
        "steps=10", "record_every=5", "run_lengths=[10, 5]", "precision=\"float64\"",
        "ode_rtol=1e-6",
        "base={n_nontopic=3, vocab_size=20, n_topics=2, words_per_topic=2, embed_dim=4, "
        "n_train=16, n_test=8, normaliser=\"softmax\", train_query=false}"]
# The tiny bucket and a second one (m = 4): bucket-0000 is the tiny bucket (the same job, the
# same key), bucket-0001 the other.
TWO = [i for i in TINY if not i.startswith("axes")] + ["axes={n_nontopic=[4]}"]


def _sets(items) -> list:
  return [a for item in items for a in ("--set", item)]


@pytest.fixture(scope="module")
def tiny_atlas(tmp_path_factory):
  out = tmp_path_factory.mktemp("atlas")
  return out, atlas.run_atlas(out, items=TINY, progress=False, findings=False)


def _copy(tiny_atlas, tmp_path, name: str):
  out = tmp_path / name
  shutil.copytree(tiny_atlas[0], out)
  return out


def _stored(out) -> list:
  """The store's job documents (``KEY.json``), by file name."""
  return [(p, json.loads(p.read_text())) for p in sorted((out / atlas.STORE).glob("*.json"))]


def _single_run(s, sigma, lr, n):
  """The `attndyn run` config of one atlas configuration: its σ, lr and steps = tau / lr."""
  raw = atlas.run_config(s, atlas.buckets(s)[0])
  raw["model"]["embed_std"] = sigma
  raw["train"].update({"lr": lr, "steps": n})
  raw["sweep"] = {"seeds": s.seeds, "data_seeds": [0]}
  return engine.validate(raw, "test")


def _same_rows(a: list, b: list) -> list:
  """The (row, column, value, value) where two tables differ (NaN equals NaN)."""
  return [(i, k, ra.get(k), rb[k]) for i, (ra, rb) in enumerate(zip(a, b)) for k in rb
          if not (ra.get(k) == rb[k] or (isinstance(rb[k], float) and math.isnan(rb[k])
                                         and math.isnan(ra[k])))] + (
      [("rows", len(a), len(b))] if len(a) != len(b) else [])


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
  lr, n = atlas.learning_rates(s)[1], s.run_lengths[1]
  sigma = s.sigma[1]
  cfg = _single_run(s, sigma, lr, n)
  with pipeline.precision_scope(cfg.precision):
    run = pipeline.run(cfg, progress=False)
  expected = measures.run_rows(run.points, run.gd, run.odes, run.m, lr=np.full(2, lr),
                               start_fraction=atlas.SEN_START_FRACTION,
                               learned_acc=atlas.LEARNED_ACC)
  got = [r for r in result.rows if r["sigma"] == sigma and r["lr"] == lr]
  assert [r["seed"] for r in got] == [p["seed"] for p in run.points]
  assert all(r["tau"] == pytest.approx(s.tau) for r in got)
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


def test_a_bucket_in_one_call_gives_the_rows_of_a_call_per_lr(tiny_atlas, tmp_path):
  """``chunk=bucket`` (the default) runs both learning rates in one call to the longer
  length, the shorter runs stopped at their own; ``chunk=lr`` one call per lr. float64: the
  same operations vmapped over 8 points instead of 4, so rtol 1e-9."""
  s = atlas.settings(items=TINY)
  assert s.chunk == "bucket"
  assert "chunk_size" not in atlas.run_config(s, atlas.buckets(s)[0])["sweep"]
  per_lr = atlas.settings(items=TINY + ["chunk=\"lr\""])
  assert atlas.run_config(per_lr, atlas.buckets(per_lr)[0])["sweep"]["chunk_size"] == 4
  got = atlas.run_atlas(tmp_path, items=TINY + ["chunk=\"lr\""], progress=False,
                        findings=False).rows
  want = tiny_atlas[1].rows
  assert len(got) == len(want) == 8
  for a, b in zip(got, want):
    for key, value in b.items():
      if isinstance(value, float) and not math.isnan(value):
        np.testing.assert_allclose(a[key], value, rtol=1e-9, atol=1e-300, err_msg=key)
      elif isinstance(value, float):
        assert math.isnan(a[key]), key
      else:
        assert a[key] == value, key


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


def test_resume_gives_the_same_table_and_the_stored_seconds(tiny_atlas):
  """Every bucket is read back from the store: the same rows and curves, and its computing
  seconds are the ones stored (the first process's), not the read-back's."""
  out, result = tiny_atlas
  first = json.loads((out / "atlas.json").read_text())["seconds"]
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  buckets = [k for k in first if k.startswith("bucket-")]
  assert buckets == ["bucket-0000"] and first["bucket-0000"] > 0
  assert {k: again.seconds[k] for k in buckets} == {k: first[k] for k in buckets}
  assert again.seconds["computing"] == first["computing"] == sum(first[k] for k in buckets)
  assert json.loads((out / "atlas.json").read_text())["reused"] == buckets
  assert not _same_rows(again.rows, result.rows)
  for name, curve in result.curves.items():
    np.testing.assert_array_equal(again.curves[name], curve)


def test_two_worker_processes_compute_the_rows_one_process_does(tiny_atlas, tmp_path, capsys,
                                                               monkeypatch):
  """``workers=2`` (a Dask LocalCluster of two processes): the Attn-TC bucket (tiny_atlas's)
  and an Attn-FC one, each computed in a worker process and kept by this one.

  Tolerance: rtol 1e-9 (float64), as test_rows_equal's: the same programs, but a worker held
  to one core sums the ODE solver's reductions on one thread, in another order, and the
  relative deviation's small denominator magnifies that rounding. The progress bar moves as
  the workers finish chunks, not only buckets: each bucket reports its 4 configurations as its
  stages' chunks finish (jobs.report), so the bar passes a count other than 0, 4 and 8. The
  stored buckets name the code this process started with (its commit, which the worker
  plugin hands the workers), though the workers import it later.
  """
  import re
  _, one = tiny_atlas
  items = [i for i in TINY if not i.startswith("classifiers")] + ['classifiers=["tc", "fc"]']
  monkeypatch.setitem(jobs._REVISION, "value", {"commit": "f" * 40, "dirty": False})
  got = atlas.run_atlas(tmp_path, items=items, progress=True, findings=False, workers=2)
  stored = _stored(tmp_path)
  assert len(stored) == 2 and all(doc["result"]["commit"] == "f" * 40 for _, doc in stored)
  shown = {int(n) for n in re.findall(r" (\d+)/8 configurations", capsys.readouterr().err)}
  assert shown - {0, 4, 8} and max(shown) == 8, shown
  doc = json.loads((tmp_path / "atlas.json").read_text())
  assert doc["workers"] == 2 and doc["commits"] == {"f" * 40: ["bucket-0000", "bucket-0001"]}
  assert all(doc["seconds"][k] > 0 for k in ("bucket-0000", "bucket-0001"))
  assert not got.failures and {r["classifier"] for r in got.rows} == {"tc", "fc"}
  tc = [r for r in got.rows if r["classifier"] == "tc"]
  assert len(tc) == len(one.rows)
  for ra, rb in zip(tc, one.rows):
    for k, v in rb.items():
      if isinstance(v, float):
        np.testing.assert_allclose(ra[k], v, rtol=1e-9, atol=0, err_msg=k)
      else:
        assert ra[k] == v, k


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bad_workers_is_one_line(value, tmp_path, capsys):
  code = cli.main(["atlas", "--out", str(tmp_path / "a"), "--workers", value, "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "--workers" in err and "auto" in err, err
  assert not (tmp_path / "a").exists()


def test_auto_workers_are_the_cores_on_a_cpu():
  assert jobs.parse_workers("auto") == len(jobs.usable_cores())
  assert jobs.parse_workers("3") == 3


def test_the_store_alone_resumes_the_atlas(tiny_atlas, tmp_path):
  """`attndyn atlas --resume` on a DIR whose outputs are gone: every bucket from DIR/jobs, the
  same table, the findings drawn, the commit that computed each bucket kept; a store file a kill
  cut short (atomic.write's temporary) is removed."""
  out = _copy(tiny_atlas, tmp_path, "store")
  commits = json.loads((out / "atlas.json").read_text())["commits"]
  (commit, names), = commits.items()   # a git commit (this checkout), or "unknown" outside git
  assert names == ["bucket-0000"] and (commit == "unknown" or len(commit.split("+")[0]) == 40)
  for name in ("atlas.csv", "atlas.json", "curves.npz", "curves.json"):
    (out / name).unlink()
  (path, _), = _stored(out)
  cut = out / atlas.STORE / f".{path.name}.abcd1234.tmp"
  cut.write_text('{"format": 1, "na')
  assert cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", *_sets(TINY)]) == 0
  assert not cut.exists()
  assert not _same_rows(atlas.read_table(out / "atlas.csv"),
                        atlas.read_table(tiny_atlas[0] / "atlas.csv"))
  doc = json.loads((out / "atlas.json").read_text())
  assert doc["reused"] == ["bucket-0000"] and doc["commits"] == commits
  assert "phase_sigma_lr.png" in doc["findings"]["figures"]


def test_a_damaged_foreign_or_linked_store_file_is_not_trusted(tiny_atlas, tmp_path):
  """jobs.Store.get reads a bucket back only when its JSON is whole, names this job and key,
  its arrays match their digest, and neither file is a symbolic link."""
  out = _copy(tiny_atlas, tmp_path, "store")
  (path, doc), = _stored(out)
  npz = path.with_suffix(".npz")
  store = jobs.Store(out / atlas.STORE)
  job = jobs.Job("bucket-0000", atlas.bucket_job, (), path.stem)
  assert not _same_rows(tiny_atlas[1].rows, store.get(job, warn=False)["rows"])   # it can pass
  text, data = path.read_text(), npz.read_bytes()

  def refused() -> bool:
    got = store.get(job, warn=False)
    path.write_text(text)
    npz.write_bytes(data)
    return got is None

  path.write_text(text[: len(text) // 2])                   # cut short
  assert refused()
  npz.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))        # its arrays edited
  assert refused()
  path.write_text(json.dumps({**doc, "name": "bucket-0007"}))   # another job's
  assert refused()
  other = jobs.Job("bucket-0000", atlas.bucket_job, (), "0" * 32)
  (out / atlas.STORE / f"{other.key}.json").write_text(text)   # another key's file
  assert store.get(other, warn=False) is None
  for linked in (path, npz):                                # a link to a whole copy of itself
    copy = tmp_path / f"copy-{linked.name}"
    shutil.copy(linked, copy)
    linked.unlink()
    linked.symlink_to(copy)
    with pytest.raises(atomic.LinkRefused):   # refused outright, not read nor recomputed
      store.get(job, warn=False)
    linked.unlink()
    shutil.copy(copy, linked)
  assert store.get(job, warn=False) is not None


def test_a_store_file_that_does_not_verify_is_computed_again(tiny_atlas, tmp_path, capsys):
  out = _copy(tiny_atlas, tmp_path, "damaged")
  (path, _), = _stored(out)
  text = path.read_text()
  path.write_text(text[: len(text) // 2])
  again = atlas.run_atlas(out, items=TINY, progress=False, findings=False, resume=True)
  err = capsys.readouterr().err
  assert "does not verify" in err and "bucket-0000 is computed again" in err, err
  assert not _same_rows(again.rows, tiny_atlas[1].rows)
  assert json.loads((out / "atlas.json").read_text())["reused"] == []
  (path, doc), = _stored(out)                               # stored whole again
  assert doc["result"]["rows"] == json.loads(text)["result"]["rows"]


def test_a_linked_store_file_is_neither_read_nor_written_through(tiny_atlas, tmp_path, capsys):
  """A store file replaced by a link (to a whole copy of itself): the bucket is not read
  through it, nor computed only to be refused: one line names the link before anything runs
  (exit 2), and the link's target is left as it was."""
  out = _copy(tiny_atlas, tmp_path, "linked")
  (path, _), = _stored(out)
  target = tmp_path / "elsewhere.json"
  shutil.copy(path, target)
  before = target.read_text()
  path.unlink()
  path.symlink_to(target)
  code = cli.main(["atlas", "--out", str(out), "--resume", "--no-progress", "--workers", "1",
                   *_sets(TINY)])
  refused, = capsys.readouterr().err.splitlines()   # before anything is computed
  assert code == 2 and refused.startswith(f"attndyn: error: {str(path)!r} is a symbolic link")
  assert path.is_symlink() and target.read_text() == before


@pytest.mark.parametrize("change, said, again", [
    ("autodiff_thin=3", "autodiff_thin = 4 there, 3 now", "0 of 1 buckets"),
    ("axes={n_nontopic=[4]}", "axes = {", "1 of 2 buckets")])
def test_resume_with_a_changed_setting_says_so_and_computes_only_the_changed_buckets(
    change, said, again, tiny_atlas, tmp_path, capsys, monkeypatch):
  """One line names what changed and how many buckets that computes again; a bucket whose key
  the change leaves alone (the tiny bucket: autodiff_thin thins only autodiff buckets) is read
  back. The buckets computed are made to raise here, so that they cost nothing and show which
  ran (their tracebacks in errors/)."""
  out = _copy(tiny_atlas, tmp_path, "changed")

  def refuse(settings_json, index):
    raise RuntimeError(f"bucket {index} was computed")
  monkeypatch.setattr(atlas, "bucket_job", refuse)
  items = [i for i in TINY if not i.startswith(change.split("=")[0])] + [change]
  got = atlas.run_atlas(out, items=items, progress=False, findings=False, resume=True)
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("atlas --resume: the settings differ"), err
  assert said in err and f"{again} are computed (again)" in err
  assert json.loads((out / "atlas.json").read_text())["reused"] == ["bucket-0000"]
  assert sorted(got.failures) == (["bucket-0001"] if "1 of 2" in again else [])
  assert not _same_rows([r for r in got.rows if r["bucket"] == 0], tiny_atlas[1].rows)


def test_a_bucket_that_raises_is_exit_1_naming_it_and_the_others_rows_are_kept(
    tiny_atlas, tmp_path, capsys, monkeypatch):
  """The bucket that raises (bucket-0001) leaves its rows out and its traceback in DIR/errors;
  the other is computed and kept; the command exits 1 with one line naming the bucket."""
  compute = atlas.bucket_job

  def second_raises(settings_json, index):
    if index == 1:
      raise RuntimeError("a bug in bucket 1")
    return compute(settings_json, index)
  monkeypatch.setattr(atlas, "bucket_job", second_raises)
  out = tmp_path / "raised"
  code = cli.main(["atlas", "--out", str(out), "--workers", "1", "--no-progress", *_sets(TWO)])
  err = capsys.readouterr().err
  assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
  assert err.startswith("attndyn: error: 1 bucket(s) failed (bucket-0001)")
  assert "RuntimeError: a bug in bucket 1" in err and "--resume" in err
  trace = (out / atlas.ERRORS / "bucket-0001.txt").read_text()
  assert trace.startswith("Traceback") and "a bug in bucket 1" in trace
  assert not _same_rows(atlas.read_table(out / "atlas.csv"),
                        atlas.read_table(tiny_atlas[0] / "atlas.csv"))
  assert len(_stored(out)) == 1
  assert "bucket-0001" in json.loads((out / "atlas.json").read_text())["errors"]


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
                                    "finished buckets and computes the others")


def test_a_store_path_that_is_a_file_is_one_line(tmp_path, capsys):
  out = tmp_path / "a"
  out.mkdir()
  (out / atlas.STORE).write_text("not a folder")
  assert cli.main(["atlas", "--out", str(out), "--force", "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "is not a directory" in err and atlas.STORE in err
  assert (out / atlas.STORE).read_text() == "not a folder"


@pytest.mark.parametrize("raised, code, first", [
    (RuntimeError("reduced solver exploded"), 1, "attndyn: internal error: an ODE stage failed"),
    (MemoryError(), 2, "attndyn: error: an ODE stage could not finish")])
def test_a_failed_ode_stage_is_not_exit_0(raised, code, first, tmp_path, capsys, monkeypatch):
  """Rows without ode_rel_dev are said, with exit 1 (a bug, traceback in a file) or 2."""
  import tempfile
  from unittest import mock

  from attndyn import api
  # The mocked atlas writes nothing, so DIR is gone and the traceback goes to a temporary
  # file: keep it in tmp_path, not the machine's /tmp.
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  done = atlas.AtlasResult([], {}, {}, {"total": 1.0}, {"bucket-0003": {"reduced": raised}})
  with mock.patch.object(api, "atlas", return_value=done):
    got = cli.main(["atlas", "--out", str(tmp_path / "a"), "--quick", "--no-progress"])
  err = capsys.readouterr().err
  assert got == code and err.count("\n") == 1 and err.startswith(first), err
  assert "bucket-0003" in err and "Traceback" not in err
  assert ("traceback in " in err) == (code == 1) and ("--resume" in err) == (code == 2)
  if code == 1:
    assert f"traceback in {tmp_path}{os.sep}attndyn-error-" in err, err


def test_axes_set_as_a_table_vary_only_the_axes_it_names():
  """``--set axes={...}`` replaces the table: an axis it leaves out is not varied."""
  s = atlas.settings(items=['classifiers=["tc"]', "crosses=[]", "axes={n_nontopic=[4]}"])
  assert s.axes.items() == [("n_nontopic", (4,))]
  assert [b.values["n_nontopic"] for b in atlas.buckets(s)] == [s.base.n_nontopic, 4]
  assert atlas.settings(items=["crosses=[]", "axes={}"]).axes.items() == []


@pytest.mark.parametrize("item, names", [
    ("tau=-1", "tau"), ("colour=3", "colour"), ("axes={m=[2]}", "axes.m"),
    ("run_lengths=[7]", "run_lengths"), ("classifiers=[\"cnn\"]", "classifiers"),
    ("sigma=[0]", "sigma"), ("tau", "tau"), ("seeds=1.5", "seeds"),
    ("base.normaliser=\"relu\"", "base.normaliser")])
def test_bad_set_is_one_line(item, names, tmp_path, capsys):
  with pytest.raises(ConfigError, match=names.split(".")[0]):
    atlas.settings(items=[item])
  code = cli.main(["atlas", "--out", str(tmp_path / "a"), "--set", item, "--no-progress"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and err.startswith("attndyn: error:")
  assert not (tmp_path / "a").exists()


def test_the_table_keeps_infinities_and_nan(tmp_path):
  rows = [{"a": math.inf, "b": -math.inf, "c": math.nan, "d": True, "e": "fc", "f": 3, "g": 0.1}]
  atlas.write_table(tmp_path / "t.csv", rows)
  (back,) = atlas.read_table(tmp_path / "t.csv")
  assert back["a"] == math.inf and back["b"] == -math.inf and math.isnan(back["c"])
  assert (back["d"], back["e"], back["f"], back["g"]) == (True, "fc", 3, 0.1)


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



def test_the_comparison_of_two_atlases_matches_rows_and_names_each_changed_verdict(tmp_path, capsys):
  """benchmarks.atlas --compare: the rows of two atlas.csv matched by (bucket, σ, lr, seed), here
  an atlas written before the job store (its buckets/ records beside atlas.csv, one bucket timed
  in part) and one written now; a run that holds in one and not the other is reported with the
  measure that crossed its bound; relative differences per measure; B's computing seconds over
  A's (atlas.json), per bucket and over the buckets both timed whole."""
  from benchmarks import atlas as bench

  def row(bucket, sigma, seed, **change):
    r = {"config": 0, "bucket": bucket, "sigma": sigma, "lr": 0.25, "seed": seed,
         "diverged": False, "sen_error": 0.01, "q_drift": 0.005, "assumption1_ratio": 0.005,
         "ode_rel_dev": 0.019, "test_acc": 1.0, "mean_topic_score": 4.0, "time_to_learn": 6.25}
    return {**r, **change}

  def write(directory, rows, seconds, **doc):
    directory.mkdir()
    atlas.write_table(directory / "atlas.csv", measures.with_flags(rows, atlas.TOLERANCES))
    (directory / "atlas.json").write_text(json.dumps(
        {"seconds": {**seconds, "total": 99.0, "computing": sum(seconds.values())}, **doc}))

  nan = float("nan")
  a, b = tmp_path / "a", tmp_path / "b"
  diverged = row(0, 2e-3, 0, diverged=True, sen_error=nan, q_drift=nan, assumption1_ratio=nan,
                 ode_rel_dev=nan)
  write(a, [row(0, 1e-3, 0), row(0, 1e-3, 1), diverged, row(1, 1e-3, 0), row(2, 1e-3, 0)],
        {"bucket-0000": 10.0, "bucket-0001": 4.0, "bucket-0002": 5.0},
        buckets_with_partial_times=["bucket-0001"])
  (a / "buckets").mkdir()
  (a / "buckets" / "bucket-0000.csv").write_text("sigma,lr\n")   # the old records: not read
  # B's rows in another order and without bucket 2; in bucket 0 seed 1 crosses Lemma 2's
  # bound, seed 0 moves inside every bound, and the run that diverged in A holds in B; bucket
  # 1's row (the same σ, lr and seed as bucket 0's first) is matched within its bucket.
  write(b, [row(0, 1e-3, 1, ode_rel_dev=0.021), row(1, 1e-3, 0, test_acc=0.5), row(0, 2e-3, 0),
            row(0, 1e-3, 0, sen_error=0.011)], {"bucket-0000": 2.0, "bucket-0001": 8.0})
  doc = bench.compare(a, b)
  assert doc["rows"] == 4 and [r["bucket"] for r in doc["buckets"]] == ["bucket-0000",
                                                                       "bucket-0001"]
  flip, gone = doc["holds_differ"]
  assert (flip["seed"], flip["holds_a"], flip["measure"]) == (1, True, "ode_rel_dev")
  assert (flip["a"], flip["b"], flip["bound"]) == (0.019, 0.021, atlas.TOLERANCES["ode_tolerance"])
  assert (gone["sigma"], gone["holds_a"], gone["measure"]) == (2e-3, False, "diverged / ")
  assert doc["relative_difference"]["sen_error"]["max"] == pytest.approx(0.1)
  assert doc["relative_difference"]["ode_rel_dev"]["max"] == pytest.approx(0.002 / 0.019)
  assert doc["relative_difference"]["test_acc"]["max"] == pytest.approx(0.5)
  # bucket 1 was timed in part in A: no ratio, and left out of the totals
  assert [r["ratio"] for r in doc["buckets"]] == [pytest.approx(0.2), None]
  assert (doc["seconds_a"], doc["seconds_b"]) == (10.0, 2.0)
  assert "holds differs in 2" in capsys.readouterr().out
  assert bench.main(["--compare", str(a), str(tmp_path / "none")]) == 2
  assert capsys.readouterr().err.count("\n") == 1
