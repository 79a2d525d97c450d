"""The pipeline's choice of how a stage maps over the sweep does not change its trajectories."""
import jax
import numpy as np

from attndyn import config, overrides, pipeline, presets


def test_tl_gradient_flow_point_by_point_equals_the_vmapped_solves():
  """TL's gradient flow runs one point after another (each with its own solver steps); the
  trajectories are those of the plain vmapped per-point solves."""
  sets = ["precision=float64", "model.classifier=tl", "task.vocab_size=30", "task.n_nontopic=3",
          "task.n_train=24", "task.n_test=8", "train.steps=40", "train.record_every=10",
          "sweep.seeds=3", "ode.kind=gradient_flow", "ode.dtmin=0.1", "model.embed_std=0.1"]
  cfg = config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))
  with pipeline.precision_scope(cfg.precision):
    result = pipeline.run(cfg, progress=False)
    dataset = jax.jit(pipeline.tasks.make_topic_dataset, static_argnums=1)(
        jax.random.PRNGKey(cfg.sweep.data_seeds[0]), cfg.task)
    vmapped = jax.jit(jax.vmap(pipeline.flow_fn(cfg, pipeline._point_setup(cfg, dataset))))(
        pipeline.sweep_inputs(cfg))
  flow = result.odes["gradient_flow"]
  assert flow.observables["score"].shape[0] == 3 and not result.errors
  np.testing.assert_array_equal(np.asarray(flow.failed_at), -1)
  for a, b in zip(jax.tree.leaves(flow.observables), jax.tree.leaves(vmapped.observables)):
    # A rounding difference between the two programs can flip a step's acceptance, so the two
    # agree to the solver's tolerances (ode.rtol 1e-6, atol 1e-9), not to rounding.
    np.testing.assert_allclose(a, b, rtol=cfg.ode.rtol, atol=cfg.ode.atol)
  assert np.ptp(np.asarray(flow.observables["score"])[:, -1]) > 1e-3   # the seeds differ
