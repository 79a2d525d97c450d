"""Output relevance (Snell et al., slides "Understanding Attention Training via Output Relevance").

For an attention classifier ``y = Σ_t a_t r_t`` with ``r_t = W h_t``, the output
relevance of position t is its vote ``r_t``; attention is attracted to large
``r``. In Lu et al.'s bag-of-words model ``h_t = ν_{w_t}`` and ``W = Uᵀ``, so each
word has one vote vector ``r_w = Uᵀν_w ∈ R^J``; its strength is the norm of
the vote after removing the part common to all classes:

.. math:: \\rho_w = \\| (I - \\tfrac{1}{J}\\mathbf{1}\\mathbf{1}^\\top) U^\\top \\nu_w \\|
"""
import jax
import jax.numpy as jnp

from attndyn.models.lu import word_scores

__all__ = ["relevance", "relevance_record"]


def relevance(params: dict) -> jax.Array:
  """``[V]`` ``ρ_w``: the class-discriminating part of each word's vote ``Uᵀν_w`` (TC/FC classifier)."""
  votes = params["embeddings"] @ params["classifier"]["U"]
  return jnp.linalg.norm(votes - votes.mean(-1, keepdims=True), axis=-1)


def relevance_record(n_topic: int, topic_attention_fn):
  """``record(params, params0)``: mean ρ and score over topic / non-topic words, attention on the topic word.

  Args:
    n_topic: the topic words are ids ``0..n_topic-1``.
    topic_attention_fn: ``params -> scalar`` mean attention on the topic word.
  """
  def record(params, params0):
    del params0
    rho, s = relevance(params), word_scores(params)
    return {"rho_topic": rho[:n_topic].mean(), "rho_other": rho[n_topic:].mean(),
            "score_topic": s[:n_topic].mean(), "score_other": s[n_topic:].mean(),
            "topic_attention": topic_attention_fn(params), "rho": rho, "score": s}
  return record
