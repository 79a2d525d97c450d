"""`attndyn reproduce` on the one engine: the synthetic section's runs are `attndyn run` configs,
checkpointed under DIR/runs, judged against the ODEs, and `--resume` finishes a killed
reproduction with the same claims as an uninterrupted one."""
import json

import jax
import numpy as np
import pytest

from attndyn import analysis
from attndyn import cli
from attndyn.reproduce import engine, report, runner

# Attn-TC on a tiny topic task, GD with Lemma 2's ODE beside it, and Theorem 1's float64 check.
TINY = ["--only", "synthetic",
        "--set", "synthetic.classifiers=['tc']",
        "--set", "synthetic.odes.tc=reduced",
        "--set", "synthetic.invariant.seeds.tc=2",
        "--set", "synthetic.run.task.vocab_size=40", "--set", "synthetic.run.task.n_train=32",
        "--set", "synthetic.run.task.n_test=16", "--set", "synthetic.run.task.n_nontopic=5",
        "--set", "synthetic.run.train.steps=60", "--set", "synthetic.run.train.record_every=20",
        "--set", "synthetic.run.sweep.seeds=2", "--set", "synthetic.run.sweep.chunk_size=1",
        "--set", "synthetic.run_figures=false"]


def _claims(out):
  doc = json.loads((out / report.JSON).read_text())
  return {row["id"]: (row["status"], row["ours"]["values"]) for row in doc["claims"]}


def test_synthetic_runs_on_the_engine_judges_the_odes_and_resumes(tmp_path, capsys):
  out = tmp_path / "rep"
  args = ["reproduce", "lu2021", "--out", str(out), "--quick", "--quiet"] + TINY
  assert cli.main(args) == 0, capsys.readouterr()
  first = _claims(out)
  # The ODE rows carry values: GD against Lemma 2's ODE from the same init, Corollary 1 along
  # the ODE, Theorem 1's invariant along the float64 ODE (conserved to solver precision).
  for row in ("synthetic.tc.reduced.max_score_dev", "synthetic.tc.reduced.corollary1",
              "synthetic.tc.theorem1.ode", "synthetic.tc.theorem1.gd"):
    assert len(first[row][1]) == 2, row
  assert max(first["synthetic.tc.theorem1.ode"][1]) < 1e-6
  assert first["synthetic.tc.gradient_flow.max_score_dev"][1] == []   # not asked for
  # Each run is an `attndyn run` directory that analysis.load reads.
  run = analysis.load(out / engine.RUNS_DIR / "synthetic-tc")
  assert run.config["model"]["classifier"] == "tc" and sorted(run.stages) == ["gd", "reduced"]
  # Killed midway through the reduced-ODE stage, before the experiment was written: --resume
  # reads back the chunks left behind, computes only the missing one, and gives the same
  # claims and values as the uninterrupted run.
  store = out / engine.RUNS_DIR / "synthetic-tc" / "checkpoints"
  (last,) = [p for p in store.glob("*.json") if p.name != "manifest.json"
             and json.loads(p.read_text())["name"] == "reduced-chunk-00001"]
  last.unlink()
  last.with_suffix(".npz").unlink()
  (out / runner.EXPERIMENTS_DIR / "synthetic.json").unlink()
  for stored in (out / runner.STORE).iterdir():   # the job had not finished: not in the store
    stored.unlink()
  (out / report.JSON).unlink()
  capsys.readouterr()
  assert cli.main(["reproduce", "lu2021", "--out", str(out), "--quick"] + TINY + ["--resume"]) == 0
  assert "synthetic-tc: 2 runs, 60 steps, ODEs: reduced (continuing from its checkpoints)" in \
      capsys.readouterr().err
  info = json.loads((out / engine.RUNS_DIR / "synthetic-tc" / "run_info.json").read_text())
  assert info["chunks"]["loaded"] == {"gd": 2, "reduced": 1}, info["chunks"]
  assert info["chunks"]["computed"] == {"reduced": 1}, info["chunks"]
  assert _claims(out) == first
  # A finished experiment with the same settings is kept as it is.
  before = (out / runner.EXPERIMENTS_DIR / "synthetic.json").read_text()
  capsys.readouterr()
  assert cli.main(["reproduce", "lu2021", "--out", str(out), "--quick"] + TINY + ["--resume"]) == 0
  assert "finished before, kept" in capsys.readouterr().err
  assert (out / runner.EXPERIMENTS_DIR / "synthetic.json").read_text() == before


