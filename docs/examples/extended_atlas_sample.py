"""Where the extended reduced ODE fixes Lemma 2's: a named sample of the quick atlas's buckets.

The atlas's ``extended_classifiers`` setting makes its buckets solve the extended reduced ODE
(docs/extended_reduced_dynamics.md) beside Lemma 2's, and its rows then carry
``ext_rel_dev`` (max |s_GD − s_ODE| over the mean final topic score, at the atlas's common flow
time) beside ``ode_rel_dev``. This script reads such an atlas.csv and prints, per classifier and
non-topic words per sentence (m), the share of runs within 2% for each ODE and the shares where
the extension fixes Lemma 2 (Lemma 2 > 2% ≥ extended) and where it does not (both > 2%), and
draws the σ × lr phase diagram of both deviations at m = 20 (2% as a white contour).

Run the sample (FC and TC, the quick atlas's σ × lr grid at the paper's sizes, m = 5, 20, 50)::

  attndyn atlas --quick --out DIR --workers 1 --set 'classifiers=["fc","tc"]' \\
      --set 'axes={n_nontopic = [5, 20, 50]}' --set 'tc_only=[]' \\
      --set 'extended_classifiers=["fc","tc"]'
  python docs/examples/extended_atlas_sample.py DIR [FIGURE.png]
"""
import csv
import math
import sys
from pathlib import Path

from attndyn.analysis import atlas as measures

BOUND = 0.02   # the reproduction's ode_tolerance (Lemma 2's 2%)


def _value(text: str):
  try:
    return float(text)
  except ValueError:
    return text


def read_rows(path: Path) -> list:
  with open(path, newline="") as f:
    return [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def shares(rows: list) -> dict:
  """Shares of the runs with both deviations finite: within 2% for each ODE, fixed, not fixed."""
  both = [r for r in rows if math.isfinite(r["ode_rel_dev"]) and math.isfinite(r["ext_rel_dev"])]
  n = len(both)
  frac = lambda test: sum(map(test, both)) / n if n else math.nan
  return {"runs": n,
          "lemma2_within": frac(lambda r: r["ode_rel_dev"] <= BOUND),
          "extended_within": frac(lambda r: r["ext_rel_dev"] <= BOUND),
          "fixed": frac(lambda r: r["ode_rel_dev"] > BOUND >= r["ext_rel_dev"]),
          "not_fixed": frac(lambda r: r["ode_rel_dev"] > BOUND and r["ext_rel_dev"] > BOUND),
          "broken": frac(lambda r: r["ode_rel_dev"] <= BOUND < r["ext_rel_dev"])}


def main(out: Path = None, figure: Path = None) -> dict:
  """Print the shares (and draw ``figure``); return ``{(classifier, m): shares}``."""
  if out is None:
    raise SystemExit(__doc__)
  rows = [r for r in read_rows(Path(out) / "atlas.csv")
          if isinstance(r.get("ext_rel_dev"), float)]
  found = {}
  print("classifier  m   runs  Lemma 2 ≤ 2%  extended ≤ 2%  fixed  not fixed  broken")
  for c in sorted({r["classifier"] for r in rows}):
    for m in sorted({r["n_nontopic"] for r in rows if r["classifier"] == c}) + ["all"]:
      sel = [r for r in rows if r["classifier"] == c and (m == "all" or r["n_nontopic"] == m)]
      s = found[c, m] = shares(sel)
      print(f"{c:10s} {m!s:>4s} {s['runs']:5d}  {s['lemma2_within']:12.3f}  "
            f"{s['extended_within']:13.3f}  {s['fixed']:5.3f}  {s['not_fixed']:9.3f}  "
            f"{s['broken']:6.3f}")
  if figure is not None:
    panels = []
    for c in sorted({r["classifier"] for r in rows}):
      for measure, label in (("ode_rel_dev", "Lemma 2"), ("ext_rel_dev", "extended")):
        xs, ys, z = measures.slice_grid(rows, "sigma", "lr", measure,
                                        {"classifier": c, "n_nontopic": 20.0})
        panels.append({"xs": xs, "ys": ys, "z": z, "x": "σ", "y": "lr",
                       "label": f"{c.upper()} {label}: max|Δs|/score", "bound": BOUND})
    measures.phase_diagram(panels, figure, title="GD against Lemma 2's and the extended reduced "
                           "ODE, median over seeds, m = 20, M = 5000 (quick atlas grid)")
    print(f"wrote {figure}")
  return found


if __name__ == "__main__":
  main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
