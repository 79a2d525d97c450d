"""Training objective: mean cross-entropy of the classifier's softmax."""
import jax
import jax.numpy as jnp
import optax

from tasks.batch import Batch


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean over the batch of ``-log softmax(logits)[label]``."""
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Fraction of sentences whose argmax logit is the label."""
  return jnp.mean(jnp.argmax(logits, axis=-1) == labels)


def make_loss(apply_fn):
  """``loss(params, batch) -> (mean cross-entropy, output)`` for any ``apply`` returning ``.logits``.

  The returned function carries ``loss.apply_fn = apply_fn``: which model it is
  the cross-entropy of. :func:`dynamics.make_fast_train` reads it to check that
  the loss it is handed is the one it computes in closed form.
  """
  def loss(params, batch: Batch):
    out = apply_fn(params, batch)
    return cross_entropy(out.logits, batch.labels), out
  loss.apply_fn = apply_fn
  return loss
