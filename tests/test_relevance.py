"""Output relevance (analysis.relevance): the half-rise time read off the records, as a law."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attndyn.analysis import relevance


@given(hnp.arrays(np.float64, (2, 6), elements=st.floats(0.01, 5.0)), st.floats(-5.0, 5.0))
def test_half_rise_time_of_rising_curves_is_the_first_record_half_way_up(steps, start):
  """For curves that rise at every record: the record at the half-rise time has made at least
  half of the whole rise and the record before it less; doubling a curve does not move it."""
  x = start + np.concatenate([np.zeros((2, 1)), np.cumsum(steps, 1)[:, :-1]], 1)
  t = np.arange(6) * 10.0
  got = relevance.half_rise_time(x, t)
  assert np.all(np.isfinite(got))
  for row, g in zip(x, got):
    i = int(g // 10)
    half = (row[-1] - row[0]) / 2
    assert row[i] - row[0] >= half and (i == 0 or row[i - 1] - row[0] < half)
  np.testing.assert_array_equal(relevance.half_rise_time(2.0 * x, t), got)


def test_a_curve_that_never_rises_has_no_half_rise_time():
  t = np.arange(4.0)
  got = relevance.half_rise_time(np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 2.0, 3.0]]), t)
  assert np.isnan(got[0]) and got[1] == 2.0
