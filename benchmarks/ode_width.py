"""The reduced ODE on wide batches: what stepping every point together costs.

``python -m benchmarks.ode_width --out FILE.json [--seeds 4 16] [--classifier tc] [--groups 2 4]
[--tiny]``

The atlas solves Lemma 2's reduced ODE for a chunk of points (σ × seeds, in flow time, the
learning rates folded out) as one system (:func:`dynamics.reduced_sen_ode_sweep`): one
adaptive step size for all, set by the most demanding point at each time. ``vmap`` of the
per-point :func:`dynamics.reduced_sen_ode` has a step size per point but, as a batched
``while_loop``, steps every point until the slowest is done. Both therefore pay for the
slowest point; this benchmark counts by how much, on the atlas's base bucket (the text
preset of :mod:`benchmarks.workload`, which is :data:`attndyn.atlas.BASE`) and its σ grid
(:data:`attndyn.atlas.QUICK`'s 10 values from 1e-4 to 1), saved at 81 flow times up to
:data:`attndyn.atlas.FULL`'s τ, with the atlas's tolerances (``ode_rtol``, the ``[ode]``
defaults otherwise).

For each width P = 10 σ × seeds it reports, in point·steps (solver steps, accepted and
rejected, times the points they advance):

* ``alone``: Σ_i s_i, each point's steps solved on its own (``vmap``'s per-point counts):
  the work no batching scheme can go below;
* ``vmap``: P · max_i s_i, what the batched loop iterates (every point, every iteration);
* ``shared``: P · S, the one shared solve's S steps;
* ``shared_by_steps_G``: the points sorted by ``s_i`` into G equal groups, each group one
  shared solve: Σ_g |g| · S_g (grouping points by stiffness);

each also as a multiple of ``alone``, and the wall seconds of the ``vmap`` and ``shared``
solves, compiled apart (compile seconds reported on their own). The groups' observables are
compared with the one shared solve's (largest relative difference of the topic-word scores
over all times): a grouping changes each point's steps, so its result moves within the
tolerance. Timings taken while other work shares the machine are not comparable.
"""
import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import atomic

N_TIMES = 81


def _setup(seeds: int, classifier: str, tiny: bool):
  from attndyn import atlas, models
  from attndyn.config import ODEConfig
  from benchmarks.workload import make_workload
  sizes = dict(vocab_size=200, n_train=60) if tiny else {}
  w = make_workload(1, classifier=classifier, **sizes)
  sigmas = np.asarray(atlas.QUICK.sigma[::3] if tiny else atlas.QUICK.sigma, np.float32)
  sig = np.repeat(sigmas, seeds)
  keys = jax.random.split(jax.random.PRNGKey(1), sig.size)

  def init(key, sigma):
    cfg = dataclasses.replace(w.model_cfg, embed_std=sigma)
    return models.lu.init(key, cfg, jnp.float32)

  params0 = jax.jit(jax.vmap(init))(keys, jnp.asarray(sig))
  tau = 5.0 if tiny else float(atlas.FULL.tau)
  ode = ODEConfig(kind="reduced")
  kw = dict(lr=1.0, ts=np.linspace(0.0, tau, N_TIMES).astype(np.float32),
            trainable=w.model_cfg.trainable(), solver=ode.solver, rtol=atlas.FULL.ode_rtol,
            atol=ode.atol, max_steps=ode.max_steps)
  n_topic = w.task.n_topic_words

  def record(params, params0):
    del params0
    return {"score": models.word_scores({"query": params["query"],
                                         "keys": params["keys"][:n_topic]})}

  return w, sig, params0, jnp.arange(n_topic), record, kw


def _timed(fn, params0):
  """``(outputs, compile seconds, run seconds)``, compiled ahead of the timed call."""
  t0 = time.perf_counter()
  compiled = jax.jit(fn).lower(params0).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  out = jax.block_until_ready(compiled(params0))
  return out, compile_s, time.perf_counter() - t0


