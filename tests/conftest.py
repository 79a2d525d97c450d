"""Shared test setup: float64, the hypothesis profiles ("ci", "deep"), a PRNG key fixture,
and one tiny task and sweep compiled once per session."""
import os
from typing import Any, Callable, NamedTuple

# XLA's compile is most of the suite's time (many small programs, most compiled once). The
# tests check what the programs compute, not how XLA:CPU generates code for them, so they
# compile with LLVM at -O0 and XLA:CPU's loop emitters instead of its MLIR fusion emitters,
# which compile faster. Programs that pass their own compiler options (the fast path, the
# reduced ODE, the topic dataset) keep those. Set before jax starts its backend; test
# subprocesses inherit it; a user's own XLA_FLAGS are kept, after these.
# ATTNDYN_TEST_XLA_DEFAULTS=1 runs the suite with XLA's defaults.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
if os.environ.get("ATTNDYN_TEST_XLA_DEFAULTS") != "1":
  os.environ["XLA_FLAGS"] = f"{TEST_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip()

# attndyn's commands keep a compile cache on disk (attndyn.compile_cache); the tests run them
# without it, so that nothing is written to the user's home. The cache's own tests set it.
os.environ["ATTNDYN_COMPILE_CACHE"] = "off"

import jax  # noqa: E402  (after XLA_FLAGS)
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import tasks

jax.config.update("jax_enable_x64", True)

CI_EXAMPLES = 25

# Two profiles. "ci" (the default): enough examples to find a counterexample that is not
# rare, within CI's budget (2 shared cores, a 15-minute limit for the whole suite).
# Derandomized: CI replays one fixed set of examples, so a red CI always means the code
# changed, never that this run drew an unlucky example. "deep" (`pytest
# --hypothesis-profile=deep`) is where the search goes on: ten times the examples, drawn at
# random on each run (a failure prints its blob to replay it), with shrinking. No deadline:
# JAX compiles on first use, so example timings vary wildly. No shrinking in "ci": each
# shrink step recompiles, and a failing example is reported as found. A test that sets its
# own max_examples says why next to it.
_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
settings.register_profile("deep", max_examples=10 * CI_EXAMPLES, derandomize=False, **_COMMON)
settings.load_profile("ci")      # pytest's --hypothesis-profile option, if given, loads after this


@pytest.fixture
def key():
  """A fixed PRNG key; tests split it rather than reuse it."""
  return jax.random.PRNGKey(0)


# One tiny topic task shared by the tests that train (J=2, m=3, T=4 topic words).
TINY_TASK = tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=20, n_nontopic=3,
                                  n_train=48, n_test=16)


@pytest.fixture(scope="session")
def tiny_data():
  """``(TopicTaskConfig, TopicDataset)`` of :data:`TINY_TASK`, generated once (jitted)."""
  make = jax.jit(tasks.make_topic_dataset, static_argnums=1)
  return TINY_TASK, make(jax.random.PRNGKey(0), TINY_TASK)


class TinyRun(NamedTuple):
  """A Attn-TC setup on :data:`TINY_TASK` and one 3-point sweep of it (seeds × lr)."""
  model: Any               # models.Model
  record: Callable         # topic_observables(model.apply, data)
  train_cfg: Any           # dynamics.TrainConfig
  run: Callable            # run(point) -> Trajectory; point = {"key", "lr"}
  points: dict             # {"key": [3, 2], "lr": [3]}
  sweep: Any               # Trajectory of NumPy arrays with a leading axis of 3


@pytest.fixture(scope="session")
def tiny_run(tiny_data):
  """Compiled once per session: ``dynamics.run_sweep`` of 3 GD runs (20 steps, 5 records)."""
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                             key_dim=2, classifier="tc", embed_std=0.1, key_std=0.1)
  model = models.lu_attention(cfg, jnp.float64)
  record = analysis.topic_observables(model.apply, data)
  train_cfg = dynamics.TrainConfig(optimizer="gd", lr=0.5, steps=20, record_every=5)
  train = dynamics.make_train(models.make_loss(model.apply), data.train, record, train_cfg,
                              cfg.trainable())

  def run(point):
    """One sweep point: its seed key and learning rate are the only inputs."""
    return train(model.init(point["key"]), point["key"], lr=point["lr"])

  points = {"key": jax.random.split(jax.random.PRNGKey(3), 3), "lr": jnp.array([0.2, 0.4, 0.6])}
  return TinyRun(model, record, train_cfg, run, points, dynamics.run_sweep(run, points))


# One tiny `attndyn run` shared by the results-directory tests (load, report, divergence,
# determinism): GD only on a 2-topic task, 2 seeds × lr grid [2.0, 1e6] in chunks of 3, so the
# first chunk mixes learning and diverging runs. In float32, lr 1e6 diverges within a few
# steps; lr 2.0 fits the training set.
TINY_RUN = ["--preset", "quick", "--no-progress", "--chunk-size", "3"] + [
    arg for item in ("task.n_topics=2", "task.vocab_size=12", "task.n_nontopic=3",
                     "task.n_train=16", "task.n_test=8", "model.embed_dim=4", "model.key_dim=4",
                     "model.embed_std=0.1", "train.steps=40", "train.record_every=10",
                     "ode.kind=none", "sweep.seeds=2", "sweep.grid.train.lr=[2.0, 1e6]")
    for arg in ("--set", item)]


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory):
  """``(directory, stdout)`` of one in-process ``attndyn run`` of :data:`TINY_RUN`."""
  import contextlib
  import io

  from attndyn import cli
  out = tmp_path_factory.mktemp("results") / "out"
  stdout = io.StringIO()
  with contextlib.redirect_stdout(stdout):
    code = cli.main(["run", *TINY_RUN, "--out", str(out)])
  assert code == 0, stdout.getvalue()
  return out, stdout.getvalue()
