"""benchmarks/compile.py: the counts of a tiny atlas, run as the benchmark runs it (a fresh
process with an empty compile cache of its own, then again with the cache it filled), agree
with each other and with the atlas's settings."""
import pytest

from benchmarks import compile as bench


def test_union_of_spans():
  # overlapping spans (a jit traced inside another's trace) count once, gaps not at all
  assert bench._union([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.8)]) == pytest.approx(4.0)
  assert bench._union([]) == 0.0


def test_tiny_atlas_counted():
  r = bench.run_workload("atlas", tiny=True, warm=True)
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
  # chunk = "bucket"), by one compiled program (the sweep's jitted call compiled once), then
  # its reduced ODE solved once for both lr in flow time (2 σ × 2 seeds)
  assert r["atlas"]["buckets"] == 1
  assert r["atlas"]["gd_points_per_program"]["max"] == 8
  assert r["atlas"]["gd_points_per_call"]["max"] == 8
  assert r["sweeps"] == 2 and r["sweep_calls"] == 2
  assert [s["points"] for s in r["sweep_calls_timed"]] == [8, 4]
  assert r["programs_by_name"].get("jit(traced_once)") == 2
  # each sweep timed: its compile's phases (its program traced, lowered and compiled inside
  # the call) within its wall time, in the bucket's job
  for timed in r["sweep_calls_timed"]:
    assert timed["job"] == "bucket-0000"
    assert 0 < timed["backend_compile_s"] <= timed["wall_s"]
    assert timed["trace_s"] > 0 and timed["lower_s"] > 0
  # every sweep's program is written to the cache (each takes far more than
  # compile_cache.MIN_COMPILE_SECONDS): none holds a host callback, which JAX never writes
  # (the ODE's would hold equinox's runtime checks had equinox been imported before the
  # command set EQX_ON_ERROR)
  assert r["cache_writes"] >= r["sweeps"]
  # the programs are the command's own: equinox's checks compiled as the command sets them
  # (EQX_ON_ERROR=nan, no host callback), not as equinox's default ("raise": a callback)
  assert r["eqx_on_error"] == "nan"
  # per job: the sweep's program was compiled by the atlas's one bucket job, and every
  # program is counted once, by the job running (or outside any)
  assert sum(r["programs_by_job"].values()) == r["programs"]
  assert r["programs_by_job"].get("bucket-0000", 0) >= 1
  assert set(r["programs_by_job"]) <= {"bucket-0000", "(outside a job)"}
  assert "| atlas (tiny) | 0 |" in bench.table([r])
  # warm: the same programs asked for again, in a new process, from the cache the cold run
  # filled; every program it wrote is loaded, so XLA compiles less than in the cold run
  w = r["warm"]
  assert w["exit_code"] == 0 and w["programs"] == r["programs"]
  assert w["cache_hits"] >= r["cache_writes"]
  assert w["programs_compiled"] < r["programs_compiled"]
  assert w["seconds_by_phase"]["backend_compile"] < r["seconds_by_phase"]["backend_compile"]
  assert "atlas warm (the cache the cold run filled)" in bench.table([r])


def test_compare_names_what_differs():
  a = [{"workload": "main", "programs": 3, "traces": 2, "programs_by_name": {"jit(f)": 2,
                                                                           "jit(g)": 1}}]
  b = [{"workload": "main", "programs": 4, "traces": 2, "programs_by_name": {"jit(f)": 2,
                                                                           "jit(g)": 2}}]
  assert bench.compare(a, b) == ["main:", "  programs: 3 -> 4", "  programs of jit(g): 1 -> 2"]
  assert bench.compare(a, a) == ["main:", "  no count differs"]
