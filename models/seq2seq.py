"""LSTM encoder–decoder with dot ("general") attention, Luong et al. (2015), as used by Snell et al.

Snell et al., Section 2.1: an LSTM encoder reads the source ``x_1..x_L`` into
hidden states ``h_l``; an LSTM decoder, started from the encoder's final state
and fed the previous target word (teacher forcing), gives ``d_t``; attention

.. math:: a_{t,l} = \\mathrm{softmax}_l(d_t^\\top W_a h_l), \\qquad c_t = \\sum_l a_{t,l} h_l

(Luong's "general" score) and the output ``p(o | t) = softmax(W_s tanh(W_c [c_t; d_t]) + b_s)``.
No input feeding. This is our model ("ours: no EOS, Glorot": flax LSTM cells with
orthogonal recurrent kernels, Glorot output layers, no attention or projection
biases, no ``project_enc``), used by the Multi30k experiments and kept for the
copying task as a named variant; the authors' copying model is
:mod:`models.seq2seq_snell` (``docs/snell-copying.md`` lists the differences). Options:

* ``attention="uniform"``: ``a_{t,l} = 1/|x|`` frozen (Snell et al., Section 3.2).
* ``heads=K``: K attention heads with their own ``W_a^k`` over the same encoder
  states, ``tanh(W_c [c_t^1; ...; c_t^K; d_t])`` (the multi-head toy, Section 5.2).
  Each head's ``W_a^k`` comes from its own PRNG key (``init(..., head_keys=...)``),
  so heads can be initialised as the heads of chosen single-head seeds.
* ``shared_embedding``: one embedding table for source and target (the copying
  task, where the output word is the input word's id).

Token id 0 is padding (source) and begin-of-sentence / padding (target); real
words are ``1..vocab-1``. The LSTM cells are ``flax.linen.LSTMCell`` used through
their pure ``init`` (the parameters) and run by :func:`run_lstm`, which does the
cell's arithmetic with the input projection hoisted out of the time loop.

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns",
  arXiv:2103.07601. Luong, Pham & Manning, "Effective Approaches to Attention-based
  Neural Machine Translation", EMNLP 2015.
"""
import dataclasses
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from attndyn.models.orthogonal import orthogonal
from attndyn.tasks.batch import Batch
from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.tasks.errors import check

__all__ = ["ATTENTIONS", "PARAM_GROUPS", "Seq2SeqConfig", "Seq2SeqOutput", "fused_lstm_weights",
           "run_lstm", "init", "head_init", "single_head_key", "encode", "decoder_inputs",
           "attention_weights", "readout", "apply", "seq_loss", "make_seq_loss"]

ATTENTIONS = ("general", "uniform")
PARAM_GROUPS = ("embed", "encoder", "decoder", "attention", "output")


@dataclasses.dataclass(frozen=True)
class Seq2SeqConfig:
  """Architecture.

  Attributes:
    src_vocab: source vocabulary size including id 0 (padding).
    tgt_vocab: target vocabulary size including id 0 (BOS / padding).
    hidden: LSTM hidden size (= embedding size). Snell et al.: 256.
    attention: ``"general"`` (trained, Luong's general score) or ``"uniform"`` (frozen 1/|x|).
    heads: number of attention heads K.
    shared_embedding: one table for source and target (needs ``src_vocab == tgt_vocab``).
    attn_std: standard deviation of the entries of each ``W_a^k`` (scaled by 1/√hidden).
    embed_std: standard deviation of the embedding entries: 1, PyTorch's ``nn.Embedding``
      default, which the authors' code uses. (At 0.1, hidden 64, copying i.i.d. tokens
      reaches token accuracy 0.28–0.60 after 200 Adam steps instead of 0.95–0.96.)
    normaliser: how the general scores become weights over the source words:
      ``"softmax"`` (Snell et al.) or any of :data:`models.normalisers.NAMED_NORMALISERS`
      (sparsemax, entmax15, and the structured fusedmax / crf / sparsemap with their
      default options). Unused with uniform attention.
  """
  src_vocab: int
  tgt_vocab: int
  hidden: int = 256
  attention: str = "general"
  heads: int = 1
  shared_embedding: bool = False
  attn_std: float = 1.0
  embed_std: float = 1.0
  normaliser: str = "softmax"

  def __post_init__(self):
    for name in ("src_vocab", "tgt_vocab", "hidden", "heads"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name, value, "a positive integer")
    check(self.src_vocab >= 2 and self.tgt_vocab >= 2, "src_vocab/tgt_vocab",
          (self.src_vocab, self.tgt_vocab), "at least 2 (id 0 is padding)")
    check(self.attention in ATTENTIONS, "attention", self.attention,
          f"one of {', '.join(ATTENTIONS)}")
    check(self.normaliser in NAMED_NORMALISERS, "normaliser", self.normaliser,
          f"one of {', '.join(NAMED_NORMALISERS)}")
    check(isinstance(self.shared_embedding, bool), "shared_embedding",
          self.shared_embedding, "true or false")
    if self.shared_embedding:
      check(self.src_vocab == self.tgt_vocab, "shared_embedding", self.shared_embedding,
            f"false unless src_vocab == tgt_vocab (got {self.src_vocab} and {self.tgt_vocab})")
    for name in ("attn_std", "embed_std"):
      value = getattr(self, name)
      check(isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 < value < float("inf"), name, value, "a finite number > 0")

  def trainable(self) -> dict:
    """Parameter groups gradient descent updates (uniform attention has no trained W_a)."""
    return {g: not (g == "attention" and self.attention == "uniform") for g in PARAM_GROUPS}


