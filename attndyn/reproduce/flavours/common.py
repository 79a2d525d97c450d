"""Shared by the attention-flavour experiments and ``attndyn explain``: train the Lu model per seed."""
import dataclasses

import jax
import numpy as np

import dynamics
import models


def train_final_params(model_cfg: models.LuModelConfig, data, *, lr: float, steps: int,
                       seeds, dtype=None):
  """GD (full batch) of the Lu model for every seed; returns ``(final params stacked over seeds,
  final train loss [S], test accuracy [S])``.

  ``models.lu.apply_for(model_cfg)`` is the forward pass, so the configured
  normaliser is used (the softmax-only fast path is not).
  """
  apply = models.lu.apply_for(model_cfg)
  loss = models.make_loss(apply)

  def record(params, params0):
    del params0
    return {"loss": loss(params, data.train)[0],
            "test_acc": models.accuracy(apply(params, data.test).logits, data.test.labels)}

  train = dynamics.make_train(loss, data.train, record,
                              dynamics.TrainConfig(lr=lr, steps=steps, record_every=steps),
                              model_cfg.trainable())

  def one(inp):
    key = jax.random.PRNGKey(inp["seed"])
    params0 = models.lu.init(key, model_cfg) if dtype is None else models.lu.init(key, model_cfg, dtype)
    traj = train(params0, key)
    return {"params": traj.final_params, "loss": traj.observables["loss"][-1],
            "test_acc": traj.observables["test_acc"][-1]}

  out = dynamics.run_sweep(one, {"seed": np.asarray(seeds, np.uint32)})
  return out["params"], np.asarray(out["loss"]), np.asarray(out["test_acc"])


def seed_params(stacked, i: int):
  """The parameters of seed ``i`` from a stacked pytree."""
  return jax.tree.map(lambda x: x[i], stacked)


def with_normaliser(cfg: models.LuModelConfig, normaliser: str) -> models.LuModelConfig:
  return dataclasses.replace(cfg, normaliser=normaliser)
