"""dynamics.strategy: how a sweep is computed, decided in one place; pipeline.run follows it."""
import jax
import numpy as np
import pytest

from attndyn import config, dynamics, models, overrides, pipeline, presets
from attndyn.dynamics import strategy


class _Accelerator:
  platform = "gpu"


def _model(**kw):
  return models.LuModelConfig(n_words=30, n_classes=2, **kw)


def _train(**kw):
  return dynamics.TrainConfig(**{"lr": 0.1, "steps": 40, "record_every": 10, **kw})


def test_softmax_fixed_query_runs_on_the_fast_path_and_solves_the_reduced_ode_per_chunk():
  plan = strategy.plan(_model(classifier="tc"), _train(),
                       ode_kinds=("reduced", "gradient_flow"), chunk_size=4)
  assert plan.gd.path == "fast" and "fixed query" in plan.gd.reason and not plan.gd.serial
  assert plan.gd.compiler_options is dynamics.fast_lu.COMPILER_OPTIONS
  assert list(plan.odes) == ["reduced", "gradient_flow"]
  assert (plan.odes["reduced"].path, plan.odes["reduced"].serial) == ("sweep", False)
  assert plan.odes["reduced"].compiler_options is dynamics.reduced_ode.LINEAR_COMPILER_OPTIONS
  assert (plan.odes["gradient_flow"].path, plan.odes["gradient_flow"].serial) == ("point", False)
  assert plan.odes["gradient_flow"].compiler_options is dynamics.ode.LINEAR_COMPILER_OPTIONS
  assert (plan.lrs_together, plan.chunk_size) == (False, 4)


@pytest.mark.parametrize("model, train, kw, why", [
    (dict(normaliser="entmax15"), {}, {}, "normaliser is 'entmax15'"),
    ({}, dict(optimizer="adam"), {}, "not plain gradient descent"),
    ({}, {}, dict(loss_fn=lambda params, batch: (0.0, None)), "a custom loss"),
    ({}, {}, dict(n_datasets=2), "several data seeds"),
    (dict(train_query=True), {}, dict(grid=(("model.key_std", (0.0, 0.1)),)),
     "at sweep.grid['model.key_std'] = 0.1"),
    ({}, {}, dict(gd_path="generic"), "gd_path = generic"),
])
def test_gd_goes_by_autodiff_where_the_fast_path_does_not_apply(model, train, kw, why):
  """Another normaliser, optimiser or loss, per-seed data, a trained query whose swept keys
  leave zero, or ``gd_path = "generic"``: autodiff, one point after another on CPU devices
  and vmapped on an accelerator, with XLA's default options."""
  on_cpu = strategy.plan(_model(**model), _train(**train), devices=jax.devices("cpu"), **kw).gd
  assert (on_cpu.path, on_cpu.serial, on_cpu.compiler_options) == ("generic", True, None)
  assert why in on_cpu.reason, on_cpu.reason
  assert not strategy.gd_stage(_model(**model), _train(**train), devices=[_Accelerator()],
                               **kw).serial


def test_a_trained_query_from_zero_keys_and_a_lu_loss_stay_on_the_fast_path():
  grid = (("model.key_std", (0.0,)), ("train.lr", (0.1, 0.2)))
  gd = strategy.gd_stage(_model(train_query=True), _train(), grid=grid,
                         loss_fn=models.make_loss(models.lu.apply))
  assert gd.path == "fast" and "trained query from zero keys" in gd.reason
  off = strategy.plan(_model(), _train(), gd=False).gd
  assert (off.path, off.reason) == ("none", "gd = False")


def test_tl_solves_each_point_on_its_own_and_several_datasets_each_point_too():
  tl = strategy.plan(_model(classifier="tl"), _train(), ode_kinds=("reduced", "gradient_flow"))
  assert tl.gd.path == "fast"
  assert [(o.path, o.serial) for o in tl.odes.values()] == [("point", True), ("point", True)]
  assert tl.odes["reduced"].compiler_options is dynamics.reduced_ode.COMPILER_OPTIONS
  assert tl.odes["gradient_flow"].compiler_options is None          # TL: XLA's defaults
  fc = strategy.plan(_model(classifier="fc"), _train(), ode_kinds=("extended",), n_datasets=3)
  assert (fc.odes["extended"].path, fc.odes["extended"].serial) == ("point", False)


