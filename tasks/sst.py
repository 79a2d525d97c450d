"""The Stanford Sentiment Treebank (SST-2 / SST-5) of Lu et al. (2021), Section 5.2.

Reads the PTB-format trees shipped in ``data/sst/trees`` (see ``data/SOURCES.md``)
with a small parser of ``(label children...)``: the leaves are the words, the
root label (0..4) is the sentence label. No tokenizer library, no download.

Choices (each one an option; defaults follow ``docs/independent-measurements.md``, which
reproduced the paper's 79.59% / 40.53% TC accuracies):

* ``lowercase=True``: words are lowercased after PTB unescaping.
* ``vocab_from="all"``: the vocabulary holds every word of train, dev and test
  (a dev/test word then has an embedding that training never moves). With
  ``"train"`` it holds the training words only, and other words map to ``<unk>``.
* ``padding="masked"``: pad positions are masked (score ``-inf``, attention 0),
  as the paper's text says. ``"pad_word"`` is the authors' code: the pad is the
  ordinary word ``<pad>`` with its own trainable embedding and key, and the mask
  is True everywhere.

The vocabulary always starts with ``<pad>`` (id 0; under ``"masked"`` it is
never attended to), then ``<unk>`` (id 1) when ``vocab_from="train"``, then the
words by decreasing token count, ties alphabetically.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2. https://arxiv.org/abs/2011.10036
  Socher et al., "Recursive Deep Models for Semantic Compositionality Over a
  Sentiment Treebank", EMNLP 2013.
"""
import collections
import dataclasses
import pathlib
import re
from typing import Dict, NamedTuple, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["SPLITS", "PAD", "UNK", "PADDINGS", "VOCAB_FROM", "LABELS", "DEFAULT_ROOT", "Sentence",
           "SSTData", "parse_tree", "read_trees", "to_binary", "build_vocab", "to_batch",
           "word_class_counts", "load_sst", "splits_of"]

SPLITS = ("train", "dev", "test")
PAD = "<pad>"
UNK = "<unk>"
PADDINGS = ("masked", "pad_word")
VOCAB_FROM = ("all", "train")
LABELS = ("0", "1", "2", "3", "4")
# PTB escapes found in the SST files (plus the bracket kinds PTB defines).
_ESCAPED_WORDS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{",
                  "-RCB-": "}"}
# Tokens split on ASCII whitespace only: a few SST words hold a no-break space ("8\xa01\/2").
_TOKEN = re.compile(r"\(|\)|[^ \t\n\r\f\v()]+")
DEFAULT_ROOT = pathlib.Path(__file__).resolve().parents[1] / "data" / "sst" / "trees"


class Sentence(NamedTuple):
  """One SST sentence.

  Attributes:
    words: the leaves of the tree, left to right (unescaped, maybe lowercased).
    label: the root label: 0..4 for SST-5; 0 (negative) / 1 (positive) for SST-2.
  """
  words: Tuple[str, ...]
  label: int


@dataclasses.dataclass(frozen=True)
class SSTData:
  """SST as batches, plus what the analysis of Section 5.2 needs.

  Not a pytree: pass ``data.train`` (a :class:`tasks.Batch`) to jitted code.

  Attributes:
    train: training sentences, ``tokens [n_train, L]``.
    dev: development sentences (early stopping), ``tokens [n_dev, L]``.
    test: test sentences, ``tokens [n_test, L]``. All three share ``L``.
    vocab: the word of every id (``vocab[0] == "<pad>"``).
    n_classes: 2 (SST-2) or 5 (SST-5).
    padding: ``"masked"`` or ``"pad_word"``.
    sentences: split name -> the :class:`Sentence` list behind each batch.
    label_counts: split name -> number of sentences of each class.
    train_word_class_counts: ``[V, C]`` int, the number of training sentences of
      class ``c`` that contain word ``w`` (a word repeated in a sentence counts
      once; under ``"pad_word"`` the pad word counts like any word). Topic
      purity and occurrence counts (``analysis.purity``) are functions of it.
  """
  train: Batch
  dev: Batch
  test: Batch
  vocab: Tuple[str, ...]
  n_classes: int
  padding: str
  sentences: Dict[str, Tuple[Sentence, ...]]
  label_counts: Dict[str, Tuple[int, ...]]
  train_word_class_counts: np.ndarray

  @property
  def n_words(self) -> int:
    return len(self.vocab)

  @property
  def sizes(self) -> Dict[str, int]:
    return {split: len(s) for split, s in self.sentences.items()}

  def word_id(self, word: str) -> int:
    """The id of ``word`` (raises ``ValueError`` if it is not in the vocabulary)."""
    return self.vocab.index(word)


