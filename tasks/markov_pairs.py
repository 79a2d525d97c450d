"""The Markov-chain word-pair task of Lu et al. (2021), Appendix A.

A dictionary of ``V`` words and ``J`` topics; topic ``i`` owns a set ``L_i`` of
ordered *topic word pairs* ``(s, e)`` with ``s ≠ e``, and the sets are mutually
exclusive. Topic ``i``'s Markov chain ``MC_i`` moves from any word to any word
(itself included) with probability ``1/V``, except that from a leading word ``s``
of ``L_i`` it moves to one of that group's second words ``e_1..e_n`` with
probability ``1/n`` each. A sentence of length ``m + 1``: draw the topic
uniformly, draw a pair of ``L_i`` uniformly and start at its first word, then
run ``MC_i`` for ``m`` steps. So every sentence of topic ``i`` opens with a pair
of ``L_i`` (the drawn pair, or another pair of the same group).

The paper: ``V = 200`` (40,000 word pairs), ``J = 2`` (A, B), two pairs per
topic, sentences of 10 words, 4,000 training and 1,000 test sentences.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Appendix A. https://arxiv.org/abs/2011.10036
"""
import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["MarkovPairsConfig", "MarkovPairsDataset", "pair_ids", "transition_matrices",
           "make_markov_pairs_dataset"]


@dataclasses.dataclass(frozen=True)
class MarkovPairsConfig:
  """Sizes of the Appendix-A task.

  Attributes:
    n_words: dictionary size V (the paper: 200).
    n_topics: number of topics J (the paper: 2, A and B).
    pairs_per_topic: topic word pairs per topic, ``|L_i|`` (the paper: 2).
    sentence_length: words per sentence, ``m + 1`` (the paper: 10).
    n_train: training sentences (the paper: 4,000).
    n_test: test sentences (the paper: 1,000).
  """
  n_words: int = 200
  n_topics: int = 2
  pairs_per_topic: int = 2
  sentence_length: int = 10
  n_train: int = 4000
  n_test: int = 1000

  def __post_init__(self):
    for name in ("n_words", "n_topics", "pairs_per_topic", "sentence_length", "n_train", "n_test"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool), name, value,
            "an integer")
    check(self.n_words >= 2, "n_words", self.n_words, "an integer >= 2 (a pair needs two words)")
    check(self.n_topics >= 2, "n_topics", self.n_topics, "an integer >= 2")
    check(self.pairs_per_topic >= 1, "pairs_per_topic", self.pairs_per_topic, "an integer >= 1")
    n_pairs = self.n_words * (self.n_words - 1)
    check(self.n_topics * self.pairs_per_topic <= n_pairs, "pairs_per_topic",
          self.pairs_per_topic,
          f"at most {n_pairs // self.n_topics}: the {self.n_topics} topics' pairs are distinct "
          f"ordered pairs of different words, and {self.n_words} words make {n_pairs}")
    check(self.sentence_length >= 2, "sentence_length", self.sentence_length,
          "an integer >= 2 (m + 1 with m >= 1)")
    check(self.n_train >= 1, "n_train", self.n_train, "an integer >= 1")
    check(self.n_test >= 1, "n_test", self.n_test, "an integer >= 1")

  @property
  def n_steps(self) -> int:
    """m: Markov steps after the start word (= word pairs per sentence)."""
    return self.sentence_length - 1


class MarkovPairsDataset(NamedTuple):
  """A train/test split plus the topic word pairs behind it.

  Attributes:
    train: ``tokens [n_train, m+1]``, labels = topic, mask all True.
    test: ``tokens [n_test, m+1]``.
    pairs: ``[J, P, 2]`` int32, ``pairs[i, k] = (s, e)``: the topic word pairs
      ``L_i`` of topic ``i``.
    transitions: ``[J, V, V]`` the transition matrix of ``MC_i`` (rows sum to 1).
  """
  train: Batch
  test: Batch
  pairs: jax.Array
  transitions: jax.Array


