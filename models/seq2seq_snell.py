"""The authors' copying model (Snell et al.'s code): LSTM encoder–decoder, Luong "general" attention.

The model of Sea-Snell/AttentionDynamics ``SequenceCopying/seq2seq_model.py`` as its
``seq2seq.py`` builds it (one layer, unidirectional, no dropout), written as a pure
``init``/``apply`` pair. For decoder output ``d_t`` and encoder states ``h_l``:

.. math::
   a_{t,l} = \\mathrm{softmax}_l\\big((W_a d_t + b_a)^\\top h_l\\big), \\qquad
   c_t = W_p \\sum_l a_{t,l} h_l + b_p,

.. math::
   \\log p(\\cdot \\mid t) = \\mathrm{log\\_softmax}\\big(W_s \\tanh(W_c [d_t; c_t] + b_c) + b_s\\big)

(Luong's "general" score with ``attn_lin = nn.Linear(h, h)`` *with* its bias, the
query the decoder LSTM's output, no input feeding; ``project_enc = nn.Linear(h, h)``
on the context; ``after_decoder_hidden``, ``hidden2vocab``). The LSTMs are
``torch.nn.LSTM``'s cell (gates i, f, g, o; two bias vectors ``b_ih``, ``b_hh``,
both trained); the decoder starts from the encoder's final ``(h, c)``. One
embedding table (``nn.Embedding``, width = hidden) serves encoder and decoder.

Every initialiser is PyTorch's default (:func:`torch_linear`, :func:`torch_lstm`,
:func:`torch_gru`, :func:`torch_embedding`). With ``heads = K > 1`` each head has its own
``W_a^k, b_a^k`` and ``W_p^k, b_p^k`` and ``c_t`` is the mean of the K projected
contexts (``multihead.py``'s ``Attn_head`` and ``context_v_agg``); ``multihead.py``'s
model is ``heads=K, cell="gru", shared_embedding=False, context_first=True``.

Differences from :mod:`models.seq2seq` ("ours: no EOS, Glorot") and which test pins
each: ``docs/snell-copying.md``.

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns",
  arXiv:2103.07601. Luong, Pham & Manning, "Effective Approaches to Attention-based
  Neural Machine Translation", EMNLP 2015.
"""
import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["CELLS", "SnellSeq2SeqConfig", "SnellOutput", "torch_linear", "torch_lstm", "torch_gru",
           "torch_embedding", "init", "attention_head", "run_lstm", "run_gru", "decoder_inputs", "attention_weights",
           "project", "readout", "apply", "probe", "nll", "make_loss"]


CELLS = ("lstm", "gru")


@dataclasses.dataclass(frozen=True)
class SnellSeq2SeqConfig:
  """Architecture of the authors' copying model.

  Attributes:
    vocab: number of ids, words + EOS + SOS (the authors': 40 + 2 = 42).
    sos: the id fed to the decoder first (the authors': ``vocab - 1``).
    hidden: LSTM hidden size = embedding width (the authors': 256).
    heads: attention heads K (1 in ``seq2seq.py``).
    cell: ``"lstm"`` (``seq2seq.py``) or ``"gru"`` (``multihead.py``: ``nn.GRU``).
    shared_embedding: one table for encoder and decoder (``seq2seq.py``); ``multihead.py``
      has two (``enc_embedding``, ``dec_embedding``).
    context_first: the readout reads ``[c; d]`` (``multihead.py``) instead of ``[d; c]``.
    normaliser: ``"softmax"`` (the authors') or any of
      :data:`models.normalisers.NAMED_NORMALISERS`, applied to the general scores.
  """
  vocab: int
  sos: int
  hidden: int = 256
  heads: int = 1
  cell: str = "lstm"
  shared_embedding: bool = True
  context_first: bool = False
  normaliser: str = "softmax"

  def __post_init__(self):
    for name in ("vocab", "hidden", "heads"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name, value, "a positive integer")
    check(isinstance(self.sos, int) and 0 <= self.sos < self.vocab, "sos", self.sos,
          f"an id in 0..{self.vocab - 1}")
    check(self.cell in CELLS, "cell", self.cell, f"one of {', '.join(CELLS)}")
    for name in ("shared_embedding", "context_first"):
      check(isinstance(getattr(self, name), bool), name, getattr(self, name),
            "true or false")
    check(self.normaliser in NAMED_NORMALISERS, "normaliser", self.normaliser,
          f"one of {', '.join(NAMED_NORMALISERS)}")


