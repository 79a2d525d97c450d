"""benchmarks/compile.py: the counts of a tiny atlas, run as the benchmark runs it (a fresh
process with an empty compile cache of its own), agree with each other and with the atlas's
settings."""
import pytest

from benchmarks import compile as bench


def test_union_of_spans():
  # overlapping spans (a jit traced inside another's trace) count once, gaps not at all
  assert bench._union([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.8)]) == pytest.approx(4.0)
  assert bench._union([]) == 0.0


def test_tiny_atlas_counted():
  r = bench.run_workload("atlas", tiny=True)
  assert r["exit_code"] == 0, r
  for field in ("programs", "programs_compiled", "compile_s", "wall_s", "compute_s",
                "points_per_call", "sweep_calls", "programs_by_name", "seconds_by_phase", "atlas"):
    assert field in r, field
  # a cold, private cache: programs are compiled; one is loaded only if asked for a second time
  assert r["cache"] and r["cache"] != "off"
  assert r["programs_compiled"] >= 1
  assert r["programs_compiled"] + r["cache_hits"] == r["programs"]
  assert r["cache_hits"] <= sum(n - 1 for n in r["programs_by_name"].values())
  assert sum(r["programs_by_name"].values()) == r["programs"]
  # the union of the trace, lowering and compile spans lies within the command's wall time,
  # and covers at least the longest of the three phases' sums
  assert 0 < r["compile_s"] <= r["wall_s"]
  assert r["compile_s"] >= max(r["seconds_by_phase"].values()) - 1e-6
  assert r["compute_s"] == pytest.approx(r["wall_s"] - r["compile_s"])
  # the tiny atlas: one bucket of 2 σ × 2 lr × 2 seeds, its GD swept in one call (the atlas's
  # chunk = "bucket"), by one compiled program (the sweep's jitted call compiled once)
  assert r["atlas"]["buckets"] == 1
  assert r["atlas"]["gd_points_per_program"]["max"] == 8
  assert r["atlas"]["gd_points_per_call"]["max"] == 8
  assert r["sweeps"] == 1 and r["sweep_calls"] == 1
  assert r["points_per_call"] == r["atlas"]["gd_points_per_call"]["mean"] == 8
  assert r["programs_by_name"].get("jit(traced_once)") == 1
  # per job: the sweep's program was compiled by the atlas's one bucket job, and every
  # program is counted once, by the job running (or outside any)
  assert sum(r["programs_by_job"].values()) == r["programs"]
  assert r["programs_by_job"].get("bucket-0000", 0) >= 1
  assert set(r["programs_by_job"]) <= {"bucket-0000", "(outside a job)"}
  assert "| atlas (tiny) | 0 |" in bench.table([r])


def test_compare_names_what_differs():
  a = [{"workload": "main", "programs": 3, "traces": 2, "programs_by_name": {"jit(f)": 2,
                                                                           "jit(g)": 1}}]
  b = [{"workload": "main", "programs": 4, "traces": 2, "programs_by_name": {"jit(f)": 2,
                                                                           "jit(g)": 2}}]
  assert bench.compare(a, b) == ["main:", "  programs: 3 -> 4", "  programs of jit(g): 1 -> 2"]
  assert bench.compare(a, a) == ["main:", "  no count differs"]
