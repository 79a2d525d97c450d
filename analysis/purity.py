"""Topic purity and the purity of the attended words (Lu et al. 2021, Section 5.2, Figs 6-7).

For a word ``w`` of SST-2, ``δ⁺(w)`` and ``δ⁻(w)`` are the fractions of positive
and negative sentences among the training sentences containing ``w``; its topic
purity is

.. math:: δ(w) = |δ^+(w) - δ^-(w)|

(1: a pure positive or negative word; 0: no topic preference). The attended
word of a sentence is its word of largest score, ties broken uniformly at random
among the distinct tied words. Figs 6-7 follow the mean purity and the mean
occurrence count (training sentences containing the word) of the attended words,
over all training sentences (Fig 7) or over those containing a given word
(Fig 6).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2. https://arxiv.org/abs/2011.10036
"""
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.models.lu import word_scores
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["purity_curves", "purity_trends", "topic_purity", "occurrence_counts", "attended_words", "AttendedPurityStats",
           "attended_purity_stats", "purity_record"]


def topic_purity(class_counts: jax.Array) -> jax.Array:
  """``[V]`` topic purity ``δ(w) = |δ⁺(w) − δ⁻(w)|`` of every word (SST-2).

  Args:
    class_counts: ``[V, 2]`` number of training sentences of class 0 (negative)
      and 1 (positive) containing each word (``SSTData.train_word_class_counts``
      or :func:`tasks.sst.word_class_counts`).

  Returns:
    ``[V]`` purity in ``[0, 1]``; NaN for a word in no training sentence.
  """
  counts = jnp.asarray(class_counts, jnp.result_type(float))
  check(counts.ndim == 2 and counts.shape[-1] == 2, "purity.class_counts",
        f"an array of shape {tuple(counts.shape)}", "shape [V, 2]: topic purity is defined on SST-2")
  total = counts.sum(-1)
  return jnp.abs(counts[:, 1] - counts[:, 0]) / jnp.where(total > 0, total, jnp.nan)


def occurrence_counts(class_counts: jax.Array) -> jax.Array:
  """``[V]`` number of training sentences containing each word: ``class_counts [V, C]`` summed over classes."""
  return jnp.asarray(class_counts).sum(-1)


def attended_words(params: dict, batch: Batch, key: jax.Array,
                   scores_fn: Callable = word_scores) -> jax.Array:
  """``[n]`` the attended word of each sentence: the word of largest score.

  Ties (e.g. at initialisation, when every score is 0) are broken uniformly at
  random among the distinct tied words, as the paper says; a word repeated in
  the sentence is one candidate, not several.

  Args:
    params: model parameters.
    batch: ``tokens [n, L]``, ``mask [n, L]``; masked positions are never attended.
    key: PRNG key for the tie-breaking.
    scores_fn: ``scores_fn(params) -> [V]`` word scores (default ``qᵀκ_w``).

  Returns:
    ``[n]`` int32 word ids.
  """
  tokens, mask = batch.tokens, batch.mask
  scores = jnp.where(mask, scores_fn(params)[tokens], -jnp.inf)
  tied = mask & (scores == jnp.max(scores, axis=-1, keepdims=True))
  # Keep the first position of each tied word: earlier equal tokens disqualify later ones.
  n_pos = tokens.shape[-1]
  earlier = jnp.tril(jnp.ones((n_pos, n_pos), bool), k=-1)
  dup = jnp.any(earlier & (tokens[:, :, None] == tokens[:, None, :]) & tied[:, None, :], axis=-1)
  candidates = tied & ~dup
  pos = jax.random.categorical(key, jnp.where(candidates, 0.0, -jnp.inf), axis=-1)
  return jnp.take_along_axis(tokens, pos[:, None], axis=-1)[:, 0].astype(jnp.int32)


class AttendedPurityStats(NamedTuple):
  """Mean purity and occurrence count of the attended words (Figs 6-7).

  Attributes:
    purity: mean ``δ`` of the attended words over all sentences (Fig 7).
    occurrence: their mean occurrence count over all sentences (Fig 7).
    word_purity: ``[K]`` mean ``δ`` of the attended words over the sentences
      containing each given word (Fig 6); NaN if none does.
    word_occurrence: ``[K]`` the same for the occurrence count.
    word_sentences: ``[K]`` number of sentences containing each given word.
  """
  purity: jax.Array
  occurrence: jax.Array
  word_purity: jax.Array
  word_occurrence: jax.Array
  word_sentences: jax.Array


