"""Multi30k en→de as a small toy translation task (Snell et al., Section 3.2, on real text).

Reads the shipped training set ``data/multi30k/train.{en,de}`` (29,000 pairs; see
data/SOURCES.md), lowercases, splits punctuation off words, keeps pairs whose both sides have at
most ``max_len`` words, and maps words seen fewer than ``min_count`` times to
``<unk>``. Id 0 is padding (and the decoder's begin-of-sentence); id 1 is ``<unk>``.
No end-of-sentence token: the probes are read at the target words only.
"""
import dataclasses
import pathlib
import re
from collections import Counter
from typing import Tuple, Union

import numpy as np

from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check, value_error

__all__ = ["DEFAULT_ROOT", "DEFAULT_STEM", "tokenize", "Multi30kData", "load_multi30k"]

DEFAULT_ROOT = pathlib.Path(__file__).resolve().parents[1] / "data" / "multi30k"
DEFAULT_STEM = "train"
_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]", re.UNICODE)


def tokenize(line: str) -> list:
  """Lowercased words, punctuation marks as their own tokens."""
  return _TOKEN.findall(line.lower())


@dataclasses.dataclass(frozen=True)
class Multi30kData:
  """Attributes:
    batch: ``tokens [N, L]`` English ids, ``mask``, ``labels [N, T]`` German ids (0 = padding).
    src_words, tgt_words: id → word (index 0 ``<pad>``, 1 ``<unk>``).
  """
  batch: Batch
  src_words: Tuple[str, ...]
  tgt_words: Tuple[str, ...]

  @property
  def src_vocab(self) -> int:
    return len(self.src_words)

  @property
  def tgt_vocab(self) -> int:
    return len(self.tgt_words)


def _read(path: pathlib.Path) -> list:
  if not path.is_file():
    raise ConfigError(f"{path}: Multi30k file does not exist; expected the shipped files "
                      f"data/multi30k/{DEFAULT_STEM}.{{en,de}} (see data/SOURCES.md)")
  try:
    lines = path.read_text(encoding="utf-8").splitlines()
  except UnicodeDecodeError as err:
    raise ConfigError(f"{path}, byte {err.start + 1}: not valid UTF-8; expected UTF-8 text, "
                      "one sentence per line") from None
  if not lines:
    raise ConfigError(f"{path}: the file is empty; expected one sentence per line")
  return lines


def _vocab(sentences, min_count: int) -> Tuple[str, ...]:
  counts = Counter(w for s in sentences for w in s)
  return ("<pad>", "<unk>") + tuple(sorted(w for w, c in counts.items() if c >= min_count))


def _ids(sentences, words, length: int) -> np.ndarray:
  index = {w: i for i, w in enumerate(words)}
  out = np.zeros((len(sentences), length), np.int32)
  for r, s in enumerate(sentences):
    out[r, :len(s)] = [index.get(w, 1) for w in s]
  return out


def load_multi30k(root: Union[str, pathlib.Path, None] = None, *, stem: str = DEFAULT_STEM,
                  max_len: int = 12, min_count: int = 3, n_pairs: int = 0) -> Multi30kData:
  """The en→de pairs of ``root/stem.en`` and ``root/stem.de``.

  Args:
    root: folder of the files (default: the shipped ``data/multi30k``).
    stem: file name without the language suffix.
    max_len: keep pairs with at most this many words on both sides.
    min_count: words seen fewer times (in the kept pairs) become ``<unk>``.
    n_pairs: keep at most the first this many pairs (0: all).

  Raises:
    ConfigError: a bad option, a missing / non-UTF-8 / empty file, files of
      different line counts, or no pair short enough.
  """
  for name, v, low in (("max_len", max_len, 1), ("min_count", min_count, 1), ("n_pairs", n_pairs, 0)):
    check(isinstance(v, int) and not isinstance(v, bool) and v >= low, name, v,
          f"an integer >= {low}")
  root = DEFAULT_ROOT if root is None else pathlib.Path(root)
  en, de = _read(root / f"{stem}.en"), _read(root / f"{stem}.de")
  if len(en) != len(de):
    raise ConfigError(f"{root}/{stem}.en has {len(en)} lines but {stem}.de has {len(de)}; "
                      "the two files must be line-aligned")
  pairs = [(tokenize(a), tokenize(b)) for a, b in zip(en, de)]
  pairs = [(a, b) for a, b in pairs if 1 <= len(a) <= max_len and 1 <= len(b) <= max_len]
  if n_pairs:
    pairs = pairs[:n_pairs]
  if not pairs:
    raise value_error("max_len", max_len, f"longer sentences: {max_len} keeps no pair of "
                                          f"{root}/{stem}")
  src_words = _vocab([a for a, _ in pairs], min_count)
  tgt_words = _vocab([b for _, b in pairs], min_count)
  src = _ids([a for a, _ in pairs], src_words, max_len)
  tgt = _ids([b for _, b in pairs], tgt_words, max_len)
  return Multi30kData(Batch(tokens=src, mask=src > 0, labels=tgt), src_words, tgt_words)
