"""One solve in flow time read as the runs of several learning rates (dynamics.flow_time)."""
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn.dynamics.trajectory import ODEStats, Trajectory


def _flow(taus, value, result=0):
  """A solve in flow time whose one observable is ``value(τ)``."""
  zero = jnp.zeros((), jnp.int32)
  return Trajectory(t=jnp.asarray(taus), observables={"x": value(jnp.asarray(taus))},
                    final_params={"w": jnp.ones(2)}, failed_at=jnp.asarray(-1.0),
                    ode=ODEStats(reason=zero, result=jnp.int32(result), num_steps=zero,
                                 num_accepted_steps=zero, num_rejected_steps=zero))


def test_the_grid_holds_every_lrs_recorded_flow_times_once():
  taus = dynamics.flow_time_grid([0.25, 0.5, 1.0], [8, 4, 2], 5)
  np.testing.assert_array_equal(taus, np.arange(9) * 1.25)
  taus = dynamics.flow_time_grid([0.3, 0.7], [3, 2], 1)
  np.testing.assert_allclose(taus, [0.0, 0.3, 0.6, 0.7, 0.9, 1.4])


@pytest.mark.parametrize("lr, records", [(0.25, 8), (0.5, 4), (1.0, 2)])
def test_each_lr_reads_its_own_recorded_flow_times_then_stays_put(lr, records):
  taus = dynamics.flow_time_grid([0.25, 0.5, 1.0], [8, 4, 2], 5)
  run = dynamics.at_learning_rate(_flow(taus, lambda t: t ** 2), taus, lr, records, 5, 9)
  k = np.minimum(np.arange(9), records)
  np.testing.assert_allclose(run.observables["x"], (lr * k * 5.0) ** 2, rtol=1e-12)
  np.testing.assert_array_equal(run.t, np.arange(9) * 5)
  assert float(run.failed_at) == -1


def test_a_non_finite_record_or_a_failed_solve_is_each_lrs_own_failure():
  taus = dynamics.flow_time_grid([0.5, 1.0], [4, 2], 5)
  blowup = lambda t: jnp.where(t >= 7.5, jnp.inf, t)     # from τ = 7.5 on
  assert float(dynamics.at_learning_rate(_flow(taus, blowup), taus, 0.5, 4, 5, 5).failed_at) == 15
  assert float(dynamics.at_learning_rate(_flow(taus, blowup), taus, 1.0, 2, 5, 5).failed_at) == 10
  failed = _flow(taus, lambda t: t, result=1)               # the solver gave up, all finite
  assert float(dynamics.at_learning_rate(failed, taus, 1.0, 2, 5, 5).failed_at) == 20


def test_points_that_differ_only_in_lr_share_one_group_in_sweep_order():
  """Each point's group is the first point with its other coordinates (sweep order kept)."""
  rng = np.random.default_rng(0)
  inputs = {"seed": rng.integers(0, 3, 40), "data_seed": rng.integers(0, 2, 40),
            "train.lr": rng.choice([0.1, 0.5, 1.0], 40)}
  base, group = dynamics.flow_time.without_learning_rate(inputs)
  key = lambda i: (inputs["seed"][i], inputs["data_seed"][i])
  firsts = [i for i in range(40) if key(i) not in {key(j) for j in range(i)}]
  assert [key(i) for i in firsts] == list(zip(base["seed"], base["data_seed"]))
  assert list(base["train.lr"]) == [inputs["train.lr"][i] for i in firsts]
  assert all(key(firsts[g]) == key(p) for p, g in enumerate(group))
