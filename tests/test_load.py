"""``analysis.load``: a results directory back as named arrays, and one clear error for every
missing, damaged, mismatched or newer file."""
import json
import shutil

import numpy as np
import pytest

from attndyn import analysis
from attndyn.tasks.errors import ConfigError


def test_round_trip_gives_the_files_arrays_with_named_axes(results_dir):
  out, _ = results_dir
  res = analysis.load(out)
  doc = json.loads((out / "summary.json").read_text())
  assert res.summary == doc and res.config == doc["config"] and res.n_runs == 4
  with np.load(out / "trajectories.npz", allow_pickle=False) as z:
    for name in z.files:
      kind, _, rest = name.partition("/")
      got = res.points[rest] if kind == "points" else res.stages[kind][rest].data
      np.testing.assert_array_equal(got, z[name])
  assert res.gd["score"].dims == ("run", "step", "word") and res.gd["score"].shape == (4, 5, 4)
  assert res.gd["loss"].dims == ("run", "step") and res.gd["t"].dims == ("run", "step")
  assert res.gd["failed_at"].dims == ("run",)
  assert res.gd["final_word_score"].dims == ("run", "vocab")
  assert res.reduced is None and res.gradient_flow is None
  np.testing.assert_array_equal(res.points["seed"], [0, 1, 0, 1])
  np.testing.assert_array_equal(res.points["train.lr"], [2.0, 2.0, 1e6, 1e6])


def test_sel_and_isel_pick_runs_and_axes_by_name(results_dir):
  res = analysis.load(results_dir[0])
  one = res.sel(seed=1, train_lr=2.0)
  assert one.n_runs == 1 and one.runs[0]["seed"] == 1 and one.runs[0]["train.lr"] == 2.0
  np.testing.assert_array_equal(one.gd["score"].data, res.gd["score"].data[1:2])
  assert one.summary["aggregate"]["n_runs"] == 1
  assert res.sel({"train.lr": [1e6]}).summary["aggregate"]["n_diverged"] == 2
  word = res.gd["score"].isel(run=0, word=2)
  assert word.dims == ("step",)
  np.testing.assert_array_equal(word.data, res.gd["score"].data[0, :, 2])
  traj = res.trajectory("gd")
  np.testing.assert_array_equal(traj.observables["loss"], res.gd["loss"].data)
  with pytest.raises(ConfigError, match="seed = 7 matches no run"):
    res.sel(seed=7)
  with pytest.raises(ConfigError, match="coordinate 'sede' is not allowed"):
    res.sel(sede=0)
  with pytest.raises(ConfigError, match="axis 'time' is not allowed"):
    res.gd["loss"].isel(time=0)


def _copy(results_dir, tmp_path):
  copy = tmp_path / "copy"
  shutil.copytree(results_dir[0], copy, ignore=shutil.ignore_patterns("*.png", "checkpoints"))
  return copy


def _set_version(path, version):
  doc = json.loads(path.read_text())
  doc["schema_version"] = version
  path.write_text(json.dumps(doc))


DAMAGE = [
    ("missing dir", lambda d: shutil.rmtree(d), "does not exist"),
    ("no summary", lambda d: (d / "summary.json").unlink(), "summary.json' is missing"),
    ("truncated summary", lambda d: (d / "summary.json").write_text('{\n "schema_version": 2,\n'),
     "summary.json' line 3 column 1 is not valid JSON"),
    ("not utf-8", lambda d: (d / "summary.json").write_bytes(b'{\n"a": "\xff"}'),
     "summary.json' line 2 is not UTF-8"),
    ("no version", lambda d: (d / "summary.json").write_text("{}"), "has no schema_version"),
    ("bad version", lambda d: _set_version(d / "summary.json", "2"),
     "schema_version = '2' is not allowed"),
    ("newer version", lambda d: _set_version(d / "summary.json", 99),
     "schema_version 99, newer than this attndyn reads"),
    ("no runs", lambda d: (d / "summary.json").write_text('{"schema_version": 2, "config": {}}'),
     "has no valid 'points' entry"),
    ("no npz", lambda d: (d / "trajectories.npz").unlink(), "trajectories.npz' is missing"),
    ("truncated npz", lambda d: (d / "trajectories.npz").write_bytes(
        (d / "trajectories.npz").read_bytes()[:1000]), "truncated or corrupt"),
    ("empty npz", lambda d: (d / "trajectories.npz").write_bytes(b""), "is not an .npz file"),
    ("pickled npz", lambda d: np.savez(d / "trajectories.npz",
                                       x=np.array([{"a": 1}], dtype=object)),
     "holds an object array, which only pickle can read"),
    ("stage without failed_at", lambda d: np.savez(
        d / "trajectories.npz", **dict(np.load(d / "trajectories.npz")),
        **{"reduced/t": np.zeros((4, 3))}), "has no array 'reduced/failed_at'"),
    ("other run's npz", lambda d: np.savez(d / "trajectories.npz", **{"gd/t": np.zeros((3, 5))}),
     "has shape (3, 5), but summary.json has 4 runs"),
]


@pytest.mark.parametrize("damage,expected", [(f, e) for _, f, e in DAMAGE],
                         ids=[name for name, _, _ in DAMAGE])
def test_a_damaged_directory_is_one_config_error(damage, expected, results_dir, tmp_path):
  copy = _copy(results_dir, tmp_path)
  damage(copy)
  with pytest.raises(ConfigError) as err:
    analysis.load(copy)
  assert expected in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_schema_version_1_directories_still_load(results_dir, tmp_path):
  copy = _copy(results_dir, tmp_path)
  _set_version(copy / "summary.json", 1)
  assert analysis.load(copy).n_runs == 4
