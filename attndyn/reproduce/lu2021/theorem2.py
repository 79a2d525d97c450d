"""Theorem 2: with a fixed linear classifier of independent columns, loss → 0 and attention → topic word.

Attn-FC with orthonormal U (the paper's choice for this check, Sec 5.1) is
trained in segments of equal length by one compiled program, recording the
training loss, the mean attention on each sentence's topic word and whether
the topic word has the largest weight in every training sentence.

Theorem 2 says the model "will attend to the topic word in every input
sentence and have its training loss approach zero". A limit cannot be
measured, so it is judged at the epochs and in the words the paper states
(Sec 5.1 ¶2: trained "for 5K epochs", "all three models achieve the training
loss close to zero"; ¶3: "Attn-FC has the training loss roughly zero when the
training is completed, Theorem 2 is confirmed"), with levels of ours fixed
before any run: at epoch 5K the training loss is ≤ ``loss_at_most`` (under 1%
of ln 4 = 1.39, the loss of the uniform start) and the topic word has the
largest weight in every training sentence of every seed; at the last epoch
(50K) the mean topic attention is ≥ ``attention_at_least`` (the limit is 1).
Strict decrease at checkpoints is not judged: small-lr GD gives it almost by
construction.
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
        "loss_at_most": 0.01, "attention_at_least": 0.9}
# The quick mode reaches the paper's 5K epochs (its loss and every-sentence rows are judged),
# not the 50K of the attention level (that row is 'quick: not comparable').
QUICK = {**FULL, "segment": 1000, "segments": 5, "checkpoints": [1000, 3000, 5000], "seeds": 3}
PAPER_EPOCHS = 5000      # Sec 5.1 ¶2: "for 5K epochs", then "training loss close to zero"
LIMIT_EPOCHS = 50000     # FULL's last epoch, where the attention level (→ 1) is judged
_THEOREM = "Theorem 2 (Sec 4)"
_SOURCE_LOSS = ("paper, Sec 5.1 ¶2: after 5K epochs “all three models achieve the training loss "
                "close to zero”; ‘close to zero’ as ≤ 0.01 is ours (under 1% of ln 4, the loss of "
                "the uniform start)")
_SOURCE_EVERY = ("paper, Theorem 2: “attend to the topic word in every input sentence”; at 5K "
                 "epochs (Sec 5.1 ¶2-3)")
_SOURCE_ATT = ("paper, Theorem 2: the topic word is attended to as training proceeds (weight → 1); "
               "≥ 0.9 at 50K epochs is ours: a limit of 1 reached within 10% after ten times the "
               "paper's 5K epochs")


def run(ctx, s) -> Outcome:
  task_cfg, data = common.topic_data(s["task"])
  cfg = common.lu_config(task_cfg, "fc", s["model"], fc_init="orthonormal")
  apply = common.apply_for(cfg)
  loss_fn = models.make_loss(apply)
  is_topic = data.train.tokens == data.train_topic_word[:, None]

  def record(params, params0):
    del params0
    loss, out = loss_fn(params, data.train)
    topic_weight = jnp.sum(jnp.where(is_topic, out.attention, 0.0), -1)             # [N]
    other_max = jnp.max(jnp.where(is_topic, -1.0, out.attention), -1)
    return {"loss": loss, "topic_attention": jnp.mean(topic_weight),
            # 1.0 when in every training sentence the topic word weighs more than any other word
            "topic_argmax_all": jnp.all(topic_weight > other_max).astype(loss.dtype),
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
  ck = ", ".join(f"{c // 1000}K" if c >= 1000 else f"{c}" for c in steps[at])
  last = int(steps[-1])
  # Which epoch each row is judged at, decided from the budget before looking at any value:
  # the paper's 5K when it was recorded (else the last epoch, then not comparable).
  k5 = int(np.flatnonzero(steps == PAPER_EPOCHS)[0]) if PAPER_EPOCHS in steps else len(steps) - 1
  at5 = int(steps[k5])
  trend = (f"at epochs {ck}: loss " + " / ".join(f"{v:.3g}" for v in loss_ck.mean(0))
           + ", topic attention " + " / ".join(f"{v:.3f}" for v in att_ck.mean(0)))
  claims = [
      rep.claim(f"{NAME}.loss_at_5k", f"Attn-FC (orthonormal U) training loss at epoch {at5}",
                paper="loss → 0 (“close to zero” after 5K epochs)",
                paper_ref="Theorem 2; Sec 5.1 ¶2", ours=rep.mean_ci(curves["loss"][:, k5]),
                tolerance=rep.Tolerance("at_most", s["loss_at_most"], f"≤ {s['loss_at_most']:g}",
                                        source=_SOURCE_LOSS),
                figure=_THEOREM, quick=ctx.quick, comparable=at5 == PAPER_EPOCHS, note=trend),
      rep.claim(f"{NAME}.attends_every_sentence", f"at epoch {at5} the topic word has the "
                "largest attention weight in every training sentence", paper="every input sentence",
                paper_ref="Theorem 2", ours=rep.mean_ci(curves["topic_argmax_all"][:, k5]),
                tolerance=rep.Tolerance("all_true", source=_SOURCE_EVERY), figure=_THEOREM,
                quick=ctx.quick, comparable=at5 == PAPER_EPOCHS),
      rep.claim(f"{NAME}.final_attention", f"mean attention on the topic word at epoch {last}",
                paper="→ 1", paper_ref="Theorem 2",
                ours=rep.mean_ci(curves["topic_attention"][:, -1]),
                tolerance=rep.Tolerance("at_least", s["attention_at_least"],
                                        f"≥ {s['attention_at_least']:g}", source=_SOURCE_ATT),
                figure=_THEOREM, quick=ctx.quick, comparable=last >= LIMIT_EPOCHS),
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
