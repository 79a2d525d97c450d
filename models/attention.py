"""Masked softmax attention pooling (Lu et al. 2021, Section 3)."""
import jax
import jax.numpy as jnp

__all__ = ["softmax_attention", "attend"]


def softmax_attention(scores: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
  """Attention weights ``a_w = exp(s_w) / Z(χ)`` over the words of each sentence.

  Masked positions get score ``-inf`` (weight exactly 0).

  .. math:: a_w = \\frac{\\exp(s_w)}{\\sum_{w' \\in χ} \\exp(s_{w'})}

  Args:
    scores: ``[..., L]`` scores ``s_w = qᵀκ_w`` of the words of each sentence.
    mask: ``[..., L]`` bool, True for real words (broadcast against ``scores``).
    axis: the words' axis (``L``), the last by default.

  Returns:
    ``[..., L]`` weights summing to 1 over the real words.
  """
  scores = jnp.where(mask, scores, -jnp.inf)
  return jax.nn.softmax(scores, axis=axis, where=mask)


def attend(values: jax.Array, weights: jax.Array) -> jax.Array:
  """Context vector ``ν̄(χ) = Σ_w a_w ν_w``: ``values [..., L, d]``, ``weights [..., L]`` → ``[..., d]``."""
  return jnp.einsum("...l,...ld->...d", weights, values)
