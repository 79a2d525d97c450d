"""Theory quantities and the analysis layer: SEN curve, invariant, deviation metrics,
JSON summaries and figures."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn import analysis
from attndyn import models
from attndyn import tasks
from attndyn.analysis import figures
from attndyn.dynamics import Trajectory


# --- Corollary 1 (eq 10) ------------------------------------------------------------------

M_MAX = 50
INVARIANT = jax.jit(analysis.invariant)


@given(m=st.integers(1, M_MAX),
       scores=st.lists(st.floats(1e-6, 20.0), min_size=6, max_size=6, unique=True))
def test_sen_norm_is_zero_at_zero_and_increasing(m, scores):
  s = np.sort(np.asarray(scores))
  predicted = np.asarray(analysis.sen_norm(jnp.asarray(s), m))
  assert float(analysis.sen_norm(jnp.zeros(()), m)) == 0.0
  assert np.all(predicted > 0)
  assert np.all(np.diff(predicted) > 0)
  # Against Theorem 1 (analysis.invariant, an independent computation, sentence by sentence):
  # a topic word at score s with ‖v‖ = SEN(s), among m non-topic words of score 0 and
  # embedding 0, has the Q of the start (s = 0, v = 0), which is 1/m.
  # Q subtracts terms of size e^s/m, so float64 leaves a few ulps of that size.
  q = INVARIANT(*_words_on_the_sen_curve(s, predicted, m))
  rounding = 32 * np.finfo(np.float64).eps * (s + np.exp(s) / m + 1)
  assert np.all(np.abs(np.asarray(q) - 1.0 / m) <= rounding), (np.asarray(q) - 1.0 / m, rounding)


def _words_on_the_sen_curve(scores, norms, m):
  """``(params, dataset)``: topic word ``t`` (one sentence each, with ``m`` non-topic words of
  embedding 0 and key 0) has score ``scores[t]`` and embedding norm ``norms[t]``; ‖q‖ = 1."""
  n_topic, d = len(scores), 2
  tokens = np.concatenate([np.arange(n_topic)[:, None],
                           n_topic + np.arange(M_MAX)[None, :].repeat(n_topic, 0)], axis=1)
  mask = np.arange(1 + M_MAX)[None, :].repeat(n_topic, 0) <= m     # one shape for every m
  train = tasks.Batch(jnp.asarray(tokens, jnp.int32), jnp.asarray(mask),
                      jnp.zeros(n_topic, jnp.int32))
  data = tasks.TopicDataset(train=train, test=train,
                            train_topic_word=jnp.arange(n_topic, dtype=jnp.int32),
                            word_topic=jnp.zeros(n_topic, jnp.int32))
  direction = np.array([0.6, 0.8])                                # unit, not along the query
  emb = np.zeros((n_topic + M_MAX, d))
  emb[:n_topic] = norms[:, None] * direction
  keys = np.zeros((n_topic + M_MAX, d))
  keys[:n_topic, 0] = scores
  params = {"embeddings": jnp.asarray(emb), "keys": jnp.asarray(keys),
            "query": jnp.array([1.0, 0.0]), "classifier": {}}
  return params, data


# --- Theorem 1 (eq 9) ---------------------------------------------------------------------

def _invariant_by_hand(params, data):
  """Q_t at zero scores from its definition, one sentence at a time."""
  qn = np.linalg.norm(np.asarray(params["query"]))
  emb = np.asarray(params["embeddings"])
  tokens, topic = np.asarray(data.train.tokens), np.asarray(data.train_topic_word)
  q = {}
  for t in np.unique(topic):
    rest = [emb[row[row != t]].mean(axis=0) for row in tokens[topic == t]]   # v̄(χ∖t)/‖q‖
    m = tokens.shape[1] - 1
    q[int(t)] = 1.0 / m - 0.5 * np.sum((qn * emb[t] - qn * np.mean(rest, axis=0)) ** 2)
  return q


@pytest.fixture(scope="module")
def zero_key_invariant(tiny_data):
  task, data = tiny_data
  def init(embed_std):
    cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                               key_dim=2, classifier="tc", embed_std=embed_std, key_std=0.0)
    return models.lu_attention(cfg, jnp.float64).init(jax.random.PRNGKey(5))
  return task, data, init, jax.jit(analysis.invariant)


def test_invariant_at_init_with_zero_keys(zero_key_invariant):
  task, data, init, invariant = zero_key_invariant
  params = init(0.3)
  q = np.asarray(invariant(params, data))
  by_hand = _invariant_by_hand(params, data)
  assert len(by_hand) == task.n_topic_words                # every topic word occurs
  for t, value in by_hand.items():
    np.testing.assert_allclose(q[t], value, rtol=1e-12)
  assert np.all(q < 1.0 / task.n_nontopic)                 # the embeddings are not tiny here
  # With tiny embeddings Q_t(0) ≈ 1/m: Corollary 1's starting point.
  tiny = np.asarray(invariant(init(1e-6), data))
  np.testing.assert_allclose(tiny, 1.0 / task.n_nontopic, atol=1e-10)


def test_invariant_drift_shape_and_value():
  time = np.linspace(0.0, 1.0, 5)
  score = np.broadcast_to((4.0 * time)[None, :, None], (2, 5, 3)).copy()   # s grows 0 → 4
  q = np.ones((2, 5, 3))
  q[1, :, 2] += 0.2 * np.sin(np.pi * time)                  # largest change 0.2, at τ = 0.5
  drift = np.asarray(analysis.invariant_drift(q, score))
  assert drift.shape == (2, 3)
  np.testing.assert_allclose(drift, [[0, 0, 0], [0, 0, 0.05]], atol=1e-15)


def test_max_drift_and_the_drift_before_a_failure():
  """The largest drift over the topic words; a run that failed is judged on its finite records
  only (a run with one finite record has no span), a run that did not fail is left out."""
  from attndyn.analysis.theorem1 import drift_before_failure, max_invariant_drift
  time = np.linspace(0.0, 1.0, 5)
  score = np.broadcast_to((4.0 * time)[None, :, None], (3, 5, 2)).copy()
  q = np.ones((3, 5, 2))
  q[:, :, 1] += 0.4 * time                                  # drift 0.4 / 4 on word 1, all runs
  np.testing.assert_allclose(max_invariant_drift({"invariant": q, "score": score}), [0.1] * 3)
  q[1, 3:], score[1, 3:] = np.nan, np.nan                   # run 1 failed after record 2
  q[2, 1:] = np.nan                                         # run 2 failed after record 0
  t = np.tile(time, (3, 1))
  got = drift_before_failure(q, score, t, np.array([-1, 0.6, 0.1]))
  assert len(got) == 1
  np.testing.assert_allclose(got[0], (0.1, 0.5))            # 0.2 / 2 up to t = 0.5


# --- GD vs ODE deviation --------------------------------------------------------------------

def _traj(score, t=None):
  score = np.asarray(score, dtype=float)
  t = np.broadcast_to(np.arange(score.shape[1], dtype=float), score.shape[:2]) if t is None else t
  return Trajectory(t=t, observables={"score": score, "loss": score.sum(-1)},
                    final_params=None, failed_at=-np.ones(score.shape[0]))


@given(lag=st.floats(-300.0, 300.0), width=st.floats(50.0, 200.0))
def test_rise_lag_and_shifted_deviation_of_a_late_copy(lag, width):
  """A logistic rise (complete within the records) and the same rise ``lag`` steps later: the
  lag is ``lag`` over the 10–90% rise time (``2 ln 9 × width``), and the best shift undoes it
  (max deviation at the records' interpolation error), while the unshifted deviation is of
  order the rise's slope."""
  t = np.arange(0.0, 5001.0, 10.0)
  rise = lambda c: 4.0 / (1.0 + np.exp(-(t - c) / width))
  a = _traj(np.stack([rise(2000.0), rise(2500.0)])[:, :, None] * np.ones(2), np.tile(t, (2, 1)))
  b = _traj(np.stack([rise(2000.0 + lag), rise(2500.0 + lag)])[:, :, None] * np.ones(2),
            np.tile(t, (2, 1)))
  got = analysis.deviation.rise_lag(a, b)
  np.testing.assert_allclose(got, lag / (2 * np.log(9.0) * width), atol=2e-3)
  dev, shift = analysis.deviation.shifted_max_deviation(a, b, max_shift=400.0, n_shifts=801)
  np.testing.assert_allclose(shift, lag, atol=1.0)
  assert np.all(dev <= 4.0 * 1.0 / width + 1e-9), dev
  if abs(lag) > 50:
    assert np.all(analysis.max_abs_deviation(a, b) > 10 * dev)


def test_half_rise_step_of_a_linear_rise_is_its_midpoint():
  t = np.arange(0.0, 11.0)
  a = _traj(np.stack([t, 2 * t, np.minimum(t, 4.0)])[:, :, None])   # rises ending at 10, 10, 4
  np.testing.assert_allclose(analysis.deviation.half_rise_step(a, t), [5.0, 5.0, 2.0])


def test_deviation_metrics():
  rng = np.random.default_rng(0)
  a = _traj(rng.normal(size=(2, 5, 3)))
  for fn in (analysis.max_abs_deviation, analysis.final_abs_deviation):
    assert np.array_equal(fn(a, a), np.zeros(2))
  assert np.array_equal(analysis.deviation_curve(a, a, "score"), np.zeros((2, 5)))
  shifted = np.array(a.observables["score"])
  shifted[1, 2, 1] += 0.5
  shifted[0, 4, 0] -= 0.25
  b = _traj(shifted)
  np.testing.assert_allclose(analysis.max_abs_deviation(a, b), [0.25, 0.5])
  np.testing.assert_allclose(analysis.final_abs_deviation(a, b), [0.25, 0.0])
  curve = analysis.deviation_curve(a, b, "score")
  assert curve.shape == (2, 5)
  np.testing.assert_allclose(curve[1], [0, 0, 0.5, 0, 0])
  np.testing.assert_allclose(analysis.max_abs_deviation(a, b, "loss"), [0.25, 0.5])
  # A failed ODE (NaN) shows as NaN for that run only.
  broken = np.array(shifted)
  broken[0, 3, 2] = np.nan
  assert np.isnan(analysis.max_abs_deviation(a, _traj(broken))[0])
  # A single run (no run axis) works too.
  single = Trajectory(t=a.t[1], observables={"score": a.observables["score"][1]},
                      final_params=None, failed_at=-1.0)
  assert analysis.max_abs_deviation(single, single).shape == ()


def test_deviation_needs_the_same_times():
  a = _traj(np.zeros((2, 5, 3)))
  later = _traj(np.zeros((2, 5, 3)), t=a.t * 2)
  shorter = _traj(np.zeros((2, 4, 3)))
  for fn in (analysis.max_abs_deviation, analysis.final_abs_deviation,
             analysis.deviation_curve):
    with pytest.raises(tasks.ConfigError, match="same times"):
      fn(a, later, "score")
    with pytest.raises(tasks.ConfigError, match="same times"):
      fn(a, shorter, "score")
  with pytest.raises(tasks.ConfigError, match=r"same times \(t\[0, 4\] = 4 and 8\)"):
    analysis.max_abs_deviation(a, later)      # same shapes, other values: name where they part
  with pytest.raises(tasks.ConfigError, match="not recorded"):
    analysis.max_abs_deviation(a, a, "invariant")


# --- JSON summaries -------------------------------------------------------------------------

def _stand_in_ode(gd, failed_run):
  """An 'ODE' on the GD grid: scores off by a known amount, one run failed at step 10."""
  obs = dict(gd.observables)
  obs["score"] = gd.observables["score"] + 1e-3 * np.arange(gd.t.shape[1])[None, :, None]
  failed = -np.ones(gd.t.shape[0])
  failed[failed_run] = 10.0
  return gd._replace(observables=obs, failed_at=failed)


def test_run_summaries_are_strict_json(tiny_run, tiny_data):
  task, _ = tiny_data
  gd = tiny_run.sweep
  lrs = [float(x) for x in tiny_run.points["lr"]]
  points = [{"seed": i, "data_seed": 0, "train.lr": np.float32(lr)} for i, lr in enumerate(lrs)]
  broken = _stand_in_ode(gd, failed_run=2)
  broken.observables["score"][1, 3, 0] = np.nan              # a run whose 'ODE' blew up
  odes = {"reduced": _stand_in_ode(gd, failed_run=1), "flow": broken}
  summaries = analysis.run_summaries(points, gd, odes, m=task.n_nontopic)
  text = json.dumps({"runs": summaries, "aggregate": analysis.aggregate(summaries)},
                    allow_nan=False)
  back = json.loads(text)["runs"]
  assert len(back) == 3
  for i, record in enumerate(back):
    assert record["seed"] == i and record["data_seed"] == 0
    assert record["train.lr"] == pytest.approx(lrs[i], rel=1e-6)
    assert record["final_train_loss"] == pytest.approx(float(gd.observables["loss"][i, -1]))
    assert record["failed_at"] is None
    assert [w["word"] for w in record["topic_words"]] == list(range(task.n_topic_words))
    for w in record["topic_words"]:
      score = float(gd.observables["score"][i, -1, w["word"]])
      assert w["score"] == pytest.approx(score)
      assert w["sen_norm"] == pytest.approx(float(analysis.sen_norm(score, task.n_nontopic)))
    # The stand-in is off by 1e-3 per record: largest (and final) deviation 1e-3 × (T−1).
    expected = 1e-3 * (gd.t.shape[1] - 1)
    assert record["ode_max_abs_score_dev"]["reduced"] == pytest.approx(expected)
    assert record["ode_final_abs_score_dev"]["reduced"] == pytest.approx(expected)
  assert back[1]["ode_max_abs_score_dev"]["flow"] is None     # NaN → null
  assert back[1]["ode_final_abs_score_dev"]["flow"] == pytest.approx(1e-3 * (gd.t.shape[1] - 1))
  assert [r["ode_failed_at"] for r in back] == [
      {"reduced": None, "flow": None}, {"reduced": 10, "flow": None},
      {"reduced": None, "flow": 10}]
  agg = analysis.aggregate(summaries)
  assert agg["n_runs"] == 3 and agg["n_diverged"] == 0 and agg["diverged"] == []
  assert agg["ode_max_abs_score_dev"]["flow"]["n"] == 2
  assert agg["ode_n_failed"] == {"flow": 1, "reduced": 1}
  losses = [float(x) for x in gd.observables["loss"][:, -1]]
  assert agg["final_train_loss"]["max"] == pytest.approx(max(losses))
  assert agg["final_train_loss"]["mean"] == pytest.approx(np.mean(losses))


def test_run_summaries_replace_nan_and_report_failures(tiny_run, tiny_data):
  task, _ = tiny_data
  gd = tiny_run.sweep
  obs = {k: np.array(v) for k, v in gd.observables.items()}
  obs["loss"][0, -1] = np.inf
  obs["score"][0, -1, 1] = np.nan
  bad = gd._replace(observables=obs, failed_at=np.array([15.0, -1.0, -1.0]))
  summaries = analysis.run_summaries([{"seed": i} for i in range(3)], bad, {}, m=task.n_nontopic)
  json.dumps(summaries, allow_nan=False)
  assert summaries[0]["final_train_loss"] is None
  assert summaries[0]["topic_words"][1]["score"] is None
  assert summaries[0]["failed_at"] == 15 and isinstance(summaries[0]["failed_at"], int)
  assert summaries[0]["ode_max_abs_score_dev"] == {}
  agg = analysis.aggregate(summaries)
  json.dumps(agg, allow_nan=False)
  assert agg["n_diverged"] == 1 and agg["diverged"] == [{"run": 0, "failed_at": 15}]
  assert agg["final_train_loss"]["n"] == 2 and summaries[0]["diverged"]
  with pytest.raises(ValueError):
    analysis.run_summaries([{"seed": 0}], bad, {}, m=task.n_nontopic)


# --- Figures --------------------------------------------------------------------------------

def _is_png(path):
  with open(path, "rb") as f:
    head = f.read(8)
  return head == b"\x89PNG\r\n\x1a\n"


def test_each_figure_writes_a_png(tiny_run, tiny_data, tmp_path):
  task, _ = tiny_data
  gd = tiny_run.sweep
  one = jax.tree.map(lambda x: x[:1], gd)                  # P = 1
  unbatched = jax.tree.map(lambda x: x[0], gd)             # no run axis
  ode = _stand_in_ode(gd, failed_run=0)
  paths = [
      figures.sen_figure({"GD": gd, "one run": one}, task.n_nontopic, tmp_path / "sen.png",
                         word=1),
      figures.dynamics_figure({"GD": gd, "reduced ODE": ode, "single": unbatched},
                              tmp_path / "dyn.png", run=0, word=2),
      figures.loss_figure({"GD": gd, "P=1": one}, tmp_path / "sub" / "loss.png"),
      figures.invariant_figure({"GD": gd, "P=1": one}, tmp_path / "inv.png"),
      figures.invariant_figure({"GD": unbatched}, tmp_path / "inv1.png", word=0),
  ]
  for path in paths:
    assert isinstance(path, str)
    assert _is_png(path)
  sizes = [len(open(p, "rb").read()) for p in paths]
  assert min(sizes) > 5000, sizes


def test_loss_figure_of_runs_that_all_diverged_is_written(tiny_run, tmp_path):
  """No finite loss (every run diverged): a PNG that says so, not a log-scale ValueError."""
  gd = tiny_run.sweep
  nan = gd._replace(observables={**gd.observables,
                                 "loss": jnp.full_like(gd.observables["loss"], jnp.nan)})
  assert _is_png(figures.loss_figure({"GD": nan}, tmp_path / "loss.png"))


def test_assumption1_ratios_mean_and_largest_change():
  from attndyn.analysis.assumption1 import change_ratio, largest_change_ratio
  change = np.array([[0.1, -0.3, 0.2], [0.0, 0.0, -0.5]])
  topic = np.array([[2.0, -4.0], [1.0, 1.0]])
  np.testing.assert_allclose(change_ratio(change, topic), [0.2 / 3.0, 0.5 / 3.0])
  np.testing.assert_allclose(largest_change_ratio(change, topic), [0.1, 0.5])


def test_nontopic_pairs_sharing_a_word_with_a_topic_pair():
  """App. A's split of the non-topic pairs: those with a word of some topic pair, by loops."""
  from attndyn.analysis import pairs
  topic_pairs = np.array([[[1, 2], [1, 3]], [[4, 0], [5, 6]]])          # [topics, pairs, 2]
  words = {int(w) for w in topic_pairs.reshape(-1)}
  ordered = {tuple(p) for p in topic_pairs.reshape(-1, 2).tolist()}
  got = np.asarray(pairs.shares_topic_word(topic_pairs, 9)
                   & pairs.nontopic_pair_mask(topic_pairs, 9))
  want = np.array([[(u in words or v in words) and (u, v) not in ordered for v in range(9)]
                   for u in range(9)])
  np.testing.assert_array_equal(got, want)
  assert want.sum() == 9 * 9 - 2 * 2 - len(ordered)           # words 7, 8 only: 4 pairs share none
