"""``ad.run(cfg, *, ode=...)``: one whole run from Python, as the Results ``ad.analysis.load`` returns."""
import numpy as np
import pytest

import attndyn as ad

_SMALL = dict(task={"vocab_size": 30, "n_nontopic": 3, "n_train": 24, "n_test": 8},
              train={"steps": 40, "record_every": 10}, sweep={"seeds": 2},
              model={"embed_std": 0.1}, precision="float64")


def test_run_in_memory_equals_the_files_it_writes(tmp_path):
  """``ad.run`` without ``out`` gives the same named arrays and summary numbers that
  ``ad.analysis.load`` reads back from the directory ``ad.run(out=...)`` writes (the
  CLI's path), and ``ode=`` puts the reduced ODE beside GD without touching ``cfg``."""
  cfg = ad.paper_config("quick", ode={"kind": "none"}, **_SMALL)
  res = ad.run(cfg, ode="reduced")
  assert cfg.ode.kind == "none" and res.directory is None
  assert isinstance(res, ad.analysis.results.Results) and res.gradient_flow is None
  assert res.gd["score"].dims == ("run", "step", "word") and res.gd["score"].shape[:2] == (2, 5)
  assert res.gd_path["path"] == "fast" and not res.summary["errors"]
  on_disk = ad.run(cfg, ode={"kind": "reduced"}, out=tmp_path / "run")
  loaded = ad.analysis.load(tmp_path / "run")
  for got in (on_disk, loaded):
    assert set(got.stages) == {"gd", "reduced"}
    for kind in got.stages:
      for name, arr in got.stages[kind].items():
        np.testing.assert_array_equal(arr.data, res.stages[kind][name].data, err_msg=name)
    assert got.summary["aggregate"]["n_runs"] == res.summary["aggregate"]["n_runs"] == 2
  np.testing.assert_allclose(res.summary["runs"][1]["test_acc"], loaded.runs[1]["test_acc"])
  assert res.sel(seed=1).gd["loss"].shape == (1, 5)


def test_run_refuses_bad_arguments_in_one_line():
  with pytest.raises(ad.ConfigError, match="ode = 'reducd' is not allowed: one of none, "):
    ad.run("quick", ode="reducd")
  with pytest.raises(ad.ConfigError, match="cfg = int is not allowed"):
    ad.run(3)
