"""Forward+backward throughput of the attention normalisers: ``python -m benchmarks.structured``.

For each length ``n`` (default 20, 50, 200) and each mapping (softmax, sparsemax,
fusedmax, CRF marginals, SparseMAP; :func:`models.normalisers.normalise` with its
default options), times ``jit(grad(Σ_i c_i · normalise(scores)_i))`` on ``rows`` rows of
``N(0, 1)`` scores with the last tenth of each row padded (float32 unless ``--x64``).
SparseMAP runs its active set to convergence on every row, orders of magnitude slower;
``--sparsemap-rows`` gives it a smaller batch (default: ``--rows``); compare per-row times.

Method:
  * compile time: ``jit(f).lower(x).compile()``, timed apart from the runs;
  * steady state: the median of ``--reps`` calls of the compiled function after one
    warm-up call; rows/s is ``rows`` ÷ that median;
  * ``vs softmax``: the median time a row ÷ softmax's at the same ``n``, measured in
    this run.

SparseMAP's cost depends on how many active-set iterations its rows need, so the table
also gives, for it, the mean number of structures in a solution and the fraction of rows
whose optimality check passed.

Prints a markdown table; ``--json PATH`` also writes the rows.
"""
import argparse
import json
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp

MAPPINGS = ("softmax", "sparsemax", "fusedmax", "crf", "sparsemap")


def _inputs(n: int, rows: int, dtype):
  key_s, key_c = jax.random.split(jax.random.PRNGKey(0))
  scores = jax.random.normal(key_s, (rows, n), dtype)
  mask = jnp.broadcast_to(jnp.arange(n) < n - n // 10, (rows, n))
  weights = jax.random.normal(key_c, (rows, n), dtype)   # a fixed downstream cotangent
  return scores, mask, weights


def time_mapping(name: str, n: int, rows: int, reps: int, dtype) -> dict:
  """Compile time and steady-state time of one mapping's forward+backward."""
  from attndyn.models.normalisers import normalise
  scores, mask, weights = _inputs(n, rows, dtype)

  def loss(s):
    return jnp.sum(normalise(name, s, mask) * weights)

  t0 = time.perf_counter()
  compiled = jax.jit(jax.grad(loss)).lower(scores).compile()
  compile_s = time.perf_counter() - t0
  compiled(scores).block_until_ready()                       # warm-up
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    compiled(scores).block_until_ready()
    times.append(time.perf_counter() - t0)
  row = {"mapping": name, "n": n, "rows": rows, "compile_s": compile_s,
         "median_s": statistics.median(times), "rows_per_s": rows / statistics.median(times)}
  if name == "sparsemap":
    from attndyn.models.structured import sparsemap_solve
    res = jax.jit(sparsemap_solve)(scores, mask=mask)
    row["structures_mean"] = float(jnp.mean(jnp.sum(res.weights > 0, axis=-1)))
    row["converged"] = float(jnp.mean(res.converged))
  return row


def table(rows: list) -> str:
  """The markdown table, with each time ÷ softmax's at the same ``n``."""
  base = {r["n"]: r["median_s"] / r["rows"] for r in rows if r["mapping"] == "softmax"}
  lines = ["| n | mapping | rows | compile (s) | fwd+bwd a batch (ms) | rows/s | vs softmax (a row) | note |",
           "|---:|---|---:|---:|---:|---:|---:|---|"]
  for r in rows:
    ratio = r["median_s"] / r["rows"] / base[r["n"]] if r["n"] in base else float("nan")
    note = (f"{r['structures_mean']:.1f} structures, {100 * r['converged']:.0f}% converged"
            if "structures_mean" in r else "")
    lines.append(f"| {r['n']} | {r['mapping']} | {r['rows']} | {r['compile_s']:.2f} "
                 f"| {1e3 * r['median_s']:.3f} | {r['rows_per_s']:,.0f} | {ratio:,.1f}× | {note} |")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.structured", description=__doc__.split("\n")[0])
  parser.add_argument("--lengths", default="20,50,200", help="comma-separated n (default 20,50,200)")
  parser.add_argument("--rows", type=int, default=256, help="rows a batch (default 256)")
  parser.add_argument("--sparsemap-rows", type=int, default=None,
                      help="rows a batch for SparseMAP (default: --rows)")
  parser.add_argument("--reps", type=int, default=5, help="timed calls (default 5)")
  parser.add_argument("--only", default=",".join(MAPPINGS),
                      help=f"comma-separated mappings (default all: {','.join(MAPPINGS)})")
  parser.add_argument("--x64", action="store_true", help="float64 instead of float32")
  parser.add_argument("--json", help="also write the rows to this JSON file")
  args = parser.parse_args(argv)
  if args.sparsemap_rows is None:
    args.sparsemap_rows = args.rows
  lengths = [int(v) for v in args.lengths.split(",")]
  names = [v for v in args.only.split(",") if v]
  unknown = [v for v in names if v not in MAPPINGS]
  if unknown or min(args.rows, args.sparsemap_rows, args.reps) < 1 or min(lengths) < 2:
    parser.error(f"--only takes {', '.join(MAPPINGS)}; --rows, --sparsemap-rows, --reps >= 1; "
                 "lengths >= 2")
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  dtype = jnp.float64 if args.x64 else jnp.float32
  if "softmax" not in names:
    names = ["softmax"] + names                            # the baseline of the ratios
  rows = []
  for n in lengths:
    for name in names:
      n_rows = args.sparsemap_rows if name == "sparsemap" else args.rows
      rows.append(time_mapping(name, n, n_rows, args.reps, dtype))
      print(f"n={n} {name}: {1e3 * rows[-1]['median_s']:.3f} ms", file=sys.stderr, flush=True)
  print(f"{jax.devices()[0].device_kind} ({platform.processor() or platform.machine()}), "
        f"{jnp.dtype(dtype).name}, median of {args.reps}\n")
  print(table(rows))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
