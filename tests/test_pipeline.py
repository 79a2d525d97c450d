"""How the pipeline maps a stage over the sweep: TL's ODEs point by point."""
import jax
import numpy as np
import pytest

from attndyn import config, overrides, pipeline, presets

_TINY = ["precision=float64", "task.vocab_size=30", "task.n_nontopic=3", "task.n_train=24",
         "task.n_test=8", "train.steps=40", "train.record_every=10", "sweep.seeds=3",
         "ode.kind=both", "ode.dtmin=0.1", "model.embed_std=0.1"]


def _cfg(classifier):
  sets = _TINY + [f"model.classifier={classifier}"]
  return config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))


@pytest.mark.parametrize("classifier, one_by_one", [("tl", True), ("tc", False)])
def test_only_tl_odes_run_point_by_point(monkeypatch, classifier, one_by_one):
  """TL's reduced ODE and gradient flow map the chunk themselves (``lax.map``: each point its
  own solver steps); TC's flow is vmapped by ``run_sweep`` and its reduced ODE solves the
  chunk's points together (batched too, but one solve)."""
  stages, mapped = {}, []

  def record(label, fn, inputs, cfg, *args, batched=False, **kwargs):
    stages[label] = batched
    return "trajectory"

  monkeypatch.setattr(pipeline, "_stage", record)
  monkeypatch.setattr(pipeline, "_one_after_another",
                      lambda fn: mapped.append(fn) or (lambda inputs: None))
  pipeline.run(_cfg(classifier), progress=False)
  assert stages["gradient_flow"] is one_by_one
  assert stages["reduced"] is True
  assert len(mapped) == (2 if one_by_one else 0)


def test_point_by_point_is_each_points_own_output_in_order():
  """``_one_after_another(fn)`` maps a chunk as ``vmap(fn)`` does, point by point, in order
  (the flow itself: ``tests/test_ode.py::test_gradient_flow_vmap_over_seeds_equals_separate_solves``)."""
  def fn(inp):
    steps = jax.lax.while_loop(lambda c: c[0] < inp["n"], lambda c: (c[0] + 1, c[1] * 0.5),
                               (0, inp["x"]))       # a per-point number of loop steps
    return {"y": steps[1], "n": steps[0]}

  inputs = {"n": np.array([3, 0, 7]), "x": np.array([1.0, 2.0, 3.0])}
  one_by_one = jax.jit(pipeline._one_after_another(fn))(inputs)
  np.testing.assert_array_equal(one_by_one["n"], [3, 0, 7])
  np.testing.assert_allclose(one_by_one["y"], [1 / 8, 2.0, 3 / 128], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(one_by_one), jax.tree.leaves(jax.vmap(fn)(inputs))):
    np.testing.assert_array_equal(a, b)


def _flow_cfg(lrs, steps, flow_time=None, ode="reduced", gd_path="auto"):
  sets = ["precision=float64", "task.n_topics=2", "task.words_per_topic=1",
          "task.vocab_size=30", "task.n_nontopic=4", "task.n_train=24", "task.n_test=8",
          "model.classifier=tc", "model.embed_dim=4", "model.key_dim=4",
          "model.embed_std=0.01", f"train.steps={steps}", "train.record_every=5",
          "sweep.seeds=2", f"sweep.grid={{\"train.lr\" = {list(lrs)}}}", f"ode.kind={ode}",
          f"gd_path={gd_path}"]
  if flow_time is not None:
    sets.append(f"train.flow_time={flow_time}")
  return config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))


