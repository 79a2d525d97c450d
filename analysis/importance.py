"""Feature importance of the words of a sentence for the Lu model (Jain & Wallace 2019, Section 3).

Two importance measures to rank against the attention weights (Kendall τ-b,
:mod:`analysis.kendall`):

* **gradient** (J&W Algorithm 1): ``g_w = |∂ŷ_c/∂x_w|``, the derivative of the
  predicted class's probability along the one-hot input of the word at
  position ``w``. In the Lu model scaling that one-hot entry by ``λ_w`` scales
  the word's embedding and key (so its score ``s_w``), hence
  ``g_w = |dŷ_c/dλ_w|`` at ``λ = 1``. As in J&W the gradient is not passed
  through the attention weights (``through_attention=False``: they are
  treated as constants), so only the embedding path counts.
* **leave-one-out** (J&W Algorithm 1): ``Δŷ_w = TVD(ŷ(χ∖w), ŷ(χ))``, the
  change of the output distribution when the word is removed (masked; every
  normaliser gives masked words weight exactly 0).

References:
  Jain & Wallace, "Attention is not Explanation", NAACL 2019. https://arxiv.org/abs/1902.10186
"""
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.divergences import tvd
from attndyn.analysis.kendall import kendall_tau_b
from attndyn.models.classifiers import apply_classifier
from attndyn.models.lu import word_scores
from attndyn.models.normalisers import normalise
from attndyn.tasks.batch import Batch

__all__ = ["lu_forward", "gradient_importance", "leave_one_out_importance", "TauStats",
           "attention_importance_tau"]


def lu_forward(params: dict, tokens: jax.Array, mask: jax.Array, normaliser: str = "softmax",
               scale: Optional[jax.Array] = None, through_attention: bool = True):
  """``(probs [n, J], attention [n, L])`` of the Lu model, with optional one-hot scales ``λ [n, L]``."""
  s = word_scores(params)[tokens]
  emb = params["embeddings"][tokens]
  if scale is not None:
    s = s * scale
    emb = emb * scale[..., None]
  a = normalise(normaliser, s, mask)
  a_used = a if through_attention else jax.lax.stop_gradient(a)
  context = jnp.einsum("...l,...ld->...d", a_used, emb)
  return jax.nn.softmax(apply_classifier(params["classifier"], context), axis=-1), a


def gradient_importance(params: dict, batch: Batch, normaliser: str = "softmax",
                        through_attention: bool = False) -> jax.Array:
  """``[n, L]`` ``|∂ŷ_c/∂x_w|`` for the predicted class ``c`` (0 at masked positions)."""
  probs, _ = lu_forward(params, batch.tokens, batch.mask, normaliser)
  pred = jnp.argmax(probs, axis=-1)

  def predicted_prob(scale):
    p, _ = lu_forward(params, batch.tokens, batch.mask, normaliser, scale, through_attention)
    return jnp.sum(jnp.take_along_axis(p, pred[:, None], axis=-1))

  grad = jax.grad(predicted_prob)(jnp.ones(batch.tokens.shape, probs.dtype))
  return jnp.where(batch.mask, jnp.abs(grad), 0.0)


def leave_one_out_importance(params: dict, batch: Batch, normaliser: str = "softmax") -> jax.Array:
  """``[n, L]`` ``TVD(ŷ(χ∖w), ŷ(χ))`` for every real word ``w`` (0 at masked positions)."""
  probs, _ = lu_forward(params, batch.tokens, batch.mask, normaliser)
  length = batch.tokens.shape[-1]

  def without(pos):
    mask = batch.mask & (jnp.arange(length) != pos)[None, :]
    p, _ = lu_forward(params, batch.tokens, mask, normaliser)
    return tvd(p, probs)

  loo = jax.lax.map(without, jnp.arange(length)).T                      # [n, L]
  return jnp.where(batch.mask, loo, 0.0)


class TauStats(NamedTuple):
  """Per-sentence Kendall τ-b of attention vs importance (NaN where undefined).

  Attributes:
    tau_grad: ``[n]`` attention vs gradient importance.
    tau_loo: ``[n]`` attention vs leave-one-out importance.
    attention: ``[n, L]``; grad, loo: ``[n, L]`` the importances.
  """
  tau_grad: np.ndarray
  tau_loo: np.ndarray
  attention: np.ndarray
  grad: np.ndarray
  loo: np.ndarray


def attention_importance_tau(params: dict, batch: Batch, normaliser: str = "softmax") -> TauStats:
  """Kendall τ-b between the attention weights and both importance measures, per sentence."""
  _, attention = lu_forward(params, batch.tokens, batch.mask, normaliser)
  grad = gradient_importance(params, batch, normaliser)
  loo = leave_one_out_importance(params, batch, normaliser)
  attention, grad, loo, mask = (np.asarray(x) for x in (attention, grad, loo, batch.mask))
  return TauStats(kendall_tau_b(attention, grad, mask), kendall_tau_b(attention, loo, mask),
                  attention, grad, loo)
