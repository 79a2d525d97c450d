"""Sparsemax and 1.5-entmax thresholds by ranks against by sorting, per row length.

``python -m benchmarks.normalisers [--rows 800] [--batch 4] [--lengths 6,11,21,32,51,101]
[--fast-path [--seeds 16] [--steps 1000]]``

Times one jitted value-and-gradient of ``Σ w · normaliser(scores)`` over ``[batch, rows, L]``
scores (an autodiff GD step's normaliser: the atlas's sparsemax and entmax buckets run 800
sentences of 6–101 words) with the threshold found by ranks
(:func:`models.normalisers._sparsemax_threshold_pairwise`, all pairs compared) and by sorting
(``_sparsemax_threshold_sorted``), best of 5 calls each, in one process, and prints sorted /
ranks per length: above 1 the ranks are faster. :data:`models.normalisers.PAIRWISE_MAX_LEN`
is where they stop being used. Run it on idle cores.

``--fast-path [--seeds 16] [--steps 1000]``: instead, the fast path's sparsemax GD
(:mod:`dynamics.fast_lu.sparse`, TC on the text preset) with its threshold by Michelot's
iteration (``sparsemax_threshold_leading``, what it uses) against by the model's ranks, and
ranks / Michelot (above 1 the iteration is faster).
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


def fast_path(seeds: int, steps: int) -> dict:
  """The fast path's sparsemax GD (:mod:`dynamics.fast_lu.sparse`) on the text preset (TC,
  ``seeds`` seeds, ``steps`` steps) with its threshold by Michelot's iteration against by the
  model's ranks (the same function over the leading axis), one after the other, best of 3."""
  import dataclasses
  import time
  import numpy as np
  from attndyn import dynamics
  from attndyn.dynamics.fast_lu import sparse
  from benchmarks.workload import make_workload

  w = make_workload(seeds)
  model_cfg = dataclasses.replace(w.model_cfg, normaliser="sparsemax")
  cfg = dynamics.TrainConfig(lr=w.lr, steps=steps, record_every=steps)
  lr = jnp.full((seeds,), w.lr, jnp.float32)

  def ranks(scores, mask):   # the model's threshold, over the leading axis
    tau, _ = normalisers.sparsemax_threshold(jnp.moveaxis(scores, 0, -1),
                                             jnp.moveaxis(mask, 0, -1))
    return tau

  seconds = {}
  for name, threshold in (("michelot", sparse.sparsemax_threshold_leading), ("ranks", ranks)):
    with mock.patch.object(sparse, "sparsemax_threshold_leading", threshold):
      train = jax.jit(dynamics.make_fast_sweep_train(model_cfg, w.data.train,
                                                     lambda p, p0: {}, cfg))
      jax.block_until_ready(train(w.params0, lr))
      runs = []
      for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(train(w.params0, lr))
        runs.append(time.perf_counter() - start)
      seconds[name] = float(np.min(runs))
  out = {"seeds": seeds, "steps": steps, "michelot_s": seconds["michelot"],
         "ranks_s": seconds["ranks"], "ratio": seconds["ranks"] / seconds["michelot"]}
  print(f"fast-path sparsemax GD (TC, {seeds} seeds, {steps} steps): Michelot "
        f"{out['michelot_s']:.3f} s, ranks {out['ranks_s']:.3f} s, ranks / Michelot "
        f"{out['ratio']:.2f}", flush=True)
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.normalisers",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--rows", type=int, default=800)
  ap.add_argument("--batch", type=int, default=4)
  ap.add_argument("--lengths", default="6,11,21,32,51,101")
  ap.add_argument("--fast-path", action="store_true",
                  help="instead, the fast path's sparsemax GD with its threshold by Michelot's "
                       "iteration against by ranks")
  ap.add_argument("--seeds", type=int, default=16, help="--fast-path: seeds (one tile)")
  ap.add_argument("--steps", type=int, default=1000, help="--fast-path: GD steps")
  args = ap.parse_args(argv)
  if args.fast_path:
    fast_path(args.seeds, args.steps)
    return 0
  measure(args.rows, args.batch, [int(x) for x in args.lengths.split(",")])
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