@pytest.mark.parametrize("item, message", [
    ("synthetic.run.train.steps=70", "synthetic run of tc: train.steps = 70"),
    ("synthetic.run.model.embed_dim=0", "model.embed_dim = 0"),
    ("synthetic.run.train.lrr=0.1", 'unknown key "train.lrr" in [train]. did you mean "lr"?'),
    ("synthetic.classifiers=['tq']",
     "synthetic.classifiers = ['tq'] is not allowed: a list drawn from 'fc', 'tc', 'tl'"),
])
def test_a_bad_run_setting_is_one_line_from_the_run_schema_before_anything_runs(
    tmp_path, capsys, item, message):
  out = tmp_path / "x"
  code = cli.main(["reproduce", "lu2021", "--out", str(out), "--quick", "--only", "synthetic",
                   "--set", "synthetic.classifiers=['tc']", "--set", item])
  err = capsys.readouterr().err
  assert code == 2 and message.lower() in err.lower() and err.count("\n") == 1, err
  assert not (out / engine.RUNS_DIR).exists()


def test_resume_needs_a_reproduction_to_continue(tmp_path, capsys):
  (tmp_path / "empty").mkdir()
  code = cli.main(["reproduce", "lu2021", "--out", str(tmp_path / "empty"), "--quick", "--resume"])
  assert code == 2 and "holds no reproduction to continue" in capsys.readouterr().err


def test_deep_update_changes_only_what_it_names():
  base = {"train": {"lr": 0.1, "steps": 5000}, "sweep": {"seeds": 5}}
  out = engine.deep_update(base, {"train": {"steps": 60}})
  assert out == {"train": {"lr": 0.1, "steps": 60}, "sweep": {"seeds": 5}}
  assert base["train"]["steps"] == 5000


def test_the_engine_trains_any_normaliser(tiny_data):
  """`attndyn run` with sparsemax: GD with sparsemax attention (on the fast path's sparsemax
  step, never its softmax one), equal to a plain make_train of the sparsemax model."""
  import jax
  from attndyn import dynamics
  from attndyn import models
  from attndyn import config, pipeline, presets
  task_cfg, data = tiny_data
  raw = engine.deep_update(presets.preset("quick"), {
      "precision": "float64", "model": {"normaliser": "sparsemax", "embed_std": 0.3},
      "task": {k: getattr(task_cfg, k) for k in
               ("n_topics", "words_per_topic", "vocab_size", "n_nontopic", "n_train", "n_test")},
      "train": {"steps": 20, "record_every": 10}, "sweep": {"seeds": 1},
      "ode": {"kind": "none"}})
  cfg = config.RunConfig.from_dict(raw)
  with pipeline.precision_scope("float64"):
    result = pipeline.run(cfg, progress=False)
    assert result.gd_path["path"] == "fast" and "sparsemax attention" in result.gd_path["reason"]
    apply = models.lu.apply_for(cfg.model)
    params0 = models.lu.init(jax.random.PRNGKey(0), cfg.model, jax.numpy.float64)
    direct = dynamics.make_train(models.make_loss(apply), data.train,
                                 lambda p, p0: {"loss": models.make_loss(apply)(p, data.train)[0]},
                                 cfg.train, cfg.model.trainable())(params0, jax.random.PRNGKey(0))
  np.testing.assert_allclose(np.asarray(result.gd.observables["loss"])[0],
                             np.asarray(direct.observables["loss"]), rtol=1e-10)
  final = jax.tree.map(lambda x: x[0], result.gd.final_params)
  with pipeline.precision_scope("float64"):   # the trained scores are not uniform: the two differ
    gap = models.make_loss(models.lu.apply)(final, data.train)[0] - \
        models.make_loss(apply)(final, data.train)[0]
  assert abs(float(gap)) > 1e-6


