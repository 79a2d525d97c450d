"""The atlas rows kept in docs/atlas/ match the grid they claim to be.

docs/atlas/full/buckets (the full grid, CPU), docs/atlas/h100/full/buckets (its first 23
buckets on a GPU), docs/atlas/quick/buckets and docs/atlas/h100/quick/buckets (the quick grid,
CPU and GPU).

Each record there is read back by `attndyn atlas --resume` in place of computing its bucket,
so a record whose settings no longer match the grid (its digest), or that lost rows, would
put stale or missing rows in the next full atlas. Checked here, without running anything.
"""
import json
from pathlib import Path

import pytest

from attndyn import atlas

DOCS = Path(__file__).resolve().parent.parent / "docs" / "atlas"
KEPT = {"full": False, "h100/full": False, "quick": True, "h100/quick": True}   # folder: quick
CASES = [(folder, p.stem) for folder in KEPT
         for p in sorted((DOCS / folder / atlas.RECORDS).glob("bucket-*.json"))]


@pytest.mark.parametrize("folder,name", CASES)
def test_a_kept_record_matches_its_grid(folder, name):
  RECORDS = DOCS / folder / atlas.RECORDS
  s = atlas.settings(quick=KEPT[folder])
  grid = atlas.buckets(s)
  index = int(name.split("-")[1])
  bucket = grid[index]
  counts = [atlas.n_configurations(s, b) for b in grid]
  doc = json.loads((RECORDS / f"{name}.json").read_text())
  assert doc["digest"] == atlas.record_digest(s, bucket), \
      f"{folder}/{name} was made with other settings than its grid's: recompute it"
  record = atlas.read_record(RECORDS.parent, name, doc["digest"],
                             start_id=sum(counts[:index]), warn=False)
  assert record is not None and not record.curves       # the rows alone are kept
  assert len(record.rows) == counts[index] * s["seeds"] == doc["rows"]
  sigmas, lengths = atlas.continuous(s, bucket)
  assert {(r["sigma"], r["steps"], r["seed"]) for r in record.rows} == {
      (sig, n, seed) for sig in sigmas for n in lengths for seed in range(s["seeds"])}
  for key, value in bucket.values.items():
    assert {r[key] for r in record.rows} == {value}, key
  assert {r["config"] for r in record.rows} == set(range(sum(counts[:index]),
                                                         sum(counts[:index + 1])))
  assert all(isinstance(x, float) and x > 0 for x in doc["seconds"] if x is not None)


def test_the_digest_ignores_the_ode_settings_of_a_bucket_that_solves_no_ode(monkeypatch):
  # A bucket without an ODE (TL, off the fast path) keeps its record when the preset's solver
  # changes; a bucket that solves the reduced ODE does not.
  from attndyn import presets
  s = atlas.settings()
  grid = atlas.buckets(s)
  tl = next(b for b in grid if not atlas.solves_ode(s, b) and atlas.fast(b))
  fc = next(b for b in grid if atlas.solves_ode(s, b))
  before = atlas.record_digest(s, tl), atlas.record_digest(s, fc)
  preset = presets.preset

  def other_solver(name):
    raw = preset(name)
    raw["ode"]["solver"] = "dopri8"
    return raw
  monkeypatch.setattr(presets, "preset", other_solver)
  assert atlas.record_digest(s, tl) == before[0]
  assert atlas.record_digest(s, fc) != before[1]
