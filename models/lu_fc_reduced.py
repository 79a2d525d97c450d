"""Attn-FC reduced to ``P = E U``: exact gradient descent in ``J + 1`` numbers per word.

With a fixed classifier ``U [d, J]`` and a fixed query ``q``, gradient descent
on the embeddings moves each ``ν_w`` only inside the column space of ``U``
(``∂L/∂ν_w = (∂L/∂P_w) Uᵀ`` with ``P_w = ν_w U``) and each key only along
``q``. Writing ``G = UᵀU = R Rᵀ`` (Cholesky), ``P = P(0) + b Rᵀ`` and
``s = s(0) + ‖q‖ σ``, plain gradient descent on ``(b, σ)`` with the same
learning rate is *exactly* gradient descent on ``(E, K)``:

.. math::
   ΔP_w = Δb_w R^T = -τ\\,\\frac{∂L}{∂P_w} R R^T = -τ\\,\\frac{∂L}{∂ν_w} U,
   \\qquad Δs_w = ‖q‖Δσ_w = -τ ‖q‖^2 \\frac{∂L}{∂s_w},

and the embedding is recovered as ``ν_w = ν_w(0) + b_w R^{-1} Uᵀ``, whose norm is

.. math:: \\|ν_w\\|^2 = \\|ν_w(0)\\|^2 + 2\\, (P(0) R^{-T})_w \\cdot b_w + \\|b_w\\|^2 .

An SST epoch then costs gathers of ``J + 1`` channels instead of ``d = 200``
(docs/independent-measurements.md: "with a fixed U, only P = E·U matters for FC").

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 4 (Theorem 2's fixed linear classifier). https://arxiv.org/abs/2011.10036
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attndyn.models.attention import attend, softmax_attention
from attndyn.models.lu import LuOutput
from attndyn.tasks.batch import Batch

__all__ = ["FCConstants", "reduce", "scores", "embedding_norms", "make_apply", "expand"]


class FCConstants(NamedTuple):
  """What the reduced model keeps fixed (per run).

  Attributes:
    p0: ``[V, J]`` ``P(0) = E(0) U``.
    p0_rinv: ``[V, J]`` ``P(0) R^{-T}`` (for the norms).
    norm0_sq: ``[V]`` ``‖ν_w(0)‖²``.
    s0: ``[V]`` initial scores ``K(0) q``.
    r: ``[J, J]`` lower Cholesky factor of ``UᵀU``.
    q_norm: ``‖q‖``.
  """
  p0: jax.Array
  p0_rinv: jax.Array
  norm0_sq: jax.Array
  s0: jax.Array
  r: jax.Array
  q_norm: jax.Array


def reduce(params0: dict):
  """``(reduced params {"b": 0 [V, J], "sigma": 0 [V]}, FCConstants)`` of Lu-model FC parameters."""
  u = params0["classifier"]["U"]
  r = jnp.linalg.cholesky(u.T @ u)
  p0 = params0["embeddings"] @ u
  p0_rinv = jax.scipy.linalg.solve_triangular(r, p0.T, lower=True).T
  consts = FCConstants(p0=p0, p0_rinv=p0_rinv,
                       norm0_sq=jnp.sum(params0["embeddings"] ** 2, -1),
                       s0=params0["keys"] @ params0["query"], r=r,
                       q_norm=jnp.linalg.norm(params0["query"]))
  reduced = {"b": jnp.zeros_like(p0), "sigma": jnp.zeros_like(consts.s0)}
  return reduced, consts


def scores(params: dict, consts: FCConstants) -> jax.Array:
  """``[V]`` word scores ``s = s(0) + ‖q‖ σ``."""
  return consts.s0 + consts.q_norm * params["sigma"]


def embedding_norms(params: dict, consts: FCConstants) -> jax.Array:
  """``[V]`` ``‖v_w‖ = ‖q‖ ‖ν_w‖`` (the paper's ``v = ‖q‖ν``)."""
  sq = consts.norm0_sq + 2 * jnp.sum(consts.p0_rinv * params["b"], -1) + jnp.sum(params["b"] ** 2, -1)
  return consts.q_norm * jnp.sqrt(jnp.maximum(sq, 0.0))


def make_apply(consts: FCConstants):
  """``apply(params, batch) -> LuOutput`` of the reduced model (``context`` is ``None``)."""
  def apply(params: dict, batch: Batch) -> LuOutput:
    s = scores(params, consts)[batch.tokens]
    attention = softmax_attention(s, batch.mask)
    projected = consts.p0 + params["b"] @ consts.r.T
    return LuOutput(attend(projected[batch.tokens], attention), attention, s, None)
  return apply


def expand(params: dict, consts: FCConstants, params0: dict) -> dict:
  """The full Lu-model parameters the reduced ones stand for.

  ``ν_w = ν_w(0) + b_w R^{-1} Uᵀ`` and ``κ_w = κ_w(0) + (s_w − s_w(0)) q / ‖q‖²``.
  """
  u, q = params0["classifier"]["U"], params0["query"]
  coeff = jax.scipy.linalg.solve_triangular(consts.r.T, params["b"].T, lower=False).T
  keys = params0["keys"] + ((scores(params, consts) - consts.s0) / consts.q_norm ** 2)[:, None] * q
  return {**params0, "embeddings": params0["embeddings"] + coeff @ u.T, "keys": keys}
