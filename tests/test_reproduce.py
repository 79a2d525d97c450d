"""`attndyn reproduce`: the replication table's statistics and verdicts, the exact reformulations
it trains with, and one tiny end-to-end run of the command."""
import dataclasses
import functools
import json
import types
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn.analysis import ablation as abl
from attndyn.analysis import replication as rep
from attndyn.analysis.sen_checks import (curve_error_on_scores, first_passage, windowed_max_error,
                                 windowed_mean_error)
from attndyn import cli, schema, settings
from attndyn.reproduce import PAPERS
from attndyn.reproduce import report, runner
from attndyn.dynamics.segmented import run_segments
from attndyn.models import lu_fc_reduced
from attndyn.models.lu_linear import apply_linear, gate
from attndyn.tasks.errors import ConfigError


# ---------------------------------------------------------------- statistics and verdicts

def test_claim_rows_and_quick_rows_keep_the_would_be_verdict():
  tol = rep.Tolerance("at_least", 76.68 - 3, "≥ paper − 3 points")
  row = rep.claim("sst2.tc.test_acc", "acc", paper=79.59, ours=rep.mean_ci([80.1, 79.9]),
                  tolerance=tol, unit="%", comparable=False, quick=True)
  assert row["status"] == "quick" and row["would_be"] == "pass"
  full = rep.claim("x", "acc", paper=79.59, ours=rep.mean_ci([70.0, 70.5]), tolerance=tol,
                   comparable=False, quick=False)
  assert full["status"] == "fail"
  assert report.format_result(row) == "quick: not comparable (would pass)"
  assert report.format_ours(row) == "80.00 ± 1.27 % (n=2)"
  flags = rep.claim("y", "t", paper="holds", ours=rep.mean_ci([1.0, 0.0]),
                    tolerance=rep.Tolerance("all_true"))
  assert report.format_ours(flags) == "1/2 runs" and report.format_result(flags) == "**FAIL**"
  with pytest.raises(Exception, match="tolerance.value"):
    rep.Tolerance("at_most")


def test_window_and_ablation_helpers():
  steps = np.arange(0, 100, 10)
  a = np.array([[1.0, 0.9, 0.7, 0.5, 0.3, 0.1, 0.05, 0.01, 0.005, 0.001]])
  b = a + 0.01
  b[0, 4] = 0.2                               # a is above b once, at step 40
  t_conv = abl.first_step_at_or_below(steps, a, np.array([0.011]))
  assert t_conv[0] == 70.0
  np.testing.assert_allclose(abl.fraction_below(steps, a, b, t_conv), [5 / 6])
  assert np.isnan(abl.first_step_at_or_below(steps, a, np.array([-1.0]))[0])
  # a's growth rate exceeds b's from step 30 on (after a brief lead at step 10 that does not last)
  x, y = np.array([[0, 3, 3.5, 5, 7, 10.]]), np.array([[0, 2, 4, 5, 6, 7.]])
  assert abl.rate_crossover(steps[:6], x, y)[0] == 30.0
  assert np.isnan(abl.rate_crossover(steps[:6], y, x)[0])
  # Eq (10) exactly: no error in the window; a wrong norm at the start only is ignored.
  s = np.linspace(0.0, 3.0, 10)[:, None]
  v = np.array(analysis.sen_norm(s, 5))
  v[0] = 1.0
  assert windowed_max_error(steps, s, v, 5, start_fraction=0.1) < 1e-12
  assert windowed_mean_error(steps, s, v, 5, start_fraction=0.1) < 1e-12
  # norms 10 % above Eq (10) on two of the nine window points: max 0.1, mean 0.2 / 9
  v[[3, 7]] *= 1.1
  np.testing.assert_allclose(windowed_max_error(steps, s, v, 5), 0.1, rtol=1e-12)
  np.testing.assert_allclose(windowed_mean_error(steps, s, v, 5), 0.2 / 9, rtol=1e-12)


