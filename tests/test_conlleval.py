"""conlleval chunk F1: hand-derived answers, and agreement with an independent chunk-span count."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn.analysis.conlleval import chunk_f1, conlleval, conlleval_ids


def test_perfect_guess():
  s = conlleval([["B-NP", "I-NP", "O", "B-VP"]], [["B-NP", "I-NP", "O", "B-VP"]])
  assert (s.correct_chunks, s.guessed_chunks, s.gold_chunks) == (2, 2, 2)
  assert s.precision == s.recall == s.f1 == s.accuracy == 1.0


def test_split_chunk():
  # gold NP[0-1] VP[2]; guessed NP[0] NP[1] VP[2]: only VP is right.
  s = conlleval([["B-NP", "I-NP", "B-VP"]], [["B-NP", "B-NP", "B-VP"]])
  assert (s.correct_chunks, s.guessed_chunks, s.gold_chunks) == (1, 3, 2)
  assert s.precision == pytest.approx(1 / 3) and s.recall == pytest.approx(1 / 2)
  assert s.f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))   # 0.4
  assert s.accuracy == pytest.approx(2 / 3)
  assert s.by_type["NP"] == pytest.approx((0.0, 0.0, 0.0))
  assert s.by_type["VP"] == pytest.approx((1.0, 1.0, 1.0))


def test_i_without_b_opens_a_chunk_as_conlleval_does():
  # conlleval: O -> I-NP starts a chunk, so I-NP I-NP is the chunk NP[0-1], which is right;
  # the tag of token 0 still differs (I vs B), so token accuracy is 2/3.
  s = conlleval([["B-NP", "I-NP", "O"]], [["I-NP", "I-NP", "O"]])
  assert (s.correct_chunks, s.guessed_chunks, s.gold_chunks) == (1, 1, 1)
  assert s.f1 == 1.0 and s.accuracy == pytest.approx(2 / 3)


def test_type_change_inside_i_tags_starts_a_new_chunk():
  # guessed B-NP I-VP = NP[0] + VP[1]; gold NP[0-1]: nothing right.
  s = conlleval([["B-NP", "I-NP"]], [["B-NP", "I-VP"]])
  assert (s.correct_chunks, s.guessed_chunks, s.gold_chunks) == (0, 2, 1)
  assert s.f1 == 0.0 and s.accuracy == 0.5


def test_wrong_end_boundary_is_wrong():
  s = conlleval([["B-NP", "I-NP", "I-NP"]], [["B-NP", "I-NP", "O"]])
  assert (s.correct_chunks, s.guessed_chunks, s.gold_chunks) == (0, 1, 1)
  assert s.precision == s.recall == s.f1 == 0.0


def test_sentence_boundary_ends_chunks():
  # Two sentences; the second starts with I-NP, which the boundary turns into a new chunk.
  s = conlleval([["B-NP"], ["I-NP", "B-VP"]], [["B-NP"], ["I-NP", "B-VP"]])
  assert (s.correct_chunks, s.gold_chunks) == (3, 3)
  # One sentence with the same tags holds one NP spanning both tokens.
  assert conlleval([["B-NP", "I-NP", "B-VP"]], [["B-NP", "I-NP", "B-VP"]]).gold_chunks == 2


def test_no_guessed_chunks_gives_zero_not_nan():
  s = conlleval([["B-NP", "O"]], [["O", "O"]])
  assert (s.precision, s.recall, s.f1, s.accuracy) == (0.0, 0.0, 0.0, 0.5)


def test_length_mismatch_raises():
  with pytest.raises(ValueError, match="gold tags"):
    conlleval([["O", "O"]], [["O"]])


def test_padded_id_arrays():
  tags = ("O", "B-NP", "I-NP", "B-VP")
  gold = np.array([[1, 2, 3, 0], [1, 0, 0, 0]])
  guess = np.array([[1, 2, 3, 3], [1, 2, 2, 2]])    # padded positions hold junk
  mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], bool)
  s = conlleval_ids(gold, guess, mask, tags)
  assert s.f1 == 1.0 and s.tokens == 4
  assert chunk_f1(gold, guess, mask, tags) == 1.0


def _spans(tags):
  """Chunks as (type, start, end): a chunk starts at B-X, or at I-X after O or another type."""
  spans, start, kind = [], None, None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, _, t = tag.partition("-")
    begins = prefix == "B" or (prefix == "I" and t != kind)
    if start is not None and (prefix == "O" or begins):
      spans.append((kind, start, i - 1))
      start, kind = None, None
    if begins:
      start, kind = i, t
  return spans


TAG = st.sampled_from(["O", "B-NP", "I-NP", "B-VP", "I-VP"])


@given(st.lists(st.tuples(st.lists(TAG, min_size=1, max_size=8), st.lists(TAG, min_size=8,
                                                                          max_size=8)),
                min_size=1, max_size=4))
def test_counts_equal_span_set_intersection(pairs):
  gold = [g for g, _ in pairs]
  guess = [p[:len(g)] for g, p in pairs]
  s = conlleval(gold, guess)
  g_spans = [(n, x) for n, sent in enumerate(gold) for x in _spans(sent)]
  p_spans = [(n, x) for n, sent in enumerate(guess) for x in _spans(sent)]
  assert s.gold_chunks == len(g_spans) and s.guessed_chunks == len(p_spans)
  assert s.correct_chunks == len(set(g_spans) & set(p_spans))
