"""Orthogonal matrices from a QR factorisation that is safe to vmap on a multi-threaded CPU.

A vmapped ``jnp.linalg.qr`` is one LAPACK call over the whole batch, which
XLA:CPU splits over its intra-op thread pool and then waits for. When several
such calls are ready at once (an LSTM's eight recurrent kernels, initialised for
every seed of a sweep), each occupies a pool thread while the pieces it waits
for queue behind the others, and with two cores the program never finishes:
``jit(vmap(models.seq2seq.init))`` over two keys at hidden 256 hung on a 2-core
CPU with jaxlib 0.10.2 (every thread parked in ``ParallelBatchMap``; see
``tests/test_orthogonal.py``). Here a batch is looped with ``lax.map``, so each
LAPACK call factors one matrix and runs on the calling thread.

:func:`orthogonal` is ``jax.nn.initializers.orthogonal`` on top of that QR: the
same draws, so the same parameters for the same key.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["qr", "random_orthogonal", "orthogonal"]


@jax.custom_batching.custom_vmap
def qr(a: jax.Array):
  """``(q, r)`` of ``jnp.linalg.qr(a)`` (reduced); batched by a loop, never by one LAPACK call."""
  q, r = jnp.linalg.qr(a)
  return q, r


@qr.def_vmap
def _qr_vmap(axis_size, in_batched, a):
  del axis_size, in_batched
  return jax.lax.map(qr, a), (True, True)


def random_orthogonal(key: jax.Array, n: int, m: int, dtype=jnp.float32) -> jax.Array:
  """``[n, m]`` with orthonormal columns (``n ≥ m``) or rows: ``jax.random.orthogonal(key, n, m=m)``."""
  z = jax.random.normal(key, (max(n, m), min(n, m)), dtype)
  q, r = qr(z)
  x = q * jnp.sign(jnp.diagonal(r))[None, :]
  return x.T if n < m else x


def orthogonal(scale: float = 1.0, column_axis: int = -1):
  """An initializer ``init(key, shape, dtype)`` equal to ``jax.nn.initializers.orthogonal``."""
  def init(key, shape, dtype=jnp.float32):
    if len(shape) < 2:
      raise ValueError("orthogonal initializer requires at least a 2D shape")
    n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
    q = random_orthogonal(key, n_rows, n_cols, dtype)
    q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
    return jnp.asarray(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
  return init
