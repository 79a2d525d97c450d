"""The Lu et al. (2021) model with a linear classifier, projected through ``U`` first.

For Attn-FC and Attn-TC the logits are linear in the context vector, so

.. math::
   U^T \\bar ν(χ) = \\sum_{w \\in χ} \\frac{e^{s_w}}{Z(χ)} U^T ν_w
                  = \\sum_{w \\in χ} \\frac{e^{s_w}}{Z(χ)} P_w, \\qquad P = E U,

and the forward pass gathers the ``J``-channel rows ``P_w`` instead of the
``d``-channel embeddings. It is the same function of the same parameters
(autodiff through ``P = E U`` gives the same gradients, up to rounding), only
cheaper when ``J ≪ d`` (SST: ``d = 200``, ``J = 2`` or ``5``).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 3 and Section 5. https://arxiv.org/abs/2011.10036
"""
from typing import Callable, Mapping

import jax
import jax.numpy as jnp

from attndyn.models.attention import attend, softmax_attention
from attndyn.models.classifiers import LINEAR_CLASSIFIERS
from attndyn.models.lu import LuModelConfig, LuOutput, apply, word_scores
from attndyn.tasks.batch import Batch

__all__ = ["apply_linear", "apply_linear_for", "gate"]


def apply_linear(params: dict, batch: Batch) -> LuOutput:
  """Forward pass of Attn-FC / Attn-TC through ``P = E U`` (``context`` is ``None``).

  Args:
    params: Lu-model parameters whose classifier is ``{"U": [d, J]}``.
    batch: ``tokens [n, L]``, ``mask [n, L]``.

  Returns:
    :class:`models.LuOutput` with ``logits [n, J]``, ``attention [n, L]``,
    ``scores [n, L]`` and ``context=None``.
  """
  scores = word_scores(params)[batch.tokens]
  attention = softmax_attention(scores, batch.mask)
  projected = params["embeddings"] @ params["classifier"]["U"]
  return LuOutput(attend(projected[batch.tokens], attention), attention, scores, None)


def apply_linear_for(cfg: LuModelConfig) -> Callable:
  """The forward pass of ``cfg``: :func:`apply_linear` (projected through U, exact) for the
  linear classifiers, else the plain :func:`models.lu.apply`."""
  return apply_linear if cfg.classifier in LINEAR_CLASSIFIERS else apply


def gate(params: dict, flags: Mapping[str, jax.Array]) -> dict:
  """Parameters whose gradient is cut for every group with flag 0 (a traced freeze).

  ``flag · x + (1 − flag) · stop_gradient(x)`` is exactly ``x`` for a flag of 0
  or 1, and its gradient is ``flag · ∇``: gradient descent leaves a group with
  flag 0 where it is. Unlike ``LuModelConfig.freeze`` (static), the flags may
  differ between the points of one vmapped sweep, so Attn-TC, Attn-TC-KF and
  Attn-TC-EF (Fig 3) or FC and TC share one compiled program.

  Args:
    params: a dict of top-level parameter groups.
    flags: group -> scalar 0.0 (frozen) or 1.0 (trained); groups not named train.

  Returns:
    The gated parameters (same values).
  """
  def one(group, tree):
    if group not in flags:
      return tree
    flag = jnp.asarray(flags[group])
    return jax.tree.map(lambda x: (flag * x + (1 - flag) * jax.lax.stop_gradient(x)).astype(x.dtype),
                        tree)
  return {group: one(group, tree) for group, tree in params.items()}
