"""The copying task (Snell et al., Section 3.3), failure-rate intervals and the lag statistic."""
import jax
import numpy as np
import pytest

from attndyn.analysis import copying_stats
from attndyn.tasks import copying
from attndyn.tasks.copying import CopyingConfig
from attndyn.tasks.errors import ConfigError

# One compiled sampler per (config, n): eager sampling compiles every primitive separately.
sample_copying = jax.jit(copying.sample_copying, static_argnums=(1, 2))


def test_permutation_rows_are_permutations(key):
  b = sample_copying(key, CopyingConfig("permutation", 7, 7), 20)
  x = np.asarray(b.tokens)
  assert np.array_equal(np.sort(x, 1), np.tile(np.arange(1, 8), (20, 1)))
  assert np.array_equal(x, np.asarray(b.labels)) and np.asarray(b.mask).all()
  assert len({tuple(r) for r in x}) > 10          # rows differ


def test_iid_covers_range_with_repeats(key):
  x = np.asarray(sample_copying(key, CopyingConfig("iid", 5, 12), 50).tokens)
  assert x.min() == 1 and x.max() == 5
  assert all(len(set(r)) < 12 for r in x)         # 12 draws from 5 words repeat


def test_subset_distinct_words_from_larger_vocab(key):
  x = np.asarray(sample_copying(key, CopyingConfig("subset", 9, 6), 40).tokens)
  assert all(len(set(r)) == 6 for r in x) and x.min() >= 1 and x.max() <= 9
  assert len(np.unique(x)) == 9                   # every word of the vocabulary is used


def test_pure_function_of_key(key):
  cfg = CopyingConfig("iid", 6, 4)
  a, b = sample_copying(key, cfg, 8), sample_copying(key, cfg, 8)
  assert np.array_equal(a.tokens, b.tokens)
  c = sample_copying(jax.random.PRNGKey(1), cfg, 8)
  assert not np.array_equal(a.tokens, c.tokens)
  assert copying.copying_dataset(key, cfg, steps=3, batch_size=5).tokens.shape == (15, 4)


@pytest.mark.parametrize("kwargs, field", [
    ({"distribution": "perm"}, "^distribution = "),
    ({"distribution": "permutation", "n_tokens": 5, "length": 4}, "^length = "),
    ({"distribution": "subset", "n_tokens": 5, "length": 6}, "^length = "),
    ({"n_tokens": 0}, "^n_tokens = ")])
def test_bad_config(kwargs, field):
  with pytest.raises(ConfigError, match=field):
    CopyingConfig(**kwargs)


def test_wilson_interval_known_values():
  lo, hi = copying_stats.wilson_interval(10, 20)
  assert lo == pytest.approx(0.2993, abs=1e-4) and hi == pytest.approx(0.7007, abs=1e-4)
  lo, hi = copying_stats.wilson_interval(0, 20)
  assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-4)
  lo, hi = copying_stats.wilson_interval(20, 20)
  assert hi == 1.0 and lo == pytest.approx(1 - 0.1611, abs=1e-4)
  with pytest.raises(ConfigError):
    copying_stats.wilson_interval(3, 2)


def test_stage_lag():
  t = np.arange(5) * 10.0
  probe = np.array([[0, .6, .7, .8, .9], [0, 0, 0, 0, 0]])
  attn = np.array([[0, 0, .2, .6, .9], [0, 0, 0, .9, 1]])
  lag = copying_stats.stage_lag(probe, attn, t)
  assert lag[0] == 20.0 and np.isnan(lag[1])
  assert "3/4" in copying_stats.rate_text([1, 1, 0, 1])


