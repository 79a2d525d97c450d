"""The attention model of Lu et al. (2021), Section 3, as a pure init/apply pair.

Each word ``w`` has an embedding ``ν_w ∈ R^d`` and a key ``κ_w ∈ R^{d'}``; a global
query ``q ∈ R^{d'}`` gives the score ``s_w = qᵀκ_w``; the context vector
``ν̄(χ) = Σ_w ν_w exp(s_w)/Z(χ)`` is classified by FC, TC or TL.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
import dataclasses
import functools
from typing import Callable, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp

from attndyn.models.attention import attend, softmax_attention
from attndyn.models.normalisers import NAMED_NORMALISERS, normalise
from attndyn.models.classifiers import CLASSIFIERS, FC_INITS, apply_classifier, init_classifier
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check, is_concrete_number

__all__ = ["PARAM_GROUPS", "LuModelConfig", "LuOutput", "Model", "check_params", "word_scores",
           "init", "init_seeds", "apply", "lu_attention", "apply_for"]

PARAM_GROUPS = ("embeddings", "keys", "query", "classifier")


@dataclasses.dataclass(frozen=True)
class LuModelConfig:
  """Architecture and initialisation.

  Float fields (``embed_std``, ``key_std``, ``query_std``) may be traced values
  inside a sweep; they are validated only when they are Python numbers.

  Attributes:
    n_words: vocabulary size V (topic + non-topic words).
    n_classes: number of topics J.
    embed_dim: d, the embedding dimension, ≥ 1.
    key_dim: d', the key and query dimension, ≥ 1.
    classifier: ``"fc"`` (a fixed linear U), ``"tc"`` (a trainable linear U) or
      ``"tl"`` (a trainable 2-layer ReLU MLP).
    fc_init: FC's fixed U: ``"orthonormal"`` columns (paper text; needs
      embed_dim ≥ J) or ``"randn_unit_diag"`` (authors' code).
    hidden_dim: TL's hidden width, ≥ 1.
    embed_std: standard deviation of each embedding entry, ≥ 0,
      ``ν ~ N(0, embed_std²)``; the paper's ``σ²/d`` is ``embed_std**2``.
    key_std: standard deviation of each key entry, ≥ 0 (0: all scores start at 0).
    query_std: standard deviation of each query entry, > 0, ``q ~ N(0, query_std²)``.
    query_norm: if set (> 0), the drawn query is rescaled to this Euclidean norm.
    query_seed: if set (an integer ≥ 0), every run draws its query from
      ``PRNGKey(query_seed)`` instead of its own seed's key, so all runs share one query,
      as in the authors' code (which seeds torch once); unset: a query per seed.
    train_query: whether the query is trained (Appendix B); the reduced ODE needs it
      false, the fast path zero keys (``key_std = 0``) with it.
    freeze: parameter groups held fixed: any of ``embeddings`` (EF), ``keys``
      (KF), ``query``, ``classifier``. FC's classifier is always fixed.
    normaliser: how scores become attention weights: ``"softmax"`` (the
      paper), ``"sparsemax"`` or ``"entmax15"`` (:mod:`models.normalisers`), or the
      structured ``"fusedmax"``, ``"crf"``, ``"sparsemap"`` (:mod:`models.structured`,
      with their default λ / pairwise strength; ``crf`` and ``sparsemap`` weights are
      marginals in [0, 1] that need not sum to 1).
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
  query_seed: Optional[int] = None
  train_query: bool = False
  freeze: tuple = ()
  normaliser: str = "softmax"

  def __post_init__(self):
    for name in ("n_words", "n_classes", "embed_dim", "key_dim", "hidden_dim"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name, value, "a positive integer")
    check(self.classifier in CLASSIFIERS, "classifier", self.classifier,
          f"one of {', '.join(CLASSIFIERS)}")
    check(self.fc_init in FC_INITS, "fc_init", self.fc_init, f"one of {', '.join(FC_INITS)}")
    if self.classifier == "fc" and self.fc_init == "orthonormal":
      check(self.n_classes <= self.embed_dim, "embed_dim", self.embed_dim,
            f"at least n_classes = {self.n_classes} for an FC classifier with orthonormal columns")
    for name in ("embed_std", "key_std"):
      value = getattr(self, name)
      if is_concrete_number(value):
        check(value == value and value >= 0 and value != float("inf"), name, value,
              "a finite number >= 0")
    if is_concrete_number(self.query_norm):
      check(0 < self.query_norm < float("inf"), "query_norm", self.query_norm,
            "a finite number > 0, or unset")
    if is_concrete_number(self.query_std):
      check(0 < self.query_std < float("inf"), "query_std", self.query_std,
            "a finite number > 0 (a zero query gives every word score 0 forever; Lemma 1 "
            "needs q ≠ 0)")
    if self.query_seed is not None:
      check(isinstance(self.query_seed, int) and not isinstance(self.query_seed, bool)
            and 0 <= self.query_seed < 2**32, "query_seed", self.query_seed,
            "an integer in 0..2**32-1, or unset (a query per seed)")
    check(isinstance(self.train_query, bool), "train_query", self.train_query, "true or false")
    check(isinstance(self.freeze, tuple) and all(g in PARAM_GROUPS for g in self.freeze),
          "freeze", self.freeze, f"a list drawn from {', '.join(PARAM_GROUPS)}")
    check(self.normaliser in NAMED_NORMALISERS, "normaliser", self.normaliser,
          f"one of {', '.join(NAMED_NORMALISERS)}")

  def trainable(self) -> dict:
    """Which parameter groups gradient descent updates."""
    return {
        "embeddings": "embeddings" not in self.freeze,
        "keys": "keys" not in self.freeze,
        "query": self.train_query and "query" not in self.freeze,
        "classifier": self.classifier != "fc" and "classifier" not in self.freeze,
    }


class LuOutput(NamedTuple):
  """What the model computes for a batch of n sentences of length L.

  Attributes:
    logits: ``[n, J]``.
    attention: ``[n, L]`` weights ``exp(s_w)/Z(χ)``.
    scores: ``[n, L]`` scores ``s_w = qᵀκ_w``.
    context: ``[n, d]`` the context vector ``ν̄(χ)``.
  """
  logits: jax.Array
  attention: jax.Array
  scores: jax.Array
  context: jax.Array


class Model(NamedTuple):
  """A model as a pair of pure functions (optax style).

  Attributes:
    init: ``init(key) -> params``.
    apply: ``apply(params, batch) -> LuOutput``.
    config: the configuration both close over.
  """
  init: Callable
  apply: Callable
  config: LuModelConfig


def check_params(params: dict) -> None:
  """Shapes at the public boundary: embeddings ``[V, d]``, keys ``[V, d']``, query ``[d']``.

  Raises:
    ConfigError: naming the array whose shape does not fit (e.g. a query given
      explicitly with another length than key_dim).
  """
  keys, query, emb = params["keys"], params["query"], params.get("embeddings")
  check(keys.ndim == 2, "params['keys'].shape", tuple(keys.shape), "[n_words, key_dim]")
  check(tuple(query.shape) == tuple(keys.shape[-1:]), "params['query'].shape",
        tuple(query.shape), f"({keys.shape[-1]},): one entry per key dimension "
        f"(key_dim = {keys.shape[-1]}, from params['keys'] of shape {tuple(keys.shape)})")
  if emb is not None:
    check(emb.ndim == 2 and emb.shape[0] == keys.shape[0], "params['embeddings'].shape",
          tuple(emb.shape), f"[n_words = {keys.shape[0]}, embed_dim], one row per key")


def word_scores(params: dict) -> jax.Array:
  """``[V]`` scores ``s_w = qᵀκ_w`` of every word of the vocabulary."""
  check_params(params)
  return params["keys"] @ params["query"]


def init(key: jax.Array, cfg: LuModelConfig, dtype=jnp.float32) -> dict:
  """Initial parameters as in Section 5.1.

  Embeddings ``N(0, embed_std²)``, keys ``N(0, key_std²)`` (zero by default, so
  every score starts at 0), query ``N(0, query_std²)`` (from ``key``, or from
  ``PRNGKey(query_seed)`` when set) optionally rescaled to ``query_norm``, classifier by
  :func:`models.classifiers.init_classifier`.

  Returns:
    ``{"embeddings": [V, d], "keys": [V, d'], "query": [d'], "classifier": {...}}``.
  """
  k_emb, k_key, k_query, k_cls = jax.random.split(key, 4)
  if cfg.query_seed is not None:      # one query for every run (the authors' code)
    k_query = jax.random.split(jax.random.PRNGKey(cfg.query_seed), 4)[2]
  query = cfg.query_std * jax.random.normal(k_query, (cfg.key_dim,), dtype)
  if cfg.query_norm is not None:
    query = query * (cfg.query_norm / jnp.linalg.norm(query))
  return {
      "embeddings": cfg.embed_std * jax.random.normal(k_emb, (cfg.n_words, cfg.embed_dim), dtype),
      "keys": cfg.key_std * jax.random.normal(k_key, (cfg.n_words, cfg.key_dim), dtype),
      "query": query,
      "classifier": init_classifier(k_cls, cfg.classifier, cfg.embed_dim, cfg.n_classes,
                                    hidden_dim=cfg.hidden_dim, fc_init=cfg.fc_init, dtype=dtype),
  }


@functools.partial(jax.jit, static_argnums=(1, 2))
def init_seeds(seeds: jax.Array, cfg: LuModelConfig, dtype=jnp.float32) -> dict:
  """:func:`init` of ``PRNGKey(seed)`` for every seed of ``seeds [S]`` (as ``attndyn run``'s
  sweep draws them), stacked on a leading axis, in one compiled program: run op by op, each
  initialiser would compile a small program of its own."""
  return jax.vmap(lambda seed: init(jax.random.PRNGKey(seed), cfg, dtype))(seeds)


def apply(params: dict, batch: Batch, normaliser: str = "softmax") -> LuOutput:
  """Forward pass: scores, attention, context vector, logits.

  ``normaliser`` (``LuModelConfig.normaliser``) replaces the paper's softmax
  by sparsemax, 1.5-entmax or a structured normaliser (:func:`models.normalisers.normalise`).

  Shapes: ``batch.tokens`` and ``batch.mask`` ``[n, L]``; the output as :class:`LuOutput`.
  """
  chex.assert_rank(batch.tokens, 2)
  chex.assert_equal_shape([batch.tokens, batch.mask])
  scores = word_scores(params)[batch.tokens]
  if normaliser == "softmax":
    attention = softmax_attention(scores, batch.mask)
  else:
    attention = normalise(normaliser, scores, batch.mask)
  context = attend(params["embeddings"][batch.tokens], attention)
  logits = apply_classifier(params["classifier"], context)
  chex.assert_shape(attention, batch.tokens.shape)
  chex.assert_rank([context, logits], 2)
  chex.assert_equal_shape_prefix([logits, context, batch.tokens], 1)
  return LuOutput(logits, attention, scores, context)


def lu_attention(cfg: LuModelConfig, dtype=jnp.float32) -> Model:
  """The Lu et al. attention model: ``Model(init, apply, cfg)``."""
  return Model(init=lambda key: init(key, cfg, dtype), apply=apply_for(cfg), config=cfg)


def normaliser_of(apply_fn: Callable) -> Optional[str]:
  """The normaliser of ``apply_fn`` when it is this model's own forward pass (:func:`apply`:
  ``"softmax"``; ``functools.partial(apply, normaliser=...)``, as :func:`apply_for` makes it),
  else ``None``: another function is not known to be it, whatever it computes."""
  if apply_fn is apply:
    return "softmax"
  if (type(apply_fn) is functools.partial and apply_fn.func is apply and not apply_fn.args
      and set(apply_fn.keywords) == {"normaliser"}):
    return apply_fn.keywords["normaliser"]
  return None


def apply_for(cfg: LuModelConfig) -> Callable:
  """``apply`` with the configured normaliser: ``apply(params, batch) -> LuOutput`` (``apply``
  itself for softmax, else ``functools.partial(apply, normaliser=...)``, which
  :func:`analysis.topic_observables` reads its normaliser from)."""
  if cfg.normaliser == "softmax":
    return apply
  return functools.partial(apply, normaliser=cfg.normaliser)
