"""Hard attention: a one-hot argmax forward pass with a straight-through gradient.

The forward pass attends to exactly one word, ``p = onehot(argmax_j θ_j)`` over
the real words (masked ones never win). argmax has zero gradient almost
everywhere, so the backward pass uses the **straight-through** estimator
(Bengio, Léonard & Courville 2013): the gradient is that of ``softmax(θ/T)``,

.. math:: p_{ST} = \\mathrm{onehot}(\\arg\\max θ) + \\mathrm{softmax}(θ/T)
   - \\mathrm{sg}[\\mathrm{softmax}(θ/T)],

where ``sg`` stops the gradient. The value is exactly the one-hot vector; the
gradient is biased (it is not the gradient of any loss of the forward pass).
No score-function (REINFORCE) estimator is implemented here.

References:
  Bengio, Léonard & Courville, "Estimating or Propagating Gradients Through
  Stochastic Neurons", 2013. https://arxiv.org/abs/1308.3432
  Treviso et al., attention-mechanisms lecture (2020), "Hard attention".
"""
from typing import Optional

import jax
import jax.numpy as jnp

from attndyn.models.attention import softmax_attention

__all__ = ["hard_attention"]


def hard_attention(scores: jax.Array, mask: Optional[jax.Array] = None,
                   temperature: float = 1.0) -> jax.Array:
  """One-hot argmax weights with the straight-through softmax gradient.

  Args:
    scores: ``[..., L]``.
    mask: ``[..., L]`` bool, True for real words (default: all real).
    temperature: ``T`` of the surrogate softmax used for the gradient only.

  Returns:
    ``[..., L]`` one-hot weights (ties go to the first maximal word).
  """
  mask = jnp.ones(scores.shape, bool) if mask is None else jnp.broadcast_to(mask, scores.shape)
  hard = jax.nn.one_hot(jnp.argmax(jnp.where(mask, scores, -jnp.inf), axis=-1), scores.shape[-1],
                        dtype=scores.dtype)
  soft = softmax_attention(scores / temperature, mask)
  return hard + soft - jax.lax.stop_gradient(soft)
