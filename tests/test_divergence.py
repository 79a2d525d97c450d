"""Divergence: a run whose loss or parameters go non-finite is frozen and flagged with its step;
the other runs of the sweep finish normally and the means leave the diverged runs out."""
import dataclasses
import json
import math

import numpy as np

from attndyn import analysis
from attndyn import config, pipeline


def test_the_diverging_lr_is_flagged_and_the_other_runs_learn(results_dir):
  out, stdout = results_dir
  doc = json.loads((out / "summary.json").read_text())
  assert [run["train.lr"] for run in doc["runs"]] == [2.0, 2.0, 1e6, 1e6]
  for run in doc["runs"]:
    if run["train.lr"] == 1e6:
      assert run["diverged"] is True and isinstance(run["failed_at"], int)
      assert 0 <= run["failed_at"] < 40
    else:
      assert run["diverged"] is False and run["failed_at"] is None
      assert run["train_acc"] == 1.0 and run["test_acc"] >= 0.75
      assert math.isfinite(run["final_train_loss"]) and run["final_train_loss"] < 0.1
  agg = doc["aggregate"]
  assert agg["n_runs"] == 4 and agg["n_diverged"] == 2
  assert [d["run"] for d in agg["diverged"]] == [2, 3]
  assert agg["train_acc"] == {"mean": 1.0, "min": 1.0, "max": 1.0, "n": 2}
  for d in agg["diverged"]:
    assert f"diverged: run {d['run']} (seed={d['run'] - 2}, data_seed=0, train.lr=1e+06) at " \
           f"step {d['failed_at']}" in stdout


def test_the_learning_runs_are_what_they_are_without_the_diverging_ones(results_dir):
  res = analysis.load(results_dir[0])
  cfg = config.RunConfig.from_dict(res.config)
  alone = dataclasses.replace(cfg, sweep=dataclasses.replace(
      cfg.sweep, grid=(("train.lr", (2.0,)),), chunk_size=None))
  gd = pipeline.run(alone, progress=False).gd
  mixed = res.sel(train_lr=2.0).gd
  for name in ("loss", "train_acc", "test_acc", "score", "emb_norm"):
    np.testing.assert_allclose(mixed[name].data, gd.observables[name], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(mixed["failed_at"].data, [-1, -1])



def test_trajectories_npz_records_the_same_divergence_steps(results_dir):
  res = analysis.load(results_dir[0])
  steps = [-1 if run["failed_at"] is None else run["failed_at"] for run in res.runs]
  np.testing.assert_array_equal(res.gd["failed_at"].data, steps)
  assert np.all(np.isfinite(res.gd["loss"].data[:2]))