def attended_purity_stats(attended: jax.Array, batch: Batch, purity: jax.Array,
                          occurrence: jax.Array, words: Optional[jax.Array] = None
                          ) -> AttendedPurityStats:
  """Average purity and occurrence count of the attended words.

  Args:
    attended: ``[n]`` attended word of each sentence (:func:`attended_words`).
    batch: the sentences (the training set in the paper).
    purity: ``[V]`` :func:`topic_purity`.
    occurrence: ``[V]`` :func:`occurrence_counts`.
    words: ``[K]`` word ids ``w`` for the per-word averages (Fig 6: the five
      highest-scoring words of the trained model); default none.

  Returns:
    An :class:`AttendedPurityStats`.
  """
  words = jnp.zeros((0,), jnp.int32) if words is None else jnp.asarray(words)
  att_purity = purity[attended]
  att_occ = jnp.asarray(occurrence, att_purity.dtype)[attended]
  contains = jnp.any((batch.tokens[None] == words[:, None, None]) & batch.mask[None], axis=-1)
  n_with = contains.sum(-1)
  denom = jnp.where(n_with > 0, n_with, jnp.nan)
  return AttendedPurityStats(
      purity=jnp.mean(att_purity),
      occurrence=jnp.mean(att_occ),
      word_purity=jnp.where(contains, att_purity, 0.0).sum(-1) / denom,
      word_occurrence=jnp.where(contains, att_occ, 0.0).sum(-1) / denom,
      word_sentences=n_with.astype(jnp.int32),
  )


def purity_record(batch: Batch, class_counts: jax.Array, words: Optional[jax.Array] = None, *,
                  key: jax.Array, scores_fn: Callable = word_scores) -> Callable:
  """A ``record(params, params0) -> AttendedPurityStats`` for ``dynamics.make_train`` (Figs 6-7).

  Args:
    batch: the training sentences.
    class_counts: ``[V, 2]`` training sentence counts per class of each word.
    words: ``[K]`` words for Fig 6's per-word averages.
    key: tie-breaking key, reused at every recorded step (a fixed tie-break).
    scores_fn: ``scores_fn(params) -> [V]`` word scores.
  """
  purity, occurrence = topic_purity(class_counts), occurrence_counts(class_counts)

  def record(params, params0):
    del params0
    return attended_purity_stats(attended_words(params, batch, key, scores_fn), batch, purity,
                                 occurrence, words)

  return record


def purity_curves(attended, batch: Batch, purity, occurrence, idx, words_per_point) -> dict:
  """Figs 6-7 along training for the points ``idx``: ``{all_purity, all_occ, word_purity, word_occ}``.

  Args:
    attended: ``[P, T, n]`` the attended word of every training sentence, per point and record.
    batch: the training sentences.
    purity, occurrence: ``[V]`` every word's topic purity and occurrence count.
    idx: the points.
    words_per_point: per point of ``idx``, the words of Fig 6 (its top-5 words).

  Returns:
    ``all_*``: ``[R, T]`` over all training sentences (Fig 7, :func:`attended_purity_stats`);
    ``word_*``: ``[R, T]`` over the sentences containing each given word, averaged over the
    words (Fig 6).
  """
  out = {"all_purity": [], "all_occ": [], "word_purity": [], "word_occ": []}
  for p, words in zip(idx, words_per_point):
    rows = [attended_purity_stats(jnp.asarray(att), batch, purity, occurrence, jnp.asarray(words))
            for att in attended[p]]
    out["all_purity"].append([float(r.purity) for r in rows])
    out["all_occ"].append([float(r.occurrence) for r in rows])
    out["word_purity"].append([float(np.nanmean(np.asarray(r.word_purity))) for r in rows])
    out["word_occ"].append([float(np.nanmean(np.asarray(r.word_occurrence))) for r in rows])
  return {k: np.asarray(v) for k, v in out.items()}


def purity_trends(curves: dict, early: int = 1, last: int = -1) -> dict:
  """Per run, Sec 5.2's trends of :func:`purity_curves` between the records ``early`` and
  ``last``: ``all`` (Fig 7) and ``word`` (Fig 6), the attended words' mean purity rises while
  their mean occurrence falls; ``word_above_all``, the final purity is higher over the
  sentences with a top word (Fig 6) than over all (Fig 7). ``[R]`` bool each."""
  return {part: (curves[f"{part}_purity"][:, last] > curves[f"{part}_purity"][:, early])
          & (curves[f"{part}_occ"][:, last] < curves[f"{part}_occ"][:, early])
          for part in ("all", "word")} | {
      "word_above_all": curves["word_purity"][:, last] > curves["all_purity"][:, last]}
