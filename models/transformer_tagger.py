"""Yang's 1-layer transformer sequence tagger (Section 4.1) as a pure init/apply pair.

Each token's input ``x_i`` (a word embedding, optionally concatenated with a
POS-tag embedding) goes through a linear layer, then the sinusoidal "time
signal" of Vaswani et al. is added: ``h_i = W_in x_i + b_in + PE(i)``. One
multi-head self-attention layer (no causal mask; padded keys get weight 0)

.. math:: \\mathrm{Attention}(Q,K,V) = \\mathrm{softmax}(QK^T/\\sqrt{d_k})\\,V, \\quad
   \\mathrm{MultiHead} = \\mathrm{Concat}(\\mathrm{head}_1..\\mathrm{head}_h) W^O

then gives, per token,

* ``block="paper"`` (Yang's text): logits ``= MultiHead(h) W_out + b_out``;
* ``block="full"`` (Vaswani's post-LN encoder block): ``u = LN(h + MultiHead(h))``,
  ``z = LN(u + FFN(u))``, logits ``= z W_out + b_out``, ``FFN(u) = max(0, uW_1+b_1)W_2+b_2``.

A softmax over the tags gives the prediction. Dropout (rate ``dropout``) acts
on ``h``, on the attention output and inside the FFN, only when ``apply`` gets
a ``key``. The attention weights of every head can be replaced by given maps
(the probing classifier of Section 4.3) or by uniform weights over the real
tokens (the baseline of Wiegreffe & Pinter); the query/key/value projections
are then still parameters, but only the values are used.

References:
  Yang, "Is Attention Points Out the Only 'Path'? An Analysis on Transformers", Section 4.1.
  Vaswani et al., "Attention Is All You Need", NeurIPS 2017. https://arxiv.org/abs/1706.03762
"""
import dataclasses
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.tasks.errors import check, is_concrete_number

__all__ = ["FEATURES", "BLOCKS", "ATTENTIONS", "TaggerConfig", "TaggerOutput", "init",
           "sinusoidal_positions", "key_mask", "uniform_attention", "apply", "token_nll",
           "source_attention", "probe_loss"]

FEATURES = ("words", "words+pos")
BLOCKS = ("paper", "full")
ATTENTIONS = ("uniform",) + NAMED_NORMALISERS   # softmax, sparsemax, ..., fusedmax, crf, sparsemap


@dataclasses.dataclass(frozen=True)
class TaggerConfig:
  """Architecture.

  Attributes:
    n_words, n_pos, n_tags: vocabulary, POS-tag vocabulary and tag-set sizes.
    d_model: model width (the embedding and attention width).
    n_heads: attention heads (Yang: 4); ``d_model`` must be a multiple.
    d_ff: feed-forward width of the full block.
    features: ``"words"`` or ``"words+pos"`` (a POS embedding of width
      ``d_model`` concatenated to the word embedding before the input linear).
    block: ``"paper"`` or ``"full"`` (see the module docstring).
    dropout: dropout rate in [0, 1).
    attention: ``"softmax"``, ``"uniform"`` (every real token weighted equally), or
      another normaliser of the scaled scores by name (:data:`models.normalisers.NAMED_NORMALISERS`:
      sparsemax, entmax15, and the structured fusedmax / crf / sparsemap of
      :mod:`models.structured` with their default options).
  """
  n_words: int
  n_pos: int
  n_tags: int
  d_model: int = 128
  n_heads: int = 4
  d_ff: int = 256
  features: str = "words+pos"
  block: str = "full"
  dropout: float = 0.1
  attention: str = "softmax"

  def __post_init__(self):
    for name in ("n_words", "n_pos", "n_tags", "d_model", "n_heads", "d_ff"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name, value, "a positive integer")
    check(self.d_model % self.n_heads == 0, "d_model", self.d_model,
          f"a multiple of model.n_heads = {self.n_heads}")
    check(self.features in FEATURES, "features", self.features, f"one of {', '.join(FEATURES)}")
    check(self.block in BLOCKS, "block", self.block, f"one of {', '.join(BLOCKS)}")
    check(self.attention in ATTENTIONS, "attention", self.attention,
          f"one of {', '.join(ATTENTIONS)}")
    if is_concrete_number(self.dropout):
      check(0 <= self.dropout < 1, "dropout", self.dropout, "a number in [0, 1)")