def test_authors_encoding_appends_eos_and_counts_42_ids(key):
  cfg = CopyingConfig("permutation", 40, 40, "authors")
  assert (cfg.vocab, cfg.eos, cfg.sos) == (42, 40, 41)
  b = sample_copying(key, cfg, 3)
  x = np.asarray(b.tokens)
  assert x.shape == (3, 41) and np.array_equal(x, np.asarray(b.labels))
  assert (x[:, -1] == 40).all()                                        # EOS last, attended
  assert np.array_equal(np.sort(x[:, :-1], 1), np.tile(np.arange(40), (3, 1)))   # words 0..39
  from attndyn.models.seq2seq_snell import decoder_inputs
  d = np.asarray(decoder_inputs(b.labels, cfg.sos))
  assert (d[:, 0] == 41).all() and np.array_equal(d[:, 1:], x[:, :-1])  # [SOS; x]
  iid = np.asarray(sample_copying(key, CopyingConfig("iid", 5, 30, "authors"), 4).tokens)
  assert iid[:, :-1].min() == 0 and iid[:, :-1].max() == 4 and (iid[:, -1] == 5).all()
  with pytest.raises(ConfigError, match="^encoding = "):
    CopyingConfig(encoding="eos")


def test_authors_train_updates_and_records_as_make_train(key):
  """The authors' loop: Adam as dynamics.make_train, and record i sees the parameters after
  update ``every·i + 1`` with a fresh evaluation key ``fold_in(k_eval, every·i)``."""
  import jax.numpy as jnp
  import optax

  from attndyn import dynamics
  from attndyn.dynamics.copying import authors_train
  from attndyn.tasks.batch import Batch

  batch = Batch(tokens=jnp.arange(6.0).reshape(3, 2), mask=jnp.ones((3, 2), bool),
                labels=jnp.array([1.0, -2.0, 0.5]))
  loss = lambda p, b: (jnp.mean((b.tokens @ p["w"] + p["c"] - b.labels) ** 2), None)
  p0 = {"w": jnp.array([0.3, -0.1]), "c": jnp.array(0.2)}
  train = authors_train(loss, lambda k: batch, lambda p, k: (p, jax.random.uniform(k)),
                        optax.adam(0.1), steps=20, every=10)
  (params, u) = jax.jit(train)(p0, key)
  ref = dynamics.make_train(loss, batch, lambda p, q: jnp.zeros(()),
                            dynamics.TrainConfig(optimizer="adam", lr=0.1, steps=11, record_every=1),
                            {"w": True, "c": True}, record_params=True)(p0, key)
  for i, updates in enumerate((1, 11)):
    for name in p0:
      np.testing.assert_allclose(params[name][i], ref.params[name][updates], rtol=1e-12)
  k_eval = jax.random.split(key)[1]
  np.testing.assert_array_equal(u, [jax.random.uniform(jax.random.fold_in(k_eval, s)) for s in (0, 10)])
  # multihead.py's can_learn records before the update: record i sees every·i updates
  before = authors_train(loss, lambda k: batch, lambda p, k: p, optax.adam(0.1), steps=20,
                         every=10, record="before")
  params = jax.jit(before)(p0, key)
  for i, updates in enumerate((0, 10)):
    for name in p0:
      np.testing.assert_allclose(params[name][i], ref.params[name][updates], rtol=1e-12)


def test_authors_metrics_count_every_position_eos_included():
  """The authors' eval_acc: accuracy over all T target positions (EOS too); attn_acc is the
  argmax attention on position t, its word form the source word under it."""
  import jax.numpy as jnp
  from attndyn.models.seq2seq_snell import SnellOutput
  from attndyn.tasks.batch import Batch

  x = jnp.array([[2, 2, 0, 3]])                           # iid-like: word 2 twice, EOS = 3
  b = Batch(tokens=x, mask=jnp.ones(x.shape, bool), labels=x)
  logits = jnp.log(jax.nn.one_hot(jnp.array([[2, 1, 0, 1]]), 4) + 1e-3)   # right at t = 0, 2
  arg = jnp.array([1, 1, 0, 3])                           # position t at t = 1, 3; word at 0, 1, 3
  att = jax.nn.one_hot(arg, 4)[None, None]
  beta = jax.nn.one_hot(jnp.array([0, 2, 2, 3]), 4)[None] * 0.5 + 0.1   # words right at 0, 2, 3
  m = jax.jit(copying_stats.authors_metrics)(SnellOutput(logits, att, None, None), beta, b)
  assert float(m["token_acc"]) == 0.5 and float(m["attn_acc"]) == 0.5
  assert float(m["attn_word_acc"]) == 0.75 and float(m["beta_acc"]) == 0.75


