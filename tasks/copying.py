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
target is ``x``, not a separate ``x′``). Id 0 is padding / begin-of-sentence.
"""
import dataclasses

import jax
import jax.numpy as jnp

from tasks.batch import Batch
from tasks.errors import check

DISTRIBUTIONS = ("permutation", "iid", "subset")


@dataclasses.dataclass(frozen=True)
class CopyingConfig:
  """Attributes:
    distribution: ``permutation``, ``iid`` or ``subset``.
    n_tokens: number of distinct words (vocabulary without id 0). Paper: 40 (60 for subset).
    length: sequence length. Paper: 40.
  """
  distribution: str = "permutation"
  n_tokens: int = 40
  length: int = 40

  def __post_init__(self):
    check(self.distribution in DISTRIBUTIONS, "task.distribution", self.distribution,
          f"one of {', '.join(DISTRIBUTIONS)}")
    for name in ("n_tokens", "length"):
      v = getattr(self, name)
      check(isinstance(v, int) and not isinstance(v, bool) and v >= 1, f"task.{name}", v,
            "a positive integer")
    if self.distribution == "permutation":
      check(self.length == self.n_tokens, "task.length", self.length,
            f"equal to n_tokens = {self.n_tokens} for permutations of [1, n_tokens]")
    if self.distribution == "subset":
      check(self.length <= self.n_tokens, "task.length", self.length,
            f"at most n_tokens = {self.n_tokens} (the words of a subset sentence are distinct)")

  @property
  def vocab(self) -> int:
    """Vocabulary size including id 0."""
    return self.n_tokens + 1


def sample_copying(key: jax.Array, cfg: CopyingConfig, n: int) -> Batch:
  """``n`` copying pairs: ``tokens = labels`` ``[n, length]`` int32, mask all True.

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
  return Batch(tokens=x, mask=jnp.ones(x.shape, bool), labels=x)


def copying_dataset(key: jax.Array, cfg: CopyingConfig, steps: int, batch_size: int) -> Batch:
  """``steps * batch_size`` fresh pairs: one epoch of ``dynamics.make_train`` with
  ``batch_size`` and ``sampling="shuffle"`` sees each once, i.e. a fresh batch every step."""
  return sample_copying(key, cfg, steps * batch_size)
