"""The sequence-copying task of Snell et al. (Section 3.3): the target is the source, token by token.

Three training distributions over length-``length`` sequences of tokens ``1..n_tokens``:

* ``permutation``: a uniformly random permutation of ``[1, n_tokens]`` (needs
  ``length == n_tokens``). Every sentence holds every word once, so word
  co-occurrence says nothing about which input word gives which output word:
  KTIW is hard to learn and, by the paper's argument, attention often fails.
* ``iid``: each token i.i.d. uniform on ``[1, n_tokens]``: co-occurrence is informative.
* ``subset``: ``length`` distinct tokens drawn from a vocabulary of ``n_tokens``
  (e.g. 40 of 60): in between.

As in the authors' code the output word is the input token's own id (the
target is ``x``, not a separate ``x′``). Two encodings of a sentence:

* ``authors`` (Sea-Snell/AttentionDynamics ``SequenceCopying/seq2seq.py``): words
  are ids ``0..n_tokens-1``, EOS = ``n_tokens`` is appended to every source and
  SOS = ``n_tokens + 1`` starts the target, ``n_tokens + 2`` ids in all. The
  source is ``[x; EOS]`` (``length + 1`` positions, all attended) and the labels
  are ``[x; EOS]`` (the decoder reads ``[SOS; x]``), so loss and accuracy include
  the EOS position.
* ``ours`` (the earlier variant, "ours: no EOS, Glorot"): words ``1..n_tokens``,
  id 0 is padding and begin-of-sentence, ``n_tokens + 1`` ids, source = labels = ``x``.
"""
import dataclasses

import jax
import jax.numpy as jnp

from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["DISTRIBUTIONS", "ENCODINGS", "CopyingConfig", "sample_copying", "copying_dataset"]

DISTRIBUTIONS = ("permutation", "iid", "subset")
ENCODINGS = ("authors", "ours")


@dataclasses.dataclass(frozen=True)
class CopyingConfig:
  """Attributes:
    distribution: ``permutation``, ``iid`` or ``subset``.
    n_tokens: number of distinct words (vocabulary without id 0). Paper: 40 (60 for subset).
    length: sequence length (without EOS). Paper: 40.
    encoding: ``authors`` (EOS and SOS ids, words from 0) or ``ours`` (no EOS, words from 1).
  """
  distribution: str = "permutation"
  n_tokens: int = 40
  length: int = 40
  encoding: str = "ours"

  def __post_init__(self):
    check(self.distribution in DISTRIBUTIONS, "distribution", self.distribution,
          f"one of {', '.join(DISTRIBUTIONS)}")
    check(self.encoding in ENCODINGS, "encoding", self.encoding,
          f"one of {', '.join(ENCODINGS)}")
    for name in ("n_tokens", "length"):
      v = getattr(self, name)
      check(isinstance(v, int) and not isinstance(v, bool) and v >= 1, name, v,
            "a positive integer")
    if self.distribution == "permutation":
      check(self.length == self.n_tokens, "length", self.length,
            f"equal to n_tokens = {self.n_tokens} for permutations of [1, n_tokens]")
    if self.distribution == "subset":
      check(self.length <= self.n_tokens, "length", self.length,
            f"at most n_tokens = {self.n_tokens} (the words of a subset sentence are distinct)")

  @property
  def vocab(self) -> int:
    """Number of ids: words + EOS + SOS (``authors``) or words + id 0 (``ours``)."""
    return self.n_tokens + (2 if self.encoding == "authors" else 1)

  @property
  def eos(self) -> int:
    """The end-of-sequence id (``authors``)."""
    return self.n_tokens

  @property
  def sos(self) -> int:
    """The id the decoder reads first: SOS = ``n_tokens + 1`` (``authors``) or 0 (``ours``)."""
    return self.n_tokens + 1 if self.encoding == "authors" else 0


def sample_copying(key: jax.Array, cfg: CopyingConfig, n: int) -> Batch:
  """``n`` copying pairs: ``tokens = labels`` int32, mask all True.

  ``[n, length + 1]`` (``[x; EOS]``) with the ``authors`` encoding, ``[n, length]`` with ``ours``.

  Args:
    key: PRNG key (the batch is a pure function of it).
    cfg: the distribution.
    n: number of sequences.
  """
  check(isinstance(n, int) and n >= 1, "n", n, "a positive integer")
  keys = jax.random.split(key, n)
  if cfg.distribution == "iid":
    x = jax.random.randint(key, (n, cfg.length), 1, cfg.n_tokens + 1)
  else:
    words = jnp.arange(1, cfg.n_tokens + 1)
    x = jax.vmap(lambda k: jax.random.permutation(k, words)[:cfg.length])(keys)
  x = x.astype(jnp.int32)
  if cfg.encoding == "authors":   # words 0..n-1, then EOS
    x = jnp.concatenate([x - 1, jnp.full((n, 1), cfg.eos, jnp.int32)], axis=1)
  return Batch(tokens=x, mask=jnp.ones(x.shape, bool), labels=x)


def copying_dataset(key: jax.Array, cfg: CopyingConfig, steps: int, batch_size: int) -> Batch:
  """``steps * batch_size`` fresh pairs: one epoch of ``dynamics.make_train`` with
  ``batch_size`` and ``sampling="shuffle"`` sees each once, i.e. a fresh batch every step."""
  return sample_copying(key, cfg, steps * batch_size)
