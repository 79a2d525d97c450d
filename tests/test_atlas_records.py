"""The full atlas's rows kept in docs/atlas/full/buckets match the grid they claim to be.

Each record there is read back by `attndyn atlas --resume` in place of computing its bucket,
so a record whose settings no longer match the grid (its digest), or that lost rows, would
put stale or missing rows in the next full atlas. Checked here, without running anything.
"""
import json
from pathlib import Path

import pytest

from attndyn import atlas

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "atlas" / "full" / atlas.RECORDS
NAMES = sorted(p.stem for p in RECORDS.glob("bucket-*.json"))


@pytest.mark.parametrize("name", NAMES)
def test_a_kept_record_matches_the_full_grid(name):
  s = atlas.settings()
  grid = atlas.buckets(s)
  index = int(name.split("-")[1])
  bucket = grid[index]
  counts = [atlas.n_configurations(s, b) for b in grid]
  doc = json.loads((RECORDS / f"{name}.json").read_text())
  assert doc["digest"] == atlas.record_digest(s, bucket), \
      f"{name} was made with other settings than the full grid's: recompute it"
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
