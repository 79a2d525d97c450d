"""Gradient descent approaches its gradient flow as the step shrinks, for a model the CLI does not know.

The model pools a sentence with one attention head whose query is computed from
the sentence itself (its mean embedding through ``W_q``), scores
``(x_l W_k)·q / √d``, and classifies the pooled vector linearly: a pure
``init``/``apply`` pair written here, trained with ``ad.dynamics.make_train``
and solved as the flow ``dθ/dt = −lr ∇L`` by ``ad.dynamics.gradient_flow``
(time in optimiser steps, so step ``n`` and ``t = n`` are the same point).

Gradient descent is the Euler discretisation of that flow, so over a fixed
physical time ``lr·steps`` its deviation from the flow halves when ``lr``
halves. Every learning rate is one point of a single vmapped, compiled program.

Run: ``python docs/examples/gd_vs_gradient_flow.py``; ``ATTNDYN_EXAMPLE_SMALL=1``
runs a smaller task in seconds (the test suite does).
"""
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import attndyn as ad

jax.config.update("jax_enable_x64", True)
SMALL = os.environ.get("ATTNDYN_EXAMPLE_SMALL") == "1"


class Output(NamedTuple):
  """``logits [n, J]`` (what ``ad.models.make_loss`` needs) and ``attention [n, L]``."""
  logits: jax.Array
  attention: jax.Array


def init(key, n_words: int, dim: int, n_classes: int) -> dict:
  k_emb, k_q, k_k, k_cls = jax.random.split(key, 4)
  return {"embeddings": 0.5 * jax.random.normal(k_emb, (n_words, dim)),
          "wq": jax.random.normal(k_q, (dim, dim)) / np.sqrt(dim),
          "wk": jax.random.normal(k_k, (dim, dim)) / np.sqrt(dim),
          "classifier": jax.random.normal(k_cls, (dim, n_classes)) / np.sqrt(dim)}


def apply(params: dict, batch: ad.tasks.Batch) -> Output:
  x = params["embeddings"][batch.tokens]                                # [n, L, d]
  real = batch.mask[..., None].astype(x.dtype)
  query = (x * real).sum(1) / real.sum(1) @ params["wq"]                # [n, d]
  scores = jnp.einsum("nld,de,ne->nl", x, params["wk"], query) / np.sqrt(x.shape[-1])
  attention = ad.models.softmax_attention(scores, batch.mask)
  return Output(ad.models.attend(x, attention) @ params["classifier"], attention)


def main():
  task = ad.tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=20 if SMALL else 300,
                                  n_nontopic=3 if SMALL else 10, n_train=48 if SMALL else 400,
                                  n_test=16)
  data = jax.jit(ad.tasks.make_topic_dataset, static_argnums=1)(jax.random.PRNGKey(0), task)
  params0 = init(jax.random.PRNGKey(1), task.n_words, 4 if SMALL else 16, task.n_topics)
  loss = ad.models.make_loss(apply)
  trainable = {group: True for group in params0}
  on_topic = data.train.tokens == data.train_topic_word[:, None]

  def record(params, params0):
    del params0
    out = apply(params, data.train)
    return {"loss": ad.models.cross_entropy(out.logits, data.train.labels),
            "topic_attention": jnp.mean(jnp.sum(out.attention * on_topic, axis=1))}

  # lr, lr/2, lr/4 for the same number of steps; compared over the first lr·steps/4 of time.
  lrs = np.array([0.4, 0.2, 0.1])
  cfg = ad.dynamics.TrainConfig(lr=float(lrs[0]), steps=200 if SMALL else 2000, record_every=10)
  horizon = lrs[-1] * cfg.steps
  train = ad.dynamics.make_train(loss, data.train, record, cfg, trainable)

  def gd_and_flow(lr):
    gd = train(params0, jax.random.PRNGKey(2), lr=lr)
    flow = ad.dynamics.gradient_flow(loss, params0, data.train, record, lr=lr,
                                     ts=cfg.record_steps(), trainable=trainable)
    return gd, flow

  gd, flow = jax.jit(jax.vmap(gd_and_flow))(jnp.asarray(lrs))
  assert np.all(np.asarray(gd.failed_at) < 0) and np.all(np.asarray(flow.failed_at) < 0)
  deviations = []
  for i, lr in enumerate(lrs):
    within = lr * np.asarray(gd.t[i]) <= horizon + 1e-9
    dev = max(float(np.abs(np.asarray(gd.observables[k][i]) -
                           np.asarray(flow.observables[k][i]))[within].max())
              for k in ("loss", "topic_attention"))
    deviations.append(dev)
    print(f"lr {lr:<4}: max |GD − flow| over t ≤ {horizon:g} (lr·steps) = {dev:.3e}")
  ratios = np.array(deviations[:-1]) / np.array(deviations[1:])
  moved = float(np.abs(np.asarray(flow.observables["loss"][-1, -1] - flow.observables["loss"][-1, 0])))
  print(f"ratios as lr halves: {np.round(ratios, 2)} (Euler: 2); the loss fell by {moved:.3f}")
  return {"deviations": np.array(deviations), "ratios": ratios, "loss_drop": moved}


if __name__ == "__main__":
  main()
