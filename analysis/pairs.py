"""Word-pair scores and embeddings of Attn-TC-CNN (Lu et al. 2021, Appendix A, Figs 8-9).

The width-2 convolutions of :mod:`models.cnn` give every ordered
word pair ``(a, b)`` a key and an embedding,

.. math::
   ρ_{ab} = W^κ_0{}^T κ_a + W^κ_1{}^T κ_b + b^κ, \\qquad
   μ_{ab} = W^ν_0{}^T ν_a + W^ν_1{}^T ν_b + b^ν,

and a score ``s_{ab} = qᵀρ_{ab}``. These do not start near zero, so Appendix A
centres them on their initial values before checking Assumption 1 and the SEN
relation: ``Δs_{ab} = s_{ab} − s_{ab}(0)`` and ``‖q‖·‖μ_{ab} − μ_{ab}(0)‖``.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Appendix A. https://arxiv.org/abs/2011.10036
"""
import jax
import jax.numpy as jnp

__all__ = ["pair_scores", "pair_embeddings", "centred_pairs", "topic_pair_changes",
           "nontopic_pair_mask"]


def pair_scores(params: dict) -> jax.Array:
  """``[V, V]`` score ``s_{ab}`` of every ordered pair (row: first word)."""
  conv, q = params["conv"], params["query"]
  first = params["keys"] @ (conv["key_kernel"][0] @ q)
  second = params["keys"] @ (conv["key_kernel"][1] @ q)
  bias = jnp.dot(conv.get("key_bias", jnp.zeros_like(q)), q)
  return first[:, None] + second[None, :] + bias


def pair_embeddings(params: dict) -> jax.Array:
  """``[V, V, d]`` embedding ``μ_{ab}`` of every ordered pair."""
  conv = params["conv"]
  first = params["embeddings"] @ conv["embed_kernel"][0]
  second = params["embeddings"] @ conv["embed_kernel"][1]
  bias = conv.get("embed_bias", jnp.zeros(first.shape[-1], first.dtype))
  return first[:, None, :] + second[None, :, :] + bias


def centred_pairs(params: dict, params0: dict):
  """``(Δs [V, V], ‖q‖·‖Δμ‖ [V, V])``: every pair's score and embedding change since ``params0``."""
  ds = pair_scores(params) - pair_scores(params0)
  dmu = pair_embeddings(params) - pair_embeddings(params0)
  return ds, jnp.linalg.norm(params["query"]) * jnp.linalg.norm(dmu, axis=-1)


def topic_pair_changes(params: dict, params0: dict, pairs: jax.Array):
  """``(Δs [P], ‖q‖·‖Δμ‖ [P])`` of the topic pairs ``pairs [J, P/J, 2]`` (flattened)."""
  flat = pairs.reshape(-1, 2)
  conv, q = params["conv"], params["query"]

  def score(p):
    rho = (p["keys"][flat[:, 0]] @ p["conv"]["key_kernel"][0]
           + p["keys"][flat[:, 1]] @ p["conv"]["key_kernel"][1] + p["conv"].get("key_bias", 0.0))
    return rho @ p["query"]

  def emb(p):
    return (p["embeddings"][flat[:, 0]] @ p["conv"]["embed_kernel"][0]
            + p["embeddings"][flat[:, 1]] @ p["conv"]["embed_kernel"][1]
            + p["conv"].get("embed_bias", 0.0))

  del conv
  return score(params) - score(params0), jnp.linalg.norm(q) * jnp.linalg.norm(
      emb(params) - emb(params0), axis=-1)


def shares_topic_word(pairs: jax.Array, n_words: int) -> jax.Array:
  """``[V, V]`` bool: True for every ordered pair with a word that is in some topic pair (the
  topic pairs themselves included; combine with :func:`nontopic_pair_mask`)."""
  in_topic = jnp.zeros(n_words, bool).at[pairs.reshape(-1)].set(True)
  return in_topic[:, None] | in_topic[None, :]


def nontopic_pair_mask(pairs: jax.Array, n_words: int) -> jax.Array:
  """``[V, V]`` bool: True for every ordered pair that is not a topic pair."""
  flat = pairs.reshape(-1, 2)
  return jnp.ones((n_words, n_words), bool).at[flat[:, 0], flat[:, 1]].set(False)