def test_multihead_protocol_labels_and_combinations_follow_multihead_py():
  """can_learn / is_good_single_head's labels, and run()'s three kinds of head lists."""
  from attndyn.reproduce.snell import multihead_authors as mh

  acc = np.array([[[0.1, 0.97, 0.5], [0.2, 0.96, 0.99], [0.96, 0.1, 0.1]],   # good: > .95 once
                  [[0.1, 0.2, 0.5], [0.3, 0.4, 0.59], [0.9, 0.7, 0.3]],      # bad: last < .6
                  [[0.1, 0.2, 0.5], [0.1, 0.97, 0.2], [0.1, 0.2, 0.3]],      # mixed: neither
                  [[0.1, 0.2, 0.6], [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]]])      # 0.6 is not < 0.6
  got = copying_stats.multihead_labels(acc, 0.95, 0.6)
  assert got["good"].tolist() == [0] and got["bad"].tolist() == [1]
  assert got["good_run"][2].tolist() == [False, True, False]
  assert got["bad_run"][3].tolist() == [False, True, True]
  good, bad = [3, 7, 9], list(range(10, 22))
  lists = mh.combinations(good, bad, 30, 8, 5)
  assert lists == mh.combinations(good, bad, 30, 8, 5)            # Python random, seeded
  for ids in lists["bad"]:
    assert len(set(ids)) == 8 and set(ids) <= set(bad)
  for ids in lists["bad+good"]:
    assert len(set(ids)) == 8 and set(ids[:7]) <= set(bad) and ids[7] in good
  for ids in lists["random"]:
    assert len(set(ids)) == 8 and all(-30 <= i <= -1 for i in ids)
  assert len({tuple(ids) for ids in lists["bad"]}) == 5        # the lists move on with idx


def test_multihead_protocol_run_records_per_head_and_draws_heads_by_id():
  """One run of the protocol (K = 2 heads) traces and records token accuracy and each head's
  attention accuracy at every record (shapes only: compiling the GRU model would cost ~10 s
  of CI; the protocol runs in `reproduce snell --quick`); candidate head ids and random head
  ids draw different heads."""
  import dataclasses

  from attndyn.models import seq2seq_snell
  from attndyn.reproduce.snell import multihead
  from attndyn.reproduce.snell import multihead_authors as mh
  from attndyn.tasks.copying import CopyingConfig

  task = CopyingConfig("permutation", 4, 4, "authors")
  s = dataclasses.replace(multihead.QUICK, hidden=4, steps=4, batch=3, lr=1e-3, record_every=2,
                          eval_size=3, body_seed=0, head_seed=0)
  one = mh.point(task, s, heads=2)
  out = jax.eval_shape(one, {"heads": np.array([3, -1], np.int32), "order": np.int32(0)})
  assert out["token_acc"].shape == (2,) and out["attn_acc"].shape == (2, 2)
  h3 = seq2seq_snell.attention_head(mh.head_key(s, 3), 4)
  h3_again = seq2seq_snell.attention_head(mh.head_key(s, np.int32(3)), 4)
  np.testing.assert_array_equal(h3["attention"]["W"], h3_again["attention"]["W"])
  assert not np.allclose(seq2seq_snell.attention_head(mh.head_key(s, -3), 4)["attention"]["W"],
                         h3["attention"]["W"])


