"""Checkpoints per chunk: run_sweep skips the chunks given as done, a stage reads back what is in
its store and saves the rest, and a damaged, foreign or unfitting chunk is computed again."""
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


def _entries(root, store, stage, bounds):
  """The files of ``stage``'s chunks in the store ``root``, in chunk order."""
  keys = [store.entry(stage, i, b).key for i, b in enumerate(bounds)]
  return [(root / f"{k}.json", root / f"{k}.npz") for k in keys]


@pytest.mark.parametrize("stage", ["gd", "reduced", "gradient_flow"])
def test_a_stage_resumes_from_its_stored_chunks(stage, tmp_path):
  cfg = _cfg()
  inputs = pipeline.sweep_inputs(cfg)
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=2)
  whole = pipeline._stage(stage, _fn, inputs, cfg, 2, False, None, store)
  root = tmp_path / "checkpoints"
  chunks = _entries(root, store, stage, dynamics.chunk_bounds(5, 2))
  assert sorted(root.iterdir()) == sorted([root / "manifest.json", *(p for c in chunks for p in c)])
  for path in chunks[2]:                     # killed before chunk 2 was written
    path.unlink()
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  resumed.check(cfg.to_dict(), every=1)
  again = pipeline._stage(stage, _fn, inputs, cfg, resumed.chunk_size, False, None, resumed)
  assert (resumed.loaded, resumed.computed) == ({stage: 2}, {stage: 1})
  for a, b in zip(*(np.asarray(x) for x in (whole.final_params["w"], again.final_params["w"]))):
    assert a.tobytes() == b.tobytes()
  np.testing.assert_array_equal(again.observables["b"]["c"], whole.observables["b"]["c"])


def _recomputed(tmp_path, cfg, whole):
  """Resume the gd stage of ``tmp_path``: the chunks it computed again, and its outputs equal
  ``whole``'s."""
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  again = pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, resumed)
  np.testing.assert_array_equal(again.observables["a"], whole.observables["a"])
  return resumed.computed.get("gd", 0)


def test_chunks_of_other_bounds_or_outputs_are_not_read_but_computed_again(tmp_path, capsys,
                                                                          monkeypatch):
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  whole = pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  one = {"seed": jnp.zeros((1,), jnp.uint32)}
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  like = lambda: jax.eval_shape(jax.vmap(_fn), one)
  assert resumed.completed("gd", dynamics.chunk_bounds(5, 3), like) == []    # other keys
  assert len(resumed.completed("gd", dynamics.chunk_bounds(5, 2), like)) == 3
  capsys.readouterr()
  # another code (the chunks' structure was recorded by this one), whose outputs differ
  monkeypatch.setattr(checkpoint, "_code_stamp", lambda: "another code")
  other = jax.vmap(lambda inp: {"x": _fn(inp), "y": inp["seed"]})
  assert resumed.completed("gd", dynamics.chunk_bounds(5, 2),
                           lambda: jax.eval_shape(other, one)) == []
  err = capsys.readouterr().err
  assert "checkpoint gd chunk 0 (" in err and "does not fit this run (its arrays are" in err
  assert "it and the chunks after it are computed again" in err
  assert _recomputed(tmp_path, cfg, whole) == 0


def test_chunks_this_code_wrote_are_read_back_without_tracing_the_stage(tmp_path,
                                                                        monkeypatch):
  # The structure the writer recorded (the same code and run give the same one) stands in for
  # `like`, which traces the stage's whole program; another code's chunks still call it.
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  whole = pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  calls = []
  like = lambda: calls.append(1) or jax.eval_shape(jax.vmap(_fn),
                                                   {"seed": jnp.zeros((1,), jnp.uint32)})
  resumed = checkpoint.Checkpoints.resume(tmp_path)
  done = resumed.completed("gd", dynamics.chunk_bounds(5, 2), like)
  assert len(done) == 3 and calls == []
  again = jax.tree.map(lambda *xs: np.concatenate(xs), *done)
  assert jax.tree.structure(again) == jax.tree.structure(whole)
  for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(whole)):
    assert a.dtype == b.dtype and a.tobytes() == np.asarray(b).tobytes()
  monkeypatch.setattr(checkpoint, "_code_stamp", lambda: "another code")
  assert len(resumed.completed("gd", dynamics.chunk_bounds(5, 2), like)) == 3 and calls == [1]


