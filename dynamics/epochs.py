"""Epoch-wise minibatch training as one compiled program, with a per-step dropout key.

``lax.scan`` over epochs, and inside each epoch a ``lax.scan`` over its
minibatches (reshuffled every epoch from the run's key, a final partial batch
dropped, as :func:`dynamics.minibatch` draws them). After each epoch the
caller's ``evaluate(params, aux)`` is recorded (e.g. dev/test predictions, for
dev-based epoch selection on the host). ``aux`` carries whatever else a run
depends on and may be traced: the adversary's λ and the original model's
parameters, the probe's source attention. Vmap ``train`` over seeds (keys)
and over ``aux`` to run a sweep in one call.

The training set may come as length buckets (a tuple of batches, each padded
to its own longest sentence, e.g. :func:`tasks.conll2000.length_buckets`): each
epoch then runs the minibatches of bucket 0, then bucket 1, ..., each
bucket reshuffled every epoch. Fewer padded tokens are computed than with one batch
padded to the longest sentence; the order within an epoch is short-to-long.
"""
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from attndyn.dynamics.train import guarded_update, minibatch
from attndyn.dynamics.trajectory import Trajectory
from attndyn.models import transformer_tagger as tt
from attndyn.tasks.errors import check

__all__ = ["make_epoch_train", "make_tagger_train"]


def make_epoch_train(loss_fn: Callable, train_batch: Any, evaluate: Callable, *, epochs: int,
                     batch_size: int, optimizer: optax.GradientTransformation,
                     record_params: bool = False):
  """Build ``train(params0, key, aux=None) -> Trajectory`` (pure; jit/vmap it).

  Args:
    loss_fn: ``loss_fn(params, batch, dropout_key, aux) -> scalar``.
    train_batch: pytree of ``[n, ...]`` arrays with a ``tokens`` field (minibatches are
      drawn from it), or a tuple of such batches (length buckets).
    evaluate: ``evaluate(params, aux) -> pytree`` recorded after every epoch.
    epochs: number of passes over the training set.
    batch_size: minibatch size (``n // batch_size`` steps per epoch).
    optimizer: an optax transformation (e.g. ``optax.adam(1e-3)``).
    record_params: also keep the parameters after every epoch (for epoch selection).

  Returns:
    ``train``: ``t = 1..epochs``; observables ``{"eval": evaluate outputs [E, ...],
    "train_loss": [E] mean minibatch loss}``; ``failed_at`` is the first
    non-finite step (-1 if none; the run is then frozen at its last finite
    parameters, as :func:`dynamics.make_train` does).
  """
  buckets = (train_batch,) if hasattr(train_batch, "tokens") else tuple(train_batch)
  sizes = [b.tokens.shape[0] for b in buckets]
  check(isinstance(epochs, int) and epochs >= 1, "epochs", epochs, "a positive integer")
  check(isinstance(batch_size, int) and 1 <= batch_size <= min(sizes), "batch_size",
        batch_size, f"an integer in [1, {min(sizes)}] (the smallest training bucket)")
  per_bucket = [n // batch_size for n in sizes]
  per_epoch = sum(per_bucket)
  grad_fn = jax.value_and_grad(loss_fn)

  def train(params0, key, aux=None):
    shuffle_key, dropout_key = jax.random.split(key)

    def step_fn(carry, step, bucket, index):
      params, opt_state, failed_at = carry
      b = minibatch(buckets[bucket], jax.random.fold_in(shuffle_key, bucket), index, batch_size,
                    "shuffle")
      loss, grads = grad_fn(params, b, jax.random.fold_in(dropout_key, step), aux)
      params, opt_state, failed_at, _ = guarded_update(optimizer, grads, loss, params, opt_state,
                                                       failed_at, step)
      return (params, opt_state, failed_at), loss

    def epoch_fn(carry, epoch):
      losses, offset = [], 0
      for bucket, k in enumerate(per_bucket):
        steps = epoch * per_epoch + offset + jnp.arange(k)    # global step: dropout key, failed_at
        index = epoch * k + jnp.arange(k)                      # step within the bucket: its shuffle
        carry, loss = jax.lax.scan(lambda c, si: step_fn(c, si[0], bucket, si[1]), carry,
                                   (steps, index))
        losses.append(loss)
        offset += k
      params = carry[0]
      out = {"eval": evaluate(params, aux), "train_loss": jnp.mean(jnp.concatenate(losses))}
      return carry, (out, params if record_params else None)

    carry0 = (params0, optimizer.init(params0), -jnp.ones((), jnp.int32))
    (params, _, failed_at), (obs, params_t) = jax.lax.scan(epoch_fn, carry0, jnp.arange(epochs))
    t = jnp.arange(1, epochs + 1).astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    return Trajectory(t=t, observables=obs, final_params=params,
                      failed_at=failed_at.astype(t.dtype), params=params_t)

  return train


def make_tagger_train(cfg: tt.TaggerConfig, train_batch: Any, evaluate: Callable, *,
                      epochs: int, batch_size: int, optimizer: optax.GradientTransformation,
                      record_params: bool = False):
  """Build ``one(seed) -> Trajectory``: Yang's tagger trained on the gold tags (Section 4.1).

  The loss is the token NLL of :func:`models.transformer_tagger.token_nll` with dropout
  (a key per step); the run starts from ``tt.init(fold_in(PRNGKey(seed), 1), cfg)`` and its
  minibatch order and dropout keys come from ``PRNGKey(seed)``. The other arguments are
  :func:`make_epoch_train`'s (``evaluate(params, aux)``, ``aux`` None).
  """
  def loss_fn(params, b, dropout_key, aux):
    return tt.token_nll(tt.apply(params, b, cfg, key=dropout_key).logits, b.labels, b.mask)

  train = make_epoch_train(loss_fn, train_batch, evaluate, epochs=epochs, batch_size=batch_size,
                           optimizer=optimizer, record_params=record_params)

  def one(seed):
    k = jax.random.PRNGKey(seed)
    return train(tt.init(jax.random.fold_in(k, 1), cfg), k)

  return one
