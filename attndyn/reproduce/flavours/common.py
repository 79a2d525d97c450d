"""Shared by the attention-flavour experiments and ``attndyn explain``."""
import dataclasses

import jax

from attndyn import models

__all__ = ["seed_params", "with_normaliser"]


def seed_params(stacked, i: int):
  """The parameters of seed ``i`` from a stacked pytree."""
  return jax.tree.map(lambda x: x[i], stacked)


def with_normaliser(cfg: models.LuModelConfig, normaliser: str) -> models.LuModelConfig:
  return dataclasses.replace(cfg, normaliser=normaliser)
