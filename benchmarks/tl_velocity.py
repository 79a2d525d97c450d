"""Attn-TL's reduced-ODE velocity in hidden space against autodiff, and the float64 solve it serves.

``python -m benchmarks.tl_velocity [--seeds 3] [--steps 1000] [--out FILE.json]``

Lemma 2's reduced ODE for TL (:func:`dynamics.reduced_ode.reduced_velocity`) goes through
:func:`dynamics.reduced_ode.relu_velocity`, written out in hidden space, where
:func:`dynamics.reduced_ode.autodiff_velocity` builds ``[d, n]`` contexts and their gradients
at every evaluation. On the ``lu2021-text-tl`` preset (800 sentences, d = 15, 10 hidden units)
this prints, in one process:

* the microseconds of one velocity evaluation of ``--seeds`` seeds (vmapped, as the solves run
  them), best of 5 runs of 100 chained evaluations, in float32 and float64, for both forms,
  and autodiff / hidden space;
* the seconds of the synthetic reproduction's float64 Theorem-1 solve (rtol 1e-10, atol
  1e-12, the preset's dtmin) of one seed over ``--steps`` steps with each form (compiling
  included, both compiled alike), their ratio, the solver's step counts and ``Q_t``'s drift
  with each (the forms agree to float rounding, but TL's kinks make the step sequence
  sensitive to it, so the drifts agree to a few digits, not all).

Run it on otherwise idle cores; the numbers are this machine's.
"""
import argparse
import json
import time
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

FORMS = ("autodiff_velocity", "relu_velocity")


def _preset(**changes):
  from attndyn.reproduce import engine
  from attndyn.reproduce.lu2021 import common
  return engine.validate(common.text_run("tl", changes), "benchmark")


def time_evaluations(seeds: int, precision: str, repeats: int = 5, chain: int = 100) -> dict:
  """Microseconds per evaluation of each form for ``seeds`` vmapped seeds."""
  from attndyn import models
  from attndyn import tasks
  from attndyn.dynamics import reduced_ode as ro
  from attndyn import pipeline
  cfg = _preset(precision=precision)
  with pipeline.precision_scope(precision):
    dtype = jnp.dtype(precision)
    data = tasks.make_topic_dataset(jax.random.PRNGKey(0), cfg.task)
    words = np.arange(data.n_topic_words)
    params0 = jax.vmap(lambda k: models.lu.init(k, cfg.model, dtype))(
        jax.vmap(jax.random.PRNGKey)(jnp.arange(seeds)))
    consts = jax.vmap(ro.nontopic_constants, (0, None, None, None))(
        params0, data.train, data.train_topic_word, words)
    state = ro.ReducedState(params0["embeddings"][:, words],
                            jax.vmap(models.lu.word_scores)(params0)[:, words],
                            params0["classifier"])
    trainable = cfg.model.trainable()
    out = {}
    for form in FORMS:
      velocity = getattr(ro, form)

      def one(y, c, p0):
        q = p0["query"]
        return velocity(y, c, y.classifier, cfg.train.lr, q @ q, form="lemma2",
                        trainable=trainable)

      def chained(y):
        step = lambda _, y: jax.tree.map(lambda a, b: a + 1e-3 * b, y,
                                         jax.vmap(one)(y, consts, params0))
        return jax.lax.fori_loop(0, chain, step, y)

      f = jax.jit(chained)
      jax.block_until_ready(f(state))
      best = float("inf")
      for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(state))
        best = min(best, time.perf_counter() - t0)
      out[form] = best / chain * 1e6
  return out


def time_solve(steps: int) -> dict:
  """Seconds, step counts and Q_t's drift of the float64 invariant solve with each form."""
  from attndyn.analysis.theorem1 import invariant_drift
  from attndyn import pipeline
  from attndyn.reproduce.lu2021 import synthetic
  from attndyn.dynamics import reduced_ode as ro
  inv = synthetic.FULL.invariant
  cfg = _preset(precision="float64", train={"steps": steps, "record_every": max(1, steps // 100)},
                sweep={"seeds": 1}, ode={"kind": "reduced", "rtol": inv.rtol,
                                         "atol": inv.atol, "solver": inv.solver})
  out = {}
  for form in FORMS:
    with mock.patch.object(ro, "relu_velocity", getattr(ro, form)), \
        pipeline.precision_scope("float64"):
      t0 = time.perf_counter()
      result = pipeline.run(cfg, progress=False, gd=False)
      seconds = time.perf_counter() - t0
    ode = result.odes["reduced"]
    o = ode.observables
    drift = np.asarray(invariant_drift(np.asarray(o["invariant"]), np.asarray(o["score"])))
    out[form] = {"seconds": seconds, "steps": int(np.asarray(ode.ode.num_steps)[0]),
                 "accepted": int(np.asarray(ode.ode.num_accepted_steps)[0]),
                 "drift": float(drift.max())}
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.tl_velocity",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--seeds", type=int, default=3)
  ap.add_argument("--steps", type=int, default=1000, help="steps of the float64 solve")
  ap.add_argument("--out", default=None, help="also write the numbers to this JSON file")
  args = ap.parse_args(argv)
  report = {"seeds": args.seeds, "evaluations_us": {}}
  for precision in ("float32", "float64"):
    us = time_evaluations(args.seeds, precision)
    report["evaluations_us"][precision] = us
    print(f"{precision}: one velocity evaluation of {args.seeds} seeds: autodiff "
          f"{us['autodiff_velocity']:.1f} µs, hidden space {us['relu_velocity']:.1f} µs, "
          f"autodiff / hidden space {us['autodiff_velocity'] / us['relu_velocity']:.2f}",
          flush=True)
  solve = time_solve(args.steps)
  report["solve"] = solve
  a, h = solve["autodiff_velocity"], solve["relu_velocity"]
  print(f"float64 Theorem-1 solve, 1 seed, {args.steps} steps: autodiff {a['seconds']:.1f} s "
        f"({a['steps']} solver steps), hidden space {h['seconds']:.1f} s ({h['steps']} solver "
        f"steps), autodiff / hidden space {a['seconds'] / h['seconds']:.2f}; Q_t drift "
        f"{a['drift']:.3g} and {h['drift']:.3g}")
  if args.out:
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