def test_both_copying_models_record_every_success_metric():
  """``success_metric`` may name any of ``SUCCESS_METRICS``: the authors' model and ours both
  record each one at every logged step (shapes only, traced without compiling)."""
  import dataclasses

  from attndyn.models import seq2seq
  from attndyn.reproduce.snell import common
  from attndyn.reproduce.snell import copying as experiment
  from attndyn.analysis import ktiw

  s = dataclasses.replace(experiment.QUICK, hidden=4, steps=4, batch=2, record_every=2,
                          eval_size=2)
  authors = common.task_config(experiment.distribution("iid", s), "authors")
  recorded = jax.eval_shape(common.authors_point(authors, s), np.uint32(0))
  task = common.task_config(experiment.distribution("iid", s), "ours")
  cfg = common.model_config(task, s)
  params = jax.eval_shape(lambda k: seq2seq.init(k, cfg), jax.random.PRNGKey(0))
  ev = copying.sample_copying(jax.random.PRNGKey(1), task, s.eval_size)
  ours = jax.eval_shape(ktiw.copy_record(cfg, ev), params, params)
  for metric in common.SUCCESS_METRICS:
    assert recorded[metric].shape == (s.steps // s.record_every,), metric
    assert ours[metric].shape == (), metric


def test_multihead_reuses_the_single_head_runs_of_copying_only_when_their_settings_match(
    monkeypatch):
  """``multihead`` (preset ours) reads ``copying``'s permutation runs when every setting that
  decides them (``SAME``) is equal, cut to its own seeds; otherwise it trains its own."""
  import dataclasses
  from types import SimpleNamespace

  from attndyn.reproduce.snell import common, multihead
  from attndyn.reproduce.snell import copying as experiment

  monkeypatch.setattr(common, "copy_sweep", lambda *args, **kw: "trained here")
  runs = {"permutation": {"attn_acc": np.arange(8.0).reshape(4, 2), "t": np.array([0.0, 10.0])}}
  mine = multihead.validate(dataclasses.replace(multihead.QUICK, preset="ours"))
  for copying_s, reused in [
      (experiment.validate(dataclasses.replace(experiment.QUICK, preset="ours")), True),
      (experiment.validate(dataclasses.replace(experiment.QUICK, preset="ours", hidden=16)),
       False),
      (experiment.validate(experiment.QUICK), False)]:                  # the authors' model
    ctx = SimpleNamespace(cache={"snell.copying": {"settings": copying_s, "runs": runs}},
                          log=lambda *a: None)
    got = multihead._single(ctx, mine, None, np.arange(3))
    if reused:
      np.testing.assert_array_equal(got["attn_acc"], runs["permutation"]["attn_acc"][:3])
      np.testing.assert_array_equal(got["t"], runs["permutation"]["t"])
    else:
      assert got == "trained here"


def test_copying_point_of_a_single_heads_own_seed_is_that_single_head_model():
  """:func:`dynamics.copying.copying_point`: a one-head model given its own seed as head seed
  (``head_seeds = [s]``) is the single-head model of seed s, record for record; another head
  seed gives another run; with ``evaluation`` the trained model's attention comes back too."""
  from attndyn import dynamics
  from attndyn.analysis import ktiw
  from attndyn.dynamics.copying import copying_point
  from attndyn.models import seq2seq

  task = CopyingConfig("iid", 5, 4)
  cfg = seq2seq.Seq2SeqConfig(task.vocab, task.vocab, hidden=3, shared_embedding=True)
  ev = copying.sample_copying(jax.random.PRNGKey(1), task, 3)
  tc = dynamics.TrainConfig(optimizer="adam", lr=1e-2, steps=4, record_every=2, batch_size=2)
  one = jax.jit(copying_point(cfg, task, ktiw.copy_record(cfg, ev), tc, evaluation=ev))
  alone = one({"seed": np.uint32(3)})
  own = one({"seed": np.uint32(3), "head_seeds": np.array([3], np.uint32)})
  other = one({"seed": np.uint32(3), "head_seeds": np.array([4], np.uint32)})
  for k in alone["obs"]:
    np.testing.assert_array_equal(own["obs"][k], alone["obs"][k])
  np.testing.assert_array_equal(own["attention"], alone["attention"])
  assert alone["attention"].shape == (3, 1, 4, 4)
  assert not np.array_equal(other["attention"], alone["attention"])
