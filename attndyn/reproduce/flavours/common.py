"""Shared by the experiments (the attention flavours, Snell's multi30k) and ``attndyn explain``."""
import jax

__all__ = ["seed_params"]


def seed_params(stacked, i: int):
  """The parameters of seed ``i`` from a stacked pytree."""
  return jax.tree.map(lambda x: x[i], stacked)