def test_a_flow_time_sweep_stops_each_lr_at_the_same_flow_time():
  """``train.flow_time``: the run of lr 1 in a sweep over lr 0.5 and 1 is the run of lr 1
  alone for flow_time / lr = 20 steps, on the fast path and the generic one (GD to float64
  rounding) and along the reduced ODE (to its tolerance: one solve in flow time serves both
  lr), then stays put up to ``steps``; the run of lr 0.5 takes every step. Both ODEs read
  as lr 0.5 off that one solve equal their solves of lr 0.5 alone, and every run ends with
  the parameters its solve alone ends with (lr 1 and lr 0.5 stop at the same flow time)."""
  alone = pipeline.run(_flow_cfg([1.0], 20), progress=False)
  half = pipeline.run(_flow_cfg([0.5], 40, ode="both"), progress=False, gd=False)
  assert pipeline.plan(_flow_cfg([0.5, 1.0], 40, flow_time=20.0)).lrs_together
  fast = pipeline.run(_flow_cfg([0.5, 1.0], 40, flow_time=20.0, ode="both"), progress=False)
  generic = pipeline.run(_flow_cfg([0.5, 1.0], 40, flow_time=20.0, ode="none",
                                   gd_path="generic"), progress=False)
  assert (fast.gd_path["path"], generic.gd_path["path"]) == ("fast", "generic")
  short = [i for i, p in enumerate(fast.points) if p["train.lr"] == 1.0]
  full = [i for i, p in enumerate(fast.points) if p["train.lr"] == 0.5]
  assert generic.points == fast.points and len(short) == len(full) == 2
  k = 20 // 5 + 1
  for name, a, b, rtol in [("fast", fast.gd, alone.gd, 1e-12),
                           ("generic", generic.gd, alone.gd, 1e-9),
                           ("reduced", fast.odes["reduced"], alone.odes["reduced"], 1e-5)]:
    for x, y in zip(jax.tree.leaves(a.observables), jax.tree.leaves(b.observables)):
      x = np.asarray(x)
      np.testing.assert_allclose(x[short, :k], np.asarray(y), rtol=rtol, atol=1e-12,
                                 err_msg=name)
      np.testing.assert_array_equal(x[short, k:], np.repeat(x[short, k - 1:k], x.shape[1] - k, 1))
    scores = np.asarray(a.observables["score"])
    assert np.all(np.abs(scores[full, -1] - scores[full, k - 1]) > 1e-6), name   # lr 0.5 goes on
  for x, y in zip(jax.tree.leaves(fast.gd.final_params), jax.tree.leaves(alone.gd.final_params)):
    np.testing.assert_allclose(np.asarray(x)[short], y, rtol=1e-12, atol=1e-15)
  # Each ODE is solved once for both lr, in flow time. Read as lr 0.5 it is the solve of lr
  # 0.5 alone; both lr end at flow time 20, so every run ends with that solve's parameters.
  for kind, ode in fast.odes.items():
    for x, y in zip(jax.tree.leaves(ode.observables), jax.tree.leaves(half.odes[kind].observables)):
      np.testing.assert_allclose(np.asarray(x)[full], np.asarray(y), rtol=1e-5, atol=1e-12,
                                 err_msg=kind)
    for x, y in zip(jax.tree.leaves(ode.final_params),
                    jax.tree.leaves(half.odes[kind].final_params)):
      for rows in (full, short):
        np.testing.assert_allclose(np.asarray(x)[rows], y, rtol=1e-5, atol=1e-12, err_msg=kind)
    np.testing.assert_array_equal(ode.failed_at, -1)
    np.testing.assert_array_equal(ode.t, np.broadcast_to(np.arange(0, 41, 5.0), ode.t.shape))
  for x, y in zip(jax.tree.leaves(fast.odes["reduced"].final_params),
                  jax.tree.leaves(alone.odes["reduced"].final_params)):
    np.testing.assert_allclose(np.asarray(x)[short], y, rtol=1e-5, atol=1e-12)


def test_flow_time_needs_the_steps_of_the_smallest_lr():
  with pytest.raises(config.ConfigError, match=r"train.steps = 30 .*at least 40 = train.flow_time / lr = 20 / 0.5"):
    _flow_cfg([0.5, 1.0], 30, flow_time=20.0)
  with pytest.raises(config.ConfigError, match=r"train.flow_time = -1.0 .*a finite number > 0"):
    _flow_cfg([1.0], 30, flow_time=-1.0)
