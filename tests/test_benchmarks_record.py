"""benchmarks.record on a tiny task: each program timed with the three records, the ratios
computed from the times it reports."""
import json

from benchmarks import record


def test_rows_and_ratios(tmp_path):
  out = tmp_path / "r.json"
  assert record.main(["--out", str(out), "--tiny", "--seeds", "2", "--steps", "20",
                      "--record-every", "10", "--classifier", "tc", "tl"]) == 0
  rows = json.loads(out.read_text())["rows"]
  assert [(r["program"], r["classifier"]) for r in rows] == [
      ("gd", "tc"), ("reduced_ode", "tc"), ("gd", "tl")]     # TL: no reduced ODE sweep here
  for r in rows:
    assert r["records"] == 3
    times = {k: r[k]["run_s"] for k in ("per_seed", "seeds_last", "nothing")}
    assert all(t > 0 for t in times.values())
    assert r["per_seed_over_seeds_last"] == times["per_seed"] / times["seeds_last"]
    assert r["seeds_last_share_of_run"] == 1 - times["nothing"] / times["seeds_last"]


def test_an_out_file_in_a_missing_folder_is_one_line(tmp_path, capsys):
  assert record.main(["--out", str(tmp_path / "no" / "r.json"), "--tiny"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "does not exist" in err
