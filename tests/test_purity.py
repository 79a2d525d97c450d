"""Topic purity (Section 5.2) and the attended-word statistics of Figs 6-7, on hand-made examples."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import analysis
from attndyn import tasks
from attndyn.tasks import sst


def _batch(tokens, mask, labels):
  return tasks.Batch(jnp.asarray(tokens, jnp.int32), jnp.asarray(mask, bool),
                     jnp.asarray(labels, jnp.int32))


# Words 0..4; sentences (label): [1 1 2] (+), [1 3 pad] (+), [2 3 pad] (-), [3 3 3] (-).
HAND = _batch([[1, 1, 2], [1, 3, 0], [2, 3, 0], [3, 3, 3]],
              [[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 1, 1]], [1, 1, 0, 0])


def test_word_class_counts_count_sentences_not_tokens():
  counts = tasks.word_class_counts(HAND, 5, 2)
  np.testing.assert_array_equal(counts, [[0, 0], [0, 2], [1, 1], [2, 1], [0, 0]])


def test_topic_purity_by_hand():
  counts = jnp.array([[0, 2], [1, 1], [2, 1], [3, 0], [0, 0]])
  purity = analysis.topic_purity(counts)
  np.testing.assert_allclose(purity[:4], [1.0, 0.0, 1 / 3, 1.0])
  assert bool(jnp.isnan(purity[4])), "a word in no training sentence has no purity"
  np.testing.assert_array_equal(analysis.occurrence_counts(counts), [2, 2, 3, 3, 0])
  with pytest.raises(tasks.ConfigError, match="SST-2"):
    analysis.topic_purity(jnp.zeros((5, 5)))


def test_sst2_purity_of_the_papers_best_and_powerful():
  """Section 5.2: 'best' is in 128 training sentences (103 positive); 'powerful' in 36, all positive."""
  train = sst.to_binary(sst.read_trees(sst.DEFAULT_ROOT / "train.txt"))
  vocab = sst.build_vocab([train])
  counts = tasks.word_class_counts(tasks.to_batch(train, vocab), len(vocab), 2)
  best, powerful = vocab.index("best"), vocab.index("powerful")
  np.testing.assert_array_equal(counts[best], [25, 103])
  np.testing.assert_array_equal(counts[powerful], [0, 36])
  purity = analysis.topic_purity(counts)
  np.testing.assert_allclose(purity[best], 78 / 128)
  assert float(purity[powerful]) == 1.0


def test_attended_word_is_the_top_score_and_ties_are_uniform_over_distinct_words():
  params = {"keys": jnp.array([[9.0], [0.0], [1.0], [0.0], [0.0]]), "query": jnp.array([1.0])}
  batch = _batch([[1, 2, 3, 0], [1, 1, 1, 3]], [[1, 1, 1, 0], [1, 1, 1, 1]], [0, 1])
  picks = jax.jit(jax.vmap(lambda k: analysis.attended_words(params, batch, k)))(
      jax.random.split(jax.random.PRNGKey(0), 400))
  assert bool(jnp.all(picks[:, 0] == 2)), "the masked pad (score 9) is never attended"
  # Sentence 2: words 1 (three times) and 3 tie at score 0: each is picked half the time.
  frac_3 = float(jnp.mean(picks[:, 1] == 3))
  assert 0.4 < frac_3 < 0.6, frac_3
  assert set(np.unique(picks[:, 1]).tolist()) == {1, 3}


def test_attended_purity_stats_by_hand():
  counts = tasks.word_class_counts(HAND, 5, 2)
  purity, occ = analysis.topic_purity(counts), analysis.occurrence_counts(counts)
  attended = jnp.array([2, 1, 3, 3])   # purities 0, 1, 1/3, 1/3; occurrences 2, 2, 3, 3
  stats = analysis.attended_purity_stats(attended, HAND, purity, occ, words=jnp.array([1, 2, 4]))
  np.testing.assert_allclose(stats.purity, (0 + 1 + 1 / 3 + 1 / 3) / 4)
  np.testing.assert_allclose(stats.occurrence, 2.5)
  # Word 1 is in sentences 0, 1; word 2 in 0, 2; word 4 in none (pads are masked).
  np.testing.assert_array_equal(stats.word_sentences, [2, 2, 0])
  np.testing.assert_allclose(stats.word_purity[:2], [0.5, 1 / 6])
  np.testing.assert_allclose(stats.word_occurrence[:2], [2.0, 2.5])
  assert bool(jnp.isnan(stats.word_purity[2]))


def test_purity_record_is_a_make_train_observable():
  params = {"keys": jnp.array([[0.0], [0.0], [5.0], [1.0], [0.0]]), "query": jnp.array([1.0])}
  record = analysis.purity_record(HAND, tasks.word_class_counts(HAND, 5, 2), jnp.array([3]),
                                  key=jax.random.PRNGKey(1))
  stats = jax.jit(record)(params, params)
  # Attended: 2, 3, 2, 3 -> purities 0, 1/3, 0, 1/3.
  np.testing.assert_allclose(stats.purity, 1 / 6)
  np.testing.assert_allclose(stats.word_purity, [(1 / 3 + 0 + 1 / 3) / 3])


def test_purity_curves_follow_the_attended_words_along_training():
  """Figs 6-7's curves: each record is that record's attended-word statistics; the word curves
  average over the given words that occur (word 4 occurs in no sentence: left out)."""
  from attndyn.analysis import purity as pur
  counts = tasks.word_class_counts(HAND, 5, 2)
  purity, occ = analysis.topic_purity(counts), analysis.occurrence_counts(counts)
  attended = np.array([[[3, 3, 3, 3], [2, 1, 3, 3]]])       # [P = 1, T = 2, n = 4]
  curves = pur.purity_curves(attended, HAND, purity, occ, [0], [np.array([1, 2, 4])])
  np.testing.assert_allclose(curves["all_purity"], [[1 / 3, (0 + 1 + 2 / 3) / 4]])
  np.testing.assert_allclose(curves["all_occ"], [[3.0, 2.5]])
  np.testing.assert_allclose(curves["word_purity"][0, 1], (0.5 + 1 / 6) / 2)
  np.testing.assert_allclose(curves["word_occ"][0, 1], (2.0 + 2.5) / 2)


def test_purity_trends_compare_the_early_and_last_records():
  from attndyn.analysis import purity as pur
  curves = {"all_purity": np.array([[0.0, 0.2, 0.5], [0.0, 0.5, 0.2]]),
            "all_occ": np.array([[9.0, 8.0, 3.0], [9.0, 8.0, 3.0]]),
            "word_purity": np.array([[0.0, 0.2, 0.9], [0.0, 0.2, 0.1]]),
            "word_occ": np.array([[9.0, 8.0, 9.0], [9.0, 8.0, 3.0]])}
  trend = pur.purity_trends(curves)
  np.testing.assert_array_equal(trend["all"], [True, False])       # run 1's purity falls
  np.testing.assert_array_equal(trend["word"], [False, False])     # occurrence rises; purity falls
  np.testing.assert_array_equal(trend["word_above_all"], [True, False])