def measure(seeds: int, classifier: str, groups, tiny: bool) -> dict:
  from attndyn import dynamics
  w, sig, params0, topic_words, record, kw = _setup(seeds, classifier, tiny)
  data = w.data

  def shared(p):
    return dynamics.reduced_sen_ode_sweep(p, data.train, data.train_topic_word, topic_words,
                                          record, **kw)

  def vmapped(p):
    return jax.vmap(lambda q: dynamics.reduced_sen_ode(
        q, data.train, data.train_topic_word, topic_words, record, **kw))(p)

  alone, vmap_compile, vmap_s = _timed(vmapped, params0)
  together, shared_compile, shared_s = _timed(shared, params0)
  steps = np.asarray(alone.ode.num_steps)
  n = steps.size
  cost = {"alone": int(steps.sum()), "vmap": int(n * steps.max()),
          "shared": int(n * np.asarray(together.ode.num_steps)[0])}
  reference = np.asarray(together.observables["score"])
  scale = max(float(np.max(np.abs(reference))), 1e-30)
  moved = {}
  order = np.argsort(steps, kind="stable")
  for g in groups:
    total, out = 0, np.empty_like(reference)
    for part in np.array_split(order, g):
      sub = jax.tree.map(lambda x: x[part], params0)
      got = jax.jit(shared)(sub)
      total += part.size * int(np.asarray(got.ode.num_steps)[0])
      out[part] = np.asarray(got.observables["score"])
    cost[f"shared_by_steps_{g}"] = total
    moved[f"shared_by_steps_{g}"] = float(np.max(np.abs(out - reference)) / scale)
  by_sigma = {f"{s:.3g}": [int(steps[sig == s].min()), int(steps[sig == s].max())]
              for s in np.unique(sig)}
  return {"points": n, "seeds": seeds, "classifier": classifier,
          "point_steps": cost,
          "over_alone": {k: v / cost["alone"] for k, v in cost.items()},
          "steps_alone": {"min": int(steps.min()), "median": float(np.median(steps)),
                          "max": int(steps.max())},
          "steps_alone_by_sigma": by_sigma,
          "shared_steps": int(np.asarray(together.ode.num_steps)[0]),
          "largest_relative_score_change_from_shared": moved,
          "failed": {"vmap": int(np.sum(np.asarray(alone.failed_at) >= 0)),
                     "shared": int(np.sum(np.asarray(together.failed_at) >= 0))},
          "seconds": {"vmap_compile": vmap_compile, "vmap_run": vmap_s,
                      "shared_compile": shared_compile, "shared_run": shared_s}}


def table(rows) -> str:
  lines = ["| P | alone (point·steps) | vmap × alone | shared × alone | grouped × alone | "
           "vmap run s | shared run s |", "|---|---|---|---|---|---|---|"]
  for r in rows:
    o = r["over_alone"]
    grouped = ", ".join(f"G={k.rsplit('_', 1)[1]}: {v:.2f}" for k, v in o.items()
                        if k.startswith("shared_by_steps_"))
    lines.append(f"| {r['points']} | {r['point_steps']['alone']:,} | {o['vmap']:.2f} | "
                 f"{o['shared']:.2f} | {grouped} | {r['seconds']['vmap_run']:.2f} | "
                 f"{r['seconds']['shared_run']:.2f} |")
  return "\n".join(lines)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.ode_width", description=__doc__.split(
      "\n")[0])
  ap.add_argument("--out", required=True, help="the JSON file to write")
  ap.add_argument("--seeds", type=int, nargs="+", default=[4, 16],
                  help="seeds per σ: widths 10 σ × seeds (default 4 16)")
  ap.add_argument("--classifier", default="tc", choices=["fc", "tc"])
  ap.add_argument("--groups", type=int, nargs="+", default=[2, 4])
  ap.add_argument("--tiny", action="store_true", help="a tiny task (a test's)")
  args = ap.parse_args(argv)
  out = Path(args.out)
  if not out.parent.is_dir():
    print(f"python -m benchmarks.ode_width: --out {out}: its folder does not exist; "
          "give a file in an existing folder", file=sys.stderr)
    return 2
  rows = []
  for seeds in args.seeds:
    rows.append(measure(seeds, args.classifier, args.groups, args.tiny))
    atomic.write_text(out, json.dumps({"rows": rows, "backend": jax.default_backend(),
                                       "tiny": args.tiny}, indent=1) + "\n")
  print(table(rows))
  for r in rows:
    print(f"P={r['points']}: steps alone by σ (min, max) {r['steps_alone_by_sigma']}; "
          f"shared {r['shared_steps']}; groups moved the scores by "
          f"{r['largest_relative_score_change_from_shared']} of their largest")
  return 0


if __name__ == "__main__":
  sys.exit(main())