def test_curves_are_compared_on_a_common_score_axis():
  # first passage: linear interpolation where each path first reaches each level, also if it dips
  s = np.array([[0.0, 1.0, 0.5, 3.0], [0.0, 2.0, 2.5, 4.0]])
  v = np.array([[0.0, 10.0, 99.0, 30.0], [0.0, 20.0, 25.0, 40.0]])
  np.testing.assert_allclose(first_passage(s, v, np.array([0.5, 2.0, 3.0])),
                             [[5.0, 99.0 + 0.6 * (30.0 - 99.0), 30.0], [5.0, 20.0, 30.0]])
  # Eq (10) exactly, one run three times faster than the other and parked at its end: same error
  # on the score axis (0 up to interpolation), whereas in time the two differ
  t = np.linspace(0.0, 1.0, 200)
  fast = np.minimum(3 * t, 1.0) * 4.0
  score = np.stack([4.0 * t, fast])[:, :, None]
  norm = np.array(analysis.sen_norm(score, 20))
  np.testing.assert_allclose(curve_error_on_scores(score, norm, 20), 0.0, atol=2e-4)
  np.testing.assert_allclose(curve_error_on_scores(score, 1.05 * norm, 20), 0.05, rtol=1e-3)
  # the common range ends at the smallest final score: a run that goes further is cut there
  longer = np.concatenate([score[:1], 2 * score[:1]])
  wrong_beyond = np.where(longer > 4.2, 2.0, 1.0) * np.array(analysis.sen_norm(longer, 20))
  np.testing.assert_allclose(curve_error_on_scores(longer, wrong_beyond, 20), 0.0, atol=2e-4)


# ---------------------------------------------------------------- exact reformulations

@pytest.fixture(scope="module")
def fc_setup(tiny_data):
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=4,
                             key_dim=3, classifier="fc", fc_init="randn_unit_diag",
                             embed_std=0.1, key_std=0.1, query_std=0.7)
  return cfg, data, models.lu.init(jax.random.PRNGKey(1), cfg, jnp.float64)


def test_projected_apply_and_gate_change_nothing_but_the_frozen_gradient(fc_setup):
  _, data, params = fc_setup
  full, proj = models.lu.apply(params, data.train), apply_linear(params, data.train)
  np.testing.assert_allclose(proj.logits, full.logits, rtol=1e-12, atol=1e-14)
  np.testing.assert_array_equal(proj.attention, full.attention)
  loss = jax.jit(lambda p, flags: models.make_loss(apply_linear)(gate(p, flags), data.train)[0])
  grad = jax.jit(jax.grad(loss))
  g_on = grad(params, {"keys": 1.0, "embeddings": 1.0})
  g_off = grad(params, {"keys": 0.0, "embeddings": 0.0})
  assert float(loss(params, {"keys": 0.0, "embeddings": 0.0})) == float(
      models.make_loss(apply_linear)(params, data.train)[0])
  assert float(jnp.max(jnp.abs(g_on["keys"]))) > 0
  assert float(jnp.max(jnp.abs(g_off["keys"]))) == 0 == float(jnp.max(jnp.abs(g_off["embeddings"])))


def test_fc_reduction_is_exact_gradient_descent(fc_setup):
  cfg, data, params0 = fc_setup
  train_cfg = dynamics.TrainConfig(lr=0.3, steps=30, record_every=30)
  zero = lambda p, p0: jnp.zeros(())
  full = dynamics.make_train(models.make_loss(models.lu.apply), data.train, zero, train_cfg,
                             cfg.trainable())(params0, jax.random.PRNGKey(0)).final_params
  red0, consts = lu_fc_reduced.reduce(params0)
  red = dynamics.make_train(models.make_loss(lu_fc_reduced.make_apply(consts)), data.train, zero,
                            train_cfg, {"b": True, "sigma": True})(
                                red0, jax.random.PRNGKey(0)).final_params
  back = lu_fc_reduced.expand(red, consts, params0)
  assert float(jnp.max(jnp.abs(full["embeddings"] - params0["embeddings"]))) > 1e-2
  for group in ("embeddings", "keys"):
    np.testing.assert_allclose(back[group], full[group], atol=1e-12)
  np.testing.assert_allclose(lu_fc_reduced.embedding_norms(red, consts),
                             analysis.embedding_norms(full), atol=1e-12)
  np.testing.assert_allclose(lu_fc_reduced.scores(red, consts), models.word_scores(full), atol=1e-12)