class SnellOutput(NamedTuple):
  """For n pairs, source length L, decoder length T.

  Attributes:
    logits: ``[n, T, V]`` log-probabilities (the model ends in log-softmax).
    attention: ``[n, K, T, L]``.
    enc: ``[n, L, h]`` encoder outputs ``h_l``.
    dec: ``[n, T, h]`` decoder LSTM outputs ``d_t``.
  """
  logits: jax.Array
  attention: jax.Array
  enc: jax.Array
  dec: jax.Array


def torch_linear(key, fan_in: int, fan_out: int, lead=()) -> dict:
  """``nn.Linear(fan_in, fan_out)``'s default init: ``W``, ``b`` both ``U(±1/√fan_in)``.

  PyTorch: ``kaiming_uniform_(W, a=√5)``, bound ``√3 · √(2/(1+a²)) / √fan_in = 1/√fan_in``;
  bias ``U(±1/√fan_in)``. ``W`` is stored ``[..., fan_in, fan_out]`` (``x @ W + b``).
  """
  bound = 1.0 / math.sqrt(fan_in)
  kw, kb = jax.random.split(key)
  return {"W": jax.random.uniform(kw, lead + (fan_in, fan_out), minval=-bound, maxval=bound),
          "b": jax.random.uniform(kb, lead + (fan_out,), minval=-bound, maxval=bound)}


def torch_lstm(key, d_in: int, hidden: int) -> dict:
  """``nn.LSTM(d_in, hidden)``'s default init: every weight and both biases ``U(±1/√hidden)``.

  ``W_ih [d_in, 4h]``, ``W_hh [h, 4h]``, ``b_ih [4h]``, ``b_hh [4h]``; gates in
  PyTorch's order i, f, g, o.
  """
  return _torch_rnn(key, d_in, hidden, gates=4)


def torch_gru(key, d_in: int, hidden: int) -> dict:
  """``nn.GRU(d_in, hidden)``'s default init: every weight and both biases ``U(±1/√hidden)``.

  ``W_ih [d_in, 3h]``, ``W_hh [h, 3h]``, ``b_ih [3h]``, ``b_hh [3h]``; gates in
  PyTorch's order r, z, n.
  """
  return _torch_rnn(key, d_in, hidden, gates=3)


def _torch_rnn(key, d_in: int, hidden: int, gates: int) -> dict:
  """PyTorch's recurrent init for ``gates`` stacked gates: all four tensors ``U(±1/√hidden)``."""
  bound = 1.0 / math.sqrt(hidden)
  shapes = {"W_ih": (d_in, gates * hidden), "W_hh": (hidden, gates * hidden),
            "b_ih": (gates * hidden,), "b_hh": (gates * hidden,)}
  keys = jax.random.split(key, len(shapes))
  return {name: jax.random.uniform(k, shape, minval=-bound, maxval=bound)
          for k, (name, shape) in zip(keys, shapes.items())}


def torch_embedding(key, vocab: int, width: int) -> jax.Array:
  """``nn.Embedding(vocab, width)``'s default init: ``N(0, 1)``."""
  return jax.random.normal(key, (vocab, width))


