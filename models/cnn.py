"""Attn-TC-CNN of Lu et al. (2021), Appendix A: attention over width-2 convolutions.

As the Section-3 model (:mod:`models.lu`), every word ``w`` has an embedding
``ν_w ∈ R^d`` and a key ``κ_w ∈ R^{d'}``, and a fixed query ``q ∈ R^{d'}``. Two
parallel 1-D convolutions of width 2 and stride 1 turn the ``m + 1`` words of a
sentence into ``m`` word pairs: ``d`` kernels of size ``d × 2`` over the
embeddings and ``d'`` kernels of size ``d' × 2`` over the keys,

.. math::
   μ_j = W^ν_0ᵀ ν_{w_j} + W^ν_1ᵀ ν_{w_{j+1}} + b^ν, \\qquad
   ρ_j = W^κ_0ᵀ κ_{w_j} + W^κ_1ᵀ κ_{w_{j+1}} + b^κ,

(``W_0, W_1`` the kernel's two taps; PyTorch's ``Conv1d(d, d, 2)`` with
``weight[o, i, t] = W_t[i, o]``). The pair score is ``s_j = qᵀρ_j``, the
attention ``a_j = exp(s_j) / Σ_k exp(s_k)`` over the ``m`` positions, the
context ``Σ_j a_j μ_j``, and a classifier (TC by default) gives the logits.

The convolutions start as PyTorch's do (weights and biases uniform in
``±1/sqrt(2·channels)``); embeddings, keys, query and classifier as in
:mod:`models.lu`.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Appendix A. https://arxiv.org/abs/2011.10036
"""
import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from attndyn.models.attention import attend, softmax_attention
from attndyn.models.classifiers import apply_classifier, init_classifier
from attndyn.models.lu import PARAM_GROUPS, LuModelConfig, Model
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["CNN_PARAM_GROUPS", "CNNAttentionConfig", "CNNOutput", "init", "pair_conv", "apply",
           "cnn_attention"]

CNN_PARAM_GROUPS = PARAM_GROUPS + ("conv",)


@dataclasses.dataclass(frozen=True)
class CNNAttentionConfig:
  """Architecture and initialisation of Attn-TC-CNN.

  The fields shared with :class:`models.LuModelConfig` mean the same and are
  validated by it; ``freeze`` may also name ``conv``.

  Attributes:
    n_words: vocabulary size V.
    n_classes: number of topics J.
    embed_dim: d (embedding and pair-embedding width).
    key_dim: d' (key and pair-key width).
    classifier: ``"tc"`` (Attn-TC-CNN, the paper), ``"fc"`` or ``"tl"``.
    fc_init: FC's fixed U (see :class:`models.LuModelConfig`).
    hidden_dim: TL hidden width.
    embed_std: standard deviation of each word-embedding entry.
    key_std: standard deviation of each word-key entry.
    query_std: standard deviation of each query entry.
    query_norm: if set, the drawn query is rescaled to this Euclidean norm.
    train_query: whether the query is trained.
    conv_bias: whether the convolutions have a bias (PyTorch's default: yes).
    freeze: parameter groups held fixed, drawn from ``embeddings``, ``keys``,
      ``query``, ``classifier``, ``conv``.
  """
  n_words: int
  n_classes: int
  embed_dim: int = 15
  key_dim: int = 15
  classifier: str = "tc"
  fc_init: str = "orthonormal"
  hidden_dim: int = 10
  embed_std: float = 1e-3
  key_std: float = 0.0
  query_std: float = 1.0
  query_norm: Optional[float] = None
  train_query: bool = False
  conv_bias: bool = True
  freeze: tuple = ()

  def __post_init__(self):
    check(isinstance(self.freeze, tuple) and all(g in CNN_PARAM_GROUPS for g in self.freeze),
          "freeze", self.freeze, f"a list drawn from {', '.join(CNN_PARAM_GROUPS)}")
    check(isinstance(self.conv_bias, bool), "conv_bias", self.conv_bias, "true or false")
    shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(LuModelConfig)
              if hasattr(self, f.name)}   # the CNN attends with softmax (no normaliser field)
    shared["freeze"] = tuple(g for g in self.freeze if g != "conv")
    LuModelConfig(**shared)

  def trainable(self) -> dict:
    """Which parameter groups gradient descent updates (every top-level key of the params)."""
    return {
        "embeddings": "embeddings" not in self.freeze,
        "keys": "keys" not in self.freeze,
        "query": self.train_query and "query" not in self.freeze,
        "classifier": self.classifier != "fc" and "classifier" not in self.freeze,
        "conv": "conv" not in self.freeze,
    }