def test_diminution_init_makes_eq8_negative(tiny_data):
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=4,
                             key_dim=3, classifier="tc", embed_std=0.3, query_norm=1.0)
  params = models.lu.init(jax.random.PRNGKey(2), cfg, jnp.float64)
  loss = models.make_loss(models.lu.apply)
  moved = abl.diminution_init(loss, params, data, 0, 0.5)
  assert float(abl.eq8_projection(loss, moved, data, 0)) < 0
  changed = np.flatnonzero(np.any(np.asarray(moved["embeddings"] != params["embeddings"]), -1))
  assert changed.tolist() == [0]


def test_a_diminution_run_starts_where_diminution_init_moves_the_seed(tiny_data):
  """analysis.ablation.from_diminution_start: Eq (8) at the moved start is negative, at the
  seed's own start it is diminution_init's input's, and GD from the moved start records the
  moved start first."""
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=4,
                             key_dim=3, classifier="tc", embed_std=0.3, query_norm=1.0)
  one = abl.from_diminution_start(cfg, dynamics.TrainConfig(lr=0.1, steps=4, record_every=2),
                                  data, 0, 0.5, jnp.float64)
  out = one(2)
  params = models.lu.init(jax.random.PRNGKey(2), cfg, jnp.float64)
  loss = models.make_loss(models.lu.apply)
  moved = abl.diminution_init(loss, params, data, 0, 0.5)
  assert float(out["eq8"]) < 0
  np.testing.assert_allclose(out["eq8_standard"], abl.eq8_projection(loss, params, data, 0),
                             rtol=1e-10)
  np.testing.assert_allclose(out["obs"]["score"][0], models.word_scores(moved)[:task.n_topic_words],
                             rtol=1e-12)


def test_at_step_reads_each_run_at_its_own_step():
  steps = np.arange(0, 50, 10)
  x = np.arange(10.0).reshape(2, 5)
  np.testing.assert_array_equal(abl.at_step(steps, x, [20.0, np.nan]), [2.0, 9.0])
  np.testing.assert_array_equal(abl.at_step(steps, x, [15.0, 99.0]), [2.0, 9.0])