def test_wide_calls_solve_the_reduced_ode_point_by_point():
  """From SHARED_SOLVE_MAX_POINTS points per call of the ODE stage, FC/TC's reduced ODE is
  vmapped per point; the call's points are the chunk's, and without their lr when the
  learning rates are solved together."""
  wide = strategy.SHARED_SOLVE_MAX_POINTS
  path = lambda **kw: strategy.plan(_model(classifier="tc"), _train(**kw.pop("train", {})),
                                    ode_kinds=("reduced", "extended"), **kw).odes
  for ode in path(n_points=wide).values():
    assert (ode.path, ode.serial) == ("point", False) and f"{wide} points per call" in ode.reason
    assert ode.compiler_options is dynamics.reduced_ode.LINEAR_COMPILER_OPTIONS
  assert path(n_points=wide - 1)["reduced"].path == "sweep"
  assert path(n_points=10 * wide, chunk_size=wide - 1)["reduced"].path == "sweep"
  lrs = (("train.lr", (0.5, 1.0)),)
  # 2·wide points over two learning rates solved together: wide points per ODE call
  assert path(n_points=2 * wide, grid=lrs, train=dict(flow_time=20.0))["reduced"].path == "point"
  assert path(n_points=2 * wide - 2, grid=lrs,
              train=dict(flow_time=20.0))["reduced"].path == "sweep"
  assert path(n_points=2 * wide - 2, grid=lrs)["reduced"].path == "point"   # not together
  # TL is solved point after point at any width
  tl = strategy.plan(_model(classifier="tl"), _train(), ode_kinds=("reduced",), n_points=wide)
  assert (tl.odes["reduced"].path, tl.odes["reduced"].serial) == ("point", True)


def test_learning_rates_are_solved_together_only_when_every_run_ends_at_one_flow_time():
  lrs = (("train.lr", (0.5, 1.0)),)
  assert strategy.lrs_together(_train(flow_time=20.0), lrs)
  assert not strategy.lrs_together(_train(), lrs)                            # no flow time
  assert not strategy.lrs_together(_train(flow_time=20.0), (("train.lr", (1.0,)),))
  # flow time 15: lr 0.5 runs 30 steps, lr 1 rounds 15 up to 20 (record_every 10): 15 ≠ 20.
  assert not strategy.lrs_together(_train(flow_time=15.0), lrs)


def test_points_per_call_is_the_asked_size_else_what_fits_a_device():
  devices = jax.devices("cpu")
  budget, n_dev = strategy.device_budget(devices), len(devices)
  assert strategy.points_per_call(10**9, 10**12, devices, configured=7) == 7
  assert strategy.points_per_call(50, budget // 60, devices) is None            # all fit
  chunk = strategy.points_per_call(10**6, budget // 3, devices)
  assert chunk == 3 * n_dev and chunk * (budget // 3) <= n_dev * budget
  assert strategy.points_per_call(10**6, 10 * budget, devices) == n_dev         # one per device


_TINY = ["precision=float64", "task.vocab_size=30", "task.n_nontopic=3", "task.n_train=24",
         "task.n_test=8", "train.steps=20", "train.record_every=10", "sweep.seeds=2",
         "model.classifier=tc", "model.embed_std=0.1", "ode.kind=reduced", "ode.rtol=1e-10",
         "ode.atol=1e-12"]


def test_pipeline_run_does_what_the_plan_says_and_every_plan_computes_the_same(monkeypatch):
  """pipeline.run decides nothing: handed a plan with the other choice at every stage
  (autodiff vmapped instead of the fast path, the reduced ODE point by point instead of one
  solve), it runs and records that plan; GD agrees to float64 rounding, the ODE to its
  tolerance."""
  cfg = config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), _TINY))
  planned = pipeline.plan(cfg)
  assert (planned.gd.path, planned.odes["reduced"].path) == ("fast", "sweep")
  default = pipeline.run(cfg, progress=False)
  other = planned._replace(
      gd=strategy.StagePlan("generic", "the test's choice", serial=False),
      odes={"reduced": planned.odes["reduced"]._replace(path="point", serial=True)})
  monkeypatch.setattr(pipeline, "plan", lambda *args: other)
  swapped = pipeline.run(cfg, progress=False)
  assert default.gd_path["path"] == "fast"
  assert swapped.gd_path == {"path": "generic", "reason": "the test's choice"}
  for a, b, rtol in [(default.gd, swapped.gd, 1e-9),
                     (default.odes["reduced"], swapped.odes["reduced"], 1e-7)]:
    for x, y in zip(jax.tree.leaves((a.observables, a.final_params)),
                    jax.tree.leaves((b.observables, b.final_params))):
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-12)
  assert np.abs(np.asarray(default.gd.observables["score"])[:, -1]).max() > 1e-3   # it moved
