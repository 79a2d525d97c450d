"""How the pipeline maps a stage over the sweep: TL's gradient flow point by point."""
import jax
import numpy as np
import pytest

from attndyn import config, overrides, pipeline, presets

_TINY = ["precision=float64", "task.vocab_size=30", "task.n_nontopic=3", "task.n_train=24",
         "task.n_test=8", "train.steps=40", "train.record_every=10", "sweep.seeds=3",
         "ode.kind=gradient_flow", "ode.dtmin=0.1", "model.embed_std=0.1"]


def _cfg(classifier):
  sets = _TINY + [f"model.classifier={classifier}"]
  return config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))


@pytest.mark.parametrize("classifier, one_by_one", [("tl", True), ("tc", False)])
def test_only_tl_gradient_flow_runs_point_by_point(monkeypatch, classifier, one_by_one):
  """TL's flow maps the chunk itself (``lax.map``: each point its own solver steps); the
  others are vmapped by ``run_sweep``."""
  stages = {}

  def record(label, fn, inputs, cfg, *args, batched=False, **kwargs):
    stages[label] = batched
    return "trajectory"

  monkeypatch.setattr(pipeline, "_stage", record)
  pipeline.run(_cfg(classifier), progress=False)
  assert stages["gradient_flow"] is one_by_one


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
