"""Topics a trained classifier recognises by the absence of every topic word.

Lu et al. (2021, Section 5.1) explain why a higher-capacity classifier gives
smaller topic-word scores: it "can explain more variations of the sample
distribution", so the attention block gets a weaker training signal. One way
it can do so on the topic task: with J topics, a classifier with a bias and a
ReLU (Attn-TL) can learn J − 1 topics from their topic words and call every
sentence in which none of them stands out the remaining topic, so that topic's
words need not be attended at all. A linear classifier without a bias (FC, TC)
cannot: a context with no topic signal gives it near-uniform logits.

:func:`recall_without_topic_word` measures this: per topic, the fraction of
its sentences still classified correctly once the topic word is masked out
(the sentence is then its m non-topic words, drawn independently of the topic).
"""
from typing import Callable

import jax
import jax.numpy as jnp

from attndyn.tasks.batch import Batch

__all__ = ["without_topic_words", "recall_without_topic_word"]


def without_topic_words(batch: Batch, n_topic_words: int) -> Batch:
  """``batch`` with its topic words (ids ``0 .. T−1`` in :mod:`tasks.topic`) masked out."""
  return batch._replace(mask=batch.mask & (batch.tokens >= n_topic_words))


def recall_without_topic_word(apply_fn: Callable, params: dict, batch: Batch,
                              n_topic_words: int, n_topics: int) -> jax.Array:
  """``[J]``: per topic, the fraction of its sentences classified correctly without their topic word.

  Args:
    apply_fn: ``apply(params, batch) -> output with .logits``; it must honour ``batch.mask``.
    params: trained parameters.
    batch: sentences of the topic task (e.g. ``dataset.test``), labels the topics.
    n_topic_words: T (``dataset.n_topic_words``); topic words are the ids below T.
    n_topics: J.

  Returns:
    ``[J]`` recalls (``nan`` for a topic without sentences). Chance is about ``1/J``
    for a classifier that needs the topic word.
  """
  logits = apply_fn(params, without_topic_words(batch, n_topic_words)).logits
  hit = (jnp.argmax(logits, axis=-1) == batch.labels).astype(logits.dtype)
  member = jax.nn.one_hot(batch.labels, n_topics, dtype=logits.dtype)        # [n, J]
  return (hit @ member) / member.sum(0)