def test_a_plain_sweep_is_checkpointed_per_chunk_and_resumes_to_the_same_outputs(tmp_path,
                                                                                   capsys):
  """engine.sweep: the checkpointed run_sweep of experiments that are not `attndyn run` configs."""
  import jax.numpy as jnp

  def fn(x):
    return {"y": jnp.cumsum(jnp.arange(4.0) * x["a"]), "z": x["a"] ** 2}

  inputs = {"a": np.arange(1.0, 6.0)}
  ctx = runner.Context(out=tmp_path, quick=True, verbose=False, experiment="demo")
  folder = engine.run_dir(ctx, "demo-sweep") / "checkpoints"      # the store of its chunks
  stamps = lambda: {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("*.npz"))}
  first = engine.sweep(ctx, "demo-sweep", fn, inputs, {"k": 1}, chunk_size=2)
  np.testing.assert_array_equal(first["z"], inputs["a"] ** 2)
  before = stamps()
  assert len(before) == 3
  names = {json.loads(p.read_text())["name"]: p for p in folder.glob("*.json")
           if p.name != "manifest.json"}
  last = names.pop("sweep-chunk-00002")
  last.unlink()                            # killed before the last chunk was written
  last.with_suffix(".npz").unlink()
  resumed = runner.Context(out=tmp_path, quick=True, verbose=True, experiment="demo",
                           resume=True)
  again = engine.sweep(resumed, "demo-sweep", fn, inputs, {"k": 1}, chunk_size=2)
  for k in first:
    np.testing.assert_array_equal(again[k], first[k])
  after = stamps()                         # chunks 0 and 1 read back, only chunk 2 computed
  assert [after[p.with_suffix(".npz").name] == before[p.with_suffix(".npz").name]
          for _, p in sorted(names.items())] == [True, True]
  assert set(after) == set(before)
  # Other inputs (or settings): the old chunks are not used; every chunk is computed afresh,
  # and the old chunks stay in the store, untouched (their keys are the old inputs').
  other = engine.sweep(resumed, "demo-sweep", fn, {"a": inputs["a"] + 1}, {"k": 1}, chunk_size=2)
  np.testing.assert_array_equal(other["z"], (inputs["a"] + 1) ** 2)
  now = stamps()
  assert len(now) == 6 and {n: now[n] for n in after} == after
  # The log names what differs, and gives no `attndyn run` advice (the reproduction itself
  # decided to start afresh).
  logged = [line for line in capsys.readouterr().err.splitlines() if "not resuming" in line]
  assert len(logged) == 1 and "the config differs" in logged[0], logged
  assert "attndyn run" not in logged[0] and "Resume with" not in logged[0], logged
  # Back to the first inputs: their chunks are read back, not computed
  engine.sweep(resumed, "demo-sweep", fn, inputs, {"k": 1}, chunk_size=2)
  assert stamps() == now


def test_a_sweep_of_a_trainer_equals_it_vmapped_and_resumes_from_its_checkpoints(tmp_path):
  """engine.sweep of a trainer: its Trajectory per point, stacked, unset fields kept unset,
  also when every chunk is read back (the structure its writer recorded, not a trace)."""
  import jax.numpy as jnp
  import optax

  from attndyn import dynamics
  from attndyn.dynamics.epochs import make_epoch_train
  from attndyn.tasks.batch import Batch

  x = jnp.linspace(-1.0, 1.0, 12).reshape(1, 6, 2)
  batch = Batch(tokens=jnp.zeros((1, 6), jnp.int32), mask=jnp.ones((1, 6), bool),
                labels=(x[0, :, 0] > 0).astype(jnp.int32)[None])

  def loss_fn(params, b, key, aux):
    return jnp.mean((x[0] @ params["w"] - b.labels[0]) ** 2)

  train = make_epoch_train(loss_fn, (batch,), lambda p, aux: {"w0": p["w"][0]}, epochs=3,
                           batch_size=1, optimizer=optax.sgd(0.1))

  def one(point):
    return train({"w": jnp.full((2,), point["w0"])}, jax.random.PRNGKey(0))

  inputs = {"w0": np.asarray([0.0, 0.5, -1.0], np.float32)}
  want = jax.jit(jax.vmap(one))(inputs)
  ctx = runner.Context(out=tmp_path, quick=True, verbose=False, experiment="demo")
  got = engine.sweep(ctx, "demo-traj", one, inputs, {"k": 1}, chunk_size=1)
  resumed = runner.Context(out=tmp_path, quick=True, verbose=False, experiment="demo",
                           resume=True)
  again = engine.sweep(resumed, "demo-traj", one, inputs, {"k": 1}, chunk_size=1)
  for traj in (got, again):
    assert isinstance(traj, dynamics.Trajectory) and traj.params is None and traj.ode is None
    for a, b in zip(jax.tree.leaves(traj), jax.tree.leaves(want)):
      np.testing.assert_allclose(a, np.asarray(b), rtol=1e-6)


