"""CoNLL-2000 chunking (Tjong Kim Sang & Buchholz 2000), the task of Yang's Section 3.

Reads the shared-task files shipped in ``data/conll2000`` (see ``data/SOURCES.md``):
one token per line, ``word POS chunk`` separated by single spaces, a blank line
after each sentence; chunk tags are IOB2 (``B-NP``, ``I-VP``, ``O``, ...).

Choices (defaults follow ``docs/independent-measurements.md``, where the words+POS
transformer reached test F1 0.90):

* dev = a held-out ``dev_fraction`` (10%) of the training file, drawn by a
  fixed NumPy permutation of ``dev_seed`` (8042 train / 894 dev sentences;
  Yang's "8042 training instances").
* word vocabulary: ``<pad>`` (0), ``<unk>`` (1), then the lowercased words seen
  at least ``min_count`` (2) times in the training sentences (not dev), by
  decreasing count, ties alphabetically. Other words map to ``<unk>``.
* POS vocabulary: ``<pad>``, ``<unk>``, then the training POS tags (sorted).
* tag set: ``O`` then the chunk tags of train and test, sorted (test holds
  ``I-LST``, which train lacks). Padded positions get tag 0 and mask False.
* every split is padded to its own longest sentence (the model takes any L).

References:
  Tjong Kim Sang & Buchholz, "Introduction to the CoNLL-2000 Shared Task:
  Chunking", CoNLL 2000. https://www.clips.uantwerpen.be/conll2000/chunking/
  Yang, "Is Attention Points Out the Only 'Path'? An Analysis on Transformers", Section 3.
"""
import collections
import dataclasses
import pathlib
import re
from typing import Dict, NamedTuple, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.tasks.errors import ConfigError, check

__all__ = ["PAD", "UNK", "FILES", "DEFAULT_ROOT", "Token", "TaggedBatch", "ConllData", "read_conll",
           "split_dev", "build_vocab", "to_tagged_batch", "length_buckets", "cap_length",
           "capped_sentence", "first_longest", "load_conll2000"]

PAD = "<pad>"
UNK = "<unk>"
FILES = ("train", "test")
DEFAULT_ROOT = pathlib.Path(__file__).resolve().parents[1] / "data" / "conll2000"
_CHUNK_TAG = re.compile(r"^(O|[BI]-[A-Z]+)$")


class Token(NamedTuple):
  word: str
  pos: str
  chunk: str


class TaggedBatch(NamedTuple):
  """Sentences as padded id arrays for a per-token tagger.

  Attributes:
    tokens: ``[n, L]`` int32 word ids (``<pad>`` = 0).
    pos: ``[n, L]`` int32 POS-tag ids (``<pad>`` = 0).
    mask: ``[n, L]`` bool, True at real tokens.
    labels: ``[n, L]`` int32 chunk-tag ids (0 at padded positions).
  """
  tokens: jax.Array
  pos: jax.Array
  mask: jax.Array
  labels: jax.Array

  @property
  def size(self) -> int:
    return self.tokens.shape[0]


@dataclasses.dataclass(frozen=True)
class ConllData:
  """CoNLL-2000 as batches (not a pytree: pass ``data.train`` to jitted code).

  Attributes:
    train, dev, test: :class:`TaggedBatch` of each split.
    vocab: word of each id; ``pos_vocab``: POS tag of each id; ``tags``: chunk tag of each id.
    sentences: split name -> the sentences (tuples of :class:`Token`) behind each batch.
  """
  train: TaggedBatch
  dev: TaggedBatch
  test: TaggedBatch
  vocab: Tuple[str, ...]
  pos_vocab: Tuple[str, ...]
  tags: Tuple[str, ...]
  sentences: Dict[str, Tuple[Tuple[Token, ...], ...]]

  @property
  def sizes(self) -> Dict[str, int]:
    return {split: len(s) for split, s in self.sentences.items()}

  def unk_rate(self, split: str) -> float:
    """Fraction of the real tokens of ``split`` that are ``<unk>``."""
    b = getattr(self, split)
    mask = np.asarray(b.mask)
    return float((np.asarray(b.tokens)[mask] == self.vocab.index(UNK)).mean())


