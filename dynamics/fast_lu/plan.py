"""The host-side plan of the shared dataset: which words are heavy, the light words grouped by count."""
import functools
import hashlib
from typing import NamedTuple

import numpy as np

from attndyn.tasks.batch import Batch

__all__ = ["HEAVY_COUNT", "WordPlan", "plan_words", "count_group_tables"]

# Words that occur more often than this go through a dense [H, n] product.
HEAVY_COUNT = 16


class WordPlan(NamedTuple):
  """The dataset's sparse structure, computed once on the host (NumPy).

  The ``V_a`` words that occur in the training set become rows ``0 .. V_a − 1``
  of the fast state: first the ``H`` heavy words (count > ``HEAVY_COUNT``; their
  backward sums use a dense ``[H, n]`` count matrix), then the light words by
  decreasing count (their backward sums gather the sentences each occurs in);
  row ``V_a`` is a padding word with weight 0 when sentences differ in length.

  Attributes:
    words: ``[V_a]`` the word id of each row.
    n_heavy: ``H``.
    heavy_counts: ``[H, n]`` counts ``C_iw`` of the heavy words.
    row_tokens: ``[n, L]`` each sentence's words as rows (``V_a`` pads).
    buckets: per group of light words with similar counts, ``(start, occ)``:
      rows ``start .. start+len(occ)`` and ``occ [k, c]`` the sentences each
      occurs in (with multiplicity; ``n`` pads, a zero row).
    dummy: whether the state carries the padding row ``V_a``.
    n: number of sentences.
  """
  words: np.ndarray
  n_heavy: int
  heavy_counts: np.ndarray
  row_tokens: np.ndarray
  buckets: tuple
  dummy: bool
  n: int


def _count_groups(counts: np.ndarray, max_groups: int = 4):
  """Split decreasing counts into ≤ ``max_groups`` runs, each padded to its largest count.

  Minimises the padded total ``Σ_runs len(run) · max(run)`` by dynamic
  programming over the distinct counts (few kernels compile fast; padding
  costs gathers of a zero row).

  Returns:
    ``[(start, stop), ...]`` index ranges into ``counts``.
  """
  if not len(counts):
    return []
  values, starts = np.unique(-counts, return_index=True)      # distinct counts, decreasing
  values = -values
  ends = np.append(starts[1:], len(counts))
  m = len(values)
  best = {(0, 0): (0, None)}
  # best[(i, g)]: least padded total covering distinct values [0, i) with g runs.
  for g in range(1, max_groups + 1):
    for i in range(1, m + 1):
      options = [(best[(j, g - 1)][0] + values[j] * (ends[i - 1] - starts[j]), j)
                 for j in range(i) if (j, g - 1) in best]
      if options:
        best[(i, g)] = min(options)
  g = min((g for g in range(1, max_groups + 1) if (m, g) in best), key=lambda g: best[(m, g)][0])
  cuts, i = [], m
  while i > 0:
    j = best[(i, g)][1]
    cuts.append((int(starts[j]), int(ends[i - 1])))
    i, g = j, g - 1
  return cuts[::-1]


def plan_words(tokens, mask, heavy_count: int = HEAVY_COUNT) -> WordPlan:
  """Build the :class:`WordPlan` of a concrete training set.

  Args:
    tokens: ``[n, L]`` word ids.
    mask: ``[n, L]`` True for real words.
    heavy_count: words occurring more often than this are heavy.
  """
  tokens = np.asarray(tokens)
  mask = np.asarray(mask, bool)
  n, length = tokens.shape
  sent = np.broadcast_to(np.arange(n)[:, None], (n, length))[mask]
  words = tokens[mask].astype(np.int64)
  n_vocab = int(words.max()) + 1 if words.size else 1
  counts = np.bincount(words, minlength=n_vocab)
  order = np.argsort(-counts, kind="stable")
  order = order[counts[order] > 0]
  n_heavy = int(np.sum(counts[order] > heavy_count))
  n_active = len(order)
  row = np.full(n_vocab, -1)
  row[order] = np.arange(n_active)

  heavy_counts = np.zeros((n_heavy, n), np.float64)
  occ_row = row[words]
  hit = occ_row < n_heavy
  np.add.at(heavy_counts, (occ_row[hit], sent[hit]), 1.0)

  # Each sentence's words as rows, real words first, padded with the dummy row.
  per_sentence = mask.sum(1)
  width = int(per_sentence.max()) if n else 0
  first_real = np.argsort(~mask, axis=1, kind="stable")[:, :width]
  row_tokens = np.where(np.take_along_axis(mask, first_real, 1),
                        row[np.take_along_axis(np.where(mask, tokens, 0), first_real, 1)],
                        n_active).astype(np.int32)
  dummy = bool(width and (per_sentence < width).any())

  # Occurrences of each light word: sentences sorted by (row, sentence).
  occ_row, occ_sent = occ_row[~hit], sent[~hit]
  by = np.lexsort((occ_sent, occ_row))
  occ_row, occ_sent = occ_row[by], occ_sent[by]
  buckets = count_group_tables(counts[order[n_heavy:]], occ_sent, n, offset=n_heavy)
  return WordPlan(order.astype(np.int32), n_heavy, heavy_counts, row_tokens, buckets, dummy, n)


def count_group_tables(counts: np.ndarray, values: np.ndarray, pad: int, offset: int = 0) -> tuple:
  """Rows with decreasing ``counts``, whose ``values`` lie one row after another, as padded
  tables per group of :func:`_count_groups`: ``((offset + start, table [k, c]), ...)``, row
  ``start + j``'s values in ``table[j]``, padded with ``pad`` to the group's largest count."""
  first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
  tables = []
  for start, stop in _count_groups(counts):
    table = np.full((stop - start, int(counts[start])), pad, np.int32)
    for k, r in enumerate(range(start, stop)):
      table[k, :counts[r]] = values[first[r]:first[r] + counts[r]]
    tables.append((offset + start, table))
  return tuple(tables)


@functools.lru_cache(maxsize=8)
def _cached_plan(digest: str, tokens_bytes: bytes, mask_bytes: bytes, shape: tuple,
                 heavy_count: int) -> WordPlan:
  del digest
  tokens = np.frombuffer(tokens_bytes, np.int32).reshape(shape)
  mask = np.frombuffer(mask_bytes, bool).reshape(shape)
  return plan_words(tokens, mask, heavy_count)


def _plan_for(batch: Batch, heavy_count: int) -> WordPlan:
  """:func:`plan_words` of a concrete batch, cached on its contents."""
  tokens = np.ascontiguousarray(np.asarray(batch.tokens), np.int32)
  mask = np.ascontiguousarray(np.asarray(batch.mask), bool)
  digest = hashlib.sha1(tokens.tobytes() + mask.tobytes()).hexdigest()
  return _cached_plan(digest, tokens.tobytes(), mask.tobytes(), tokens.shape, heavy_count)