class CNNOutput(NamedTuple):
  """What Attn-TC-CNN computes for n sentences of L = m + 1 words.

  Attributes:
    logits: ``[n, J]``.
    attention: ``[n, m]`` weights over the word pairs.
    scores: ``[n, m]`` pair scores ``s_j = qᵀρ_j``.
    context: ``[n, d]`` the attention-weighted pair embeddings.
    pair_embeddings: ``[n, m, d]`` ``μ_j`` (the CNN's embedding output).
    pair_keys: ``[n, m, d']`` ``ρ_j`` (the CNN's key output).
    pair_mask: ``[n, m]`` True where both words of the pair are real.
  """
  logits: jax.Array
  attention: jax.Array
  scores: jax.Array
  context: jax.Array
  pair_embeddings: jax.Array
  pair_keys: jax.Array
  pair_mask: jax.Array


def _init_conv(key, channels, dtype):
  bound = 1.0 / jnp.sqrt(2.0 * channels)
  k_w, k_b = jax.random.split(key)
  return (jax.random.uniform(k_w, (2, channels, channels), dtype, -bound, bound),
          jax.random.uniform(k_b, (channels,), dtype, -bound, bound))


def init(key: jax.Array, cfg: CNNAttentionConfig, dtype=jnp.float32) -> dict:
  """Initial parameters.

  Returns:
    ``{"embeddings": [V, d], "keys": [V, d'], "query": [d'], "classifier": {...},
    "conv": {"embed_kernel": [2, d, d], "embed_bias": [d], "key_kernel": [2, d', d'],
    "key_bias": [d']}}`` (kernel axes: tap, input channel, output channel); the
    biases are absent without ``conv_bias``.
  """
  k_emb, k_key, k_query, k_cls, k_ce, k_ck = jax.random.split(key, 6)
  query = cfg.query_std * jax.random.normal(k_query, (cfg.key_dim,), dtype)
  if cfg.query_norm is not None:
    query = query * (cfg.query_norm / jnp.linalg.norm(query))
  embed_kernel, embed_bias = _init_conv(k_ce, cfg.embed_dim, dtype)
  key_kernel, key_bias = _init_conv(k_ck, cfg.key_dim, dtype)
  conv = {"embed_kernel": embed_kernel, "key_kernel": key_kernel}
  if cfg.conv_bias:
    conv.update(embed_bias=embed_bias, key_bias=key_bias)
  return {
      "embeddings": cfg.embed_std * jax.random.normal(k_emb, (cfg.n_words, cfg.embed_dim), dtype),
      "keys": cfg.key_std * jax.random.normal(k_key, (cfg.n_words, cfg.key_dim), dtype),
      "query": query,
      "classifier": init_classifier(k_cls, cfg.classifier, cfg.embed_dim, cfg.n_classes,
                                    hidden_dim=cfg.hidden_dim, fc_init=cfg.fc_init, dtype=dtype),
      "conv": conv,
  }


def pair_conv(x: jax.Array, kernel: jax.Array, bias=0.0) -> jax.Array:
  """Width-2, stride-1 convolution: ``x [..., L, c]`` → ``[..., L-1, c']``.

  .. math:: y_j = W_0ᵀ x_j + W_1ᵀ x_{j+1} + b
  """
  return x[..., :-1, :] @ kernel[0] + x[..., 1:, :] @ kernel[1] + bias


def apply(params: dict, batch: Batch) -> CNNOutput:
  """Forward pass: word pairs by the two convolutions, attention over pairs, logits."""
  if batch.tokens.shape[-1] < 2:
    raise ConfigError(f"Attn-TC-CNN needs sentences of at least 2 words (its convolution has "
                      f"width 2); got length {batch.tokens.shape[-1]}")
  conv = params["conv"]
  pair_emb = pair_conv(params["embeddings"][batch.tokens], conv["embed_kernel"],
                       conv.get("embed_bias", 0.0))
  pair_key = pair_conv(params["keys"][batch.tokens], conv["key_kernel"], conv.get("key_bias", 0.0))
  scores = pair_key @ params["query"]
  pair_mask = batch.mask[..., :-1] & batch.mask[..., 1:]
  attention = softmax_attention(scores, pair_mask)
  context = attend(pair_emb, attention)
  return CNNOutput(apply_classifier(params["classifier"], context), attention, scores, context,
                   pair_emb, pair_key, pair_mask)


def cnn_attention(cfg: CNNAttentionConfig, dtype=jnp.float32) -> Model:
  """Attn-TC-CNN as ``Model(init, apply, cfg)`` (same pattern as :func:`models.lu_attention`)."""
  return Model(init=lambda key: init(key, cfg, dtype), apply=apply, config=cfg)