def pair_ids(tokens: jax.Array, pairs: jax.Array) -> jax.Array:
  """``[..., m]`` which topic word pair sits at each position (-1: a non-topic pair).

  Position ``j`` holds the pair ``(tokens[j], tokens[j+1])``, the input of the
  CNN's ``j``-th output (:mod:`models.cnn`).

  Args:
    tokens: ``[..., m+1]`` word ids.
    pairs: ``[J, P, 2]`` topic word pairs.

  Returns:
    ``[..., m]`` int32 flat pair index ``i * P + k`` of ``pairs[i, k]``, or -1.
  """
  flat = pairs.reshape(-1, 2)
  hit = ((tokens[..., :-1, None] == flat[:, 0]) & (tokens[..., 1:, None] == flat[:, 1]))
  return jnp.where(hit.any(-1), jnp.argmax(hit, axis=-1), -1).astype(jnp.int32)


def _draw_pairs(key: jax.Array, cfg: MarkovPairsConfig) -> jax.Array:
  """``[J, P, 2]`` distinct ordered pairs of different words, uniformly at random."""
  v = cfg.n_words
  n = cfg.n_topics * cfg.pairs_per_topic
  idx = jax.random.choice(key, v * (v - 1), (n,), replace=False)
  first = idx // (v - 1)
  rest = idx % (v - 1)
  second = rest + (rest >= first)   # skip the first word: no repeated word in a pair
  return jnp.stack([first, second], -1).reshape(cfg.n_topics, cfg.pairs_per_topic, 2).astype(jnp.int32)


def transition_matrices(pairs: jax.Array, n_words: int) -> jax.Array:
  """``[J, V, V]`` the chains ``MC_i`` (Appendix A, steps 2a-2b).

  Uniform rows ``1/V``, except the row of a leading word ``s`` of ``L_i``, which
  puts ``1/n`` on each of its group's second words ``e_1..e_n``.
  """
  n_topics = pairs.shape[0]
  topic = jnp.broadcast_to(jnp.arange(n_topics)[:, None], pairs.shape[:2])
  counts = jnp.zeros((n_topics, n_words, n_words)).at[topic, pairs[..., 0], pairs[..., 1]].add(1.0)
  n = counts.sum(-1, keepdims=True)
  return jnp.where(n > 0, counts / jnp.maximum(n, 1.0), 1.0 / n_words)


def _sentences(key: jax.Array, cfg: MarkovPairsConfig, pairs: jax.Array, cdf: jax.Array, n: int):
  """``n`` sentences: (tokens [n, m+1] int32, labels [n] int32).

  Each step is inverse-CDF sampling from the current word's row: the first word
  whose cumulative probability exceeds ``u · total`` (``u ~ U[0, 1)``), so a
  word of probability 0 is never drawn. All randomness is drawn up front.
  """
  k_topic, k_pair, k_walk = jax.random.split(key, 3)
  topic = jax.random.randint(k_topic, (n,), 0, cfg.n_topics)
  pair = jax.random.randint(k_pair, (n,), 0, cfg.pairs_per_topic)
  start = pairs[topic, pair, 0]
  u = jax.random.uniform(k_walk, (cfg.n_steps, n), cdf.dtype)

  def step(word, u_j):
    row = cdf[topic, word]
    nxt = jnp.argmax(row > u_j[:, None] * row[:, -1:], axis=-1).astype(word.dtype)
    return nxt, nxt

  _, walk = jax.lax.scan(step, start, u)
  tokens = jnp.concatenate([start[:, None], walk.T], axis=1)
  return tokens.astype(jnp.int32), topic.astype(jnp.int32)


def make_markov_pairs_dataset(key: jax.Array, cfg: MarkovPairsConfig) -> MarkovPairsDataset:
  """Generate the Appendix-A task: a pure function of ``key``; vmappable over keys.

  Args:
    key: PRNG key; the same key gives the same pairs and sentences.
    cfg: task sizes.

  Returns:
    A :class:`MarkovPairsDataset`.
  """
  k_pairs, k_train, k_test = jax.random.split(key, 3)
  pairs = _draw_pairs(k_pairs, cfg)
  transitions = transition_matrices(pairs, cfg.n_words)
  cdf = jnp.cumsum(transitions, axis=-1)
  tr_tokens, tr_labels = _sentences(k_train, cfg, pairs, cdf, cfg.n_train)
  te_tokens, te_labels = _sentences(k_test, cfg, pairs, cdf, cfg.n_test)
  ones = lambda x: jnp.ones(x.shape, dtype=bool)
  return MarkovPairsDataset(train=Batch(tr_tokens, ones(tr_tokens), tr_labels),
                            test=Batch(te_tokens, ones(te_tokens), te_labels),
                            pairs=pairs, transitions=transitions)
