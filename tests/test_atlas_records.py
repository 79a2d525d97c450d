"""The atlas rows kept in docs/atlas/ match the grid they claim to be.

docs/atlas/full/buckets (the full grid, CPU), docs/atlas/h100/full/buckets (its first 23
buckets on a GPU), docs/atlas/quick/buckets and docs/atlas/h100/quick/buckets (the quick grid,
CPU and GPU) hold each bucket's rows as published. A bucket whose rows no longer match the
grid of today's settings (another σ, run length, seed count or discrete value), or that lost
rows, would be a stale table in the docs. Checked here, without running anything.
"""
import json
from pathlib import Path

import pytest

from attndyn import atlas

DOCS = Path(__file__).resolve().parent.parent / "docs" / "atlas"
KEPT = {"full": False, "h100/full": False, "quick": True, "h100/quick": True}   # folder: quick
CASES = [(folder, p.stem) for folder in KEPT
         for p in sorted((DOCS / folder / "buckets").glob("bucket-*.json"))]


@pytest.mark.parametrize("folder,name", CASES)
def test_a_kept_bucket_matches_its_grid(folder, name):
  kept = DOCS / folder / "buckets"
  s = atlas.settings(quick=KEPT[folder])
  grid = atlas.buckets(s)
  index = int(name.split("-")[1])
  bucket = grid[index]
  counts = [atlas.n_configurations(s, b) for b in grid]
  doc = json.loads((kept / f"{name}.json").read_text())
  rows = atlas.read_table(kept / f"{name}.csv")
  assert len(rows) == counts[index] * s.seeds == doc["rows"]
  sigmas, lengths = atlas.continuous(s, bucket)
  assert {(r["sigma"], r["steps"], r["seed"]) for r in rows} == {
      (sig, n, seed) for sig in sigmas for n in lengths for seed in range(s.seeds)}
  for key, value in bucket.values.items():
    assert {r[key] for r in rows} == {value}, key
  first = doc["start_id"]
  assert {r["config"] - first for r in rows} == set(range(counts[index]))
  assert all(isinstance(x, float) and x > 0 for x in doc["seconds"] if x is not None)


def test_a_bucket_key_ignores_the_ode_settings_of_a_bucket_that_solves_no_ode(monkeypatch):
  # A bucket without an ODE (TL, off the fast path) keeps its stored job when the preset's
  # solver changes; a bucket that solves the reduced ODE does not.
  from attndyn import presets
  s = atlas.settings()
  grid = atlas.buckets(s)
  tl = next(b for b in grid if not atlas.solves_ode(s, b) and atlas.fast_path(b))
  fc = next(b for b in grid if atlas.solves_ode(s, b))
  before = atlas._bucket_key(s, tl), atlas._bucket_key(s, fc)
  preset = presets.preset

  def other_solver(name):
    raw = preset(name)
    raw["ode"]["solver"] = "dopri8"
    return raw
  monkeypatch.setattr(presets, "preset", other_solver)
  assert atlas._bucket_key(s, tl) == before[0]
  assert atlas._bucket_key(s, fc) != before[1]