def read_conll(path: Union[str, pathlib.Path], limit: Optional[int] = None
               ) -> Tuple[Tuple[Token, ...], ...]:
  """Read a CoNLL-2000 file into sentences of ``(word, POS, chunk)`` tokens.

  Args:
    path: e.g. ``data/conll2000/train.txt``.
    limit: keep only the first ``limit`` sentences (tests, the quick mode).

  Raises:
    ConfigError: a missing/empty/non-UTF-8 file, or a line that is not
      ``word POS chunk`` with an IOB2 chunk tag (names file and line).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise ConfigError(f"{path}: CoNLL-2000 file does not exist; expected train.txt and test.txt "
                      "of the shared task (see data/SOURCES.md)")
  try:
    text = path.read_bytes().decode("utf-8")
  except UnicodeDecodeError as err:
    raise ConfigError(f"{path}, byte {err.start + 1}: not valid UTF-8 ({err.reason})") from None
  sentences, current = [], []
  for number, line in enumerate(text.split("\n"), start=1):
    line = line.rstrip("\r")
    if not line.strip():
      if current:
        sentences.append(tuple(current))
        current = []
        if limit is not None and len(sentences) >= limit:
          break
      continue
    fields = line.split(" ")
    if len(fields) != 3 or not all(fields):
      raise ConfigError(f"{path}, line {number}: {line!r} splits into {len(fields)} fields at "
                        "single spaces (one empty); each non-blank line must be 'word POS chunk' "
                        "separated by single spaces" if len(fields) == 3 else
                        f"{path}, line {number}: {line!r} splits into {len(fields)} fields at "
                        "single spaces; each non-blank line must be 'word POS chunk' separated by "
                        "single spaces")
    if not _CHUNK_TAG.match(fields[2]):
      raise ConfigError(f"{path}, line {number}: chunk tag {fields[2]!r} is not allowed: O, or "
                        "B-TYPE / I-TYPE with an upper-case type (IOB2)")
    current.append(Token(*fields))
  if current and (limit is None or len(sentences) < limit):
    sentences.append(tuple(current))
  if not sentences:
    raise ConfigError(f"{path}: no sentence found; expected 'word POS chunk' lines with a blank "
                      "line after each sentence")
  return tuple(sentences)


def split_dev(n: int, fraction: float, seed: int) -> Tuple[np.ndarray, np.ndarray]:
  """``(train_idx, dev_idx)``: a fixed random ``round(fraction·n)`` of ``0..n-1`` held out, both sorted."""
  n_dev = int(round(fraction * n))
  perm = np.random.default_rng(seed).permutation(n)
  return np.sort(perm[n_dev:]), np.sort(perm[:n_dev])


def build_vocab(sentences, *, min_count: int) -> Tuple[str, ...]:
  """``<pad>``, ``<unk>``, then lowercased words seen ≥ ``min_count`` times (by count, then alphabetically)."""
  counts = collections.Counter(t.word.lower() for s in sentences for t in s)
  words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
  return (PAD, UNK) + tuple(w for w in words if w not in (PAD, UNK))


def to_tagged_batch(sentences, vocab: Sequence[str], pos_vocab: Sequence[str],
                    tags: Sequence[str], max_len: Optional[int] = None) -> TaggedBatch:
  """Pad sentences into a :class:`TaggedBatch` (unknown words / POS tags → ``<unk>``).

  Raises:
    ConfigError: ``max_len`` shorter than a sentence, or a chunk tag not in ``tags``.
  """
  longest = max(len(s) for s in sentences)
  max_len = longest if max_len is None else max_len
  check(isinstance(max_len, int) and max_len >= longest, "max_len", max_len,
        f"an integer >= the longest sentence ({longest} tokens), or unset")
  w_index = {w: i for i, w in enumerate(vocab)}
  p_index = {p: i for i, p in enumerate(pos_vocab)}
  t_index = {t: i for i, t in enumerate(tags)}
  n = len(sentences)
  tokens = np.zeros((n, max_len), np.int32)
  pos = np.zeros((n, max_len), np.int32)
  labels = np.zeros((n, max_len), np.int32)
  mask = np.zeros((n, max_len), bool)
  for i, s in enumerate(sentences):
    k = len(s)
    tokens[i, :k] = [w_index.get(t.word.lower(), 1) for t in s]
    pos[i, :k] = [p_index.get(t.pos, 1) for t in s]
    for j, t in enumerate(s):
      if t.chunk not in t_index:
        raise ConfigError(f"conll2000: chunk tag {t.chunk!r} (sentence {i}) is not in the tag set "
                          f"{', '.join(tags)}")
      labels[i, j] = t_index[t.chunk]
    mask[i, :k] = True
  return TaggedBatch(jnp.asarray(tokens), jnp.asarray(pos), jnp.asarray(mask), jnp.asarray(labels))


def length_buckets(batch: TaggedBatch, n_buckets: int) -> Tuple[TaggedBatch, ...]:
  """Split a batch into ``n_buckets`` groups of similar length, each trimmed to its longest sentence.

  The boundaries minimise the total padded tokens ``Σ_b n_b · max_len_b`` (dynamic
  programming over the sorted lengths). Sentence order inside a bucket follows
  the batch. Buckets are returned from short to long; empty ones are dropped.
  """
  check(isinstance(n_buckets, int) and n_buckets >= 1, "buckets", n_buckets,
        "a positive integer")
  lengths = np.asarray(batch.mask).sum(-1)
  values = np.unique(lengths)                         # distinct lengths, sorted
  count = np.array([(lengths == v).sum() for v in values])
  cum = np.concatenate([[0], np.cumsum(count)])
  k, m = min(n_buckets, len(values)), len(values)
  # cost[j][i]: best padded tokens for the first i distinct lengths in j buckets.
  inf = float("inf")
  cost = np.full((k + 1, m + 1), inf)
  cut = np.zeros((k + 1, m + 1), int)
  cost[0, 0] = 0
  for j in range(1, k + 1):
    for i in range(1, m + 1):
      for s in range(i):
        c = cost[j - 1, s] + (cum[i] - cum[s]) * values[i - 1]
        if c < cost[j, i]:
          cost[j, i], cut[j, i] = c, s
  j = int(np.argmin(cost[1:, m])) + 1
  bounds, i = [], m
  while j > 0:
    bounds.append((cut[j, i], i))
    i, j = cut[j, i], j - 1
  out = []
  for lo, hi in reversed(bounds):
    rows = np.nonzero((lengths >= values[lo]) & (lengths <= values[hi - 1]))[0]
    top = int(values[hi - 1])
    out.append(jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[rows, :top]), batch))
  return tuple(out)


def cap_length(batch: TaggedBatch, max_len: int) -> TaggedBatch:
  """The sentences of at most ``max_len`` words, trimmed to ``max_len`` columns."""
  keep = np.asarray(batch.mask).sum(-1) <= max_len
  return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[keep][:, :max_len]), batch)


def capped_sentence(data: ConllData, max_len: int, i: int):
  """The tokens of capped test sentence ``i`` (:func:`cap_length` keeps the original order)."""
  lengths = np.asarray(data.test.mask).sum(-1)
  original = np.nonzero(lengths <= max_len)[0][i]
  return data.sentences["test"][int(original)]


def first_longest(batch: TaggedBatch) -> int:
  """The first sentence of the longest length present."""
  lengths = np.asarray(batch.mask).sum(-1)
  return int(np.argmax(lengths == lengths.max()))


def load_conll2000(root: Union[str, pathlib.Path, None] = None, *, dev_fraction: float = 0.1,
                   dev_seed: int = 0, min_count: int = 2, limit: Optional[int] = None,
                   test_limit: Optional[int] = None) -> ConllData:
  """Load CoNLL-2000 with a held-out dev split of the training file.

  Args:
    root: folder holding ``train.txt`` and ``test.txt`` (default: ``data/conll2000``).
    dev_fraction: fraction of the training file held out as dev, in (0, 0.5].
    dev_seed: seed of the fixed permutation that picks the dev sentences.
    min_count: a training word enters the vocabulary if seen this often (lowercased).
    limit: read only the first ``limit`` sentences of train.txt (quick mode, tests).
    test_limit: read only the first ``test_limit`` sentences of test.txt.

  Returns:
    A :class:`ConllData` (full data: 8042 / 894 / 2012 sentences).

  Raises:
    ConfigError: a bad option or a malformed file.
  """
  check(isinstance(dev_fraction, float) and 0 < dev_fraction <= 0.5, "dev_fraction",
        dev_fraction, "a number in (0, 0.5]")
  check(isinstance(min_count, int) and min_count >= 1, "min_count", min_count,
        "an integer >= 1")
  for name, value in (("limit", limit), ("test_limit", test_limit)):
    check(value is None or (isinstance(value, int) and value >= 2), name, value,
          "an integer >= 2, or unset")
  root = DEFAULT_ROOT if root is None else pathlib.Path(root)
  full = read_conll(root / "train.txt", limit)
  test = read_conll(root / "test.txt", test_limit)
  train_idx, dev_idx = split_dev(len(full), dev_fraction, dev_seed)
  check(len(dev_idx) >= 1 and len(train_idx) >= 1, "limit", limit,
        "enough sentences for a non-empty train and dev split")
  sentences = {"train": tuple(full[i] for i in train_idx), "dev": tuple(full[i] for i in dev_idx),
               "test": test}
  vocab = build_vocab(sentences["train"], min_count=min_count)
  pos_vocab = (PAD, UNK) + tuple(sorted({t.pos for s in sentences["train"] for t in s}))
  chunk_tags = {t.chunk for split in (full, test) for s in split for t in s} - {"O"}
  tags = ("O",) + tuple(sorted(chunk_tags))
  batches = {k: to_tagged_batch(v, vocab, pos_vocab, tags) for k, v in sentences.items()}
  return ConllData(train=batches["train"], dev=batches["dev"], test=batches["test"], vocab=vocab,
                   pos_vocab=pos_vocab, tags=tags, sentences=sentences)