def init(key: jax.Array, cfg: SnellSeq2SeqConfig) -> dict:
  """Parameters ``{"embed", "encoder", "decoder", "attention", "project", "output"}``.

  ``attention``/``project`` hold ``W [K, h, h]``, ``b [K, h]``; ``output`` holds
  ``after`` (``W [2h, h]``, input ``[d; c]``, or ``[c; d]`` with ``context_first``) and
  ``vocab`` (``W [h, V]``); ``embed_dec`` is the decoder's table unless ``shared_embedding``.
  """
  h, k = cfg.hidden, cfg.heads
  ks = jax.random.split(key, 8)
  rnn = torch_lstm if cfg.cell == "lstm" else torch_gru
  extra = {} if cfg.shared_embedding else {"embed_dec": torch_embedding(ks[7], cfg.vocab, h)}
  return {
      "embed": torch_embedding(ks[0], cfg.vocab, h), **extra,
      "encoder": rnn(ks[1], h, h),
      "decoder": rnn(ks[2], h, h),
      "attention": torch_linear(ks[3], h, h, lead=(k,)),
      "project": torch_linear(ks[4], h, h, lead=(k,)),
      "output": {"after": torch_linear(ks[5], 2 * h, h), "vocab": torch_linear(ks[6], h, cfg.vocab)},
  }


def attention_head(key: jax.Array, hidden: int) -> dict:
  """One head of the authors' ``multihead.py`` (``Attn_head``: ``attn_proj``, ``enc_proj``, each
  ``nn.Linear(h, h)``) as ``{"attention": W, b, "project": W, b}`` (PyTorch inits): one row
  of :func:`init`'s ``attention`` / ``project``."""
  ka, kp = jax.random.split(key)
  return {"attention": torch_linear(ka, hidden, hidden),
          "project": torch_linear(kp, hidden, hidden)}


