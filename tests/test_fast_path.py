"""The fast path (dynamics.fast_lu) is an exact reformulation of autodiff GD.

Each comparison trains the same initial parameters on the same data with
``dynamics.make_train`` (plain autodiff) and ``dynamics.make_fast_train`` long
enough for the topic-word scores to reach O(1) (≈ 3), then compares every
recorded observable and the final parameters.

Tolerances: in float64 the two paths agree to 1e-9 (exact algebra; only the
summation order differs). In float32 they round differently at every step
(different summation orders, ``ν·G`` read from the updated ``ν``), and the
rounding of ~1e-7 per step accumulates over 400 steps; observed differences
are ≤ 5e-6 on scores ≈ 3, so float32 uses ``rtol = atol = 3e-5``: 250× float32's
epsilon, far below the O(1) gap a wrong gradient term would leave.
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.dynamics import fast_lu

TASK = tasks.TopicTaskConfig(n_topics=3, words_per_topic=2, vocab_size=60, n_nontopic=5,
                             n_train=90, n_test=20)
TOL = {jnp.float32: dict(rtol=3e-5, atol=3e-5), jnp.float64: dict(rtol=1e-9, atol=1e-9)}


@pytest.fixture(scope="module")
def data():
  return jax.jit(tasks.make_topic_dataset, static_argnums=1)(jax.random.PRNGKey(0), TASK)


def _model_cfg(classifier="tc", **kw):
  return models.LuModelConfig(n_words=TASK.n_words, n_classes=TASK.n_topics, embed_dim=6,
                              key_dim=5, classifier=classifier, hidden_dim=4, embed_std=0.3,
                              **kw)


def _record(apply_fn, data):
  def record(params, params0):
    out = apply_fn(params, data.train)
    return {"loss": models.cross_entropy(out.logits, data.train.labels),
            "score": models.lu.word_scores(params)[:TASK.n_topic_words],
            "emb_norm": jnp.linalg.norm(params["embeddings"][:TASK.n_topic_words], axis=-1)}
  return record


def _trainers(data, model_cfg, dtype, *, steps=400, record_every=50, batch=None, **fast_kw):
  """Jitted ``run(params0, keys, lr [S])`` of autodiff and of the fast path, and the model."""
  batch = data.train if batch is None else batch
  model = models.lu_attention(model_cfg, dtype)
  record = _record(model.apply, data._replace(train=batch))
  cfg = dynamics.TrainConfig(lr=0.5, steps=steps, record_every=record_every)
  trainable = model_cfg.trainable()
  loss = models.make_loss(model.apply)
  generic = dynamics.make_train(loss, batch, record, cfg, trainable)
  fast = dynamics.make_fast_train(loss, batch, record, cfg, trainable, model_cfg=model_cfg,
                                  **fast_kw)
  return jax.jit(jax.vmap(generic)), jax.jit(jax.vmap(fast)), fast, model


def _seeds(model, n_seeds=3):
  keys = jax.random.split(jax.random.PRNGKey(1), n_seeds)
  return jax.vmap(model.init)(keys), keys


def _assert_close(a, b, tol):
  jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(y), np.asarray(x), **tol), a, b)


def _assert_agree(generic, fast, tol):
  _assert_close(generic.observables, fast.observables, tol)
  _assert_close(generic.final_params, fast.final_params, tol)
  np.testing.assert_array_equal(fast.t, generic.t)
  np.testing.assert_array_equal(fast.failed_at, generic.failed_at)


@pytest.fixture(scope="module")
def tc32(data):
  """TC in float32, both paths compiled once for the tests below; the fast path
  advances seeds in tiles of 2 (``lax.map``), so 3 seeds exercise a padded tile."""
  return _trainers(data, _model_cfg("tc"), jnp.float32, seed_tile=2)


@pytest.mark.parametrize("classifier", ["fc", "tc", "tl"])
def test_matches_autodiff_float32(data, tc32, classifier):
  run_generic, run_fast, _, model = (tc32 if classifier == "tc" else
                                     _trainers(data, _model_cfg(classifier), jnp.float32))
  params0, keys = _seeds(model)
  lr = jnp.full((3,), 0.5, jnp.float32)
  generic, fast = run_generic(params0, keys, lr), run_fast(params0, keys, lr)
  assert float(jnp.max(jnp.abs(generic.observables["score"]))) > 1.0  # scores reached O(1)
  assert fast.observables["score"].dtype == jnp.float32
  _assert_agree(generic, fast, TOL[jnp.float32])


def _padded(data):
  """Half the sentences lose their last two words (masked; padding id 0, a topic word)."""
  rng = np.random.default_rng(0)
  mask = np.ones(data.train.mask.shape, bool)
  mask[rng.random(mask.shape[0]) < 0.5, -2:] = False
  tokens = np.where(mask, np.asarray(data.train.tokens), 0)
  return data.train._replace(tokens=jnp.asarray(tokens), mask=jnp.asarray(mask))


@pytest.mark.parametrize("classifier,freeze,padded,project", [
    ("tc", ("keys",), False, False), ("tc", (), True, True),
    ("tl", ("embeddings",), True, True), ("tl", ("embeddings",), False, False),
    ("tl", (), False, False),
    ("fc", (), True, True), ("fc", ("keys",), False, True), ("fc-code", (), False, True),
    ("tl", ("classifier",), False, True),
    ("tc+query", (), True, True), ("fc+query", (), False, True), ("tl+query", (), False, False),
    ("tc+query", ("keys",), False, False)])
def test_matches_autodiff_float64_exactly(data, classifier, freeze, padded, project):
  """In float64 the reformulation is exact up to summation order: frozen groups (KF, EF),
  masked positions (variable-length sentences), both forms of the forward pass
  (gathering ``Wᵀx``, with ``∂L/∂W`` over words, or ``x``), the state in a frozen first
  layer's coordinates (FC's fixed ``U``, orthonormal or the authors' ``fc-code`` init with
  ``UᵀU ≠ I``; a frozen TL classifier) and a trainable query (``+query``: keys start at
  zero, so GD only scales the query) included."""
  batch = _padded(data) if padded else None
  if padded:
    assert fast_lu.plan_words(batch.tokens, batch.mask).dummy
  kw = dict(freeze=freeze)
  if classifier == "fc-code":
    classifier, kw["fc_init"] = "fc", "randn_unit_diag"
  if classifier.endswith("+query"):
    classifier, kw["train_query"] = classifier[:-len("+query")], True
  run_generic, run_fast, _, model = _trainers(data, _model_cfg(classifier, **kw),
                                              jnp.float64, steps=200, batch=batch,
                                              project=project)
  params0, keys = _seeds(model)
  lr = jnp.full((3,), 0.5)
  generic, fast = run_generic(params0, keys, lr), run_fast(params0, keys, lr)
  _assert_agree(generic, fast, TOL[jnp.float64])
  for group in freeze:
    _assert_close(params0[group], fast.final_params[group], dict(rtol=0, atol=0))
  if kw.get("train_query") and "keys" not in freeze:   # the query moved: not a fixed-query run
    moved = jnp.linalg.norm(fast.final_params["query"] - params0["query"], axis=-1)
    assert float(jnp.min(moved / jnp.linalg.norm(params0["query"], axis=-1))) > 0.01


def test_batched_equals_one_seed_at_a_time(data, tc32):
  """The vmap rule (all seeds at once, in tiles) gives each seed its own trajectory."""
  _, run_fast, fast, model = tc32
  params0, keys = _seeds(model)
  lrs = jnp.array([0.5, 0.4, 0.3], jnp.float32)
  batched = run_fast(params0, keys, lrs)
  single = jax.jit(fast)(jax.tree.map(lambda x: x[2], params0), keys[2], lrs[2])
  _assert_close(single.observables, jax.tree.map(lambda x: x[2], batched.observables),
                dict(rtol=1e-6, atol=1e-7))
  # dynamics.run_sweep in chunks of 2 (the last chunk padded) runs the same seeds.
  chunked = dynamics.run_sweep(lambda p: fast(model.init(p["key"]), p["key"], lr=p["lr"]),
                               {"key": keys, "lr": lrs}, chunk_size=2)
  _assert_close(batched.observables, chunked.observables, dict(rtol=1e-6, atol=1e-7))
  assert chunked.observables["score"].shape == (3, 9, TASK.n_topic_words)


def test_failed_runs_are_flagged_and_frozen(data, tc32):
  """A diverging run is flagged and frozen, never reported as finite garbage.

  The fast path may stop first: once scores spread by more than ~87 its
  factored softmax underflows (module docstring) while autodiff goes on.
  """
  run_generic, run_fast, _, model = tc32
  params0, keys = _seeds(model)
  lr = jnp.array([1e9, 0.5, 1e9], jnp.float32)
  generic, fast = run_generic(params0, keys, lr), run_fast(params0, keys, lr)
  diverged = np.array([True, False, True])
  assert np.all((np.asarray(generic.failed_at) >= 0) == diverged)
  assert np.all((np.asarray(fast.failed_at) >= 0) == diverged)
  assert np.all(np.asarray(fast.failed_at) <= np.asarray(generic.failed_at) + 1e9 * ~diverged)
  assert np.all(np.isfinite(np.asarray(fast.observables["score"])))
  _assert_close(jax.tree.map(lambda x: x[1], generic.observables),
                jax.tree.map(lambda x: x[1], fast.observables), TOL[jnp.float32])


def test_fast_path_applies_says_why_not(data):
  gd = dynamics.TrainConfig()
  check = dynamics.fast_path_applies(_model_cfg("tc"), gd, batch=data.train)
  assert check and check.applies and "fixed query" in check.reason
  cases = {
      "query": (_model_cfg("tc", train_query=True, key_std=0.1), gd),
      "adam": (_model_cfg("tc"), dynamics.TrainConfig(optimizer="adam")),
      "minibatch": (_model_cfg("tc"), dynamics.TrainConfig(optimizer="sgd", batch_size=10)),
  }
  for word, (model_cfg, train_cfg) in cases.items():
    check = dynamics.fast_path_applies(model_cfg, train_cfg, batch=data.train)
    assert not check and word in check.reason, (word, check)
  verdict = []                                   # a traced dataset: not shared by the seeds

  def probe(tokens):
    verdict.append(dynamics.fast_path_applies(_model_cfg("tc"), gd,
                                              batch=data.train._replace(tokens=tokens)))
    return tokens

  jax.eval_shape(probe, data.train.tokens)
  assert not verdict[0] and "traced" in verdict[0].reason
  with pytest.raises(Exception, match="query"):
    dynamics.make_fast_train(models.make_loss(models.lu.apply), data.train, lambda p, p0: {},
                             gd, {"query": True},
                             model_cfg=_model_cfg("tc", train_query=True, key_std=0.1))
  # Keys that start at zero stay on a trained query's line: it applies, and says so.
  check = dynamics.fast_path_applies(_model_cfg("tc", train_query=True), gd, batch=data.train)
  assert check and "trained query" in check.reason
  # Called with nonzero keys anyway (concrete parameters), the trainer refuses them.
  model_cfg = _model_cfg("tc", train_query=True)
  train = dynamics.make_fast_sweep_train(model_cfg, data.train, lambda p, p0: {}, gd)
  params0 = jax.vmap(models.lu_attention(model_cfg).init)(jax.random.split(
      jax.random.PRNGKey(0), 2))
  with pytest.raises(Exception, match="key_std = 0"):
    train(dict(params0, keys=params0["keys"] + 0.1))


def test_custom_loss_is_refused_and_auto_trains_it_generically(data):
  """A loss the fast path does not compute (scores / √d′) is refused, never trained as the
  vanilla model: ``make_auto_train`` falls back to autodiff, whose trajectory differs."""
  model_cfg = _model_cfg("tc")
  model = models.lu_attention(model_cfg)
  scaled = lambda p, b: models.lu.apply(dict(p, query=p["query"] / np.sqrt(model_cfg.key_dim)), b)
  custom, vanilla = models.make_loss(scaled), models.make_loss(model.apply)
  cfg = dynamics.TrainConfig(lr=0.5, steps=40, record_every=20)
  record = lambda p, p0: {"score": models.lu.word_scores(p)[:TASK.n_topic_words]}
  trainable = model_cfg.trainable()
  wrapped = lambda p, b: vanilla(p, b)          # equal to the vanilla loss, but unprovably so
  for loss_fn in (custom, wrapped, None):
    verdict = dynamics.fast_path_applies(model_cfg, cfg, batch=data.train, loss_fn=loss_fn)
    assert not verdict and "custom loss" in verdict.reason, verdict
    with pytest.raises(ValueError, match="custom loss"):
      dynamics.make_fast_train(loss_fn, data.train, record, cfg, trainable, model_cfg=model_cfg)
  assert dynamics.fast_path_applies(model_cfg, cfg, batch=data.train, loss_fn=vanilla)
  auto = dynamics.make_auto_train(custom, data.train, record, cfg, trainable, model_cfg=model_cfg)
  plain = dynamics.make_auto_train(vanilla, data.train, record, cfg, trainable,
                                   model_cfg=model_cfg)
  assert (auto.path, plain.path) == ("generic", "fast") and "custom loss" in auto.reason
  params0 = model.init(jax.random.PRNGKey(1))
  got, ref = (jax.jit(c.train)(params0, jax.random.PRNGKey(0)) for c in (auto, plain))
  # Scaling the query by 1/√d′ slows the recorded scores qᵀκ by about 1/√d′: trained
  # as the vanilla model, these scores would agree to float rounding.
  got, ref = np.asarray(got.observables["score"][-1]), np.asarray(ref.observables["score"][-1])
  assert np.abs(ref).max() > 0.05 and not np.allclose(got, ref, rtol=0.2), (got, ref)


@given(n=st.integers(1, 40), width=st.integers(1, 6), vocab=st.integers(1, 30),
       seed=st.integers(0, 2**16), heavy=st.integers(0, 8))
def test_plan_reproduces_the_count_matrix(n, width, vocab, seed, heavy):
  """Law: the plan's sentence lists and word buckets are the count matrix C and its transpose."""
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, vocab, (n, width))
  mask = rng.random((n, width)) < 0.8
  mask[:, 0] = True
  plan = fast_lu.plan_words(tokens, mask, heavy_count=heavy)
  rows = len(plan.words) + 1                                     # state rows + the dummy
  row_of = {int(w): i for i, w in enumerate(plan.words)}
  counts = np.zeros((n, rows))                                   # C over state rows
  for i, l in zip(*np.nonzero(mask)):
    counts[i, row_of[int(tokens[i, l])]] += 1
  forward = np.zeros((n, rows))
  np.add.at(forward, (np.arange(n)[:, None].repeat(plan.row_tokens.shape[1], 1),
                      plan.row_tokens), 1)
  np.testing.assert_array_equal(forward[:, :-1], counts[:, :-1])
  backward = np.zeros((rows, n + 1))
  backward[:plan.n_heavy, :n] = plan.heavy_counts
  for start, occ in plan.buckets:
    np.add.at(backward, (np.arange(start, start + len(occ))[:, None].repeat(occ.shape[1], 1),
                         occ), 1)
  np.testing.assert_array_equal(backward[:-1, :n], counts[:, :-1].T)
  assert np.all(np.diff(counts[:, :-1].sum(0)) <= 0)            # rows by decreasing count


