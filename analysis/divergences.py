"""Distances between attention distributions (or output distributions): JSD and TVD.

Shared by every comparison of two distributions over the same support (the
adversarial attention of Wiegreffe & Pinter / Yang, the Jain & Wallace checks,
attention vs the KTIW probe). Natural logarithms throughout, so the
Jensen–Shannon divergence is bounded by ``ln 2``.

References:
  Jain & Wallace, "Attention is not Explanation", NAACL 2019. https://arxiv.org/abs/1902.10186
  Wiegreffe & Pinter, "Attention is not not Explanation", EMNLP 2019. https://arxiv.org/abs/1908.04626
"""
import jax
import jax.numpy as jnp

__all__ = ["kl", "jsd", "tvd"]


def _xlogy_ratio(p: jax.Array, q: jax.Array) -> jax.Array:
  """``p log(p/q)`` with ``0 log 0 = 0`` (and the gradient kept finite where ``p = 0``)."""
  safe_p = jnp.where(p > 0, p, 1.0)
  safe_q = jnp.where(p > 0, q, 1.0)
  return jnp.where(p > 0, p * (jnp.log(safe_p) - jnp.log(safe_q)), 0.0)


def kl(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Kullback–Leibler divergence ``KL(p‖q) = Σ p log(p/q)`` (nats) along ``axis``.

  Infinite where ``q = 0 < p``.
  """
  return jnp.sum(_xlogy_ratio(p, q), axis=axis)


def jsd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Jensen–Shannon divergence (natural logs), in ``[0, ln 2]``.

  .. math:: \\mathrm{JSD}(p, q) = ½ KL(p‖m) + ½ KL(q‖m), \\quad m = ½(p + q)

  Args:
    p, q: distributions (non-negative, summing to 1) along ``axis``; any
      broadcastable leading shape.
  """
  m = 0.5 * (p + q)
  return 0.5 * kl(p, m, axis) + 0.5 * kl(q, m, axis)


def tvd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Total variation distance ``½ Σ |p − p′|`` along ``axis``, in ``[0, 1]``."""
  return 0.5 * jnp.sum(jnp.abs(p - q), axis=axis)