@pytest.mark.parametrize("doc", [
    {"namedtuple": "collections:OrderedDict", "of": []},            # outside attndyn
    {"namedtuple": "attndyn.dynamics.trajectory:Trajectory", "of": [0]},   # fields differ
    {"namedtuple": "attndyn.checkpoint:Checkpoints", "of": []},     # not a NamedTuple
    {"dict": ["a", "a"], "of": [0, 0]}, {"dict": ["a"], "of": []}, {"set": [0]}, True, "x",
])
def test_a_recorded_structure_names_only_attndyn_namedtuples_or_is_not_used(doc):
  with pytest.raises((ValueError, KeyError, TypeError)):
    checkpoint._skeleton(doc)


def test_every_stage_output_structure_is_recorded_and_rebuilt():
  # dicts, None, NamedTuples within NamedTuples (an ODE's stats), lists and tuples
  tree = dynamics.Trajectory(t=np.zeros(3), observables={"b": [np.zeros(1), (np.zeros(2),)],
                                                         "a": np.zeros(1)},
                             final_params={"U": np.zeros(2)}, failed_at=np.zeros(()),
                             params=None,
                             ode=dynamics.ODEStats(*[np.zeros(1)] * len(dynamics.ODEStats._fields)))
  doc = checkpoint._tree_json(jax.tree.structure(tree))
  assert jax.tree.structure(checkpoint._skeleton(doc)) == jax.tree.structure(tree)
  assert checkpoint._tree_json(jax.tree.structure({1: np.zeros(1)})) is None   # a key not a str


@pytest.mark.parametrize("name, damage, message", [
    ("t", lambda t: t * 2, r"its times t are not this run's recorded steps 0, 5, \.\.\., 10"),
    ("failed_at", lambda f: f - 7, r"its failed_at holds \[-8\.0, -8\.0\]; -1 \(no failure\) or a "
                                   r"step in 0\.\.10 is expected"),
])
def test_a_stored_chunk_with_other_times_is_computed_again(tmp_path, capsys, name, damage,
                                                           message):
  """Right shapes, wrong values (an entry another attndyn wrote under this run's key): named on
  reading the chunk, which is computed again with every chunk after it."""
  import re
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  whole = pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  job = store.entry("gd", 0, (0, 2))
  got = store.store.get(job)
  got["arrays"][name] = damage(got["arrays"][name])
  store.store.put(job, got)
  assert _recomputed(tmp_path, cfg, whole) == 3
  assert re.search(r"chunk 0 \(.*\) does not fit this run \(" + message, capsys.readouterr().err)


@pytest.mark.parametrize("damage", ["truncated", "edited", "another entry's"])
def test_a_damaged_or_foreign_chunk_is_computed_again(damage, tmp_path, capsys):
  """A chunk's file cut short by hand, edited, or holding another chunk's entry: the store's
  digest and key refuse it; that chunk and the ones after it are computed again, and the
  result is the uninterrupted one."""
  cfg = _cfg()
  store = checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  whole = pipeline._stage("gd", _fn, pipeline.sweep_inputs(cfg), cfg, 2, False, None, store)
  chunks = _entries(tmp_path / "checkpoints", store, "gd", dynamics.chunk_bounds(5, 2))
  doc, arrays = chunks[1]
  if damage == "truncated":
    arrays.write_bytes(arrays.read_bytes()[:200])
  elif damage == "edited":
    data = bytearray(arrays.read_bytes())
    data[-100] ^= 1
    arrays.write_bytes(bytes(data))
  else:
    for mine, other in zip(chunks[1], chunks[2]):
      mine.write_bytes(other.read_bytes())
  assert _recomputed(tmp_path, cfg, whole) == 2
  err = capsys.readouterr().err
  assert f"{doc} does not verify" in err, err
  assert "job gd-chunk-00001 is computed again" in err


def test_a_resumed_run_on_another_machine_kind_is_refused(tmp_path):
  cfg = _cfg()
  checkpoint.Checkpoints.create(tmp_path, cfg.to_dict(), 2, every=1)
  store = checkpoint.Checkpoints.resume(tmp_path)
  store.manifest["device_count"] = 64
  with pytest.raises(ConfigError, match="device_count = 64, this process has 1"):
    store.check(cfg.to_dict(), every=1)