def _unescape(word: str, lowercase: bool) -> str:
  word = _ESCAPED_WORDS.get(word, word).replace("\\/", "/").replace("\\*", "*")
  return word.lower() if lowercase else word


# Fast path for well-formed lines (C-speed regexes): replace every leaf by a
# placeholder, then collapse innermost nodes until one placeholder is left.
# Anything else (including every malformed line) goes to the checking parser.
_LEAF = re.compile(r"\(([0-4]) ([^ \t\n\r\f\v()\x00]+)\)")
_NODE = re.compile(r"\([0-4](?: \x00)+\)")
_ESCAPED_LOWER = {k.lower(): v for k, v in _ESCAPED_WORDS.items()}


def _parse_fast(text: str, lowercase: bool) -> Optional[Sentence]:
  text = text.strip(" \t")
  if "\x00" in text:
    return None
  rest = _LEAF.sub("\x00", text)
  while True:
    reduced = _NODE.sub("\x00", rest)
    if reduced == rest:
      break
    rest = reduced
  if rest != "\x00":
    return None
  # Labels are digits and the escapes hold no parenthesis: unescape the whole line at once.
  text = text.replace("\\/", "/").replace("\\*", "*")
  if lowercase:
    text = text.lower()
  words = _LEAF.findall(text)
  if "-" in text:
    escaped = _ESCAPED_LOWER if lowercase else _ESCAPED_WORDS
    return Sentence(tuple(escaped.get(w, w) for _, w in words), int(text[1]))
  return Sentence(tuple(w for _, w in words), int(text[1]))


def parse_tree(text: str, *, where: str = "<string>", lowercase: bool = True) -> Sentence:
  """Parse one PTB-format tree ``(label children...)`` into its words and root label.

  A node is ``(label word)`` (a leaf) or ``(label node node ...)``; every label
  is an integer 0..4.

  Args:
    text: the tree, e.g. ``"(3 (2 It) (4 works))"``.
    where: ``"file, line N"`` for error messages.
    lowercase: lowercase the words.

  Returns:
    A :class:`Sentence` with the SST-5 root label.

  Raises:
    ConfigError: naming ``where``, the column, what was wrong and what is allowed.
  """
  def fail(col: int, what: str):
    raise ConfigError(f"{where}, column {col}: {what}; each line must be one tree "
                      "'(label children...)' with labels 0-4, whose leaves '(label word)' "
                      "are the words")

  stack = []   # per open node: [label, n_subtrees, n_words]
  words = []
  root_label = None
  expect_label = False
  for match in _TOKEN.finditer(text):
    tok, col = match.group(), match.start() + 1
    if root_label is not None:
      fail(col, f"unbalanced parentheses: {tok!r} after the tree already closed")
    if expect_label:
      if tok not in LABELS:
        what = "missing label" if tok in ("(", ")") else f"label {tok!r} is outside 0-4"
        fail(col, what)
      stack[-1][0] = int(tok)
      expect_label = False
    elif tok == "(":
      if stack:
        if stack[-1][2]:
          fail(col, "a leaf '(label word)' holds a subtree")
        stack[-1][1] += 1
      stack.append([None, 0, 0])
      expect_label = True
    elif tok == ")":
      if not stack:
        fail(col, "unbalanced parentheses: ')' closes nothing")
      label, n_sub, n_words = stack.pop()
      if n_sub == 0 and n_words == 0:
        fail(col, "a node has no word and no subtree")
      if not stack:
        root_label = label
    else:
      if not stack:
        fail(col, f"the word {tok!r} is outside any '(...)'")
      if stack[-1][1] or stack[-1][2]:
        fail(col, f"the word {tok!r} is not alone in its leaf")
      stack[-1][2] += 1
      words.append(_unescape(tok, lowercase))
  if stack:
    fail(len(text) + 1, f"unbalanced parentheses: {len(stack)} '(' still open at the end of the line")
  if root_label is None:
    fail(1, "no tree on this line")
  return Sentence(tuple(words), root_label)


