"""benchmarks.ode_width on a tiny task: the point·step counts it reports are what they say."""
import json

from benchmarks import ode_width


def test_counts_are_the_per_point_steps(tmp_path):
  out = tmp_path / "w.json"
  assert ode_width.main(["--out", str(out), "--tiny", "--seeds", "1", "--groups", "2"]) == 0
  doc = json.loads(out.read_text())
  (row,) = doc["rows"]
  steps, cost = row["steps_alone"], row["point_steps"]
  assert row["points"] == 4 and row["failed"] == {"vmap": 0, "shared": 0}
  # vmap iterates every point until the slowest is done
  assert cost["vmap"] == row["points"] * steps["max"]
  assert steps["min"] * row["points"] <= cost["alone"] <= cost["vmap"]
  assert cost["shared"] == row["points"] * row["shared_steps"]
  assert set(row["over_alone"]) == set(cost)
  assert abs(row["over_alone"]["vmap"] - cost["vmap"] / cost["alone"]) < 1e-12
  # two groups, each a shared solve of at least one step per point
  assert cost["shared_by_steps_2"] >= row["points"]
  assert set(row["steps_alone_by_sigma"]) == {"0.0001", "0.00215", "0.0464", "1"}


def test_an_out_file_in_a_missing_folder_is_one_line(tmp_path, capsys):
  assert ode_width.main(["--out", str(tmp_path / "no" / "w.json"), "--tiny"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "does not exist" in err
