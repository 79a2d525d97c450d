"""Chunk-level precision / recall / F1 and token accuracy, as the CoNLL ``conlleval`` script computes them.

A chunk counts as correct when the guessed chunk starts at the same token, ends
at the same token and has the same type as a gold chunk. Chunk starts and ends
follow conlleval's ``startOfChunk`` / ``endOfChunk`` exactly, so ill-formed
sequences are read the way conlleval reads them: an ``I-X`` after ``O`` (or
after a chunk of another type, or at the start of a sentence) opens a new
chunk, as if it were ``B-X``. A sentence boundary acts as an ``O`` token.
Token accuracy is the fraction of tokens whose full tag (prefix and type)
matches. F1 here is a fraction (conlleval prints percentages).

References:
  conlleval.pl (CoNLL-2000 shared task), https://www.clips.uantwerpen.be/conll2000/chunking/output.html
  Tjong Kim Sang & Buchholz, "Introduction to the CoNLL-2000 Shared Task: Chunking", 2000.
"""
from typing import Dict, NamedTuple, Sequence, Tuple

import numpy as np

__all__ = ["ChunkScores", "split_tag", "end_of_chunk", "start_of_chunk", "conlleval",
           "conlleval_ids", "chunk_f1"]


class ChunkScores(NamedTuple):
  """conlleval's counts and scores (scores as fractions in [0, 1])."""
  precision: float
  recall: float
  f1: float
  accuracy: float
  correct_chunks: int
  guessed_chunks: int
  gold_chunks: int
  tokens: int
  by_type: Dict[str, Tuple[float, float, float]]   # type -> (precision, recall, f1)


def split_tag(tag: str) -> Tuple[str, str]:
  """``"B-NP"`` -> ``("B", "NP")``; ``"O"`` -> ``("O", "")`` (conlleval without ``-r``)."""
  if tag == "O":
    return "O", ""
  prefix, _, kind = tag.partition("-")
  return prefix, kind


def end_of_chunk(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
  """conlleval's ``endOfChunk``: a chunk ended between the previous token and this one."""
  end = (prev_tag, tag) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"),
                            ("E", "I"), ("E", "O")}
  end = end or (prev_tag not in ("O", ".") and prev_type != kind)
  return end or prev_tag in ("]", "[")


def start_of_chunk(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
  """conlleval's ``startOfChunk``: a chunk starts at this token."""
  start = (prev_tag, tag) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"),
                              ("E", "I"), ("O", "E")}
  start = start or (tag not in ("O", ".") and prev_type != kind)
  return start or tag in ("[", "]")


def _f1(p: float, r: float) -> float:
  return 2 * p * r / (p + r) if p + r > 0 else 0.0


def conlleval(gold: Sequence[Sequence[str]], guessed: Sequence[Sequence[str]]) -> ChunkScores:
  """Score guessed tag sequences against gold ones, sentence by sentence (conlleval's algorithm).

  Args:
    gold: per sentence, the gold tags (``"B-NP"``, ``"I-NP"``, ``"O"``, ...).
    guessed: per sentence, the guessed tags (same lengths).

  Returns:
    :class:`ChunkScores` with precision = correct/guessed chunks, recall =
    correct/gold chunks, F1 = 2PR/(P+R) (0 when P+R = 0), and token accuracy.

  Raises:
    ValueError: the sentence counts or lengths differ.
  """
  if len(gold) != len(guessed):
    raise ValueError(f"{len(gold)} gold sentences but {len(guessed)} guessed")
  correct = found_guessed = found_gold = correct_tags = n_tokens = 0
  per_type = {}   # type -> [correct, guessed, gold]

  def bump(kind, i):
    per_type.setdefault(kind, [0, 0, 0])[i] += 1

  for g_sent, p_sent in zip(gold, guessed):
    if len(g_sent) != len(p_sent):
      raise ValueError(f"a sentence has {len(g_sent)} gold tags but {len(p_sent)} guessed")
    last_g, last_gt, last_p, last_pt = "O", "", "O", ""
    in_correct = False
    # The sentence's tokens, then the boundary line, which conlleval reads as tag O.
    for g_tag, p_tag, real in [(g, p, True) for g, p in zip(g_sent, p_sent)] + [("O", "O", False)]:
      g, gt = split_tag(g_tag)
      p, pt = split_tag(p_tag)
      if in_correct:
        g_end = end_of_chunk(last_g, g, last_gt, gt)
        p_end = end_of_chunk(last_p, p, last_pt, pt)
        if g_end and p_end and last_pt == last_gt:
          in_correct = False
          correct += 1
          bump(last_gt, 0)
        elif g_end != p_end or pt != gt:
          in_correct = False
      g_start = start_of_chunk(last_g, g, last_gt, gt)
      p_start = start_of_chunk(last_p, p, last_pt, pt)
      if g_start and p_start and pt == gt:
        in_correct = True
      if g_start:
        found_gold += 1
        bump(gt, 2)
      if p_start:
        found_guessed += 1
        bump(pt, 1)
      if real:
        correct_tags += int(g == p and gt == pt)
        n_tokens += 1
      last_g, last_gt, last_p, last_pt = g, gt, p, pt
    # (conlleval closes an open correct chunk at the end of the file; every
    # sentence here ends with the boundary O, which already closed it.)
  precision = correct / found_guessed if found_guessed else 0.0
  recall = correct / found_gold if found_gold else 0.0
  by_type = {}
  for kind, (c, fg, fo) in sorted(per_type.items()):
    p_k = c / fg if fg else 0.0
    r_k = c / fo if fo else 0.0
    by_type[kind] = (p_k, r_k, _f1(p_k, r_k))
  return ChunkScores(precision, recall, _f1(precision, recall),
                     correct_tags / n_tokens if n_tokens else 0.0, correct, found_guessed,
                     found_gold, n_tokens, by_type)


def conlleval_ids(gold_ids, guessed_ids, mask, tags: Sequence[str]) -> ChunkScores:
  """:func:`conlleval` on padded id arrays: ``[n, L]`` gold and guessed tag ids, ``[n, L]`` mask.

  Args:
    gold_ids, guessed_ids: ``[n, L]`` integer tag ids (indices into ``tags``).
    mask: ``[n, L]`` bool, True at real tokens (a prefix of each row).
    tags: the tag string of each id.
  """
  gold_ids, guessed_ids, mask = (np.asarray(x) for x in (gold_ids, guessed_ids, mask))
  tags = np.asarray(tags, dtype=object)
  lengths = mask.sum(-1)
  gold = [tags[gold_ids[i, :k]] for i, k in enumerate(lengths)]
  guessed = [tags[guessed_ids[i, :k]] for i, k in enumerate(lengths)]
  return conlleval(gold, guessed)


def chunk_f1(gold_ids, guessed_ids, mask, tags: Sequence[str]) -> float:
  """Chunk-level F1 (fraction) of padded id arrays."""
  return conlleval_ids(gold_ids, guessed_ids, mask, tags).f1