def test_a_segment_checkpoint_gives_back_the_state_it_kept_and_only_for_the_same_settings(
    tmp_path):
  from attndyn import dynamics

  params0 = {"embeddings": np.zeros((2, 3, 4), np.float32), "query": np.ones((2, 4), np.float32)}
  state = dynamics.SegmentState(
      3, {"embeddings": np.full((2, 3, 4), 1.5, np.float32), "query": np.ones((2, 4))},
      {"embeddings": np.full((2, 3, 4), 0.5, np.float32), "query": np.ones((2, 4))},
      np.array([0.25, np.inf]), np.array([40, 0]), np.array([60, -1]),
      {"dev_loss": np.arange(14.0).reshape(2, 7)})
  ctx = runner.Context(out=tmp_path, quick=True, verbose=False, experiment="demo")
  with engine.segment_checkpoint(ctx, "demo-seg", {"k": 1}, params0) as (start, on_state):
    assert start is None
    on_state(state)
  resumed = runner.Context(out=tmp_path, quick=True, verbose=False, experiment="demo",
                           resume=True)
  with engine.segment_checkpoint(resumed, "demo-seg", {"k": 1}, params0) as (start, _):
    for a, b in zip(jax.tree.leaves(start), jax.tree.leaves(state)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  with engine.segment_checkpoint(resumed, "demo-seg", {"k": 2}, params0) as (start, _):
    assert start is None                    # other settings: not resumed
  with engine.segment_checkpoint(ctx, "demo-seg", {"k": 1}, params0) as (start, _):
    assert start is None                    # without --resume: afresh


def test_an_experiment_starts_after_those_whose_runs_it_reuses(tmp_path, monkeypatch):
  # purity reuses sst's runs (its USES): on several workers it must not start beside sst
  # (it would compute the same runs into the same folders, and stop on their lock)
  from attndyn import jobs
  from attndyn.reproduce import runner
  seen = {}

  def execute(work, store, **kw):
    seen.update({job.name: job.after for job in work})
    return jobs.Executed({job.name: {"name": job.name, "claims": []} for job in work}, [], {}, {})

  monkeypatch.setattr(jobs, "execute", execute)
  runner.run("lu2021", tmp_path / "out", quick=True, only=["purity", "sst"], verbose=False,
             workers=2)
  assert seen == {"purity": ("sst",), "sst": ()}


def test_on_several_workers_the_synthetic_runs_are_jobs_of_their_own(tmp_path, capsys):
  # The runs synthetic declares (its `runs`) are computed by jobs of their own, side by side;
  # the experiment reads them back from their checkpoints and judges the same claims, to the
  # bit, as when it computes them itself in one process.
  import distributed
  from attndyn.reproduce.lu2021 import synthetic
  alone, spread = tmp_path / "alone", tmp_path / "spread"
  assert cli.main(["reproduce", "lu2021", "--out", str(alone), "--quick", "--quiet"] + TINY) == 0
  capsys.readouterr()
  items = [TINY[i + 1] for i, a in enumerate(TINY) if a == "--set"]
  planned = synthetic.runs(runner.settings_for(synthetic, quick=True, items=items))
  assert [p.name for p in planned] == ["synthetic-tc-invariant-float64", "synthetic-tc"]
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                dashboard_address="127.0.0.1:0") as cluster:
    with distributed.Client(cluster) as client:
      runner.run("lu2021", spread, quick=True, only=["synthetic"], items=items, client=client)
  err = capsys.readouterr().err
  for p in planned:   # computed by its job, then read back whole by the experiment
    assert f"{p.name}: 2 runs, 60 steps" in err, err
    assert err.count(f"{p.name}: 2 runs") == 2, err
    assert "(continuing from its checkpoints)" in err.split(f"{p.name}: 2 runs")[2].split("\n")[0]
  assert "not resuming" not in err
  doc = json.loads((spread / runner.EXPERIMENTS_DIR / "synthetic.json").read_text())
  ref = json.loads((alone / runner.EXPERIMENTS_DIR / "synthetic.json").read_text())
  assert not doc["error"]
  assert ({c["id"]: (c["status"], c["ours"]["values"]) for c in doc["claims"]}
          == {c["id"]: (c["status"], c["ours"]["values"]) for c in ref["claims"]})


def test_a_run_job_that_fails_returns_its_error_for_the_experiment_to_meet(tmp_path):
  from attndyn.reproduce import engine as eng
  (tmp_path / runner.STORE).mkdir()
  bad = eng.Planned("synthetic-tc", {"train": {"steps": -1}})
  doc = runner.run_job("synthetic", str(tmp_path), True, [], None, False, False, bad)
  assert doc["name"] == "synthetic-tc" and "train.steps" in doc["error"], doc