def read_trees(path: Union[str, pathlib.Path], *, lowercase: bool = True) -> Tuple[Sentence, ...]:
  """Read an SST tree file: one tree per line, UTF-8.

  Args:
    path: e.g. ``data/sst/trees/train.txt``.
    lowercase: lowercase the words.

  Returns:
    The sentences in file order, SST-5 labels.

  Raises:
    ConfigError: the file is missing or empty, a line is not UTF-8, is blank, or
      is not one well-formed tree (message names the file and line).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise ConfigError(f"{path}: SST tree file does not exist; expected the files "
                      f"{', '.join(s + '.txt' for s in SPLITS)} of trainDevTestTrees_PTB.zip "
                      "(see data/SOURCES.md)")
  raw = path.read_bytes()
  if not raw.strip():
    raise ConfigError(f"{path}, line 1: the file is empty; expected one SST tree per line")
  lines = raw.split(b"\n")
  if lines[-1] == b"":
    lines = lines[:-1]
  sentences = []
  for number, line in enumerate(lines, start=1):
    where = f"{path}, line {number}"
    try:
      text = line.decode("utf-8")
    except UnicodeDecodeError as err:
      raise ConfigError(f"{where}, byte {err.start + 1}: not valid UTF-8 ({err.reason}); "
                        "SST files must be UTF-8 text") from None
    text = text.rstrip("\r")
    if not text.strip():
      raise ConfigError(f"{where}: the line is blank; expected one SST tree on every line")
    sentence = _parse_fast(text, lowercase)
    if sentence is None:
      sentence = parse_tree(text, where=where, lowercase=lowercase)
    sentences.append(sentence)
  return tuple(sentences)


def to_binary(sentences: Sequence[Sentence]) -> Tuple[Sentence, ...]:
  """SST-2 from SST-5 labels: drop neutral (2); 0, 1 → 0 (negative); 3, 4 → 1 (positive)."""
  return tuple(Sentence(s.words, int(s.label >= 3)) for s in sentences if s.label != 2)


def build_vocab(splits: Sequence[Sequence[Sentence]], *, unk: bool = False) -> Tuple[str, ...]:
  """``<pad>``, then ``<unk>`` if asked, then words by decreasing token count (ties alphabetically)."""
  counts = collections.Counter(w for sentences in splits for s in sentences for w in s.words)
  specials = (PAD, UNK) if unk else (PAD,)
  for special in specials:
    counts.pop(special, None)
  words = sorted(counts, key=lambda w: (-counts[w], w))
  return specials + tuple(words)


def to_batch(sentences: Sequence[Sentence], vocab: Sequence[str], max_len: Optional[int] = None,
             padding: str = "masked") -> Batch:
  """Pad sentences into a :class:`tasks.Batch`.

  Args:
    sentences: the sentences.
    vocab: word of each id; must contain ``<pad>``, and ``<unk>`` if a word is
      missing from it.
    max_len: padded length L (default: the longest sentence).
    padding: ``"masked"`` (pad positions masked: score ``-inf``, attention 0; the
      paper's text) or ``"pad_word"`` (pad is the ordinary word ``<pad>``, mask
      True everywhere; the authors' code).

  Returns:
    ``Batch(tokens [n, L] int32, mask [n, L] bool, labels [n] int32)``.

  Raises:
    ConfigError: bad ``padding`` or ``max_len``, or a word missing from ``vocab``
      with no ``<unk>``.
  """
  check(padding in PADDINGS, "padding", padding, f"one of {', '.join(PADDINGS)}")
  check(len(sentences) >= 1, "sentences", len(sentences), "at least one sentence")
  index = {w: i for i, w in enumerate(vocab)}
  check(PAD in index, "vocab", f"{len(vocab)} words without {PAD}", f"a vocabulary containing {PAD}")
  longest = max(len(s.words) for s in sentences)
  if max_len is None:
    max_len = longest
  check(isinstance(max_len, int) and not isinstance(max_len, bool) and max_len >= longest,
        "max_len", max_len, f"an integer >= the longest sentence ({longest} words), or unset")
  tokens = np.full((len(sentences), max_len), index[PAD], np.int32)
  mask = np.zeros((len(sentences), max_len), bool)
  unk = index.get(UNK)
  for i, s in enumerate(sentences):
    ids = [index.get(w, unk) for w in s.words]
    if unk is None and None in ids:
      missing = s.words[ids.index(None)]
      raise ConfigError(f"sst: word {missing!r} of sentence {i} is not in the vocabulary, which "
                        f"has no {UNK}; build the vocabulary from every split or add {UNK}")
    tokens[i, :len(ids)] = ids
    mask[i, :len(ids)] = True
  if padding == "pad_word":
    mask[:] = True
  labels = np.array([s.label for s in sentences], np.int32)
  return Batch(jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(labels))


def word_class_counts(batch: Batch, n_words: int, n_classes: int) -> jax.Array:
  """``[V, C]`` number of sentences of class ``c`` containing word ``w`` (jittable).

  A word repeated within a sentence counts once; masked positions are ignored.

  Args:
    batch: ``tokens [n, L]``, ``mask [n, L]``, ``labels [n]``.
    n_words: V.
    n_classes: C.
  """
  toks = jnp.sort(jnp.where(batch.mask, batch.tokens, -1), axis=-1)
  first = jnp.concatenate([jnp.ones_like(toks[:, :1], bool), toks[:, 1:] != toks[:, :-1]], axis=-1)
  first = first & (toks >= 0)
  flat = jnp.where(first, toks * n_classes + batch.labels[:, None], 0)
  counts = jnp.zeros((n_words * n_classes,), jnp.int32).at[flat.ravel()].add(
      first.ravel().astype(jnp.int32))
  return counts.reshape(n_words, n_classes)


def load_sst(root: Union[str, pathlib.Path, None] = None, *, fine_grained: bool,
             lowercase: bool = True, vocab_from: str = "all", padding: str = "masked",
             max_len: Optional[int] = None) -> SSTData:
  """Load SST-5 (``fine_grained=True``) or SST-2 (Lu et al. 2021, Section 5.2).

  SST-5 keeps the root labels 0..4 (8544 / 1101 / 2210 sentences); SST-2 drops
  the neutral label 2 and maps 0, 1 → 0 and 3, 4 → 1 (6920 / 872 / 1821).

  Args:
    root: folder holding ``train.txt``, ``dev.txt``, ``test.txt`` (default:
      the project's ``data/sst/trees``).
    fine_grained: SST-5 if True, SST-2 if False.
    lowercase: lowercase the words (the replication notes did).
    vocab_from: ``"all"`` (every split, the replication notes) or ``"train"``
      (training words only, others become ``<unk>``).
    padding: ``"masked"`` or ``"pad_word"`` (see :func:`to_batch`).
    max_len: padded length shared by the three splits (default: the longest
      sentence of any split).

  Returns:
    An :class:`SSTData`.

  Raises:
    ConfigError: a bad option or a malformed file (naming file and line).
  """
  check(isinstance(fine_grained, bool), "fine_grained", fine_grained, "true or false")
  check(isinstance(lowercase, bool), "lowercase", lowercase, "true or false")
  check(vocab_from in VOCAB_FROM, "vocab_from", vocab_from, f"one of {', '.join(VOCAB_FROM)}")
  check(padding in PADDINGS, "padding", padding, f"one of {', '.join(PADDINGS)}")
  root = DEFAULT_ROOT if root is None else pathlib.Path(root)
  sentences = {split: read_trees(root / f"{split}.txt", lowercase=lowercase) for split in SPLITS}
  if not fine_grained:
    sentences = {split: to_binary(s) for split, s in sentences.items()}
  n_classes = 5 if fine_grained else 2
  vocab = build_vocab(list(sentences.values()) if vocab_from == "all" else [sentences["train"]],
                      unk=vocab_from == "train")
  if max_len is None:
    max_len = max(len(s.words) for split in sentences.values() for s in split)
  batches = {split: to_batch(s, vocab, max_len, padding) for split, s in sentences.items()}
  label_counts = {split: tuple(int(c) for c in np.bincount([s.label for s in ss], minlength=n_classes))
                  for split, ss in sentences.items()}
  counts = np.asarray(word_class_counts(batches["train"], len(vocab), n_classes))
  return SSTData(train=batches["train"], dev=batches["dev"], test=batches["test"], vocab=vocab,
                 n_classes=n_classes, padding=padding, sentences=sentences,
                 label_counts=label_counts, train_word_class_counts=counts)


def splits_of(data: "SSTData", padding: str, max_sentences: int = 0) -> Dict[str, Batch]:
  """``{"train", "dev", "test": Batch}`` of loaded SST data with masked padding (score −∞,
  the paper's text) or the authors' unmasked ``<pad>`` word (``"pad_word"``: every position
  counts, the mask all true); ``max_sentences > 0`` keeps only the first that many sentences
  of every split (tests)."""
  cut = (lambda b: jax.tree.map(lambda x: x[:max_sentences], b)) if max_sentences else (lambda b: b)
  pad = (lambda b: b._replace(mask=jnp.ones_like(b.mask))) if padding == "pad_word" else (lambda b: b)
  return {split: pad(cut(getattr(data, split))) for split in ("train", "dev", "test")}
