"""What to record during a topic-task run: the ``record`` function passed to dynamics."""
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.theorem1 import invariant, psi_mean
from attndyn.analysis.sen import sen_norm
from attndyn.models import lu
from attndyn.models.attention import softmax_attention
from attndyn.models.classifiers import apply_classifier
from attndyn.models.lu import init_seeds, word_scores
from attndyn.models.normalisers import normalise
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

  For the Lu model's own forward pass (``apply_fn`` is ``models.lu.apply``, softmax
  attention, or ``models.lu.apply_for``'s ``functools.partial`` of it with sparsemax or
  1.5-entmax) the record also has ``record.seeds_last(rows, rows0)``: the same observables
  of every seed at once from the fast path's per-word view
  (:func:`topic_observables_seeds_last`), which that path reads instead of converting its
  state to parameters at every record.
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

  normaliser = lu.normaliser_of(apply_fn)
  if normaliser in SEEDS_LAST_NORMALISERS:
    record.seeds_last = functools.partial(topic_observables_seeds_last, dataset,
                                          normaliser=normaliser)
  return record


# The normalisers whose attention topic_observables_seeds_last forms (over the seeds-last
# layout: each sentence's words on an axis of their own).
SEEDS_LAST_NORMALISERS = ("softmax", "sparsemax", "entmax15")


def _attention(scores, rows, mask, normaliser: str = "softmax"):
  """The model's attention over each sentence's words: ``[n, L, S]`` for ``scores [V, S]``
  and (host) ``rows [n, L]`` the words' rows, ``mask [n, L]``."""
  if normaliser == "softmax":
    return softmax_attention(scores[rows], mask[:, :, None], axis=1)
  weights = normalise(normaliser, jnp.moveaxis(scores[rows], 1, -1), mask[:, None, :])
  return jnp.moveaxis(weights, -1, 1)


def topic_observables_seeds_last(dataset: TopicDataset, rows, rows0, *,
                                 normaliser: str = "softmax") -> dict:
  """:func:`topic_observables`' ``record`` of every seed at once, from per-word parameters
  with the seed axis last (the fast path's :class:`dynamics.fast_lu.WordRows`: ``row_of
  [V]`` on the host, ``embeddings [V, d, S]``, ``scores [V, S]``, ``query_norm [S]``,
  ``classifier`` leaves seeds last, ``weighted_sum``; ``rows0`` the same at the start).

  A second form of the same observables, for speed: ``jax.vmap(record)`` on ordinary
  parameters gathers each seed's ``[n, L, d]`` embeddings twice a record (the forward pass
  and Theorem 1's context), which made recording a large share of a fast-path run
  (``python -m benchmarks.record``); here the gathers take every seed's row at once. Equal to ``record`` up to
  summation order (tests/test_fast_record.py, float64). ``normaliser``: the model's
  attention (one of :data:`SEEDS_LAST_NORMALISERS`). Returns the dict ``jax.vmap(record)``
  returns (leaves ``[S, ...]``).
  """
  n_topic = dataset.n_topic_words
  train, test = dataset.train, dataset.test
  m = train.tokens.shape[-1] - 1
  row_of = np.asarray(rows.row_of)
  tokens = np.asarray(train.tokens)
  train_rows, train_mask = row_of[tokens], np.asarray(train.mask, bool)
  test_rows, test_mask = row_of[np.asarray(test.tokens)], np.asarray(test.mask, bool)
  is_topic_pos = tokens == np.asarray(dataset.train_topic_word)[:, None]           # [n, L]
  topic_rows = row_of[:n_topic]
  nontopic_row = np.ones(len(row_of), bool)
  nontopic_row[topic_rows] = False
  scores, emb, qnorm = rows.scores, rows.embeddings, rows.query_norm
  logits_of = jax.vmap(apply_classifier, in_axes=(-1, -1), out_axes=-1)   # [n, d, S] -> [n, J, S]
  per_seed = lambda f, x, labels: jax.vmap(f, in_axes=(-1, None))(x, labels)

  context = rows.weighted_sum                             # (weights, table, rows) -> [n, c, S]
  attention = _attention(scores, train_rows, train_mask, normaliser)               # [n, L, S]
  logits = logits_of(rows.classifier, context(attention, emb, train_rows))
  test_logits = logits_of(rows.classifier,
                          context(_attention(scores, test_rows, test_mask, normaliser), emb,
                                  test_rows))
  # Theorem 1's context: each sentence without its topic word (theorem1.nontopic_context).
  rest = (train_mask & ~is_topic_pos)[:, :, None]
  s_rest = jnp.where(rest, scores[train_rows], -jnp.inf)
  shift = jnp.max(s_rest, axis=1)                                                  # [n, S]
  weights = jnp.where(rest, jnp.exp(s_rest - shift[:, None]), 0.0)
  z = jnp.sum(weights, axis=1)
  vbar = qnorm * context(weights / z[:, None], emb, train_rows)                    # [n, d, S]
  inv_z, vbar = psi_mean(jnp.exp(-shift) / z, dataset), psi_mean(vbar, dataset)    # [T, (d,) S]
  score = scores[topic_rows]                                                       # [T, S]
  v = qnorm * emb[topic_rows]                                                      # [T, d, S]
  q = score + jnp.exp(score) * inv_z - 0.5 * jnp.sum((v - vbar) ** 2, axis=1)
  topic_pos = is_topic_pos[:, :, None]
  topic_weight = jnp.sum(jnp.where(topic_pos, attention, 0.0), axis=1)             # [n, S]
  other_max = jnp.max(jnp.where(topic_pos, -1.0, attention), axis=1)
  norms = qnorm * jnp.linalg.norm(emb, axis=1)                                     # [V, S]
  norms0 = rows0.query_norm * jnp.linalg.norm(rows0.embeddings, axis=1)
  nontopic_max = lambda x: jnp.max(jnp.where(nontopic_row[:, None], jnp.abs(x), 0.0), axis=0)
  out = {
      "loss": per_seed(cross_entropy, logits, train.labels),
      "train_acc": per_seed(accuracy, logits, train.labels),
      "test_acc": per_seed(accuracy, test_logits, test.labels),
      "score": score.T,
      "emb_norm": norms[topic_rows].T,
      "sen_norm": sen_norm(score, m).T,
      "invariant": q.T,
      "topic_attention": jnp.mean(topic_weight, axis=0),
      "topic_argmax_all": jnp.all(topic_weight > other_max, axis=0).astype(topic_weight.dtype),
      "nontopic_max_abs_score_change": nontopic_max(scores - rows0.scores),
      "nontopic_max_abs_norm_change": nontopic_max(norms - norms0),
  }
  return out
