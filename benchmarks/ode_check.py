"""GD vs the reduced SEN ODE (Lemma 2) vs the gradient flow at the paper's text preset.

Lu et al. (2021), Section 5.1: J=4 topics × 2 topic words, M=5000, m=20, 800/200
sentences, d=d'=15, embedding std 1e-3 (σ²/d = 1e-6), unit-norm fixed query,
full-batch GD with lr 0.1 for 5000 epochs, recorded every 50. Seeds vary the
initialisation on one shared dataset and run vmapped through
``dynamics.run_sweep``.

Reports, per solver: wall time of the ``run_sweep`` call (compile + run), and
separately the AOT lower+compile time and one steady-state call of the same
vmapped function; solver steps; failures;
and the deviations ``|s_GD − s_ODE|`` of the topic scores (at the last recorded
step and the worst over time), plus Theorem 1's ``Q_t`` drift along each run.

Usage:
  python -m benchmarks.ode_check --classifier tc [--x64] [--seeds 5]
      [--solvers gd,lemma2,exact,flow] [--rtol 1e-8 --atol 1e-10]
"""
import argparse
import json
import time

import jax


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--classifier", default="tc", choices=("fc", "tc", "tl"))
  ap.add_argument("--x64", action="store_true", help="float64 (default float32)")
  ap.add_argument("--seeds", type=int, default=5)
  ap.add_argument("--solvers", default="gd,lemma2,exact,flow")
  ap.add_argument("--solver", default="tsit5", help="diffrax solver name for the ODEs")
  ap.add_argument("--rtol", type=float, default=None, help="reduced-ODE rtol (default: module's)")
  ap.add_argument("--atol", type=float, default=None, help="reduced-ODE atol (default: module's)")
  ap.add_argument("--flow-rtol", type=float, default=None)
  ap.add_argument("--flow-atol", type=float, default=None)
  ap.add_argument("--dtmin", type=float, default=None)
  ap.add_argument("--steps", type=int, default=5000)
  ap.add_argument("--record-every", type=int, default=50)
  ap.add_argument("--lr", type=float, default=0.1)
  ap.add_argument("--json", default=None, help="write the summary here")
  args = ap.parse_args()
  jax.config.update("jax_enable_x64", args.x64)

  import jax.numpy as jnp
  import numpy as np

  from attndyn import dynamics
  from attndyn import models
  from attndyn import tasks
  from attndyn.models import lu

  dtype = jnp.float64 if args.x64 else jnp.float32
  task = tasks.TopicTaskConfig()
  data = tasks.make_topic_dataset(jax.random.PRNGKey(0), task)
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=15,
                             key_dim=15, classifier=args.classifier, embed_std=1e-3,
                             query_norm=1.0)
  n_topic = task.n_topic_words
  trainable = cfg.trainable()
  loss = models.make_loss(lu.apply)
  train_cfg = dynamics.TrainConfig(optimizer="gd", lr=args.lr, steps=args.steps,
                                   record_every=args.record_every)
  ts = train_cfg.record_steps()
  keys = jax.random.split(jax.random.PRNGKey(1), args.seeds)
  params0 = jax.vmap(lambda k: lu.init(k, cfg, dtype))(keys)

  def record(params, params0):
    del params0
    return {"s": models.word_scores(params)[:n_topic], "nu": params["embeddings"][:n_topic]}

  tol = lambda r, a: {k: v for k, v in (("rtol", r), ("atol", a)) if v is not None}
  ode_opts = dict(solver=args.solver, dtmin=args.dtmin)
  fns = {
      "gd": lambda p: dynamics.make_train(loss, data.train, record, train_cfg, trainable)(
          p, jax.random.PRNGKey(0)),
      "lemma2": lambda p: dynamics.reduced_sen_ode(
          p, data.train, data.train_topic_word, np.arange(n_topic), record, lr=args.lr, ts=ts,
          trainable=trainable, form="lemma2", **tol(args.rtol, args.atol), **ode_opts),
      "exact": lambda p: dynamics.reduced_sen_ode(
          p, data.train, data.train_topic_word, np.arange(n_topic), record, lr=args.lr, ts=ts,
          trainable=trainable, form="exact", **tol(args.rtol, args.atol), **ode_opts),
      "flow": lambda p: dynamics.gradient_flow(
          loss, p, data.train, record, lr=args.lr, ts=ts, trainable=trainable,
          **tol(args.flow_rtol, args.flow_atol), **ode_opts),
  }

  # Q_t of eq (9) from the initial non-topic words (all in float64 NumPy).
  scores0 = np.asarray(jax.vmap(models.word_scores)(params0), np.float64)
  emb0 = np.asarray(params0["embeddings"], np.float64)
  qn2 = np.sum(np.asarray(params0["query"], np.float64) ** 2, axis=-1)
  tokens, topic = np.asarray(data.train.tokens), np.asarray(data.train_topic_word)
  rest = tokens != topic[:, None]
  onehot = np.eye(n_topic)[topic]                                           # [n, T]
  count = onehot.sum(0)

  def theorem1_q(s, nu):
    out = []
    for k in range(args.seeds):
      e = np.exp(scores0[k][tokens]) * rest                                  # [n, L]
      z = e.sum(1)
      nubar = np.einsum("nl,nld->nd", e / z[:, None], emb0[k][tokens])
      inv_z = onehot.T @ (1 / z) / count
      mean_nubar = onehot.T @ nubar / count[:, None]
      out.append(s[k] + np.exp(s[k]) * inv_z
                 - 0.5 * qn2[k] * ((nu[k] - mean_nubar) ** 2).sum(-1))
    return np.stack(out)                                                     # [S, K, T]

  summary = {"classifier": args.classifier, "dtype": str(np.dtype(dtype)), "seeds": args.seeds,
             "backend": jax.default_backend(), "device": str(jax.devices()[0]),
             "solver": args.solver, "runs": {}}
  results = {}
  for name in args.solvers.split(","):
    fn = fns[name]
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(fn)).lower(params0).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(params0))
    t_run = time.perf_counter() - t0
    t0 = time.perf_counter()
    traj = dynamics.run_sweep(fn, params0)
    stats = {} if traj.ode is None else traj.ode._asdict()   # diffrax's result and step counts
    t_sweep = time.perf_counter() - t0
    results[name] = traj
    s = np.asarray(traj.observables["s"], np.float64)
    q = theorem1_q(s, np.asarray(traj.observables["nu"], np.float64))
    growth = np.abs(s[:, -1] - s[:, 0])
    run = {"sweep_wall_s": round(t_sweep, 2), "compile_s": round(t_compile, 2),
           "run_s": round(t_run, 3),
           "failed_at": np.asarray(traj.failed_at).tolist(),
           "final_s_mean": float(s[:, -1].mean()), "final_s_min": float(s[:, -1].min()),
           "final_s_max": float(s[:, -1].max()),
           "q_drift_max": float(np.abs(q - q[:, :1]).max()),
           "q_drift_rel_max": float((np.abs(q - q[:, :1]).max(1) / np.maximum(1, growth)).max())}
    for k, v in stats.items():
      run[k] = np.asarray(v).tolist()
    if name != "gd" and "gd" in results:
      s_gd = np.asarray(results["gd"].observables["s"], np.float64)
      run["dev_last_max"] = float(np.abs(s[:, -1] - s_gd[:, -1]).max())
      run["dev_last_per_seed"] = np.abs(s[:, -1] - s_gd[:, -1]).max(1).round(4).tolist()
      run["dev_any_time_max"] = float(np.abs(s - s_gd).max())
      run["dev_last_rel_growth_max"] = float(
          (np.abs(s[:, -1] - s_gd[:, -1]) / np.abs(s_gd[:, -1] - s_gd[:, :1].squeeze(1))).max())
    summary["runs"][name] = run
    print(name, json.dumps(run), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(summary, f, indent=1)


if __name__ == "__main__":
  main()
