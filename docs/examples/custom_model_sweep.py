"""Your own pure model, trained over 256 seeds with its gradient flow alongside, without the CLI.

The model is the Lu et al. attention model with scaled scores ``qᵀκ_w / √d′`` (a
variant the CLI does not run). Each seed is one sweep point: gradient descent
(``ad.dynamics.make_auto_train``, which explains why it cannot take the exact
fast path) and the gradient flow of the same loss (``ad.dynamics.gradient_flow``)
from the same initial parameters, vmapped over seeds in chunks by
``ad.dynamics.run_sweep``. Settings come from the paper's preset
(``ad.paper_config``), shrunk to the ``quick`` demo's size.

Run: ``python docs/examples/custom_model_sweep.py`` (13.6 min on 2 heavily loaded CPU
cores; docs/examples/README.md);
``ATTNDYN_EXAMPLE_SMALL=1`` runs 4 seeds of a tiny task in seconds (the test suite does).
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

import attndyn as ad

SMALL = os.environ.get("ATTNDYN_EXAMPLE_SMALL") == "1"


def scaled_apply(params, batch):
  """The Lu model with every score divided by √d′ (the query scaled by 1/√d′)."""
  d_key = params["query"].shape[-1]
  return ad.models.lu.apply(dict(params, query=params["query"] / jnp.sqrt(d_key)), batch)


def main():
  n_seeds = 4 if SMALL else 256
  # The small run starts from larger embeddings and a larger step so scores move in 100 steps.
  small = dict(task={"n_topics": 2, "vocab_size": 20, "n_nontopic": 3, "n_train": 48,
                     "n_test": 16},
               model={"embed_std": 0.3}, train={"steps": 100, "record_every": 50, "lr": 1.0})
  cfg = ad.paper_config("quick", **(small if SMALL else {}))
  data = jax.jit(ad.tasks.make_topic_dataset, static_argnums=1)(jax.random.PRNGKey(0), cfg.task)
  n_topic = cfg.task.n_topic_words

  loss = ad.models.make_loss(scaled_apply)
  trainable = cfg.model.trainable()

  def record(params, params0):
    del params0
    return {"score": ad.models.word_scores(params)[:n_topic] / jnp.sqrt(cfg.model.key_dim),
            "loss": loss(params, data.train)[0]}

  gd = ad.dynamics.make_auto_train(loss, data.train, record, cfg.train, trainable,
                                   model_cfg=cfg.model)
  print(f"gradient descent: {gd.path} path ({gd.reason})")

  def one_seed(key):
    params0 = ad.models.lu.init(key, cfg.model)
    traj = gd.train(params0, key)
    flow = ad.dynamics.gradient_flow(loss, params0, data.train, record, lr=cfg.train.lr,
                                     ts=cfg.train.record_steps(), trainable=trainable)
    return {"gd": traj.observables, "flow": flow.observables,
            "failed": jnp.maximum(traj.failed_at, flow.failed_at)}

  keys = jax.random.split(jax.random.PRNGKey(1), n_seeds)
  out = ad.dynamics.run_sweep(one_seed, keys, chunk_size=min(n_seeds, 64))

  ok = out["failed"] < 0
  s_gd, s_flow = out["gd"]["score"][ok], out["flow"]["score"][ok]     # [seeds, time, T]
  gap = np.abs(s_gd - s_flow).max(axis=(1, 2))
  print(f"{ok.sum()} of {n_seeds} seeds finished; {cfg.train.steps} steps of lr {cfg.train.lr}")
  print(f"final loss (GD): {out['gd']['loss'][ok, -1].mean():.4f} ± "
        f"{out['gd']['loss'][ok, -1].std():.4f} over seeds")
  print(f"final topic-word score (GD): {s_gd[:, -1].mean():.3f}; "
        f"largest |GD − flow| of a score: median {np.median(gap):.2e}, max {gap.max():.2e}")
  return out


if __name__ == "__main__":
  main()
