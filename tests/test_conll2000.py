"""CoNLL-2000 loader: the counts of data/SOURCES.md, the vocabulary rule, the dev split, bad files."""
import numpy as np
import pytest

from attndyn.tasks import conll2000
from attndyn.tasks.errors import ConfigError


@pytest.fixture(scope="module")
def data():
  return conll2000.load_conll2000()


def test_files_hold_the_sources_md_counts():
  for name, n_sent, n_tok in (("train", 8936, 211727), ("test", 2012, 47377)):
    sents = conll2000.read_conll(conll2000.DEFAULT_ROOT / f"{name}.txt")
    assert len(sents) == n_sent and sum(map(len, sents)) == n_tok


def test_splits_vocabulary_and_tags(data):
  assert data.sizes == {"train": 8042, "dev": 894, "test": 2012}
  assert data.vocab[:2] == (conll2000.PAD, conll2000.UNK) and data.pos_vocab[:2] == data.vocab[:2]
  counts = {}
  for s in data.sentences["train"]:
    for t in s:
      counts[t.word.lower()] = counts.get(t.word.lower(), 0) + 1
  assert set(data.vocab[2:]) == {w for w, c in counts.items() if c >= 2}
  assert data.tags[0] == "O" and len(data.tags) == 23 and "I-LST" in data.tags   # test-only tag
  assert 0.09 < data.unk_rate("test") < 0.10   # docs/independent-measurements.md: 9.4% of test tokens


def test_dev_is_a_fixed_disjoint_tenth_of_train(data):
  tr, dev = conll2000.split_dev(8936, 0.1, 0)
  assert len(dev) == 894 and not set(tr) & set(dev) and len(set(tr) | set(dev)) == 8936
  tr2, dev2 = conll2000.split_dev(8936, 0.1, 0)
  assert np.array_equal(dev, dev2)
  full = conll2000.read_conll(conll2000.DEFAULT_ROOT / "train.txt")
  assert data.sentences["dev"][0] == full[dev[0]]


def test_batch_round_trips_to_the_sentences(data):
  b = data.test
  for i in (0, 2011):
    s = data.sentences["test"][i]
    m = np.asarray(b.mask[i])
    assert m.sum() == len(s) and m[:len(s)].all()
    assert [data.tags[j] for j in np.asarray(b.labels[i])[m]] == [t.chunk for t in s]
    assert [data.pos_vocab[j] for j in np.asarray(b.pos[i])[m]] == [
        t.pos if t.pos in data.pos_vocab else conll2000.UNK for t in s]
    words = [data.vocab[j] for j in np.asarray(b.tokens[i])[m]]
    assert words == [t.word.lower() if t.word.lower() in data.vocab else conll2000.UNK for t in s]
    assert not np.asarray(b.tokens[i])[~m].any() and not np.asarray(b.labels[i])[~m].any()


def test_length_buckets_partition_the_sentences(data):
  b = data.dev
  buckets = conll2000.length_buckets(b, 3)
  assert len(buckets) == 3 and sum(x.size for x in buckets) == b.size
  lens = [np.asarray(x.mask).sum(-1) for x in buckets]
  assert all(x.tokens.shape[1] == l.max() for x, l in zip(buckets, lens))
  assert lens[0].max() < lens[1].min() and lens[1].max() < lens[2].min()
  assert sum(x.tokens.size for x in buckets) < b.tokens.size
  rows = {tuple(np.asarray(x.tokens)[i][np.asarray(x.mask)[i]]) for x in buckets
          for i in range(x.size)}
  assert rows == {tuple(np.asarray(b.tokens)[i][np.asarray(b.mask)[i]]) for i in range(b.size)}


def test_limit_reads_a_slice(tmp_path):
  d = conll2000.load_conll2000(limit=50, test_limit=20)
  assert d.sizes == {"train": 45, "dev": 5, "test": 20}


@pytest.mark.parametrize("text, match", [
    ("Confidence NN B-NP\nin IN\n\n", "line 2.*2 fields"),
    ("Confidence NN B-NP\nin  IN B-PP\n\n", "line 2"),
    ("Confidence NN X-NP\n\n", "line 1.*chunk tag 'X-NP'"),
    ("\n\n", "no sentence"),
])
def test_malformed_files_raise_one_clear_error(tmp_path, text, match):
  (tmp_path / "train.txt").write_text(text)
  (tmp_path / "test.txt").write_text("a DT B-NP\n\n")
  with pytest.raises(ConfigError, match=match):
    conll2000.load_conll2000(tmp_path)


def test_missing_file_and_bad_options(tmp_path):
  with pytest.raises(ConfigError, match="does not exist"):
    conll2000.load_conll2000(tmp_path)
  with pytest.raises(ConfigError, match="dev_fraction"):
    conll2000.load_conll2000(dev_fraction=0.9)
  with pytest.raises(ConfigError, match="min_count"):
    conll2000.load_conll2000(min_count=0)


def test_capped_sentences_keep_their_order_and_the_first_longest_is_found(data):
  """:func:`cap_length` keeps the sentences of at most ``max_len`` words in order; sentence
  ``i`` of the capped batch is :func:`capped_sentence` ``i``; :func:`first_longest` is the
  first sentence of the longest length present."""
  capped = conll2000.cap_length(data.test, 6)
  lengths = np.asarray(capped.mask).sum(-1)
  assert capped.tokens.shape[1] == 6 and lengths.max() <= 6
  i = conll2000.first_longest(capped)
  assert lengths[i] == lengths.max() and np.all(lengths[:i] < lengths.max())
  for j in (0, i, len(lengths) - 1):
    sentence = conll2000.capped_sentence(data, 6, j)
    assert len(sentence) == lengths[j]
    ids = [data.vocab.index(t.word.lower()) if t.word.lower() in data.vocab else
           data.vocab.index(conll2000.UNK) for t in sentence]
    np.testing.assert_array_equal(np.asarray(capped.tokens[j, :lengths[j]]), ids)