def test_init_seeds_and_word_values_are_init_and_the_words_per_seed(tiny_data):
  from attndyn.analysis import observables
  from attndyn.models.lu_linear import apply_linear_for
  task, _ = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=4,
                             key_dim=3, classifier="tc", embed_std=0.3, key_std=0.2)
  seeds = jnp.asarray([0, 5], jnp.uint32)
  stacked = models.lu.init_seeds(seeds, cfg, jnp.float64)
  words = observables.initial_word_values(seeds, cfg, jnp.float64)
  for i, seed in enumerate((0, 5)):
    one = models.lu.init(jax.random.PRNGKey(seed), cfg, jnp.float64)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b, rtol=1e-12, atol=1e-15),
                 stacked, one)                   # compiled vs op by op: equal up to rounding
    np.testing.assert_allclose(words["score"][i], models.word_scores(one), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(words["norm"][i], analysis.embedding_norms(one), rtol=1e-12)
  assert apply_linear_for(cfg) is apply_linear
  assert apply_linear_for(dataclasses.replace(cfg, classifier="tl")) is models.lu.apply


def test_segmented_early_stopping_finds_the_one_long_run_best(tiny_data):
  task, data = tiny_data
  flip = jax.random.bernoulli(jax.random.PRNGKey(9), 0.3, data.test.labels.shape)
  dev = data.test._replace(labels=jnp.where(flip, 1 - data.test.labels, data.test.labels))
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                             key_dim=2, embed_std=0.1, key_std=0.1)
  loss = models.make_loss(models.lu.apply)
  record = lambda p, p0: {"dev_loss": loss(p, dev)[0]}
  lrs = jnp.array([1.0, 3.0])

  @functools.lru_cache(maxsize=None)   # one compiled program per segment length
  def make(steps):
    train = dynamics.make_train_early_stopping(
        loss, data.train, dev, record, dynamics.TrainConfig(lr=1.0, steps=steps, record_every=5),
        cfg.trainable(), patience=4, eval_every=5)
    return jax.jit(jax.vmap(lambda p, lr: train(p, jax.random.PRNGKey(0), lr=lr)))

  params0 = jax.vmap(lambda k: models.lu.init(k, cfg, jnp.float64))(
      jax.random.split(jax.random.PRNGKey(3), 2))
  long = make(400)(params0, lrs)
  seg = run_segments(lambda p: make(50)(p, lrs), params0, segment=50, max_segments=8,
                     record_every=5)
  assert np.all(seg.stopped_at > 0) and np.all(np.asarray(long.stopped_at) > 0)
  np.testing.assert_array_equal(seg.best_step, long.best_step)
  np.testing.assert_allclose(seg.best_value, long.best_value, rtol=1e-12)
  assert np.all(seg.stopped_at >= np.asarray(long.stopped_at))
  assert np.all(seg.stopped_at - np.asarray(long.stopped_at) <= 4 * 5)
  assert seg.observables["dev_loss"].shape == (2, len(seg.steps))
  # counting the patience across segments gives the long run's stop exactly, also when the
  # patience (20 steps) is longer than a segment (10 steps; alone, a segment never stops a run)
  for segment in (50, 10):
    exact = run_segments(lambda p: make(segment)(p, lrs), params0, segment=segment,
                         max_segments=400 // segment, record_every=5, patience_steps=4 * 5)
    np.testing.assert_array_equal(exact.stopped_at, np.asarray(long.stopped_at))
    np.testing.assert_array_equal(exact.best_step, long.best_step)
  # Interrupted after its second segment and continued from the state it reported, the call
  # returns what the uninterrupted one does.
  seg10 = lambda p: make(10)(p, lrs)
  states = []

  def interrupt(state):
    states.append(state)
    if state.segments == 2:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    run_segments(seg10, params0, segment=10, max_segments=40, record_every=5,
                 patience_steps=20, on_state=interrupt)
  resumed = run_segments(seg10, params0, segment=10, max_segments=40, record_every=5,
                         patience_steps=20, start=states[-1])
  for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(exact)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------- the command, end to end

TINY = ["--set", "theorem2.run.train.steps=60", "--set", "theorem2.run.train.record_every=20",
        "--set", "theorem2.checkpoints=[20,40,60]", "--set", "theorem2.run.sweep.seeds=2",
        "--set", "theorem2.run.task.vocab_size=40", "--set", "theorem2.run.task.n_train=32",
        "--set", "theorem2.run.task.n_test=16", "--set", "theorem2.run.task.n_nontopic=5"]


@pytest.mark.parametrize("raised,code,first", [
    (ValueError("boom"), 1, "attndyn: internal error: experiment theorem2 failed (ValueError: boom)"),
    (RuntimeError("RESOURCE_EXHAUSTED: 45 GB"), 2,
     "attndyn: error: experiment theorem2 failed (RuntimeError: RESOURCE_EXHAUSTED: 45 GB)")])
def test_a_failed_experiment_is_one_line_with_its_traceback_in_a_file(raised, code, first, tmp_path,
                                                                      capsys, monkeypatch):
  """A bug (exit 1) or the machine's failure (exit 2, with how to rerun it): one line on
  stderr, never a traceback there; the traceback is kept beside the experiment's file."""
  from attndyn.reproduce.lu2021 import theorem2

  def fail(ctx, s):
    raise raised

  monkeypatch.setattr(theorem2, "run", fail)
  out = tmp_path / "rep"
  got = cli.main(["reproduce", "lu2021", "--out", str(out), "--quick", "--quiet",
                  "--only", "theorem2"])
  err = capsys.readouterr().err
  assert got == code and "Traceback" not in err, err
  lines = [line for line in err.splitlines() if line.startswith("attndyn:")]
  assert len(lines) == 1 and lines[0].startswith(first), err
  log = out / "experiments" / "theorem2.traceback.txt"
  assert str(log) in lines[0] and "raise raised" in log.read_text()
  assert ("--resume reruns it alone" in lines[0]) == (code == 2)


def test_reproduce_end_to_end_writes_the_table_figures_and_rebuilds_it(tmp_path, capsys):
  out = tmp_path / "rep"
  code = cli.main(["reproduce", "lu2021", "--out", str(out), "--quick", "--quiet",
                   "--only", "theorem2"] + TINY)
  assert code == 0, capsys.readouterr()
  doc = json.loads((out / report.JSON).read_text())
  assert doc["columns"] == list(report.COLUMNS) and doc["modes"] == ["quick"]
  ids = [row["id"] for row in doc["claims"]]
  assert {"theorem2.loss_at_5k", "theorem2.attends_every_sentence", "theorem2.final_attention"} <= set(ids)
  for row in doc["claims"]:
    assert {"paper", "ours", "tolerance", "status"} <= set(row)
    assert row["status"] in rep.STATUSES and row["ours"]["n"] >= 1
  text = (out / report.MARKDOWN).read_text()
  assert "| " + " | ".join(report.COLUMNS) + " |" in text
  for fig in doc["experiments"][0]["figures"]:
    assert (out / fig).read_bytes()[:4] == b"\x89PNG"
  (out / report.MARKDOWN).unlink()
  assert cli.main(["reproduce", "lu2021", "--out", str(out), "--report-only"]) == 0
  assert (out / report.MARKDOWN).read_text().count("| theorem2.") == len(ids)
  # A damaged experiment file is named in one line, and the table is left as it was.
  saved = out / "experiments" / "theorem2.json"
  good, table = saved.read_text(), (out / report.MARKDOWN).read_text()
  capsys.readouterr()
  for damaged, expected in (('{"name": ', "line 1 column 10 is not valid JSON"),
                            ("[]", "is not an attndyn experiment file"),
                            ('{"name": "theorem2", "claims": [{"id": 1}]}', "KeyError: 'mode'")):
    saved.write_text(damaged)
    assert cli.main(["reproduce", "lu2021", "--out", str(out), "--report-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "theorem2.json'" in err and expected in err, err
    assert (out / report.MARKDOWN).read_text() == table
  saved.write_text(good)


@pytest.mark.parametrize("args, message", [
    (["--set", "synthetic.classifierz=['tc']"], "did you mean 'classifiers'"),
    (["--set", "nosuch.steps=3"], "no experiment 'nosuch'"),
    (["--only", "synthetc"], "Did you mean 'synthetic'"),
    (["--only", ",,"], "--only ',,' names no experiment"),
    (["--set", "theorem2.run.train.lr=abc"], "theorem2 run: train.lr = 'abc' is not allowed: a number"),
    (["--set", "theorem2.run.sweep.seeds=-1"], "sweep.seeds = -1 is not allowed"),
    (["--set", "synthetic.run.train.steps=1.5"], "train.steps = 1.5 is not allowed"),
    # Counts start at 1: seeds = 0 ran nothing and judged the claims on an empty sample.
    (["--set", "theorem2.run.sweep.seeds=0"], "sweep.seeds = 0 is not allowed"),
    (["--set", "theorem2.segment=100"], "no setting 'segment'"),
    (["--set", "theorem2.checkpoints=[0, 1000]"], "of integers >= 1"),
    (["--set", "theorem2.checkpoints=[20, true]"], "is not allowed: a list of integers >= 1"),
    (["--set", "synthetic.invariant=3"], "synthetic.invariant is a table; set one of its keys"),
])
def test_bad_settings_are_one_line_errors_before_anything_runs(tmp_path, capsys, args, message):
  code = cli.main(["reproduce", "lu2021", "--out", str(tmp_path / "x"), "--quick"] + args)
  err = capsys.readouterr().err
  assert code == 2 and message.lower() in err.lower(), err
  assert not (tmp_path / "x" / runner.EXPERIMENTS_DIR).exists()


@pytest.mark.parametrize("paper, experiment, item, message", [
    ("snell", "copying", "copying.preset=foo",
     "copying.preset = 'foo' is not allowed: one of 'authors', 'cpu'"),
    ("snell", "copying", "copying.model=theirs", "copying.model = 'theirs' is not allowed"),
    ("snell", "copying", "copying.success_metric=loss",
     "copying.success_metric = 'loss' is not allowed: one of 'token_acc'"),
    ("snell", "copying", 'copying.distributions=["iid", "perm"]',
     "copying.distributions = ['iid', 'perm'] is not allowed: a list drawn from 'permutation'"),
    ("snell", "multihead", "multihead.preset=foo", "multihead.preset = 'foo' is not allowed"),
    ("snell", "multihead", "multihead.heads=1", "multihead.heads = 1 is not allowed"),
    ("snell", "relevance", "relevance.model.classifier=zz",
     "relevance.model.classifier = 'zz' is not allowed"),
    ("snell", "relevance", "relevance.model.freeze=[]",
     "relevance.model.freeze is not allowed: the experiment sets it"),
    ("snell", "relevance", "relevance.task.kind=topic",
     "relevance.task.kind is not allowed: the experiment sets it"),
    ("yang", "adversary", "adversary.match=kl", "adversary.match = 'kl' is not allowed: one of 'nll'"),
    ("yang", "tagger", "tagger.model.block=half",
     "tagger.model.block = 'half' is not allowed: one of 'paper', 'full'"),
    ("yang", "tagger", "tagger.data.limit=-1", "tagger.data.limit = -1 is not allowed"),
])
def test_snell_and_yang_settings_are_checked_before_anything_runs(tmp_path, capsys, paper,
                                                                  experiment, item, message):
  """Presets, models and the settings with a fixed set of values are refused in one line."""
  code = cli.main(["reproduce", paper, "--out", str(tmp_path / "x"), "--quick", "--only",
                   experiment, "--set", item])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and message in err, err
  assert not (tmp_path / "x" / runner.EXPERIMENTS_DIR).exists()


@pytest.mark.parametrize("name", ["copying", "multihead"])
def test_every_snell_preset_is_settings_of_their_kinds(name):
  """A preset only sets settings the experiment has, to values of their kinds (in quick and
  full mode), so ``--set NAME.preset=P`` can never run settings ``--set`` would refuse."""
  import dataclasses
  from attndyn import settings
  module = next(m for m in runner.experiment_modules("snell") if m.NAME == name)
  for base in (module.QUICK, module.FULL):
    for preset, values in module.PRESETS.items():
      merged = module.validate(dataclasses.replace(base, preset=preset))
      settings.check_fields(merged, name)
      assert all(getattr(merged, k) == v for k, v in values.items()), preset


def test_a_shuffled_batch_size_beyond_the_training_set_is_one_line(tmp_path, capsys):
  code = cli.main(["reproduce", "sgd", "--out", str(tmp_path / "x"), "--quick", "--quiet",
                   "--set", "noise.keep_last_batch_sizes=[500]"])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1, err
  assert "noise.keep_last_batch_sizes holds 500: a shuffled batch size is 1..task.n_train = 200" in err


def test_seeds_and_times_may_be_zero_where_counts_may_not():
  """A seed or a time τ takes 0; a count (seeds, steps, sizes) starts at 1 — as declared, whatever the name."""
  noise = next(m for m in runner.experiment_modules("sgd") if m.NAME == "noise")
  items = ["noise.init_seed=0", "noise.sen_start_tau=0"]
  settings = runner.settings_for(noise, quick=True, items=items)
  assert settings.init_seed == 0 and settings.sen_start_tau == 0
  for item in ("noise.seeds=0", "noise.tau_every=0"):  # a τ step of 0 never records
    with pytest.raises(ConfigError, match="= 0 is not allowed: an integer >= 1"):
      runner.settings_for(noise, quick=True, items=[item])


def test_noise_sde_and_tolerance_tables_are_typed():
  """A key of a nested table is set alone (the others keep QUICK's) and checked by its kind."""
  noise = next(m for m in runner.experiment_modules("sgd") if m.NAME == "noise")
  s = runner.settings_for(noise, quick=True, items=["noise.sde.dt=0.25", "noise.tolerance.sen=0.1"])
  assert (s.sde.dt, s.tolerance.sen) == (0.25, 0.1)
  assert s.sde.brownian == noise.QUICK.sde.brownian and s.tolerance.slope == noise.QUICK.tolerance.slope
  with pytest.raises(ConfigError, match="noise.sde.brownian = 'x' is not allowed: one of 'virtual', 'unsafe'"):
    runner.settings_for(noise, quick=True, items=["noise.sde.brownian=x"])
  with pytest.raises(ConfigError, match=r"noise.sde is a table; set one of its keys: noise.sde.lr"):
    runner.settings_for(noise, quick=True, items=["noise.sde=1"])


def _all_experiments():
  return [m for paper in PAPERS for m in runner.experiment_modules(paper)]


_EXPERIMENTS = pytest.mark.parametrize(
    "module", _all_experiments(), ids=lambda m: f"{m.__name__.split('.')[-2]}.{m.NAME}")


_UNIONS = (typing.Union, types.UnionType)


def _settings_of(cls, prefix=""):
  """``(dotted name, annotation)`` of every setting of a settings dataclass, nested tables
  expanded: read from the annotations here, apart from :mod:`attndyn.settings`."""
  hints = typing.get_type_hints(cls, include_extras=True)
  for f in dataclasses.fields(cls):
    tp = hints[f.name]
    inner = [a for a in typing.get_args(tp) if a is not type(None)]
    table = tp if dataclasses.is_dataclass(tp) else inner[0] if (
        typing.get_origin(tp) in _UNIONS and dataclasses.is_dataclass(inner[0])) else None
    if table is not None:
      yield from _settings_of(table, f"{prefix}{f.name}.")
    else:
      yield f"{prefix}{f.name}", tp


def _values(tp):
  """For a setting's annotation: ``(path inside it, --set text, the value stored)`` of a value
  of its kind, and the --set text of a value that is not."""
  origin, args = typing.get_origin(tp), typing.get_args(tp)
  if origin in _UNIONS:                                        # Optional[X]: "none" unsets it
    return ("", "none", None), _values(next(a for a in args if a is not type(None)))[1]
  if origin is typing.Literal:
    v = args[-1]
    return ("", repr(v) if isinstance(v, str) else str(v), v), "'no_such_value'"
  if origin is tuple:
    (_, good, value), bad = _values(args[0])
    return ("", f"[{good}]", (value,)), f"[{bad}]"
  if tp is bool:
    return ("", "false", False), "3"
  if tp is str:
    return ("", "'x'", "x"), "3"
  kind = tp.__metadata__[0]
  if isinstance(kind, tuple):                                  # section(name): a run-schema key
    key = next(k for k, v in schema.SECTIONS[kind[1]].items() if v == "int")
    return (f".{key}", "2", 2), "3"
  return {"count": (("", "2", 2), "0"), "index": (("", "0", 0), "-1"),
          "number": (("", "0.5", 0.5), "-0.5"),
          "numbers_by_name": (("", "{a = 1.5}", {"a": 1.5}), "{a = -1}"),
          "run": ((".train.steps", "7", 7), "3")}[kind]


def _at(obj, path: str):
  for key in path.split("."):
    obj = obj[key] if isinstance(obj, dict) else getattr(obj, key)
  return obj


@_EXPERIMENTS
def test_every_experiment_declares_typed_settings(module):
  """FULL and QUICK are instances of the experiment's frozen ``Settings`` and every field fits
  its annotation; what the experiment file records (``as_json``) reads back to the same
  settings; the settings dicts are gone."""
  assert not hasattr(module, "KINDS") and dataclasses.is_dataclass(module.Settings)
  assert module.Settings.__dataclass_params__.frozen
  for s in (module.FULL, module.QUICK):
    assert type(s) is module.Settings
    settings.check_fields(s, module.NAME)
    doc = json.loads(json.dumps(settings.as_json(s)))
    back = settings.from_json(module.Settings, doc, module.NAME)
    assert type(back) is module.Settings and settings.as_json(back) == doc
  assert list(settings.leaves(module.FULL)) == [name for name, _ in _settings_of(module.Settings)]


@_EXPERIMENTS
def test_every_setting_can_be_set_with_a_value_of_its_kind_and_no_other(module):
  """``--set NAME.KEY=VALUE`` for every setting, with a value made from its annotation: a value
  of its kind is stored (and nothing else changes); one of another kind is one line naming
  the setting and what is allowed, before the experiment runs."""
  before = settings.leaves(module.QUICK)
  for name, tp in _settings_of(module.Settings):
    (inside, good, stored), bad = _values(tp)
    got = settings.replace(module.QUICK, [f"{module.NAME}.{name}{inside}={good}"], module.NAME)
    assert _at(got, name + inside) == stored, name
    after = settings.leaves(got)
    assert [k for k in before if before[k] != after[k]] in ([], [name]), name
    item = f"{module.NAME}.{name}={bad}"
    with pytest.raises(ConfigError) as err:
      runner.settings_for(module, quick=True, items=[item])
    text = str(err.value)
    assert f"{module.NAME}.{name} = " in text and "is not allowed" in text \
        and "\n" not in text, (item, text)


@_EXPERIMENTS
def test_an_unknown_setting_is_named_with_the_closest_one(module):
  """A misspelt setting (at any depth of the tables) is one line with the one meant."""
  for name, _ in _settings_of(module.Settings):
    table, _, key = name.rpartition(".")
    item = f"{module.NAME}.{name}x=1"
    with pytest.raises(ConfigError, match=f"{module.NAME}{'.' if table else ''}{table} has no "
                       f"setting '{key}x'. Did you mean '{key}'") as err:
      runner.settings_for(module, quick=True, items=[item])
    assert "\n" not in str(err.value), item


@pytest.mark.parametrize("paper", list(PAPERS))
def test_settings_lists_every_setting_of_every_experiment(paper, tmp_path, capsys, monkeypatch):
  """``reproduce PAPER --settings`` prints one line per setting (nested tables expanded), in
  the order the dataclasses declare them, and writes nothing."""
  monkeypatch.chdir(tmp_path)
  assert cli.main(["reproduce", paper, "--settings"]) == 0
  names = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()]
  assert names == [f"{m.NAME}.{name}" for m in runner.experiment_modules(paper)
                   for name, _ in _settings_of(m.Settings)]
  assert list(tmp_path.iterdir()) == []


def test_a_setting_missing_or_of_the_wrong_kind_in_the_defaults_is_named():
  """A default that does not fit its declared kind is found before anything runs; a recorded
  settings table with a setting missing or unknown is named."""
  theorem2 = next(m for m in runner.experiment_modules("lu2021") if m.NAME == "theorem2")
  with pytest.raises(ConfigError, match="theorem2.loss_at_most = -1 is not allowed: a finite number >= 0"):
    settings.check_fields(dataclasses.replace(theorem2.QUICK, loss_at_most=-1), "theorem2")
  doc = settings.as_json(theorem2.QUICK)
  with pytest.raises(ConfigError, match="theorem2 lacks the settings checkpoints"):
    settings.from_json(theorem2.Settings, {k: v for k, v in doc.items() if k != "checkpoints"},
                       "theorem2")
  with pytest.raises(ConfigError, match="theorem2 has no setting 'segment'"):
    settings.from_json(theorem2.Settings, {**doc, "segment": 3}, "theorem2")


def test_settings_lists_every_setting_with_its_kind_and_writes_nothing(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert cli.main(["reproduce", "lu2021", "--settings", "--only", "theorem2",
                   "--set", "theorem2.loss_at_most=0.5"]) == 0
  lines = capsys.readouterr().out.splitlines()
  theorem2 = next(m for m in runner.experiment_modules("lu2021") if m.NAME == "theorem2")
  assert len(lines) == len(settings.leaves(theorem2.FULL)) == 4
  assert ("theorem2.checkpoints  a list of integers >= 1  quick=[1000, 3000, 5000]  "
          "full=[5000, 20000, 50000]") in lines
  assert "theorem2.loss_at_most  a finite number >= 0  quick=0.5  full=0.5" in lines
  assert list(tmp_path.iterdir()) == []
  assert cli.main(["reproduce", "lu2021", "--quick"]) == 2
  assert "--out DIR is required" in capsys.readouterr().err
