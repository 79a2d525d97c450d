"""The bag-of-words proxy of Snell et al. (Section 2.3) for how KTIW is learned under uniform attention.

Early in training the attention is uniform, so the output at every target step
is the average over source positions of each position's vote. If the
information of a word stays in its own hidden state, position l's vote for
output o is a free number ``γ[x_l, o]`` (the output relevance ``r_{o,l}`` of the
slides), and

.. math:: p(o \\mid x) = \\mathrm{softmax}_o\\Big(\\frac{1}{|x|} \\sum_l \\gamma[x_l, o]\\Big)

is the same for every target step: training maximises the likelihood of every
target word of the pair, so ``γ`` grows with word co-occurrence. The proxy's
lexical probe is ``β_{t,l} = softmax(γ[x_l])_{o_t}`` (attending only to l).
γ starts at zero (uniform output, as the real model's attention starts uniform).
"""
import jax
import jax.numpy as jnp

from attndyn.tasks.batch import Batch

__all__ = ["init", "apply", "loss", "lexical_probe"]


def init(src_vocab: int, tgt_vocab: int, dtype=jnp.float32) -> dict:
  """``{"gamma": zeros [V_src, V_tgt]}``."""
  return {"gamma": jnp.zeros((src_vocab, tgt_vocab), dtype)}


def apply(params: dict, batch: Batch) -> jax.Array:
  """``[n, V_tgt]`` logits ``(1/|x|) Σ_l γ[x_l]`` over the real source words."""
  m = batch.mask.astype(params["gamma"].dtype)
  votes = params["gamma"][batch.tokens] * m[..., None]
  return votes.sum(1) / jnp.maximum(m.sum(1, keepdims=True), 1)


def loss(params: dict, batch: Batch):
  """``(mean cross-entropy over real target words, logits)``: every target word scored by the same logits.

  Pair i's target words share its logits ``ℓ_i``, so the summed cross-entropy is
  ``Σ_t w_it (logsumexp(ℓ_i) − ℓ_i[o_t])``: no ``[n, T, V_tgt]`` tensor is formed.
  """
  logits = apply(params, batch)
  y = batch.labels
  w = (y > 0).astype(logits.dtype)
  picked = jnp.take_along_axis(logits, y, axis=1)                     # [n, T]
  lse = jax.nn.logsumexp(logits, axis=-1)                             # [n]
  total = (w.sum(1) * lse).sum() - (w * picked).sum()
  return total / jnp.maximum(w.sum(), 1), logits


def lexical_probe(params: dict, batch: Batch) -> jax.Array:
  """``β [n, T, L] = softmax(γ[x_l])_{o_t}``."""
  p = jax.nn.softmax(params["gamma"], -1)[batch.tokens]               # [n, L, V]
  return jnp.take_along_axis(p[:, None, :, :], batch.labels[:, :, None, None], -1)[..., 0]
