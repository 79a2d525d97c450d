"""What recording the topic observables costs on the fast path and in the reduced ODE's sweep.

``python -m benchmarks.record --out FILE.json [--seeds 16] [--steps 2000] [--record-every 25]
[--classifier tc tl] [--tiny]``

:func:`analysis.topic_observables`' record can be read two ways: per seed on ordinary
parameters (``jax.vmap(record)``, what any record gets) or through ``record.seeds_last`` from
per-word rows, all seeds at once (:class:`dynamics.fast_lu.WordRows`). On the text preset of
:mod:`benchmarks.workload` (the atlas's base bucket) this times, in one process, each program
compiled alike and run twice (the faster run kept), with three records: ``per_seed`` (the
record without its ``seeds_last``), ``seeds_last`` and ``nothing`` (a record reading one
number, the floor):

* ``gd``: :func:`dynamics.fast_lu.make_fast_sweep_train`, ``--seeds`` seeds, ``--steps``
  steps recorded every ``--record-every`` (the quick atlas's);
* ``reduced_ode`` (FC/TC only): :func:`dynamics.reduced_sen_ode_sweep` of the same seeds,
  saved at ``steps / record_every + 1`` times, at the atlas's tolerances (``ode_rtol``, the
  ``[ode]`` section's ``atol``).

For each it reports compile and run seconds per record, ``per_seed / seeds_last`` (above 1:
the seeds-last form is faster) and each record's share of the run over ``nothing``. Run it on
otherwise idle cores; the numbers are this machine's.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import atomic


def _records(data):
  from attndyn import analysis, models
  record = analysis.topic_observables(models.lu.apply, data)
  return {"per_seed": lambda params, params0: record(params, params0),   # no seeds_last
          "seeds_last": record,
          "nothing": lambda params, params0: {"score": params["keys"][0, 0]}}


def _time(fn, args, options) -> dict:
  from benchmarks.xla_options import _compile
  compile_s, exe = _compile(fn, args, options)
  runs = []
  for _ in range(2):
    t0 = time.perf_counter()
    jax.block_until_ready(exe(*args))
    runs.append(time.perf_counter() - t0)
  return {"compile_s": compile_s, "run_s": min(runs)}


def measure(classifier: str, seeds: int, steps: int, record_every: int, tiny: bool) -> list:
  from attndyn import atlas, dynamics
  from attndyn.config import ODEConfig
  from attndyn.dynamics import fast_lu, reduced_ode
  from benchmarks.workload import make_workload
  w = make_workload(seeds, classifier=classifier, **(dict(vocab_size=60, n_train=40) if tiny
                                                      else {}))
  cfg = dynamics.TrainConfig(lr=w.lr, steps=steps, record_every=record_every)
  ts = jnp.asarray(cfg.record_steps(), jnp.float32)
  programs = {"gd": lambda record: (lambda p: fast_lu.make_fast_sweep_train(
      w.model_cfg, w.data.train, record, cfg)(p), fast_lu.COMPILER_OPTIONS)}
  if classifier != "tl":
    programs["reduced_ode"] = lambda record: (lambda p: dynamics.reduced_sen_ode_sweep(
        p, w.data.train, w.data.train_topic_word, np.arange(w.task.n_topic_words), record,
        lr=w.lr, ts=ts, trainable=w.model_cfg.trainable(), rtol=atlas.QUICK.ode_rtol,
        atol=ODEConfig().atol), reduced_ode.LINEAR_COMPILER_OPTIONS)
  rows = []
  for program, make in programs.items():
    timed = {}
    for name, record in _records(w.data).items():
      fn, options = make(record)
      timed[name] = _time(fn, (w.params0,), options)
    row = {"program": program, "classifier": classifier, "seeds": seeds, "steps": steps,
           "records": int(ts.shape[0]), **{k: v for k, v in timed.items()}}
    row["per_seed_over_seeds_last"] = timed["per_seed"]["run_s"] / timed["seeds_last"]["run_s"]
    for name in ("per_seed", "seeds_last"):
      row[f"{name}_share_of_run"] = 1 - timed["nothing"]["run_s"] / timed[name]["run_s"]
    rows.append(row)
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.record",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--seeds", type=int, default=16)
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--record-every", type=int, default=25)
  parser.add_argument("--classifier", nargs="+", default=["tc", "tl"],
                      choices=["fc", "tc", "tl"])
  parser.add_argument("--tiny", action="store_true",
                      help="a 60-word, 40-sentence task (for the tests)")
  args = parser.parse_args(argv)
  out = Path(args.out)
  if not out.parent.is_dir():
    print(f"python -m benchmarks.record: --out {out}: its folder does not exist (allowed: a "
          f"file in an existing folder)", file=sys.stderr)
    return 2
  rows = [row for c in args.classifier
          for row in measure(c, args.seeds, args.steps, args.record_every, args.tiny)]
  for r in rows:
    print(f"{r['program']:12s} {r['classifier']}: run per seed {r['per_seed']['run_s']:.3f} s, "
          f"seeds last {r['seeds_last']['run_s']:.3f} s, nothing {r['nothing']['run_s']:.3f} s "
          f"(per seed / seeds last {r['per_seed_over_seeds_last']:.2f}; the record's share "
          f"{r['per_seed_share_of_run']:.2f} -> {r['seeds_last_share_of_run']:.2f})")
  atomic.write_text(out, json.dumps({"rows": rows, "device": str(jax.devices()[0])}, indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