class TaggerOutput(NamedTuple):
  """Per-token logits ``[B, L, T]`` and the attention weights ``[B, H, L, L]`` (query, key)."""
  logits: jax.Array
  attention: jax.Array


def _dense(key, fan_in: int, fan_out: int, dtype) -> dict:
  """LeCun-normal weights (std ``1/√fan_in``), zero bias."""
  w = jax.random.normal(key, (fan_in, fan_out), dtype) / math.sqrt(fan_in)
  return {"w": w, "b": jnp.zeros((fan_out,), dtype)}


def init(key: jax.Array, cfg: TaggerConfig, dtype=jnp.float32) -> dict:
  """Parameters: embeddings ``N(0, 1)``, dense layers LeCun-normal, LayerNorm scale 1 / bias 0."""
  d = cfg.d_model
  ks = jax.random.split(key, 10)
  in_dim = 2 * d if cfg.features == "words+pos" else d
  params = {
      "word_emb": jax.random.normal(ks[0], (cfg.n_words, d), dtype),
      "input": _dense(ks[1], in_dim, d, dtype),
      "query": _dense(ks[2], d, d, dtype),
      "key": _dense(ks[3], d, d, dtype),
      "value": _dense(ks[4], d, d, dtype),
      "attn_out": _dense(ks[5], d, d, dtype),
      "output": _dense(ks[6], d, cfg.n_tags, dtype),
  }
  if cfg.features == "words+pos":
    params["pos_emb"] = jax.random.normal(ks[7], (cfg.n_pos, d), dtype)
  if cfg.block == "full":
    params["ffn_in"] = _dense(ks[8], d, cfg.d_ff, dtype)
    params["ffn_out"] = _dense(ks[9], cfg.d_ff, d, dtype)
    for name in ("ln_attn", "ln_ffn"):
      params[name] = {"scale": jnp.ones((d,), dtype), "bias": jnp.zeros((d,), dtype)}
  return params


