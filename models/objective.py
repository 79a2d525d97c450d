"""Training objective: mean cross-entropy of the classifier's softmax."""
import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import optax

from attndyn.tasks.batch import Batch

__all__ = ["LuCrossEntropy", "accuracy", "cross_entropy", "make_loss"]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean over the batch of ``-log softmax(logits)[label]``."""
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Fraction of sentences whose argmax logit is the label."""
  return jnp.mean(jnp.argmax(logits, axis=-1) == labels)


@dataclasses.dataclass(frozen=True)
class LuCrossEntropy:
  """``loss(params, batch) -> (mean cross-entropy, output)`` of the model ``apply_fn``.

  The training objective of Lu et al. (2021), Section 3: the mean over sentences of
  ``-log softmax(logits)[label]``, for any ``apply(params, batch)`` returning ``.logits``.

  A frozen object rather than a closure so that what a loss is can be read from its
  type: :func:`dynamics.fast_path_applies` accepts exactly this class (not a subclass,
  not a ``functools.partial`` or a ``functools.wraps`` wrapper of it, which may add terms)
  with ``apply_fn`` one of the Lu forward passes it computes in closed form.

  Attributes:
    apply_fn: the model's ``apply(params, batch)``.
  """
  apply_fn: Callable

  def __call__(self, params, batch: Batch):
    out = self.apply_fn(params, batch)
    return cross_entropy(out.logits, batch.labels), out


def make_loss(apply_fn: Callable) -> LuCrossEntropy:
  """The mean cross-entropy of ``apply_fn``: ``LuCrossEntropy(apply_fn)``, called as
  ``loss(params, batch) -> (loss, output)``."""
  return LuCrossEntropy(apply_fn)