def run_lstm(p: dict, inputs: jax.Array, carry=None):
  """``torch.nn.LSTM`` (one layer) over ``inputs [n, L, d_in]`` from ``carry = (h, c)`` (zeros).

  .. math:: [i, f, g, o] = W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh}, \\quad
     c_t = σ(f) c_{t-1} + σ(i) \\tanh g, \\quad h_t = σ(o) \\tanh c_t

  Returns:
    ``(final (h, c), outputs h [n, L, h])``.
  """
  hd = p["W_hh"].shape[0]
  n = inputs.shape[0]
  if carry is None:
    carry = (jnp.zeros((n, hd), inputs.dtype), jnp.zeros((n, hd), inputs.dtype))
  xs = jnp.swapaxes(inputs @ p["W_ih"] + p["b_ih"] + p["b_hh"], 0, 1)

  def step(hc, x):
    h, c = hc
    i, f, g, o = jnp.split(x + h @ p["W_hh"], 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h

  carry, hs = jax.lax.scan(step, carry, xs)
  return carry, jnp.swapaxes(hs, 0, 1)


def run_gru(p: dict, inputs: jax.Array, carry=None):
  """``torch.nn.GRU`` (one layer) over ``inputs [n, L, d_in]`` from ``carry = h`` (zeros).

  .. math:: r = σ(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}), \\quad
     z = σ(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}),

  .. math:: n = \\tanh(W_{in} x + b_{in} + r ⊙ (W_{hn} h + b_{hn})), \\quad h' = (1 − z) ⊙ n + z ⊙ h

  Returns:
    ``(final h, outputs h [n, L, h])``.
  """
  hd = p["W_hh"].shape[0]
  if carry is None:
    carry = jnp.zeros((inputs.shape[0], hd), inputs.dtype)
  xs = jnp.swapaxes(inputs @ p["W_ih"] + p["b_ih"], 0, 1)

  def step(h, x):
    xr, xz, xn = jnp.split(x, 3, axis=-1)
    hr, hz, hn = jnp.split(h @ p["W_hh"] + p["b_hh"], 3, axis=-1)
    r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
    h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
    return h, h

  carry, hs = jax.lax.scan(step, carry, xs)
  return carry, jnp.swapaxes(hs, 0, 1)


def decoder_inputs(labels: jax.Array, sos: int) -> jax.Array:
  """Teacher forcing: ``[SOS, o_1, ..., o_{T-1}]`` (the target ``[SOS; x; EOS]`` minus its last)."""
  return jnp.concatenate([jnp.full_like(labels[:, :1], sos), labels[:, :-1]], axis=1)


def attention_weights(params: dict, cfg: SnellSeq2SeqConfig, enc, dec, mask) -> jax.Array:
  """``[n, K, T, L]``: ``normalise_l((W_a^k d_t + b_a^k)ᵀ h_l)`` over the source positions in ``mask``."""
  a = params["attention"]
  query = jnp.einsum("ntd,kde->nkte", dec, a["W"]) + a["b"][None, :, None, :]
  scores = jnp.einsum("nkte,nle->nktl", query, enc)
  valid = mask[:, None, None, :]
  if cfg.normaliser != "softmax":
    return normalise(cfg.normaliser, scores, valid)
  return jax.nn.softmax(jnp.where(valid, scores, -jnp.inf), axis=-1)


def project(params: dict, contexts: jax.Array) -> jax.Array:
  """``c = mean_k (W_p^k ctx^k + b_p^k)`` for ``contexts [..., K, h]`` (K = 1: ``project_enc``)."""
  p = params["project"]
  return (jnp.einsum("...kd,kde->...ke", contexts, p["W"]) + p["b"]).mean(-2)


def readout(params: dict, cfg: SnellSeq2SeqConfig, dec: jax.Array, c: jax.Array) -> jax.Array:
  """``log_softmax(W_s tanh(W_c [d; c] + b_c) + b_s)`` (``[..., V]``; ``dec``, ``c`` broadcast;
  ``[c; d]`` with ``cfg.context_first``)."""
  out = params["output"]
  w = out["after"]["W"]
  h = dec.shape[-1]   # [d; c] @ W as d @ W[:h] + c @ W[h:], so d and c broadcast (the probe)
  first, second = (c, dec) if cfg.context_first else (dec, c)
  z = jnp.tanh(first @ w[:h] + second @ w[h:] + out["after"]["b"])
  return jax.nn.log_softmax(z @ out["vocab"]["W"] + out["vocab"]["b"], -1)


def apply(params: dict, batch: Batch, cfg: SnellSeq2SeqConfig) -> SnellOutput:
  """Teacher-forced forward pass: ``batch.tokens [n, L]`` source, ``batch.labels [n, T]`` target."""
  run = run_lstm if cfg.cell == "lstm" else run_gru
  carry, enc = run(params["encoder"], params["embed"][batch.tokens])
  table = params["embed"] if cfg.shared_embedding else params["embed_dec"]
  _, dec = run(params["decoder"], table[decoder_inputs(batch.labels, cfg.sos)], carry)
  a = attention_weights(params, cfg, enc, dec, batch.mask)
  ctx = jnp.einsum("nktl,nld->ntkd", a, enc)
  return SnellOutput(readout(params, cfg, dec, project(params, ctx)), a, enc, dec)


def probe(params: dict, cfg: SnellSeq2SeqConfig, out: SnellOutput, labels: jax.Array) -> jax.Array:
  """``β [n, T, L]``: ``p(o_t | d_t, c_t = W_p h_l + b_p)``, the lexical probe of Snell et al.
  (Section 2.2) as the authors compute it (``get_state_scores2_one_off``: every head's
  context set to ``h_l``)."""
  k = params["project"]["W"].shape[0]
  ctx = jnp.broadcast_to(out.enc[:, :, None, :], out.enc.shape[:2] + (k, out.enc.shape[-1]))
  c = project(params, ctx)                                             # [n, L, h]
  logp = readout(params, cfg, out.dec[:, :, None, :], c[:, None, :, :])   # [n, T, L, V]
  return jnp.exp(jnp.take_along_axis(logp, labels[:, :, None, None], -1)[..., 0])


def nll(logp: jax.Array, labels: jax.Array) -> jax.Array:
  """``nn.NLLLoss`` with no ignored id: mean ``−log p(o_t)`` over every target position (EOS too)."""
  return -jnp.take_along_axis(logp, labels[..., None], -1).mean()


def make_loss(cfg: SnellSeq2SeqConfig):
  """``loss(params, batch) -> (mean NLL, SnellOutput)`` (the shape ``dynamics.make_train`` takes)."""
  def loss(params, batch: Batch):
    out = apply(params, batch, cfg)
    return nll(out.logits, batch.labels), out
  return loss
