"""Attn-TL's ODEs by solver: ``python -m benchmarks.tl_solver --out DIR [--seeds 3] [--ode reduced]``.

Runs ``attndyn run --preset lu2021-text-tl`` (the paper's 5000 epochs of lr 0.1) once per
solver (``--solvers``, default the preset's former ``tsit5`` and its ``bosh3``), with only the
chosen ODE beside GD, in this one process, and prints per solver the seconds of each stage
(from ``run_info.json``), the ODE stage's ratio to the first solver's, and the largest
difference of the ODE's topic scores from the first solver's, relative to GD's mean final
topic score (the scale on which the synthetic reproduction judges GD against the ODE at 2%).
TL's ReLU kinks cut the adaptive steps short wherever a hidden unit switches, so a cheaper
low-order step can win there. Run it on otherwise idle cores. Writes ``DIR/tl_solver.json``.

``benchmarks.ode_check --solver S`` also takes a solver, but it vmaps its own seeds through
the dynamics functions with its own settings; this one times the path the main job and
``attndyn run`` take (the preset's ``dtmin`` and ``max_steps``, TL's seeds solved one after
another, the run's own records), which is what the preset's choice of solver is for.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.tl_solver",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="a new or empty directory")
  ap.add_argument("--seeds", type=int, default=3)
  ap.add_argument("--ode", default="reduced", choices=("reduced", "gradient_flow"))
  ap.add_argument("--solvers", default="tsit5,bosh3")
  args = ap.parse_args(argv)
  from attndyn import cli, compile_cache
  os.environ[compile_cache.ENV] = "off"   # time the compiles too, as a fresh machine would
  out = Path(args.out)
  rows, first = [], None
  for solver in args.solvers.split(","):
    run_dir = out / solver
    code = cli.main(["run", "--preset", "lu2021-text-tl", "--out", str(run_dir), "--no-progress",
                     "--set", f"sweep.seeds={args.seeds}", "--set", f"ode.kind={args.ode}",
                     "--set", f"ode.solver={solver}"])
    if code:
      return code
    seconds = json.loads((run_dir / "run_info.json").read_text())["seconds"]
    with np.load(run_dir / "trajectories.npz") as z:
      score, gd = z[f"{args.ode}/score"], z["gd/score"]
    scale = np.abs(gd[:, -1]).mean()
    first = score if first is None else first
    rows.append({"solver": solver, "seconds": seconds,
                 "max_score_diff_rel": float(np.abs(score - first).max() / scale),
                 "ode_rel_dev": float(np.abs(gd - score).max() / scale)})
  base = rows[0]["seconds"][args.ode]
  for r in rows:
    r["ode_ratio"] = r["seconds"][args.ode] / base
    first_name = rows[0]["solver"]
    print(f"{r['solver']:8s} {args.ode} {r['seconds'][args.ode]:7.1f} s ({r['ode_ratio']:.2f}× "
          f"{first_name})  GD {r['seconds']['gd']:6.1f} s  max |Δs| vs {first_name}: "
          f"{r['max_score_diff_rel']:.2g} of the final score  max |s_GD − s_ODE|: "
          f"{r['ode_rel_dev']:.4f}")
  (out / "tl_solver.json").write_text(json.dumps({"seeds": args.seeds, "ode": args.ode,
                                                  "rows": rows}, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
