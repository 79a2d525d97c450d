"""The Appendix-A Markov word-pair task: determinism, topic pairs at the start, transition statistics."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import tasks

CFG = tasks.MarkovPairsConfig(n_words=6, n_topics=2, pairs_per_topic=2, sentence_length=8,
                              n_train=3000, n_test=50)


@pytest.fixture(scope="module")
def sets():
  """One compiled call, vmapped over the keys 0, 0, 1."""
  keys = jnp.stack([jax.random.PRNGKey(0), jax.random.PRNGKey(0), jax.random.PRNGKey(1)])
  return jax.jit(jax.vmap(lambda k: tasks.make_markov_pairs_dataset(k, CFG)))(keys)


@pytest.fixture(scope="module")
def data(sets):
  return jax.tree.map(lambda x: x[0], sets)


def test_same_key_same_data_and_vmap_over_keys(sets, data):
  for leaf in jax.tree.leaves(sets):
    np.testing.assert_array_equal(leaf[0], leaf[1])
  assert not np.array_equal(sets.train.tokens[0], sets.train.tokens[2])
  assert not np.array_equal(sets.pairs[0], sets.pairs[2])
  assert data.train.tokens.shape == (CFG.n_train, CFG.sentence_length)
  assert data.test.tokens.shape == (CFG.n_test, CFG.sentence_length)
  assert data.train.tokens.dtype == jnp.int32 and bool(jnp.all(data.train.mask))


def test_topic_pairs_are_distinct_ordered_pairs_of_different_words(data):
  pairs = np.asarray(data.pairs).reshape(-1, 2)
  assert data.pairs.shape == (CFG.n_topics, CFG.pairs_per_topic, 2)
  assert np.all(pairs[:, 0] != pairs[:, 1])
  assert len({tuple(p) for p in pairs}) == len(pairs), "L_A and L_B are mutually exclusive"


def test_every_sentence_opens_with_a_pair_of_its_topic(data):
  ids = tasks.pair_ids(data.train.tokens, data.pairs)
  assert ids.shape == (CFG.n_train, CFG.sentence_length - 1)
  topic_of_first = np.asarray(ids[:, 0]) // CFG.pairs_per_topic
  assert np.all(np.asarray(ids[:, 0]) >= 0)
  np.testing.assert_array_equal(topic_of_first, data.train.labels)
  counts = np.bincount(np.asarray(data.train.labels), minlength=2)
  assert abs(counts[0] - counts[1]) < 0.1 * CFG.n_train, "topics are drawn uniformly"


def test_transitions_follow_mc_i(data):
  t = np.asarray(data.transitions)
  np.testing.assert_allclose(t.sum(-1), 1.0)
  tokens, labels = np.asarray(data.train.tokens), np.asarray(data.train.labels)
  for i in range(CFG.n_topics):
    lead = set(np.asarray(data.pairs[i, :, 0]).tolist())
    for w in range(CFG.n_words):
      expected = np.zeros(CFG.n_words)
      if w in lead:
        seconds = [int(e) for s, e in np.asarray(data.pairs[i]) if s == w]
        expected[seconds] = 1.0 / len(seconds)
      else:
        expected[:] = 1.0 / CFG.n_words
      np.testing.assert_allclose(t[i, w], expected)
    # Empirical next-word frequencies of topic-i sentences match MC_i.
    sents = tokens[labels == i]
    prev, nxt = sents[:, :-1].ravel(), sents[:, 1:].ravel()
    counts = np.zeros((CFG.n_words, CFG.n_words))
    np.add.at(counts, (prev, nxt), 1)
    rows = counts.sum(-1)
    freq = counts / np.maximum(rows, 1)[:, None]
    assert np.all(rows > 600)
    np.testing.assert_allclose(freq, t[i], atol=0.06)
    for w in lead:   # from a leading word the chain never leaves the group's second words
      assert np.all(freq[w][t[i, w] == 0] == 0)


def test_bad_config_is_one_clear_error():
  with pytest.raises(tasks.ConfigError, match="^sentence_length = "):
    tasks.MarkovPairsConfig(sentence_length=1)
  with pytest.raises(tasks.ConfigError, match="^pairs_per_topic = "):
    tasks.MarkovPairsConfig(n_words=2, pairs_per_topic=2)
  with pytest.raises(tasks.ConfigError, match="^n_words = "):
    tasks.MarkovPairsConfig(n_words=2.5)
