"""SST loader: split sizes and label counts of data/SOURCES.md, one clear error per malformed file."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import models
from attndyn import tasks
from attndyn.tasks import sst


@pytest.fixture(scope="module")
def sst2():
  return tasks.load_sst(fine_grained=False)


@pytest.fixture(scope="module")
def sst5():
  return tasks.load_sst(fine_grained=True)


def test_sst2_has_the_standard_sentence_level_sizes(sst2):
  assert sst2.sizes == {"train": 6920, "dev": 872, "test": 1821}
  assert sst2.n_classes == 2
  # Negative = labels 0+1, positive = 3+4 of the SST-5 root counts in data/SOURCES.md.
  assert sst2.label_counts == {"train": (1092 + 2218, 2322 + 1288), "dev": (139 + 289, 279 + 165),
                               "test": (279 + 633, 510 + 399)}
  for split in ("train", "dev", "test"):
    batch = getattr(sst2, split)
    assert batch.tokens.dtype == jnp.int32 and batch.labels.dtype == jnp.int32
    assert batch.tokens.shape == batch.mask.shape == (sst2.sizes[split], sst2.train.tokens.shape[1])


def test_sst5_sizes_and_root_label_counts_match_sources_md(sst5):
  assert sst5.sizes == {"train": 8544, "dev": 1101, "test": 2210}
  assert sst5.label_counts == {"train": (1092, 2218, 1624, 2322, 1288),
                               "dev": (139, 289, 229, 279, 165),
                               "test": (279, 633, 389, 510, 399)}


def test_batches_round_trip_to_the_sentences(sst2):
  for i in (0, 17, 6919):
    s = sst2.sentences["train"][i]
    row = np.asarray(sst2.train.tokens[i])[np.asarray(sst2.train.mask[i])]
    assert tuple(sst2.vocab[t] for t in row) == s.words
    assert int(sst2.train.labels[i]) == s.label
  assert sst2.vocab[0] == sst.PAD and sst.UNK not in sst2.vocab   # all-split vocabulary: no <unk>
  assert all(w == w.lower() for w in sst2.vocab)


def test_ptb_escapes_lowercasing_and_no_break_spaces():
  s = sst.parse_tree("(3 (2 -LRB-) (4 (2 A\\/B) (3 (2 \\*) (2 8\u00a01\\/2))) (2 -RRB-))")
  assert s == sst.Sentence(("(", "a/b", "*", "8\u00a01/2", ")"), 3)
  assert sst.parse_tree("(1 (2 The) (0 End))", lowercase=False).words == ("The", "End")


def test_the_fast_parser_agrees_with_the_checking_parser():
  lines = sst.DEFAULT_ROOT.joinpath("dev.txt").read_text(encoding="utf-8").splitlines()[:300]
  for line in lines:
    for lowercase in (True, False):
      assert sst._parse_fast(line, lowercase) == sst.parse_tree(line, lowercase=lowercase)


BAD_FILES = {
    "unbalanced_open": (b"(3 (2 a) (2 b))\n(2 (2 c) (2 d)\n", 2, "unbalanced parentheses"),
    "unbalanced_close": (b"(3 (2 a) (2 b)))\n", 1, "unbalanced parentheses"),
    "bad_label": (b"(3 (2 a) (2 b))\n(2 (2 c) (2 d))\n(7 (2 e) (2 f))\n", 3, "outside 0-4"),
    "missing_label": (b"((2 a) (2 b))\n", 1, "missing label"),
    "empty": (b"", 1, "empty"),
    "blank_line": (b"(3 (2 a) (2 b))\n\n(2 (2 c) (2 d))\n", 2, "blank"),
    "bad_encoding": (b"(3 (2 a) (2 b))\n(2 (2 caf\xe9) (2 d))\n", 2, "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_malformed_file_gives_one_error_naming_file_and_line(tmp_path, case):
  content, line, what = BAD_FILES[case]
  path = tmp_path / "train.txt"
  path.write_bytes(content)
  with pytest.raises(tasks.ConfigError) as err:
    sst.read_trees(path)
  message = str(err.value)
  assert str(path) in message and f"line {line}" in message and what in message, message


def test_load_sst_names_the_missing_file_and_bad_options(tmp_path):
  (tmp_path / "train.txt").write_text("(3 (2 a) (2 b))\n")
  with pytest.raises(tasks.ConfigError, match="dev.txt"):
    tasks.load_sst(tmp_path, fine_grained=True)
  with pytest.raises(tasks.ConfigError, match="^padding = "):
    tasks.load_sst(tmp_path, fine_grained=True, padding="zeros")
  with pytest.raises(tasks.ConfigError, match="^vocab_from = "):
    tasks.load_sst(tmp_path, fine_grained=True, vocab_from="dev")


def test_train_only_vocabulary_maps_unseen_words_to_unk():
  train = [sst.Sentence(("good", "film"), 1)]
  dev = [sst.Sentence(("bad", "film"), 0)]
  vocab = sst.build_vocab([train], unk=True)
  assert vocab == (sst.PAD, sst.UNK, "film", "good")
  np.testing.assert_array_equal(tasks.to_batch(dev, vocab).tokens, [[1, 2]])
  with pytest.raises(tasks.ConfigError, match="'bad'"):
    tasks.to_batch(dev, sst.build_vocab([train]))
  with pytest.raises(tasks.ConfigError, match="^max_len = "):
    tasks.to_batch(train, vocab, max_len=1)


def test_masked_padding_gets_zero_attention_and_pad_word_is_an_ordinary_word():
  sentences = [sst.Sentence(("a", "b", "c"), 1), sst.Sentence(("b",), 0)]
  vocab = sst.build_vocab([sentences])
  masked = tasks.to_batch(sentences, vocab, max_len=5, padding="masked")
  pad_word = tasks.to_batch(sentences, vocab, max_len=5, padding="pad_word")
  np.testing.assert_array_equal(masked.tokens, pad_word.tokens)
  np.testing.assert_array_equal(masked.mask, [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
  assert bool(jnp.all(pad_word.mask))
  rng = np.random.default_rng(0)   # hand-made parameters: no PRNG programs to compile
  params = {"embeddings": jnp.asarray(rng.normal(size=(len(vocab), 3))),
            "keys": jnp.asarray(rng.normal(size=(len(vocab), 2))), "query": jnp.array([1.0, -0.5]),
            "classifier": {"U": jnp.asarray(rng.normal(size=(3, 2)))}}
  apply = jax.jit(models.lu.apply)
  att_masked = apply(params, masked).attention
  att_pad = apply(params, pad_word).attention
  assert float(jnp.max(jnp.where(masked.mask, 0.0, att_masked))) == 0.0
  np.testing.assert_allclose(att_masked[1, 0], 1.0)
  is_pad = pad_word.tokens == vocab.index(sst.PAD)
  assert float(jnp.min(jnp.where(is_pad, att_pad, 1.0))) > 0.0
  np.testing.assert_allclose(att_pad.sum(-1), 1.0)


def test_a_group_resumes_under_settings_that_only_choose_groups_or_judge_them():
  """The segment checkpoint's settings hold what decides a group's training and nothing else:
  adding a dataset, a padding or a variant, or changing a tolerance, keeps a finished group's
  segments; changing its training does not."""
  import dataclasses
  from attndyn import settings
  from attndyn.reproduce.lu2021 import sst as experiment
  s = experiment.FULL
  key = lambda s, variants=("fc", "fc_orthonormal"): experiment.segment_settings(
      s, variants, s.max_steps.sst2, "sst2 masked")
  changed = lambda item: settings.replace(s, [f"sst.{item}"], "sst")
  for item in ("datasets=['sst2']", "paddings=['masked']", "variants=['fc']", "max_steps.sst5=10",
               "tolerance=1.0", "top_words=5", "sen_ok=0.5", "fig4_words=1"):
    assert changed(item) != s and key(changed(item)) == key(s), item
  assert {f.name for f in dataclasses.fields(s)} == set(experiment.TRAINING) | {
      "datasets", "paddings", "variants", "max_steps", "tolerance", "top_words", "sen_ok",
      "fig4_words"}
  for item in ("lr=0.05", "seeds=2", "patience=5", "segment=100", "model.embed_std=1e-2",
               "max_steps.sst2=10"):
    assert key(changed(item)) != key(s), item
  assert key(s, ("fc",)) != key(s)


def test_splits_of_cuts_every_split_and_the_pad_word_unmasks_only():
  sentences = [sst.Sentence(("a", "b", "c"), 1), sst.Sentence(("b",), 0),
               sst.Sentence(("c", "a"), 1)]
  vocab = sst.build_vocab([sentences])
  batch = tasks.to_batch(sentences, vocab, max_len=4, padding="masked")
  data = type("Loaded", (), {"train": batch, "dev": batch, "test": batch})()
  masked = sst.splits_of(data, "masked", 2)
  pad_word = sst.splits_of(data, "pad_word")
  for split in ("train", "dev", "test"):
    np.testing.assert_array_equal(masked[split].tokens, batch.tokens[:2])
    np.testing.assert_array_equal(masked[split].mask, batch.mask[:2])
    np.testing.assert_array_equal(pad_word[split].tokens, batch.tokens)
    assert bool(jnp.all(pad_word[split].mask))


def test_top_sen_fraction_counts_the_top_words_on_eq10():
  from attndyn.analysis import sst_words
  from attndyn.analysis.sen import sen_norm
  score = np.array([[9.0, 3.0, 2.0, 1.0, 0.5]])              # word 0 (padding) left out
  m = np.full(5, 4.0)
  norm = np.asarray(sen_norm(score, 4.0), np.float64).copy()
  norm[0, 2] *= 1.5                                         # one of the top 3 off the curve
  assert sst_words.top_sen_fraction(score, norm, [0], m, 3, 0.25)[0] == pytest.approx(2 / 3)
  assert sst_words.top_sen_fraction(score, norm, [0], m, 3, 0.6)[0] == 1.0


def test_a_group_starts_at_each_points_init_and_fc_reduces_exactly(tiny_data):
  """analysis.sst_runs.make_group: the points are variant-major over the seeds; FC's reduced
  start evaluates to the full model's word scores, norms and accuracy; one segment trains."""
  from attndyn import analysis
  from attndyn import dynamics
  from attndyn.analysis import sst_runs
  task, data = tiny_data
  base = dict(n_words=task.n_words, n_classes=task.n_topics, embed_dim=4, key_dim=3,
              embed_std=0.3, key_std=0.2)
  cfgs = [models.LuModelConfig(classifier="fc", fc_init=f, **base)
          for f in ("randn_unit_diag", "orthonormal")]
  seeds = np.arange(2, dtype=np.uint32)
  group = sst_runs.make_group(cfgs, seeds, dynamics.TrainConfig(lr=0.1, steps=4, record_every=2),
                              patience=2, eval_every=2)
  np.testing.assert_array_equal(group.seed, [0, 1, 0, 1])
  np.testing.assert_array_equal(group.which, [0, 0, 1, 1])
  acc, score, norm = group.evaluate(group.params0, group.aux, data.test)
  for i, (seed, w) in enumerate(zip(group.seed, group.which)):
    full = models.lu.init(jax.random.PRNGKey(seed), cfgs[w])
    np.testing.assert_allclose(score[i], models.word_scores(full), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm[i], analysis.embedding_norms(full), rtol=1e-5, atol=1e-6)
  res = group.segment(group.params0, group.aux, {"train": data.train, "dev": data.test})
  assert np.asarray(res.trajectory.observables["score"]).shape[:2] == (4, 3)


def test_merged_groups_repeat_the_last_record_of_the_one_that_stopped_sooner():
  from attndyn.analysis import sst_runs
  part = lambda n, t, v: {"variant": np.array([v] * n), "seed": np.arange(n),
                          "test_acc": np.zeros(n), "best_step": np.zeros(n),
                          "stopped_at": np.zeros(n), "final_score": np.zeros((n, 3)),
                          "final_norm": np.zeros((n, 3)), "steps": np.arange(t),
                          "obs": {"loss": np.arange(n * t, dtype=float).reshape(n, t)}}
  out = sst_runs.merge_groups([part(2, 4, "fc"), part(1, 2, "tc")], 10)
  np.testing.assert_array_equal(out["steps"], [0, 10, 20, 30])
  np.testing.assert_array_equal(out["variant"], ["fc", "fc", "tc"])
  np.testing.assert_array_equal(out["obs"]["loss"][2], [0.0, 1.0, 1.0, 1.0])
  np.testing.assert_array_equal(out["obs"]["loss"][:2], np.arange(8.0).reshape(2, 4))