class Seq2SeqOutput(NamedTuple):
  """What the model computes for n pairs, source length L, target length T.

  Attributes:
    logits: ``[n, T, V_tgt]`` output logits.
    attention: ``[n, K, T, L]`` attention weights ``a_{t,l}`` of each head.
    enc: ``[n, L, d]`` encoder states ``h_l``.
    dec: ``[n, T, d]`` decoder states ``d_t``.
  """
  logits: jax.Array
  attention: jax.Array
  enc: jax.Array
  dec: jax.Array


def _cell(cfg: Seq2SeqConfig) -> nn.OptimizedLSTMCell:
  # Flax's default orthogonal recurrent init, through a QR that is safe under vmap (models.orthogonal).
  return nn.OptimizedLSTMCell(features=cfg.hidden, recurrent_kernel_init=orthogonal())


def fused_lstm_weights(cell_params: dict):
  """``(W_i [d_in, 4d], W_h [d, 4d], b [4d])`` of a flax ``OptimizedLSTMCell`` (gates i, f, g, o)."""
  gates = ("i", "f", "g", "o")
  w_i = jnp.concatenate([cell_params[f"i{g}"]["kernel"] for g in gates], -1)
  w_h = jnp.concatenate([cell_params[f"h{g}"]["kernel"] for g in gates], -1)
  b = jnp.concatenate([cell_params[f"h{g}"]["bias"] for g in gates], -1)
  return w_i, w_h, b


def run_lstm(cell_params: dict, inputs: jax.Array, mask: Optional[jax.Array] = None, carry=None):
  """Run the flax ``OptimizedLSTMCell`` of ``cell_params`` over ``inputs [n, L, d_in]``.

  The same arithmetic as ``cell.apply`` step by step, with the input projection
  of all L steps done as one matmul before the scan (the cost on a CPU).

  Args:
    cell_params: the cell's parameters (``cell.init(...)["params"]``).
    inputs: ``[n, L, d_in]``.
    mask: optional ``[n, L]``; where False the carry is held (padding).
    carry: optional initial ``(c, h)``, each ``[n, d]`` (default zeros).

  Returns:
    ``(final (c, h), states h [n, L, d])``.
  """
  w_i, w_h, b = fused_lstm_weights(cell_params)
  d = w_h.shape[0]
  n = inputs.shape[0]
  if carry is None:
    carry = (jnp.zeros((n, d), inputs.dtype), jnp.zeros((n, d), inputs.dtype))
  if mask is None:
    mask = jnp.ones(inputs.shape[:2], bool)
  xs = jnp.swapaxes(inputs @ w_i + b, 0, 1)

  def step(c_h, xm):
    x, m = xm
    c, h = c_h
    z = x + h @ w_h
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c_new = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
    keep = m[:, None]
    return (jnp.where(keep, c_new, c), jnp.where(keep, h_new, h)), h_new

  carry, hs = jax.lax.scan(step, carry, (xs, mask.T))
  return carry, jnp.swapaxes(hs, 0, 1)


def init(key: jax.Array, cfg: Seq2SeqConfig, head_keys: Optional[jax.Array] = None) -> dict:
  """Parameters ``{"embed", "encoder", "decoder", "attention", "output"}``.

  Args:
    key: PRNG key of everything but the attention heads (and of the heads too
      when ``head_keys`` is None).
    cfg: the architecture.
    head_keys: optional ``[K, 2]`` keys, one per head: head k's ``W_a^k`` is the
      ``W_a`` a single-head model initialised with key ``head_keys[k]`` gets.

  Returns:
    ``attention["W"]`` is ``[K, d, d]``; ``embed["src"]`` (and ``embed["tgt"]``
    unless shared) ``[V, d]``; ``encoder``/``decoder`` are flax
    ``OptimizedLSTMCell`` parameters; ``output`` holds ``W_c [(K+1)d, d]``,
    ``W_s [d, V]``, ``b_s``.
  """
  d, k = cfg.hidden, cfg.heads
  ks = jax.random.split(key, 8)
  x = jnp.zeros((1, d))
  carry = _cell(cfg).initialize_carry(ks[0], x.shape)
  embed = {"src": jax.random.normal(ks[1], (cfg.src_vocab, d)) * cfg.embed_std}
  if not cfg.shared_embedding:
    embed["tgt"] = jax.random.normal(ks[2], (cfg.tgt_vocab, d)) * cfg.embed_std
  if head_keys is None:
    head_keys = jax.random.split(ks[3], k) if k > 1 else ks[3][None]
  else:
    check(head_keys.shape[0] == k, "head_keys", tuple(head_keys.shape), f"one key per head ({k})")
  w_a = jax.vmap(lambda hk: head_init(hk, cfg))(head_keys)
  glorot = nn.initializers.glorot_uniform()
  return {
      "embed": embed,
      "encoder": _cell(cfg).init(ks[4], carry, x)["params"],
      "decoder": _cell(cfg).init(ks[5], carry, x)["params"],
      "attention": {"W": w_a},
      "output": {"W_c": glorot(ks[6], ((k + 1) * d, d)), "W_s": glorot(ks[7], (d, cfg.tgt_vocab)),
                 "b_s": jnp.zeros((cfg.tgt_vocab,))},
  }


