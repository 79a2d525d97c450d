"""The tagger's evaluation (analysis.tagger_scores): head matching and the learning speed, as laws."""
import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attndyn.analysis import tagger_scores

_JSD = st.integers(1, 4).flatmap(lambda h: hnp.arrays(
    np.float64, (h, h), elements=st.floats(0.0, np.log(2.0), allow_nan=False)))


@given(_JSD, st.randoms(use_true_random=False))
def test_matched_head_jsd_is_the_best_matching_whatever_the_heads_order(jsd, rnd):
  """Relabelling b's heads changes nothing; the matched JSD is at most the heads-by-index
  JSD and at least the mean of each head's best partner; it is attained by some matching."""
  h = jsd.shape[0]
  perm = list(range(h))
  rnd.shuffle(perm)
  best = tagger_scores.matched_head_jsd(jsd)
  assert tagger_scores.matched_head_jsd(jsd[:, perm]) == best
  assert best <= np.mean(np.diag(jsd)) + 1e-15
  assert best >= np.mean(jsd.min(1)) - 1e-15
  assert any(np.isclose(best, np.mean(jsd[np.arange(h), list(p)]), rtol=0, atol=1e-15)
             for p in itertools.permutations(range(h)))


@given(hnp.arrays(np.float64, (3, 5), elements=st.floats(0.0, 1.0)), st.floats(0.0, 1.0),
       st.integers(1, 50))
def test_steps_to_level_is_the_end_of_the_first_epoch_at_or_above_the_level(dev_f1, level,
                                                                            per_epoch):
  steps = tagger_scores.steps_to_level(dev_f1, level, per_epoch)
  for row, got in zip(dev_f1, steps):
    reached = np.flatnonzero(row >= level)
    if reached.size:
      assert got == per_epoch * (reached[0] + 1)
    else:
      assert np.isnan(got)


def test_select_epoch_takes_the_earliest_best():
  np.testing.assert_array_equal(tagger_scores.select_epoch([[0.2, 0.5, 0.5], [0.9, 0.1, 0.9]]),
                                [1, 0])
