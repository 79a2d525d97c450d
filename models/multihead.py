"""Multi-head attention with any scorer and normaliser (Vaswani et al. 2017, Section 3.2.2).

.. math:: \\mathrm{head}_h = π(\\mathrm{score}(Q W^Q_h, K W^K_h))\\, V W^V_h, \\qquad
   \\mathrm{out} = [\\mathrm{head}_1; …; \\mathrm{head}_H] W^O

with ``π`` a normaliser of :mod:`models.normalisers` (softmax, sparsemax,
entmax15) or ``"hard"`` (:mod:`models.hard_attention`), and ``score`` a scorer
of :mod:`models.scorers`.

References:
  Vaswani et al., "Attention Is All You Need", NeurIPS 2017. https://arxiv.org/abs/1706.03762
"""
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from attndyn.models.hard_attention import hard_attention
from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.models.scorers import init_scorer, score
from attndyn.tasks.errors import check

__all__ = ["MultiHeadOutput", "init_multihead", "multihead_attention"]


class MultiHeadOutput(NamedTuple):
  """``out [..., m, d_model]`` and the attention weights ``[..., H, m, n]``."""
  out: jax.Array
  attention: jax.Array


def init_multihead(key: jax.Array, d_model: int, n_heads: int, d_head: Optional[int] = None,
                   scorer: str = "scaled_dot", dtype=jnp.float32) -> dict:
  """Projections ``W^Q, W^K, W^V [H, d_model, d_head]``, ``W^O [H·d_head, d_model]`` and one
  scorer per head (the scorer's parameters get a leading head axis).
  """
  d_head = d_model // n_heads if d_head is None else d_head
  check(isinstance(d_head, int) and d_head >= 1, "d_head", d_head, "a positive integer")
  kq, kk, kv, ko, ks = jax.random.split(key, 5)
  std = 1.0 / jnp.sqrt(d_model)
  shape = (n_heads, d_model, d_head)
  return {"Wq": std * jax.random.normal(kq, shape, dtype),
          "Wk": std * jax.random.normal(kk, shape, dtype),
          "Wv": std * jax.random.normal(kv, shape, dtype),
          "Wo": jax.random.normal(ko, (n_heads * d_head, d_model), dtype) / jnp.sqrt(n_heads * d_head),
          "scorer": jax.vmap(lambda k: init_scorer(k, scorer, d_head, d_head, dtype=dtype))(
              jax.random.split(ks, n_heads))}


def multihead_attention(params: dict, queries: jax.Array, keys: jax.Array,
                        mask: Optional[jax.Array] = None, *, scorer: str = "scaled_dot",
                        normaliser: str = "softmax") -> MultiHeadOutput:
  """Multi-head attention of queries ``[..., m, d]`` over keys/values ``[..., n, d]``.

  Args:
    params: from :func:`init_multihead`.
    queries: ``[..., m, d_model]``.
    keys: ``[..., n, d_model]`` (also the values).
    mask: ``[..., n]`` (or ``[..., m, n]``) bool, True for keys that may be attended.
    scorer: one of :data:`models.scorers.SCORERS`.
    normaliser: one of :data:`models.normalisers.NAMED_NORMALISERS` or ``"hard"``.
  """
  check(normaliser in NAMED_NORMALISERS + ("hard",), "normaliser", normaliser,
        f"one of {', '.join(NAMED_NORMALISERS + ('hard',))}")
  q = jnp.einsum("...md,hde->...hme", queries, params["Wq"])
  k = jnp.einsum("...nd,hde->...hne", keys, params["Wk"])
  v = jnp.einsum("...nd,hde->...hne", keys, params["Wv"])
  heads = q.ndim - 3
  theta = jax.vmap(lambda p, q_, k_: score(scorer, p, q_, k_), in_axes=(0, heads, heads),
                   out_axes=heads)(params["scorer"], q, k)               # [..., H, m, n]
  if mask is None:
    mask = jnp.ones(theta.shape, bool)
  else:
    mask = mask[..., None, :] if mask.ndim == keys.ndim - 1 else mask   # [..., (m,) n]
    mask = jnp.broadcast_to(mask[..., None, :, :], theta.shape)
  if normaliser == "hard":
    weights = hard_attention(theta, mask)
  else:
    weights = normalise(normaliser, theta, mask)
  ctx = jnp.einsum("...hmn,...hne->...mhe", weights, v)
  out = ctx.reshape(ctx.shape[:-2] + (-1,)) @ params["Wo"]
  return MultiHeadOutput(out, weights)
