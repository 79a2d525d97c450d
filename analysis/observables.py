"""What to record during a topic-task run: the ``record`` function passed to dynamics."""
import functools
from typing import Callable

import jax
import jax.numpy as jnp

from attndyn.analysis.theorem1 import invariant
from attndyn.analysis.sen import sen_norm
from attndyn.models.lu import init_seeds, word_scores
from attndyn.models.objective import accuracy, cross_entropy
from attndyn.tasks.topic import TopicDataset

__all__ = ["embedding_norms", "word_values", "initial_word_values", "topic_observables"]


def embedding_norms(params: dict) -> jax.Array:
  """``[V]`` ``‖v_w‖ = ‖q‖·‖ν_w‖`` for every word (the paper's v = ‖q‖ν)."""
  return jnp.linalg.norm(params["query"]) * jnp.linalg.norm(params["embeddings"], axis=-1)


def word_values(params: dict) -> dict:
  """``{"score": [V], "norm": [V]}``: every word's score ``s_w = qᵀκ_w`` and embedding norm
  ``‖v_w‖ = ‖q‖·‖ν_w‖``."""
  return {"score": word_scores(params), "norm": embedding_norms(params)}


@functools.partial(jax.jit, static_argnums=(1, 2))
def initial_word_values(seeds: jax.Array, model_cfg, dtype) -> dict:
  """:func:`word_values` at the initialisation of every seed of ``seeds [S]``
  (:func:`models.lu.init_seeds`, as ``attndyn run``'s sweep draws them): ``[S, V]`` each."""
  return jax.vmap(word_values)(init_seeds(seeds, model_cfg, dtype))


def topic_observables(apply_fn: Callable, dataset: TopicDataset) -> Callable:
  """Build ``record(params, params0) -> dict`` for the topic-word task.

  Recorded (``T`` topic words):
    ``loss``, ``train_acc``, ``test_acc``: scalars;
    ``score`` ``[T]``: ``s_t``; ``emb_norm`` ``[T]``: ``‖v_t‖``;
    ``sen_norm`` ``[T]``: Corollary 1's ``‖v_t‖`` for the current ``s_t``;
    ``invariant`` ``[T]``: Theorem 1's ``Q_t``;
    ``topic_attention``: mean over training sentences of the attention on the topic word;
    ``topic_argmax_all``: 1.0 when in every training sentence the topic word has a larger
    attention weight than every other word (Theorem 2's "attend to the topic word in every
    input sentence"), else 0.0;
    ``nontopic_max_abs_score_change``, ``nontopic_max_abs_norm_change``:
    ``max_w |s_w − s_w(0)|`` and ``max_w |‖v_w‖ − ‖v_w(0)‖|`` over non-topic words.
  """
  n_topic = dataset.n_topic_words
  m = dataset.train.tokens.shape[-1] - 1
  is_topic_pos = dataset.train.tokens == dataset.train_topic_word[:, None]

  def record(params, params0):
    out = apply_fn(params, dataset.train)
    test_logits = apply_fn(params, dataset.test).logits
    s, s0 = word_scores(params), word_scores(params0)
    norms, norms0 = embedding_norms(params), embedding_norms(params0)
    score = s[:n_topic]
    topic_weight = jnp.sum(jnp.where(is_topic_pos, out.attention, 0.0), axis=-1)      # [N]
    other_max = jnp.max(jnp.where(is_topic_pos, -1.0, out.attention), axis=-1)
    return {
        "loss": cross_entropy(out.logits, dataset.train.labels),
        "train_acc": accuracy(out.logits, dataset.train.labels),
        "test_acc": accuracy(test_logits, dataset.test.labels),
        "score": score,
        "emb_norm": norms[:n_topic],
        "sen_norm": sen_norm(score, m),
        "invariant": invariant(params, dataset),
        "topic_attention": jnp.mean(topic_weight),
        "topic_argmax_all": jnp.all(topic_weight > other_max).astype(topic_weight.dtype),
        "nontopic_max_abs_score_change": jnp.max(jnp.abs(s - s0)[n_topic:]),
        "nontopic_max_abs_norm_change": jnp.max(jnp.abs(norms - norms0)[n_topic:]),
    }

  return record
