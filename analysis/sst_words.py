"""Word-level views of SST training (Lu et al. 2021, Section 5.2, Figs 4-7).

Real sentences have no single topic word, so Section 5.2 looks at words: the
highest-scoring ones (Fig 4, whose SEN curves use ``m`` = the word's mean
sentence length − 1), a frequent low-purity word competing with a rare pure
one in a shared sentence (Fig 5: *best* vs *powerful*), and the attended
words of each sentence (Figs 6-7, :mod:`analysis.purity`).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2. https://arxiv.org/abs/2011.10036
"""
from typing import Optional, Sequence

import numpy as np

from attndyn.analysis.sen_checks import relative_error
from attndyn.tasks.batch import Batch

__all__ = ["mean_sentence_length", "top_words", "shared_sentence", "sentence_weights",
           "competition", "top_sen_fraction"]


def mean_sentence_length(batch: Batch, n_words: int) -> np.ndarray:
  """``[V]`` mean length (real positions) of the sentences containing each word; NaN if none.

  A sentence counts once per word however often the word occurs in it. Under
  the authors' unmasked padding every position is real, so every length is L.
  """
  tokens, mask = np.asarray(batch.tokens), np.asarray(batch.mask)
  lengths = mask.sum(-1).astype(np.float64)
  total = np.zeros(n_words)
  count = np.zeros(n_words)
  for row, length, valid in zip(tokens, lengths, mask):
    words = np.unique(row[valid])
    total[words] += length
    count[words] += 1
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(count > 0, total / count, np.nan)


def top_words(scores: np.ndarray, k: int, exclude: Sequence[int] = ()) -> np.ndarray:
  """``[k]`` ids of the ``k`` largest scores, largest first, skipping ``exclude`` (e.g. ``<pad>``)."""
  scores = np.asarray(scores, np.float64).copy()
  scores[list(exclude)] = -np.inf
  order = np.argsort(-scores, kind="stable")
  return order[:k]


def shared_sentence(batch: Batch, a: int, b: int) -> Optional[int]:
  """Index of the shortest training sentence holding both words ``a`` and ``b`` (``None`` if none)."""
  tokens, mask = np.asarray(batch.tokens), np.asarray(batch.mask)
  has = lambda w: np.any((tokens == w) & mask, axis=-1)
  both = np.flatnonzero(has(a) & has(b))
  if both.size == 0:
    return None
  return int(both[np.argmin(mask[both].sum(-1))])


def sentence_weights(word_scores_t: np.ndarray, words: np.ndarray) -> np.ndarray:
  """Attention weight of every position of one sentence along training.

  .. math:: a_w(\\mathsf t) = \\frac{e^{s_w(\\mathsf t)}}{\\sum_{u \\in χ} e^{s_u(\\mathsf t)}}

  Args:
    word_scores_t: ``[T, K]`` scores along training of the sentence's distinct words.
    words: ``[L]`` for each position of the sentence, the column (0..K-1) of its word.

  Returns:
    ``[T, L]`` attention weights (rows sum to 1).
  """
  s = np.asarray(word_scores_t, np.float64)[:, np.asarray(words)]
  s = s - s.max(-1, keepdims=True)
  e = np.exp(s)
  return e / e.sum(-1, keepdims=True)


def competition(steps, s_frequent, s_pure, end_step) -> dict:
  """Fig 5's pattern for a frequent low-purity word and a rare pure word, one run.

  The frequent word is attended first (its score leads early), the pure word
  overtakes it by the end, and the frequent word's score falls from its peak.

  Args:
    steps: ``[T]`` recorded steps.
    s_frequent: ``[T]`` score of the frequent, low-purity word (*best*).
    s_pure: ``[T]`` score of the rare, pure word (*powerful*).
    end_step: the end of training (the early-stopping best step).

  Returns:
    ``{"frequent_leads_early", "pure_leads_at_end", "frequent_falls_from_peak"}``
    (bools) and ``{"overtake_step", "frequent_peak_step"}`` (floats, NaN if none).
  """
  steps = np.asarray(steps, np.float64)
  sf, sp = np.asarray(s_frequent, np.float64), np.asarray(s_pure, np.float64)
  live = (steps > 0) & (steps <= end_step)
  if not live.any():
    nan = float("nan")
    return {"frequent_leads_early": False, "pure_leads_at_end": False,
            "frequent_falls_from_peak": False, "overtake_step": nan, "frequent_peak_step": nan}
  idx = np.flatnonzero(live)
  early = idx[: max(1, len(idx) // 4)]
  last = idx[-1]
  lead = sf[idx] > sp[idx]
  after_lead = np.flatnonzero(~lead & (np.cumsum(lead) > 0))
  peak = idx[np.argmax(sf[idx])]
  return {
      "frequent_leads_early": bool(np.any(sf[early] > sp[early])),
      "pure_leads_at_end": bool(sp[last] > sf[last]),
      "frequent_falls_from_peak": bool(sf[last] < sf[peak] and peak != last),
      "overtake_step": float(steps[idx[after_lead[0]]]) if after_lead.size else float("nan"),
      "frequent_peak_step": float(steps[peak]),
  }


def top_sen_fraction(final_score, final_norm, idx, m_word: np.ndarray, k: int,
                     sen_ok: float) -> np.ndarray:
  """Per point ``p`` of ``idx``: the fraction of its ``k`` top-scored words (the padding word 0
  left out) whose ``‖v‖`` is within ``sen_ok`` (relative) of Eq (10) with the word's own
  ``m_word`` (Sec 5.2 ¶3, Fig 4).

  Args:
    final_score, final_norm: ``[P, V]`` every word's score and ``‖v‖`` per point.
    m_word: ``[V]`` Eq (10)'s m per word (its mean sentence length − 1).
  """
  out = []
  for p in idx:
    words = top_words(final_score[p], k, exclude=[0])
    err = relative_error(final_score[p, words], final_norm[p, words], m_word[words])
    out.append(float(np.mean(err <= sen_ok)))
  return np.asarray(out)