def head_init(key: jax.Array, cfg: Seq2SeqConfig) -> jax.Array:
  """One head's ``W_a [d, d]``: entries ``N(0, attn_std² / d)``."""
  return jax.random.normal(key, (cfg.hidden, cfg.hidden)) * cfg.attn_std / jnp.sqrt(cfg.hidden)


def single_head_key(key: jax.Array) -> jax.Array:
  """The key :func:`init` uses for the head of a single-head model initialised with ``key``."""
  return jax.random.split(key, 8)[3]


def encode(params: dict, cfg: Seq2SeqConfig, tokens: jax.Array, mask: jax.Array):
  """Encoder states ``h [n, L, d]`` and the final carry (the state after the last real word)."""
  del cfg
  carry, hs = run_lstm(params["encoder"], params["embed"]["src"][tokens], mask)
  return hs, carry


def decoder_inputs(labels: jax.Array) -> jax.Array:
  """Teacher forcing: ``[BOS=0, o_1, ..., o_{T-1}]``."""
  return jnp.concatenate([jnp.zeros_like(labels[:, :1]), labels[:, :-1]], axis=1)


def attention_weights(params: dict, cfg: Seq2SeqConfig, enc, dec, mask) -> jax.Array:
  """``[n, K, T, L]``: ``softmax_l(d_tᵀ W_a^k h_l)`` over real source words, or uniform.

  A ``cfg.normaliser`` other than softmax replaces the softmax (padding gets weight 0).
  """
  n, t, l = dec.shape[0], dec.shape[1], enc.shape[1]
  valid = mask[:, None, None, :]
  if cfg.attention == "uniform":
    a = jnp.broadcast_to(valid, (n, cfg.heads, t, l)).astype(enc.dtype)
    return a / jnp.maximum(a.sum(-1, keepdims=True), 1)
  scores = jnp.einsum("ntd,kde,nle->nktl", dec, params["attention"]["W"], enc)
  if cfg.normaliser != "softmax":
    return normalise(cfg.normaliser, scores, valid)
  scores = jnp.where(valid, scores, -jnp.inf)
  return jax.nn.softmax(scores, axis=-1)


def readout(params: dict, contexts: jax.Array, dec: jax.Array) -> jax.Array:
  """Logits ``W_s tanh(W_c [c^1; ...; c^K; d]) + b_s``.

  Args:
    params: the model's parameters.
    contexts: ``[..., K, d]`` one context vector per head.
    dec: ``[..., d]`` decoder states (broadcast against ``contexts[..., 0, :]``).
  """
  flat = contexts.reshape(contexts.shape[:-2] + (-1,))
  dec = jnp.broadcast_to(dec, flat.shape[:-1] + dec.shape[-1:])
  out = params["output"]
  h = jnp.tanh(jnp.concatenate([flat, dec], -1) @ out["W_c"])
  return h @ out["W_s"] + out["b_s"]


def apply(params: dict, batch: Batch, cfg: Seq2SeqConfig) -> Seq2SeqOutput:
  """Teacher-forced forward pass: ``batch.tokens`` source, ``batch.labels [n, T]`` target."""
  enc, carry = encode(params, cfg, batch.tokens, batch.mask)
  table = params["embed"]["src" if cfg.shared_embedding else "tgt"]
  _, dec = run_lstm(params["decoder"], table[decoder_inputs(batch.labels)], carry=carry)
  a = attention_weights(params, cfg, enc, dec, batch.mask)
  ctx = jnp.einsum("nktl,nld->ntkd", a, enc)
  return Seq2SeqOutput(readout(params, ctx, dec), a, enc, dec)


def seq_loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean cross-entropy over real target words (``labels > 0``)."""
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
  m = (labels > 0).astype(ce.dtype)
  return (ce * m).sum() / jnp.maximum(m.sum(), 1)


def make_seq_loss(cfg: Seq2SeqConfig):
  """``loss(params, batch) -> (mean token cross-entropy, Seq2SeqOutput)`` for ``dynamics.make_train``."""
  def loss(params, batch: Batch):
    out = apply(params, batch, cfg)
    return seq_loss(out.logits, batch.labels), out
  return loss
