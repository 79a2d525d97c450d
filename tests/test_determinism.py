"""Determinism: the same config and seeds give byte-identical summary.json and trajectories.npz;
what differs between runs (time, command line, seconds) lives in run_info.json."""
import contextlib
import io
import json

from attndyn import cli
from conftest import TINY_RUN


def test_two_runs_of_one_config_write_identical_bytes(results_dir, tmp_path):
  first, _ = results_dir
  second = tmp_path / "again"
  with contextlib.redirect_stdout(io.StringIO()):
    assert cli.main(["run", *TINY_RUN, "--out", str(second)]) == 0
  for name in ("summary.json", "trajectories.npz"):
    assert (second / name).read_bytes() == (first / name).read_bytes(), name
  one, two = (json.loads((d / "run_info.json").read_text()) for d in (first, second))
  assert one["command"] != two["command"] and set(one) >= {"created", "seconds", "command"}


def test_summary_records_config_versions_backend_and_devices_but_no_times(results_dir):
  doc = json.loads((results_dir[0] / "summary.json").read_text())
  env = doc["environment"]
  assert doc["config"]["train"]["steps"] == 40
  assert env["versions"]["jax"] and env["versions"]["numpy"] and env["versions"]["python"]
  assert env["backend"] == "cpu" and env["device_count"] >= 1
  assert not {"created", "command", "seconds"} & set(doc)
