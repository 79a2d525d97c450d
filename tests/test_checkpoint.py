"""Checkpoints per chunk: run_sweep skips the chunks given as done, a stage reads back what is on
disk and saves the rest, and a damaged or foreign chunk file is refused."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn import checkpoint, config, overrides, pipeline, presets
from attndyn.tasks.errors import ConfigError


def _fn(inp):
  """A cheap stand-in for a stage: a Trajectory-shaped output of one sweep point."""
  x = inp["seed"].astype(jnp.float32)
  return dynamics.Trajectory(t=jnp.arange(3.0) * 5, observables={"a": x * jnp.arange(3.0),
                                                                 "b": {"c": jnp.sin(x)}},
                             final_params={"w": jnp.full((2,), x)},
                             failed_at=jnp.where(x > 3, 5.0, -1.0))  # _cfg() records 0, 5, 10


def _cfg(*sets):
  base = ["sweep.seeds=5", "ode.kind=none", "train.steps=10", "train.record_every=5"]
  return config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), base + list(sets)))


def test_run_sweep_with_done_chunks_runs_only_the_rest_and_matches():
  xs = {"seed": np.arange(5, dtype=np.uint32)}
  whole = dynamics.run_sweep(_fn, xs, chunk_size=2)
  assert dynamics.chunk_bounds(5, 2) == [(0, 2), (2, 4), (4, 5)]
  first = dynamics.run_sweep(_fn, {"seed": xs["seed"][:2]}, chunk_size=2)
  seen = []
  again = dynamics.run_sweep(_fn, xs, chunk_size=2, done=[first],
                             on_chunk=lambda done, total, out: seen.append(done))
  assert seen == [4, 5]
  for a, b in zip(np.asarray(whole.observables["a"]), np.asarray(again.observables["a"])):
    assert a.tobytes() == b.tobytes()
  with pytest.raises(ValueError, match="done chunk 0"):
    dynamics.run_sweep(_fn, xs, chunk_size=3, done=[first])


@pytest.mark.parametrize("stage", ["gd", "reduced", "gradient_flow"])
def test_a_stage_resumes_from_its_chunk_files(stage, tmp_path):
  cfg = _cfg()
  inputs = pipeline.sweep_inputs(cfg)
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=2)
  whole = pipeline._stage(stage, _fn, inputs, cfg, 2, False, None, store)
  files = sorted(p.name for p in (tmp_path / "checkpoints" / stage).iterdir())
  assert files == ["chunk_00000.npz", "chunk_00001.npz", "chunk_00002.npz"]
  (tmp_path / "checkpoints" / stage / "chunk_00002.npz").unlink()     # killed before chunk 2
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  resumed.check(cfg.to_dict(), every=1)
  again = pipeline._stage(stage, _fn, inputs, cfg, resumed.chunk_size, False, None, resumed)
  assert (resumed.loaded, resumed.computed) == ({stage: 2}, {stage: 1})
  for a, b in zip(*(np.asarray(x) for x in (whole.final_params["w"], again.final_params["w"]))):
    assert a.tobytes() == b.tobytes()
  np.testing.assert_array_equal(again.observables["b"]["c"], whole.observables["b"]["c"])


def test_a_chunk_file_that_does_not_fit_the_run_is_refused(tmp_path):
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  one = {"seed": jnp.zeros((1,), jnp.uint32)}
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  with pytest.raises(ConfigError, match=r"chunk_00000.npz' does not match this run \(it holds "
                                        r"sweep points \[0, 2\], expected \[0, 3\]\)"):
    resumed.completed("gd", dynamics.chunk_bounds(5, 3), lambda: jax.eval_shape(
        jax.vmap(_fn), one))
  other = jax.vmap(lambda inp: {"x": _fn(inp), "y": inp["seed"]})
  with pytest.raises(ConfigError, match="its arrays are"):
    resumed.completed("gd", dynamics.chunk_bounds(5, 2), lambda: jax.eval_shape(other, one))


@pytest.mark.parametrize("name, damage, message", [
    ("t", lambda t: t * 2, r"its times t are not this run's recorded steps 0, 5, \.\.\., 10"),
    ("failed_at", lambda f: f - 7, r"its failed_at holds \[-8\.0, -8\.0\]; -1 \(no failure\) or a "
                                   r"step in 0\.\.10 is expected"),
])
def test_a_chunk_file_with_damaged_times_is_refused_before_anything_runs(tmp_path, name, damage,
                                                                        message):
  """Right shapes, wrong values: named on reading the chunk (it used to surface only after every
  stage, as GD and the ODE "not recorded at the same times")."""
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  path = tmp_path / "checkpoints" / "gd" / "chunk_00000.npz"
  arrays = dict(np.load(path))
  arrays[name] = damage(arrays[name])
  np.savez(path, **arrays)
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  with pytest.raises(ConfigError, match=r"chunk_00000.npz' does not match this run \(" + message):
    pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, resumed)
  assert resumed.computed == {}


def test_a_resumed_run_on_another_machine_kind_is_refused(tmp_path):
  cfg = _cfg()
  checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  store = checkpoint.Checkpoints.resume(tmp_path)
  store.manifest["device_count"] = 64
  with pytest.raises(ConfigError, match="device_count = 64, this process has 1"):
    store.check(cfg.to_dict(), every=1)
