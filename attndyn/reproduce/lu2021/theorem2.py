"""Theorem 2: with a fixed linear classifier of independent columns, loss → 0 and attention → topic word.

Attn-FC with orthonormal U (the paper's choice for this check) is trained in
segments of equal length by one compiled program, recording the training loss
and the mean attention on each sentence's topic word at the end of every
segment; both must move monotonically towards 0 and 1.
"""
import jax
import jax.numpy as jnp
import numpy as np

import dynamics
import models
from analysis import lu2021_figures as figs
from analysis import replication as rep
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome

NAME = "theorem2"
TITLE = "Theorem 2: Attn-FC (orthonormal U) trained longer: loss → 0, attention → topic word"
FULL = {"task": dict(common.TEXT_TASK), "model": dict(common.TEXT_MODEL), "lr": 0.1,
        "segment": 5000, "segments": 10, "checkpoints": [5000, 20000, 50000], "seeds": 5,
        "final_attention": 0.9}
QUICK = {**FULL, "segment": 1000, "segments": 3, "checkpoints": [1000, 2000, 3000], "seeds": 3,
         "final_attention": 0.5}


def run(ctx, s) -> Outcome:
  task_cfg, data = common.topic_data(s["task"])
  cfg = common.lu_config(task_cfg, "fc", s["model"], fc_init="orthonormal")
  apply = common.apply_for(cfg)
  loss_fn = models.make_loss(apply)
  is_topic = data.train.tokens == data.train_topic_word[:, None]

  def record(params, params0):
    del params0
    loss, out = loss_fn(params, data.train)
    return {"loss": loss, "topic_attention": jnp.mean(jnp.sum(jnp.where(is_topic, out.attention, 0.0), -1)),
            "train_acc": models.accuracy(out.logits, data.train.labels),
            "test_acc": models.accuracy(apply(params, data.test).logits, data.test.labels)}

  train_cfg = dynamics.TrainConfig(lr=s["lr"], steps=s["segment"], record_every=s["segment"])
  train = dynamics.make_train(loss_fn, data.train, record, train_cfg, cfg.trainable())
  segment = jax.jit(jax.vmap(lambda p: train(p, jax.random.PRNGKey(0))))
  params = jax.vmap(lambda k: models.lu.init(jax.random.PRNGKey(k), cfg))(
      jnp.asarray(common.seeds(s["seeds"])))
  steps, records = [0], []
  ctx.log(f"{NAME}: Attn-FC x {s['seeds']} seeds, {s['segments']} x {s['segment']} epochs")
  for i in range(s["segments"]):
    traj = segment(params)
    params = traj.final_params
    obs = common.host(traj.observables)
    if i == 0:
      records.append({k: v[:, 0] for k, v in obs.items()})
    records.append({k: v[:, -1] for k, v in obs.items()})
    steps.append((i + 1) * s["segment"])
  steps = np.asarray(steps)
  curves = {k: np.stack([r[k] for r in records], -1) for k in records[0]}   # [S, K]
  at = [int(np.flatnonzero(steps == c)[0]) for c in s["checkpoints"] if c in steps]
  loss_ck, att_ck = curves["loss"][:, at], curves["topic_attention"][:, at]
  dec = np.array([rep.strictly_monotone(l, increasing=False) for l in loss_ck])
  inc = np.array([rep.strictly_monotone(a, increasing=True) for a in att_ck])
  ck = ", ".join(f"{c // 1000}K" for c in s["checkpoints"])
  claims = [
      rep.claim(f"{NAME}.loss_decreasing", f"Attn-FC (orthonormal U) training loss strictly "
                f"decreases across epochs {ck}", paper="loss → 0", ours=rep.mean_ci(dec),
                tolerance=rep.Tolerance("all_true"), figure="Theorem 2", quick=ctx.quick,
                note="loss " + " / ".join(f"{v:.3g}" for v in loss_ck.mean(0))),
      rep.claim(f"{NAME}.attention_increasing", f"mean attention on the topic word strictly "
                f"increases across epochs {ck}", paper="attention → topic word",
                ours=rep.mean_ci(inc), tolerance=rep.Tolerance("all_true"), figure="Theorem 2",
                quick=ctx.quick,
                note="attention " + " / ".join(f"{v:.3f}" for v in att_ck.mean(0))),
      rep.claim(f"{NAME}.final_attention", f"mean attention on the topic word at epoch "
                f"{steps[-1]}", paper="→ 1", ours=rep.mean_ci(curves["topic_attention"][:, -1]),
                tolerance=rep.Tolerance("at_least", s["final_attention"]), figure="Theorem 2",
                quick=ctx.quick, comparable=steps[-1] >= 50000),
      rep.claim(f"{NAME}.final_loss", f"training loss at epoch {steps[-1]}", paper="→ 0",
                ours=rep.mean_ci(curves["loss"][:, -1]), tolerance=rep.Tolerance("info"),
                figure="Theorem 2", quick=ctx.quick),
  ]
  figs.curve_panels([
      {"title": "training loss", "ylabel": "cross-entropy", "logy": True,
       "curves": [("Attn-FC", steps, curves["loss"])]},
      {"title": "attention on the topic word", "ylabel": "mean weight",
       "curves": [("Attn-FC", steps, curves["topic_attention"])]},
  ], ctx.path("theorem2.png"), title=f"Theorem 2: Attn-FC, orthonormal U, {s['seeds']} runs")
  notes = [f"Attn-FC with orthonormal U (UᵀU = I), text settings, {s['seeds']} seeds vmapped; "
           f"recorded every {s['segment']} epochs."]
  return Outcome(claims, ["theorem2.png"], {"notes": notes, "steps": steps,
                                             "loss": curves["loss"].mean(0),
                                             "topic_attention": curves["topic_attention"].mean(0)})
