"""A batch of bag-of-words sentences: the one data type every model consumes."""
from typing import NamedTuple

import jax

__all__ = ["Batch"]


class Batch(NamedTuple):
  """Sentences as padded token ids.

  Attributes:
    tokens: ``[n, L]`` int32 word ids.
    mask: ``[n, L]`` bool, True where the position holds a real word. Masked
      positions get score ``-inf`` (attention weight 0).
    labels: ``[n]`` int32 class (topic) of each sentence.
  """
  tokens: jax.Array
  mask: jax.Array
  labels: jax.Array

  @property
  def size(self) -> int:
    return self.tokens.shape[0]
