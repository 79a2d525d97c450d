"""Corollary 1 of Lu et al. (2021): the score–embedding-norm (SEN) relation of a topic word."""
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["sen_norm", "sen_relative_error", "array_module"]


def array_module(*arrays):
  """``jax.numpy`` if any of ``arrays`` is a JAX array (or a tracer), else ``numpy``.

  The theory quantities below are evaluated inside compiled programs and on recorded
  trajectories already on the host. On the host, NumPy computes them in the arrays' own dtype
  without compiling a program per operation and shape (each ``jnp`` call on a host array
  compiles one, and reading a sweep's rows made hundreds)."""
  return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def sen_norm(score: jax.Array, m) -> jax.Array:
  """Embedding norm predicted by Corollary 1 (eq 10) from the score.

  .. math:: \\|v_t\\|_2 = \\sqrt{2\\left(s_t + \\frac{e^{s_t}}{m} - \\frac{1}{m}\\right)}

  Assumes the paper's start: ``s_t(0) = 0``, ``v_t(0) ≈ 0``, non-topic scores 0
  (so ``⟨1/Z(χ∖t)⟩ = 1/m``). The argument of the square root is convex in
  ``s`` with its minimum 0 at ``s = 0``; it is clipped at 0 against rounding.

  Args:
    score: topic word score(s) ``s_t``, any shape.
    m: number of non-topic words per sentence (scalar or broadcastable).

  Returns:
    Predicted ``‖v_t‖``, same shape as ``score`` (a NumPy array for host inputs:
    :func:`array_module`).
  """
  xp = array_module(score, m)
  with np.errstate(over="ignore", invalid="ignore"):   # as jnp: inf and NaN, no warning
    return xp.sqrt(xp.maximum(2.0 * (score + xp.expm1(score) / m), 0.0))


def sen_relative_error(score: jax.Array, emb_norm: jax.Array, m) -> jax.Array:
  """``|‖v_t‖ − SEN(s_t)| / SEN(s_t)``: how far a run is from Corollary 1."""
  predicted = sen_norm(score, m)
  with np.errstate(divide="ignore", invalid="ignore"):
    return array_module(emb_norm, predicted).abs(emb_norm - predicted) / predicted