def sinusoidal_positions(length: int, d: int, dtype=jnp.float32) -> jax.Array:
  """``[L, d]``: ``PE(i, 2k) = sin(i / 10000^{2k/d})``, ``PE(i, 2k+1) = cos(i / 10000^{2k/d})``."""
  pos = jnp.arange(length, dtype=dtype)[:, None]
  rate = jnp.power(10000.0, -jnp.arange(0, d, 2, dtype=dtype) / d)
  pe = jnp.zeros((length, d), dtype)
  pe = pe.at[:, 0::2].set(jnp.sin(pos * rate))
  return pe.at[:, 1::2].set(jnp.cos(pos * rate[: d // 2]))


def key_mask(mask: jax.Array) -> jax.Array:
  """``[B, 1, 1, L]`` keys each query may attend to: the real tokens (all, for an all-pad row)."""
  any_real = jnp.any(mask, axis=-1, keepdims=True)
  return jnp.where(any_real, mask, True)[:, None, None, :]


def uniform_attention(mask: jax.Array, n_heads: int, dtype=jnp.float32) -> jax.Array:
  """``[B, H, L, L]`` weights ``1/n`` on each of the ``n`` real tokens of a sentence (every query, head)."""
  km = key_mask(mask).astype(dtype)
  w = km / jnp.sum(km, axis=-1, keepdims=True)
  return jnp.broadcast_to(w, (mask.shape[0], n_heads, mask.shape[1], mask.shape[1]))


def _linear(p: dict, x: jax.Array) -> jax.Array:
  return x @ p["w"] + p["b"]


def _layer_norm(p: dict, x: jax.Array, eps: float = 1e-6) -> jax.Array:
  mu = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
  return (x - mu) * jax.lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def _dropout(x: jax.Array, rate, key: Optional[jax.Array]) -> jax.Array:
  if key is None:
    return x
  keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
  return jnp.where(keep, x / (1.0 - rate), 0.0)


def apply(params: dict, batch, cfg: TaggerConfig, *, key: Optional[jax.Array] = None,
          attention: Optional[jax.Array] = None) -> TaggerOutput:
  """Per-token tag logits and the per-head attention maps.

  Args:
    params: from :func:`init`.
    batch: anything with ``tokens [B, L]``, ``mask [B, L]`` and (for
      ``features="words+pos"``) ``pos [B, L]``, e.g. :class:`tasks.conll2000.TaggedBatch`.
    cfg: the architecture.
    key: dropout key; ``None`` (evaluation) turns dropout off.
    attention: ``[B, H, L, L]`` weights used instead of ``softmax(QKᵀ/√d_k)``
      (the probing classifier). Overrides ``cfg.attention``.

  Returns:
    :class:`TaggerOutput` ``(logits [B, L, T], attention [B, H, L, L])``; the
    returned attention is the one used.
  """
  d, n_heads = cfg.d_model, cfg.n_heads
  d_k = d // n_heads
  keys = [None] * 4 if key is None else list(jax.random.split(key, 4))
  x = params["word_emb"][batch.tokens]
  if cfg.features == "words+pos":
    x = jnp.concatenate([x, params["pos_emb"][batch.pos]], axis=-1)
  b, length = batch.tokens.shape
  h = _linear(params["input"], x) + sinusoidal_positions(length, d, x.dtype)
  h = _dropout(h, cfg.dropout, keys[0])

  def heads(p):
    return _linear(p, h).reshape(b, length, n_heads, d_k).transpose(0, 2, 1, 3)   # [B, H, L, d_k]

  v = heads(params["value"])
  if attention is None:
    if cfg.attention == "uniform":
      attention = uniform_attention(batch.mask, n_heads, h.dtype)
    else:
      scores = jnp.einsum("bhqd,bhkd->bhqk", heads(params["query"]), heads(params["key"]))
      km = key_mask(batch.mask)
      if cfg.attention == "softmax":
        scores = jnp.where(km, scores / math.sqrt(d_k), -jnp.inf)
        attention = jax.nn.softmax(scores, axis=-1, where=km)
      else:
        attention = normalise(cfg.attention, scores / math.sqrt(d_k), km)
  context = jnp.einsum("bhqk,bhkd->bhqd", attention, v).transpose(0, 2, 1, 3).reshape(b, length, d)
  a = _dropout(_linear(params["attn_out"], context), cfg.dropout, keys[1])
  if cfg.block == "full":
    u = _layer_norm(params["ln_attn"], h + a)
    f = _dropout(jax.nn.relu(_linear(params["ffn_in"], u)), cfg.dropout, keys[2])
    z = _layer_norm(params["ln_ffn"], u + _dropout(_linear(params["ffn_out"], f), cfg.dropout,
                                                   keys[3]))
  else:
    z = a
  return TaggerOutput(_linear(params["output"], z), attention)


def token_nll(logits: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean negative log-likelihood of ``labels`` over the real tokens (Yang's NLLoss)."""
  logp = jax.nn.log_softmax(logits, axis=-1)
  nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
  m = mask.astype(logits.dtype)
  return jnp.sum(nll * m) / jnp.maximum(jnp.sum(m), 1.0)


def source_attention(cfg: TaggerConfig):
  """``maps(source, batch)``: the attention a probing classifier reads (Yang, Section 4.3):
  that of the tagger ``source = (params, is_uniform)`` on ``batch``, or, where ``is_uniform``,
  uniform weights over the real words (Wiegreffe & Pinter's uniform baseline)."""
  def maps(source, b):
    src_params, is_uniform = source
    own = apply(src_params, b, cfg).attention
    return jnp.where(is_uniform, uniform_attention(b.mask, cfg.n_heads, own.dtype), own)
  return maps


def probe_loss(cfg: TaggerConfig, maps_fn):
  """``loss(params, batch, dropout_key, source)``: the probing classifier's :func:`token_nll`
  of the gold tags, its attention replaced by ``maps_fn(source, batch)`` (no gradient reaches
  the source)."""
  def loss(params, b, k, source):
    maps = jax.lax.stop_gradient(maps_fn(source, b))
    return token_nll(apply(params, b, cfg, key=k, attention=maps).logits, b.labels, b.mask)
  return loss
