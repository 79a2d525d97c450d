"""Why an ODE solve failed, per run under vmap: ``Trajectory.ode`` (``dynamics.trajectory.ODEStats``)
keeps diffrax's result code and step counts, and ``analysis.run_summaries`` reports the reason.

The ODE is the gradient flow of a one-parameter loss, ``L = −θ³/3``: its flow
``dθ/dt = lr θ²`` stays at ``θ₀ = 0`` and blows up at ``t* = 1/(lr θ₀)`` otherwise.
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn import analysis
from attndyn import dynamics
from attndyn.dynamics.trajectory import FAILURE_REASONS, ODEStats, failure_reason
from attndyn.tasks.batch import Batch

BATCH = Batch(jnp.zeros((1, 1), jnp.int32), jnp.ones((1, 1), bool), jnp.zeros(1, jnp.int32))
TS = jnp.linspace(0.0, 4.0, 5)                    # with lr = 1, θ₀ = 1: blow-up at t* = 1
CUBIC = lambda p, b: (-p["theta"] ** 3 / 3, None)
RECORD = lambda p, p0: {"theta": p["theta"]}


def _flow(loss, theta0, **options):
  """The flow from each ``θ₀`` in one vmapped, jitted solve (``throw=False`` inside); Heun,
  the smallest adaptive solver, to keep the compile short."""
  solve = lambda t0: dynamics.gradient_flow(loss, {"theta": t0}, BATCH, RECORD, lr=1.0, ts=TS,
                                            trainable={"theta": True}, solver="heun", **options)
  return jax.jit(jax.vmap(solve))(jnp.asarray(theta0, jnp.float64))


def _reasons(traj):
  return [failure_reason(code) for code in np.asarray(traj.ode.reason)]


def test_each_run_in_a_vmapped_solve_gets_its_own_reason():
  """θ₀ = 0 is a fixed point of the cubic flow: no failure. θ₀ = 1 blows up at t = 1 < 4;
  the adaptive steps shrink towards it until max_steps runs out."""
  traj = _flow(CUBIC, [0.0, 1.0], max_steps=200)
  assert isinstance(traj.ode, ODEStats) and _reasons(traj) == [None, "max_steps"]
  assert np.asarray(traj.ode.result)[0] == 0 and np.asarray(traj.ode.result)[1] != 0
  steps = np.asarray(traj.ode.num_steps)
  assert 0 < steps[0] < 200 and steps[1] == 200
  assert np.all(steps == np.asarray(traj.ode.num_accepted_steps + traj.ode.num_rejected_steps))
  failed = np.asarray(traj.failed_at)                           # failed_at as before
  assert failed[0] == -1 and failed[1] >= 1.0


def test_a_forced_step_across_the_blow_up_is_non_finite():
  traj = _flow(CUBIC, [1.0], dtmin=0.25, max_steps=200)
  assert _reasons(traj) == ["non_finite"]
  assert not np.all(np.isfinite(np.asarray(traj.observables["theta"])))


def test_an_unforced_step_below_dtmin_is_step_size_underflow():
  traj = _flow(CUBIC, [1.0], dtmin=1e-3, force_dtmin=False, max_steps=10_000)
  assert _reasons(traj) == ["step_size_underflow"]


def test_every_reason_has_a_name():
  assert FAILURE_REASONS[0] == "none" and failure_reason(0) is None
  assert [failure_reason(i) for i in range(1, len(FAILURE_REASONS))] == list(FAILURE_REASONS[1:])


def test_run_summaries_report_the_reason_per_run(tiny_run, tiny_data):
  task, _ = tiny_data
  gd = tiny_run.sweep
  n = gd.t.shape[0]
  codes = [FAILURE_REASONS.index(r) for r in ("none", "max_steps", "non_finite")]
  ode = gd._replace(ode=ODEStats(reason=np.array(codes), result=np.array([0, 1, 0]),
                                 num_steps=np.array([7, 8, 9]),
                                 num_accepted_steps=np.array([7, 8, 9]),
                                 num_rejected_steps=np.zeros(n, int)))
  points = [{"seed": i} for i in range(n)]
  runs = analysis.run_summaries(points, gd, {"flow": ode, "reduced": gd}, m=task.n_nontopic)
  assert [r["ode_failure_reason"] for r in runs] == [
      {"flow": None}, {"flow": "max_steps"}, {"flow": "non_finite"}]
  assert [r["ode_solver_steps"] for r in runs] == [{"flow": 7}, {"flow": 8}, {"flow": 9}]
  assert all("failed_at" in r and "ode_failed_at" in r for r in runs)
