"""Attention scorers: ``θ = score(q, K)``, one score per (query, key) pair.

Every scorer maps queries ``[..., m, d_q]`` and keys ``[..., n, d_k]`` to
scores ``[..., m, n]`` (leading axes broadcast); a single query is
``q[..., None, :]``. Parameters, where a scorer has any, come from
:func:`init_scorer` (Treviso et al. 2020, "Attention mechanism", step 1):

* ``dot``: ``θ_j = k_jᵀ q`` (``d_q = d_k``); Lu et al.'s ``s_w = qᵀκ_w``.
* ``scaled_dot``: ``θ_j = k_jᵀ q / √d_k`` (Vaswani et al. 2017).
* ``bilinear``: ``θ_j = k_jᵀ W q``, ``W ∈ R^{d_k×d_q}`` (Luong et al. 2015, "general").
* ``additive``: ``θ_j = vᵀ tanh(W_1 k_j + W_2 q)`` (Bahdanau et al. 2015).

References:
  Bahdanau, Cho & Bengio, ICLR 2015. https://arxiv.org/abs/1409.0473
  Luong, Pham & Manning, EMNLP 2015. https://arxiv.org/abs/1508.04025
  Vaswani et al., NeurIPS 2017. https://arxiv.org/abs/1706.03762
"""
import jax
import jax.numpy as jnp

from attndyn.tasks.errors import check

__all__ = ["SCORERS", "dot", "scaled_dot", "bilinear", "additive", "init_scorer", "score"]

SCORERS = ("dot", "scaled_dot", "bilinear", "additive")


def dot(params: dict, queries: jax.Array, keys: jax.Array) -> jax.Array:
  """``θ_ij = k_jᵀ q_i``: ``[..., m, d]``, ``[..., n, d]`` → ``[..., m, n]``."""
  del params
  return jnp.einsum("...md,...nd->...mn", queries, keys)


def scaled_dot(params: dict, queries: jax.Array, keys: jax.Array) -> jax.Array:
  """``θ_ij = k_jᵀ q_i / √d``."""
  return dot(params, queries, keys) / jnp.sqrt(jnp.asarray(keys.shape[-1], queries.dtype))


def bilinear(params: dict, queries: jax.Array, keys: jax.Array) -> jax.Array:
  """``θ_ij = k_jᵀ W q_i`` with ``params["W"]`` of shape ``[d_k, d_q]``."""
  return jnp.einsum("...nk,kq,...mq->...mn", keys, params["W"], queries)


def additive(params: dict, queries: jax.Array, keys: jax.Array) -> jax.Array:
  """``θ_ij = vᵀ tanh(W_1 k_j + W_2 q_i)`` (Bahdanau et al. 2015, eq 6 / App. A.1.2).

  ``params``: ``W1 [h, d_k]``, ``W2 [h, d_q]``, ``v [h]``.
  """
  hk = jnp.einsum("hk,...nk->...nh", params["W1"], keys)
  hq = jnp.einsum("hq,...mq->...mh", params["W2"], queries)
  return jnp.einsum("...mnh,h->...mn", jnp.tanh(hq[..., :, None, :] + hk[..., None, :, :]),
                    params["v"])


_FNS = {"dot": dot, "scaled_dot": scaled_dot, "bilinear": bilinear, "additive": additive}


def init_scorer(key: jax.Array, name: str, d_query: int, d_key: int, hidden: int = 16,
                dtype=jnp.float32) -> dict:
  """Parameters of a scorer (``{}`` for ``dot``/``scaled_dot``), Glorot-like normal init.

  Raises:
    ConfigError: an unknown scorer, or ``dot``/``scaled_dot`` with ``d_query ≠ d_key``.
  """
  check(name in SCORERS, "scorer", name, f"one of {', '.join(SCORERS)}")
  if name in ("dot", "scaled_dot"):
    check(d_query == d_key, "d_query", d_query, f"equal to d_key = {d_key} for the {name} scorer")
    return {}
  if name == "bilinear":
    return {"W": jax.random.normal(key, (d_key, d_query), dtype) / jnp.sqrt(d_query)}
  k1, k2, k3 = jax.random.split(key, 3)
  return {"W1": jax.random.normal(k1, (hidden, d_key), dtype) / jnp.sqrt(d_key),
          "W2": jax.random.normal(k2, (hidden, d_query), dtype) / jnp.sqrt(d_query),
          "v": jax.random.normal(k3, (hidden,), dtype) / jnp.sqrt(hidden)}


def score(name: str, params: dict, queries: jax.Array, keys: jax.Array) -> jax.Array:
  """Scores ``[..., m, n]`` of the scorer ``name`` (one of :data:`SCORERS`)."""
  check(name in SCORERS, "scorer", name, f"one of {', '.join(SCORERS)}")
  return _FNS[name](params, queries, keys)
