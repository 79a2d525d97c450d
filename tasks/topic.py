"""The topic-word classification task of Lu et al. (2021), Section 3.

Each sentence is one topic word plus ``m`` non-topic words drawn uniformly with
replacement from a dictionary of ``M`` words; its label is the topic of the topic
word. Word ids: topic words are ``0 .. T-1`` (``T = J * words_per_topic``, the
topic of word ``t`` is ``t // words_per_topic``), non-topic words are
``T .. T+M-1``.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["MAX_WORDS", "TopicTaskConfig", "TopicDataset", "COMPILER_OPTIONS",
           "check_key_and_config", "make_topic_dataset"]

MAX_WORDS = 2**31 - 1  # word ids are int32


@dataclasses.dataclass(frozen=True)
class TopicTaskConfig:
  """Sizes of the synthetic task (paper symbols in brackets).

  Attributes:
    n_topics: number of topics (classes) [J], ≥ 2.
    words_per_topic: topic words per topic [|T_j|], ≥ 1. There are
      T = J·words_per_topic topic words, ids ``0..T-1``.
    vocab_size: non-topic dictionary size [M = |Θ|], ≥ 1.
    n_nontopic: non-topic words per sentence [m], drawn with replacement, ≥ 1.
    n_train: training sentences [|Ψ|], at least T.
    n_test: test sentences, ≥ 1.
  """
  n_topics: int = 4
  words_per_topic: int = 2
  vocab_size: int = 5000
  n_nontopic: int = 20
  n_train: int = 800
  n_test: int = 200

  def __post_init__(self):
    for name in ("n_topics", "words_per_topic", "vocab_size", "n_nontopic", "n_train", "n_test"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool), name, value,
            "an integer")
    check(self.n_topics >= 2, "n_topics", self.n_topics, "an integer >= 2")
    check(self.words_per_topic >= 1, "words_per_topic", self.words_per_topic, "an integer >= 1")
    check(self.vocab_size >= 1, "vocab_size", self.vocab_size, "an integer >= 1")
    check(self.n_nontopic >= 1, "n_nontopic", self.n_nontopic, "an integer m >= 1")
    check(self.n_train >= 1, "n_train", self.n_train, "an integer >= 1")
    check(self.n_test >= 1, "n_test", self.n_test, "an integer >= 1")
    check(self.n_words <= MAX_WORDS, "n_topics*words_per_topic + vocab_size", self.n_words,
          f"at most {MAX_WORDS} words in all (word ids are int32)")

  @property
  def n_topic_words(self) -> int:
    """T = J * words_per_topic."""
    return self.n_topics * self.words_per_topic

  @property
  def n_words(self) -> int:
    """Total vocabulary V = T + M."""
    return self.n_topic_words + self.vocab_size

  @property
  def sentence_length(self) -> int:
    """m + 1."""
    return self.n_nontopic + 1


class TopicDataset(NamedTuple):
  """A train/test split plus what the theory needs.

  Attributes:
    train: training sentences, ``tokens [n_train, m+1]``.
    test: test sentences.
    train_topic_word: ``[n_train]`` the topic word of each training sentence
      (sample ``i`` is in Ψ_t iff ``train_topic_word[i] == t``).
    word_topic: ``[T]`` the topic of each topic word.
  """
  train: Batch
  test: Batch
  train_topic_word: jax.Array
  word_topic: jax.Array

  @property
  def n_topic_words(self) -> int:
    return self.word_topic.shape[-1]

  def psi(self) -> jax.Array:
    """``[T, n_train]`` bool membership of Ψ_t (samples containing topic word t)."""
    t = jnp.arange(self.n_topic_words)
    return self.train_topic_word[..., None, :] == t[:, None]


def _sentences(key: jax.Array, cfg: TopicTaskConfig, n: int):
  """Draw ``n`` sentences: (tokens [n, m+1], labels [n], topic word [n])."""
  k_topic, k_word, k_rest, k_pos = jax.random.split(key, 4)
  labels = jax.random.randint(k_topic, (n,), 0, cfg.n_topics)
  within = jax.random.randint(k_word, (n,), 0, cfg.words_per_topic)
  topic_word = labels * cfg.words_per_topic + within
  nontopic = cfg.n_topic_words + jax.random.randint(
      k_rest, (n, cfg.n_nontopic), 0, cfg.vocab_size)
  tokens = jnp.concatenate([topic_word[:, None], nontopic], axis=1)
  # The model is a bag of words; shuffle positions so nothing can rely on order.
  order = jax.vmap(lambda k: jax.random.permutation(k, cfg.sentence_length))(
      jax.random.split(k_pos, n))
  tokens = jnp.take_along_axis(tokens, order, axis=1)
  return tokens.astype(jnp.int32), labels.astype(jnp.int32), topic_word.astype(jnp.int32)


# XLA options for jit-compiling make_topic_dataset on its own (pass to jax.jit through
# dynamics.xla_options.supported, which drops options the installed XLA lacks): LLVM at -O1 and
# XLA:CPU's loop emitters instead of its MLIR fusion emitters. The generator is integer threefry
# draws that run in milliseconds, so its compile is the whole cost; both options give the same
# arrays bit for bit and compile faster (`python -m benchmarks.xla_options` times both ways).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}


def check_key_and_config(key, cfg, config_type, where: str) -> None:
  """One line when a ``(key, cfg)`` generator is called with the arguments swapped or wrong."""
  order = f"{where}(key, cfg)"
  if isinstance(key, config_type):
    raise ConfigError(f"{order}: the first argument is a {config_type.__name__} and the second "
                      f"{type(cfg).__name__}: the arguments are swapped; call {order} with "
                      "key = jax.random.PRNGKey(seed).")
  dtype = getattr(key, "dtype", None)
  is_key = dtype is not None and (jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) or (
      dtype == jnp.uint32 and tuple(getattr(key, "shape", ()))[-1:] == (2,)))
  check(is_key, "key", type(key).__name__ if dtype is None else f"an array of dtype {dtype}",
        f"a PRNG key (jax.random.PRNGKey(seed) or jax.random.key(seed)); {order}")
  check(isinstance(cfg, config_type), "cfg", type(cfg).__name__, f"a {config_type.__name__}; {order}")


def make_topic_dataset(key: jax.Array, cfg: TopicTaskConfig) -> TopicDataset:
  """Generate the task (Section 3): a pure function of ``key``; vmappable over keys.

  Args:
    key: PRNG key; the same key gives the same data.
    cfg: task sizes.

  Returns:
    A :class:`TopicDataset`.
  """
  check_key_and_config(key, cfg, TopicTaskConfig, "make_topic_dataset")
  k_train, k_test = jax.random.split(key)
  tr_tokens, tr_labels, tr_topic = _sentences(k_train, cfg, cfg.n_train)
  te_tokens, te_labels, _ = _sentences(k_test, cfg, cfg.n_test)
  ones = lambda x: jnp.ones(x.shape, dtype=bool)
  return TopicDataset(
      train=Batch(tr_tokens, ones(tr_tokens), tr_labels),
      test=Batch(te_tokens, ones(te_tokens), te_labels),
      train_topic_word=tr_topic,
      word_topic=(jnp.arange(cfg.n_topic_words) // cfg.words_per_topic).astype(jnp.int32),
  )