@given(n=st.integers(1, 200), parts=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_sum_rows_is_a_sum(n, parts, seed):
  """Law: the unrolled two- and three-level row sums equal ``sum(axis=0)``."""
  x = np.random.default_rng(seed).normal(size=(n, 3, 2))
  x_fn = lambda a, b: jnp.asarray(x[a:b])
  for got in (fast_lu.xla_cpu._sum_rows(x_fn, n), fast_lu.xla_cpu._sum_many_rows(x_fn, n, parts)):
    np.testing.assert_allclose(np.asarray(got), x.sum(0), rtol=1e-12, atol=1e-12)


def test_projected_forward_when_it_gathers_fewer_channels(data):
  """The cost model: gather ``Wᵀx`` (K + 1 channels) for a frozen classifier with K < d,
  never when K > d; the default test model (K = 3, d = 6) gathers ``Wᵀx``."""
  plan = fast_lu.plan_words(data.train.tokens, data.train.mask)
  frozen = dict(_model_cfg("fc").trainable(), classifier=False)
  layout = lambda d, k: fast_lu.step._Layout(plan.n, d, k, TASK.n_topics, "tc")
  assert fast_lu.projected_forward_pays(plan, layout(6, 3), frozen)
  assert not fast_lu.projected_forward_pays(plan, layout(6, 9), frozen)
  assert not fast_lu.projected_forward_pays(plan, layout(6, 9), _model_cfg("tc").trainable())
  assert fast_lu.projected_forward_pays(plan, layout(6, 3), _model_cfg("tc").trainable())


def _l2(loss_fn, weight=0.05):
  """``loss_fn`` plus ``weight · ‖embeddings‖²``: a loss the fast path does not compute."""
  def loss(p, b):
    value, aux = loss_fn(p, b)
    return value + weight * jnp.sum(p["embeddings"] ** 2), aux
  return loss


class _L2Loss(models.LuCrossEntropy):
  """A subclass of the Lu cross-entropy that adds an L2 term: another loss."""

  def __call__(self, params, batch):
    return _l2(super().__call__)(params, batch)


def _wrapped_losses():
  """The L2 loss dressed as the Lu cross-entropy three ways; each carries (or inherits)
  ``apply_fn = models.lu.apply``, which the attribute-based choice read as proof."""
  base = models.make_loss(models.lu.apply)

  @functools.wraps(base)
  def wrapped(p, b):
    return _l2(base)(p, b)

  def with_weight(p, b, weight):
    return _l2(base, weight)(p, b)

  partial = functools.update_wrapper(functools.partial(with_weight, weight=0.05), base)
  return {"functools.wraps": wrapped, "functools.partial": partial,
          "subclass": _L2Loss(models.lu.apply)}


@pytest.mark.parametrize("form", ["functools.wraps", "functools.partial", "subclass"])
def test_a_loss_dressed_as_the_lu_cross_entropy_trains_generically(data, form):
  """The fast path is chosen by type: a ``functools.wraps`` wrapper, a ``functools.partial``
  (with ``update_wrapper``) and a subclass of ``models.LuCrossEntropy`` all carry
  ``apply_fn = models.lu.apply``, all add an L2 term, and all train on autodiff with the L2
  term in (float64: equal to ``make_train`` of the same loss to 1e-12), where the Lu
  cross-entropy alone ends elsewhere."""
  loss = _wrapped_losses()[form]
  assert getattr(loss, "apply_fn", None) is models.lu.apply
  model_cfg = _model_cfg("tc")
  cfg = dynamics.TrainConfig(lr=0.5, steps=40, record_every=20)
  record = lambda p, p0: {"score": models.lu.word_scores(p)[:TASK.n_topic_words]}
  trainable = model_cfg.trainable()
  choice = dynamics.make_auto_train(loss, data.train, record, cfg, trainable, model_cfg=model_cfg)
  assert choice.path == "generic" and "custom loss" in choice.reason, choice.reason
  assert not dynamics.fast_path_applies(model_cfg, cfg, batch=data.train, loss_fn=loss)
  with pytest.raises(ValueError, match="custom loss"):
    dynamics.make_fast_train(loss, data.train, record, cfg, trainable, model_cfg=model_cfg)
  params0 = models.lu.init(jax.random.PRNGKey(1), model_cfg, jnp.float64)
  key = jax.random.PRNGKey(0)
  got = jax.jit(choice.train)(params0, key)
  ref = jax.jit(dynamics.make_train(loss, data.train, record, cfg, trainable))(params0, key)
  plain = dynamics.make_auto_train(models.make_loss(models.lu.apply), data.train, record, cfg,
                                   trainable, model_cfg=model_cfg)
  assert plain.path == "fast"
  ce = jax.jit(plain.train)(params0, key)
  _assert_close(ref.final_params, got.final_params, dict(rtol=1e-12, atol=1e-12))
  gap = np.abs(np.asarray(ce.final_params["embeddings"]) - np.asarray(got.final_params["embeddings"]))
  assert gap.max() > 1e-3, gap.max()        # the L2 term moves the trajectory


def test_auto_train_checks_the_fast_step_against_autodiff(data, monkeypatch):
  """``make_auto_train`` trusts the fast path only after one of its steps equals autodiff's
  (float64, relative 1e-9): a fast step with a learning rate 0.1% off is caught, and the
  trainer falls back to autodiff with the gap in its reason."""
  from attndyn.dynamics import auto_train
  model_cfg = _model_cfg("tc")
  cfg = dynamics.TrainConfig(lr=0.5, steps=20, record_every=10)
  loss = models.make_loss(models.lu.apply)
  record = lambda p, p0: {}
  choice = dynamics.make_auto_train(loss, data.train, record, cfg, model_cfg.trainable(),
                                    model_cfg=model_cfg)
  assert choice.path == "fast" and "first step equals autodiff" in choice.reason
  real = auto_train.make_fast_sweep_train

  def off_by_a_little(model_cfg, batch, record, cfg, *args, **kw):
    return real(model_cfg, batch, record, dataclasses.replace(cfg, lr=cfg.lr * 1.001), *args, **kw)

  monkeypatch.setattr(auto_train, "make_fast_sweep_train", off_by_a_little)
  choice = dynamics.make_auto_train(loss, data.train, record, cfg, model_cfg.trainable(),
                                    model_cfg=model_cfg)
  assert choice.path == "generic" and "first step differs from autodiff" in choice.reason, \
      choice.reason


def test_auto_train_of_another_model_with_the_lu_config_is_generic(data):
  """A custom model whose parameters are not the Lu model's (a learned temperature beside
  them), handed ``model_cfg``, trains generically: the loss's type decides before anything
  is built from the Lu parameters, and a nested ``trainable`` fits its parameters."""
  model_cfg = _model_cfg("tc")
  apply = lambda p, b: models.lu.apply(dict(p["lu"], query=p["lu"]["query"] / p["t"]), b)
  loss = models.make_loss(apply)
  cfg = dynamics.TrainConfig(lr=0.5, steps=4, record_every=2)
  trainable = {"lu": model_cfg.trainable(), "t": True}
  choice = dynamics.make_auto_train(loss, data.train, lambda p, p0: {"t": p["t"]}, cfg,
                                    trainable, model_cfg=model_cfg)
  assert choice.path == "generic" and "custom loss" in choice.reason
  params0 = {"lu": models.lu.init(jax.random.PRNGKey(1), model_cfg, jnp.float64),
             "t": jnp.ones(())}
  traj = choice.train(params0, jax.random.PRNGKey(0))
  assert float(traj.observables["t"][-1]) != 1.0


class _Device:
  """A stand-in for a jax Device: its platform and what memory_stats reports."""

  def __init__(self, platform, stats):
    self.platform, self._stats = platform, stats

  def memory_stats(self):
    if isinstance(self._stats, Exception):
      raise self._stats
    return self._stats


def test_default_seed_tile_is_cache_sized_on_cpu_and_memory_sized_on_an_accelerator():
  from attndyn.dynamics.fast_lu import SEED_TILE, default_seed_tile
  from attndyn.dynamics.fast_lu.train import ACCELERATOR_SEED_TILE as most, MEMORY_SHARE
  assert default_seed_tile(4096, 10**6, _Device("cpu", {"bytes_limit": 10**12})) == SEED_TILE
  gpu = lambda limit: _Device("gpu", {"bytes_limit": limit})
  # room for every seed: one tile up to the cap, then equal tiles of at most the cap
  assert default_seed_tile(most - 3, 10**6, gpu(10**12)) == most - 3
  assert default_seed_tile(16 * most, 10**6, gpu(10**12)) == most
  assert default_seed_tile(most + 2, 10**6, gpu(10**12)) == most // 2 + 1
  # room for fewer: as many as MEMORY_SHARE of the memory holds, at least one
  room = int(MEMORY_SHARE * 4 * 10**8 // 10**6)
  assert room < most and default_seed_tile(4 * room, 10**6, gpu(4 * 10**8)) == room
  assert default_seed_tile(4096, 10**9, gpu(10**8)) == 1
  # a device that reports no limit (or fails to): the cap alone
  assert default_seed_tile(300, 10**6, _Device("tpu", {})) == 300
  assert default_seed_tile(300, 10**6, _Device("gpu", RuntimeError("no stats"))) == 300
  for n in (1, 7, most, 3 * most + 1, 10**5):     # tiles cover every seed, padding < tiles
    tile = default_seed_tile(n, 10**6, gpu(10**12))
    tiles = -(-n // tile)
    assert tile <= most and 0 <= tiles * tile - n < tiles


# ---------------------------------------------------------------------------- sparsemax


@pytest.mark.parametrize("classifier,freeze,padded", [
    ("tc", (), True), ("fc", ("keys",), False), ("tl", ("embeddings",), False), ("tl", (), True),
    ("tc", ("classifier",), False)])
def test_sparsemax_matches_autodiff_float64_exactly(data, classifier, freeze, padded):
  """Sparsemax attention on the fast path (dynamics.fast_lu.sparse) is the same GD as autodiff
  through models.normalisers.sparsemax: every observable and the final parameters in float64,
  with supports that change along the run (keys start off zero, so the scores spread) and
  masked positions."""
  batch = _padded(data) if padded else data.train
  model_cfg = _model_cfg(classifier, normaliser="sparsemax", key_std=1.0, freeze=freeze)
  model = models.lu_attention(model_cfg, jnp.float64)
  record = _record(model.apply, data._replace(train=batch))
  cfg = dynamics.TrainConfig(lr=0.5, steps=200, record_every=50)
  generic = dynamics.make_train(models.make_loss(model.apply), batch, record, cfg,
                                model_cfg.trainable())
  fast = dynamics.make_fast_sweep_train(model_cfg, batch, record, cfg)
  params0, keys = _seeds(model)
  lr = jnp.full((3,), 0.5)
  want, got = jax.jit(jax.vmap(generic))(params0, keys, lr), jax.jit(fast)(params0, lr)
  _assert_agree(want, got, TOL[jnp.float64])
  weights = [model.apply(jax.tree.map(lambda x: x[0], p), batch).attention
             for p in (params0, got.final_params)]
  zero = [float(jnp.mean((w == 0) & batch.mask) / jnp.mean(batch.mask)) for w in weights]
  assert 0.2 < min(zero) and max(zero) < 0.95, zero            # sparse, never one-hot only
  if "keys" not in freeze:   # the scores moved, and with them the supports
    support = [(w > 0) & batch.mask for w in weights]
    assert bool(jnp.any(support[0] != support[1]))
    assert float(jnp.max(jnp.abs(got.observables["score"][:, -1]
                                 - got.observables["score"][:, 0]))) > 0.5


@given(st.integers(1, 12), st.integers(1, 5), st.integers(0, 2**31 - 1), st.booleans())
def test_michelot_threshold_equals_the_models(length, rows, seed, dyadic):
  """The fast path's sparsemax threshold (Michelot's iteration, leading axis) equals the model's
  (ranks) up to the order of one sum, with the same support: ties and rows without a real
  entry included."""
  rng = np.random.default_rng(seed)
  scores = (rng.integers(-8, 9, (rows, length)) / 4.0 if dyadic
            else rng.normal(0.0, rng.choice([0.01, 1.0, 10.0]), (rows, length)))
  mask = rng.random((rows, length)) < 0.8
  want, _ = models.normalisers.sparsemax_threshold(jnp.asarray(scores), jnp.asarray(mask))
  got = fast_lu.sparse.sparsemax_threshold_leading(jnp.asarray(scores.T), jnp.asarray(mask.T))
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-14, atol=1e-15)
  support = lambda tau: mask & (scores > np.asarray(tau)[:, None])
  np.testing.assert_array_equal(support(got), support(want))


def test_sparsemax_fast_path_applies_with_a_fixed_query_and_its_own_loss(data):
  gd = dynamics.TrainConfig()
  check = dynamics.fast_path_applies(_model_cfg("tc", normaliser="sparsemax"), gd, batch=data.train)
  assert check and "sparsemax attention" in check.reason
  for model_cfg, word in ((_model_cfg("tc", normaliser="sparsemax", train_query=True), "query"),
                          (_model_cfg("tc", normaliser="entmax15"), "entmax15")):
    check = dynamics.fast_path_applies(model_cfg, gd, batch=data.train)
    assert not check and word in check.reason, check
  # The softmax model's loss with a sparsemax config is another loss: refused, not trained.
  sparse_cfg = _model_cfg("tc", normaliser="sparsemax")
  check = dynamics.fast_path_applies(sparse_cfg, gd, batch=data.train,
                                     loss_fn=models.make_loss(models.lu.apply))
  assert not check and "softmax attention" in check.reason
  with pytest.raises(ValueError, match="softmax attention"):
    dynamics.make_fast_train(models.make_loss(models.lu.apply), data.train, lambda p, p0: {},
                             gd, sparse_cfg.trainable(), model_cfg=sparse_cfg)
  # Its own loss (models.lu.apply_for's partial) is accepted: make_auto_train checks one fast
  # step against autodiff and trains on the fast path, as autodiff would.
  model = models.lu_attention(sparse_cfg, jnp.float64)
  own = models.make_loss(model.apply)
  assert dynamics.fast_path_applies(sparse_cfg, gd, batch=data.train, loss_fn=own)
  cfg = dynamics.TrainConfig(lr=0.5, steps=40, record_every=20)
  record = _record(model.apply, data)
  auto = dynamics.make_auto_train(own, data.train, record, cfg, sparse_cfg.trainable(),
                                  model_cfg=sparse_cfg)
  assert auto.path == "fast", auto.reason
  params0 = model.init(jax.random.PRNGKey(1))
  plain = dynamics.make_train(own, data.train, record, cfg, sparse_cfg.trainable())
  _assert_agree(jax.jit(plain)(params0, jax.random.PRNGKey(0)),
                jax.jit(auto.train)(params0, jax.random.PRNGKey(0)), TOL[jnp.float64])
  # Another normaliser's loss with this config is refused whatever the path could do.
  other = models.make_loss(models.lu.apply_for(_model_cfg("tc", normaliser="entmax15")))
  check = dynamics.fast_path_applies(sparse_cfg, gd, batch=data.train, loss_fn=other)
  assert not check and "entmax15 attention" in check.reason


def test_occurrences_list_every_position_of_every_row(data):
  """Each state row's occurrences (dynamics.fast_lu.sparse) are exactly the flat positions of
  ``row_tokens`` holding it, padded with the zero row ``n L``."""
  plan = fast_lu.plan_words(_padded(data).tokens, _padded(data).mask)
  flat = plan.row_tokens.reshape(-1)
  seen = np.zeros(flat.size, int)
  for start, occ in fast_lu.sparse.plan_occurrences(plan).buckets:
    for k, row in enumerate(occ):
      real = row[row < flat.size]
      assert np.all(flat[real] == start + k) and np.all(row[len(real):] == flat.size)
      seen[real] += 1
  assert np.array_equal(seen, (flat < len(plan.words)).astype(int))


def test_sparsemax_failed_runs_are_flagged_and_frozen(data):
  """A diverging sparsemax run is flagged and frozen on the fast path, as by autodiff; the
  others are untouched by it (float32)."""
  model_cfg = _model_cfg("tc", normaliser="sparsemax", key_std=1.0)
  model = models.lu_attention(model_cfg)
  record = _record(model.apply, data)
  cfg = dynamics.TrainConfig(lr=0.5, steps=60, record_every=20)
  generic = dynamics.make_train(models.make_loss(model.apply), data.train, record, cfg,
                                model_cfg.trainable())
  fast = dynamics.make_fast_sweep_train(model_cfg, data.train, record, cfg)
  params0, keys = _seeds(model)
  lr = jnp.array([1e30, 0.5, 1e30], jnp.float32)
  want, got = jax.jit(jax.vmap(generic))(params0, keys, lr), jax.jit(fast)(params0, lr)
  diverged = np.array([True, False, True])
  assert np.all((np.asarray(want.failed_at) >= 0) == diverged)
  assert np.all((np.asarray(got.failed_at) >= 0) == diverged)
  assert np.all(np.isfinite(np.asarray(got.observables["score"])))
  _assert_close(jax.tree.map(lambda x: x[1], want.observables),
                jax.tree.map(lambda x: x[1], got.observables), TOL[jnp.float32])
