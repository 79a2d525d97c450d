"""Sparsemax and 1.5-entmax thresholds by ranks against by sorting, per row length.

``python -m benchmarks.normalisers [--rows 800] [--batch 4] [--lengths 6,11,21,32,51,101]``

Times one jitted value-and-gradient of ``Σ w · normaliser(scores)`` over ``[batch, rows, L]``
scores (an autodiff GD step's normaliser: the atlas's sparsemax and entmax buckets run 800
sentences of 6–101 words) with the threshold found by ranks
(:func:`models.normalisers._sparsemax_threshold_pairwise`, all pairs compared) and by sorting
(``_sparsemax_threshold_sorted``), best of 5 calls each, in one process, and prints sorted /
ranks per length: above 1 the ranks are faster. :data:`models.normalisers.PAIRWISE_MAX_LEN`
is where they stop being used. Run it on idle cores.
"""
import argparse
from unittest import mock

import jax
import jax.numpy as jnp

from benchmarks.gather_ceiling import time_form
from attndyn.models import normalisers

PATHS = {"sparsemax": ("_sparsemax_threshold_pairwise", "_sparsemax_threshold_sorted"),
         "entmax15": ("_entmax15_threshold_pairwise", "_entmax15_threshold_sorted")}
PUBLIC = {"sparsemax": ("sparsemax_threshold", normalisers.sparsemax),
          "entmax15": ("_entmax15_threshold", normalisers.entmax15)}


def measure(rows: int, batch: int, lengths) -> list:
  out = []
  for length in lengths:
    z = jax.random.normal(jax.random.PRNGKey(0), (batch, rows, length))
    w = jax.random.normal(jax.random.PRNGKey(1), z.shape)
    mask = jnp.ones(z.shape, bool)
    for name, (ranks, sorting) in PATHS.items():
      hook, fn = PUBLIC[name]
      seconds = {}
      for path in (ranks, sorting):
        with mock.patch.object(normalisers, hook, getattr(normalisers, path)):
          step = jax.value_and_grad(lambda z: jnp.sum(fn(z, mask) * w))
          seconds[path] = time_form(step, z)
      out.append({"normaliser": name, "length": length, "ranks_s": seconds[ranks],
                  "sorting_s": seconds[sorting], "ratio": seconds[sorting] / seconds[ranks]})
      r = out[-1]
      print(f"{name:9s} L={length:4d}  ranks {r['ranks_s'] * 1e3:8.2f} ms  sorting "
            f"{r['sorting_s'] * 1e3:8.2f} ms  sorting / ranks {r['ratio']:.2f}", flush=True)
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.normalisers",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--rows", type=int, default=800)
  ap.add_argument("--batch", type=int, default=4)
  ap.add_argument("--lengths", default="6,11,21,32,51,101")
  args = ap.parse_args(argv)
  measure(args.rows, args.batch, [int(x) for x in args.lengths.split(",")])
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
