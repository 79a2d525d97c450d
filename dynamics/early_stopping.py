"""Early stopping inside one compiled program, per seed of a vmapped sweep.

Lu et al. (2021, Section 5.2) train on SST by gradient descent "combined with
the early stopping technique (Prechelt, 2012) of patience 100". Here every run
(every seed of a ``vmap``) keeps its own best monitored value, best parameters
and patience counter; when its patience runs out it is frozen at its best
parameters while the other runs go on. The loop is the ``lax.scan`` of
:func:`dynamics.make_train` (an outer scan over recorded times, an inner scan of
``record_every`` steps) with the monitor evaluated after every ``eval_every``-th
step. The step number is a scan input, not carried state, so under ``vmap`` the
"evaluate now?" branch stays a real ``lax.cond`` shared by all seeds.

Monitor the dev LOSS (the default): on SST the dev accuracy plateaus early, and
patience 100 on it stops at epochs 50-675 (``docs/independent-measurements.md``).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2. https://arxiv.org/abs/2011.10036
  Prechelt, "Early Stopping — But When?", in Neural Networks: Tricks of the
  Trade, 2012.
"""
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from attndyn.dynamics.optimizers import base_optimizer, masked_optimizer
from attndyn.dynamics.train import (TrainConfig, check_train_args, guarded_update,
                            minibatch_value_and_grad)
from attndyn.dynamics.trajectory import Trajectory
from attndyn.models.objective import accuracy
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["MONITORS", "EarlyStopped", "make_train_early_stopping"]

MONITORS = ("dev_loss", "dev_acc")


class EarlyStopped(NamedTuple):
  """A run with early stopping (extra leading axes under ``vmap``).

  Attributes:
    trajectory: the :class:`dynamics.Trajectory`. Its ``final_params`` are the
      parameters at the last step: the best parameters for a run that stopped,
      the last iterate for one that ran to ``cfg.steps``. Observables recorded
      after a run stopped are those of its best parameters.
    best_params: parameters at ``best_step`` (use these to report test accuracy).
    best_step: ``[...]`` int32 step of the best monitored value (0: the start).
    best_value: ``[...]`` the best dev loss (``dev_loss``) or dev accuracy
      (``dev_acc``).
    stopped_at: ``[...]`` int32 step at which patience ran out (from then on the
      run is frozen at ``best_params``), ``-1`` if it never did.
  """
  trajectory: Trajectory
  best_params: Any
  best_step: jax.Array
  best_value: jax.Array
  stopped_at: jax.Array


class _State(NamedTuple):
  params: Any
  opt_state: Any
  failed_at: jax.Array   # shape=(), int32; -1 while finite
  best_params: Any
  best: jax.Array        # shape=(), float; monitored value, lower is better
  best_step: jax.Array   # shape=(), int32
  bad_evals: jax.Array   # shape=(), int32; evaluations since the last improvement
  stopped_at: jax.Array  # shape=(), int32; -1 while running


def make_train_early_stopping(loss_fn: Callable, train_batch: Batch, dev_batch: Batch,
                              record: Callable, cfg: TrainConfig, trainable: dict, *,
                              patience, eval_every: int = 1, monitor: str = "dev_loss",
                              record_params: bool = False):
  """Build ``train(params0, key, lr=cfg.lr) -> EarlyStopped`` (pure; jit/vmap it).

  At step 0 and after every ``eval_every``-th step the monitor is evaluated on
  ``dev_batch``. A strictly better value (lower loss, higher accuracy) becomes
  the best (parameters and step saved, counter reset); otherwise the counter
  grows by one. When it reaches ``patience`` the run stops: its parameters are
  reset to the best ones and never change again. A run that goes non-finite is
  frozen at its last finite parameters as in :func:`dynamics.make_train` (and
  then stops once its patience runs out). With ``patience=math.inf`` the
  trajectory equals :func:`dynamics.make_train`'s.

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``; ``aux.logits`` is used
      for ``monitor="dev_acc"``.
    train_batch: the training set (minibatches are drawn from it).
    dev_batch: the development set the monitor is computed on.
    record: ``record(params, params0) -> pytree`` of observables.
    cfg: training configuration.
    trainable: parameter group -> trainable.
    patience: evaluations without improvement before stopping (an integer
      >= 1, or ``math.inf`` / ``None`` for never); in steps that is
      ``patience * eval_every`` (the paper: 100 epochs, ``eval_every=1``).
    eval_every: evaluate the monitor after every this many steps.
    monitor: ``"dev_loss"`` (the replication notes' choice) or ``"dev_acc"``.
    record_params: also store the full parameters at every recorded step.

  Returns:
    ``train(params0, key, lr=None)``: ``key`` drives minibatch order only; ``lr``
    (traced or not) overrides ``cfg.lr``.

  Raises:
    ConfigError: bad ``patience``, ``eval_every`` or ``monitor``.
  """
  if patience is None:
    patience = math.inf
  check((isinstance(patience, int) and not isinstance(patience, bool) and patience >= 1)
        or patience == math.inf, "patience", patience,
        "an integer >= 1, or inf / unset for no early stopping")
  check(isinstance(eval_every, int) and not isinstance(eval_every, bool) and eval_every >= 1,
        "eval_every", eval_every, "a positive integer")
  check(monitor in MONITORS, "monitor", monitor, f"one of {', '.join(MONITORS)}")
  check_train_args("make_train_early_stopping", loss_fn, train_batch, record, cfg, trainable)
  check(hasattr(dev_batch, "tokens"), "dev_batch", type(dev_batch).__name__,
        "a tasks.Batch; make_train_early_stopping takes (loss_fn, train_batch, dev_batch, "
        "record, cfg, trainable, *, options)")
  grad_fn = jax.value_and_grad(lambda p, b: loss_fn(p, b)[0])
  full = not cfg.batch_size or cfg.batch_size >= train_batch.tokens.shape[0]
  sign = 1.0 if monitor == "dev_loss" else -1.0

  def monitored(params):
    """The monitored value, lower is better (minus the accuracy for ``dev_acc``)."""
    loss, aux = loss_fn(params, dev_batch)
    return loss if monitor == "dev_loss" else -accuracy(aux.logits, dev_batch.labels)

  def select(flag, new, old):
    return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)

  def evaluate(state: _State, step) -> _State:
    running = state.stopped_at < 0
    value = monitored(state.params)
    improved = running & (value < state.best)   # NaN never improves
    bad = jnp.where(improved, 0, state.bad_evals + running.astype(jnp.int32))
    stop = running & (bad >= patience) if patience != math.inf else jnp.zeros((), bool)
    best_params = select(improved, state.params, state.best_params)
    return state._replace(
        params=select(stop, best_params, state.params),
        best_params=best_params,
        best=jnp.where(improved, value, state.best),
        best_step=jnp.where(improved, step, state.best_step),
        bad_evals=bad,
        stopped_at=jnp.where(stop, step, state.stopped_at))

  def train(params0, key, lr=None):
    lr = cfg.lr if lr is None else lr
    opt = masked_optimizer(base_optimizer(cfg.optimizer, lr), trainable)

    def step_fn(state: _State, step):
      if full:
        loss, grads = grad_fn(state.params, train_batch)
      else:
        loss, grads = minibatch_value_and_grad(grad_fn, state.params, train_batch, key, step,
                                               cfg.batch_size, cfg.sampling)
      params, opt_state, failed_at, _ = guarded_update(
          opt, grads, loss, state.params, state.opt_state, state.failed_at, step,
          running=state.stopped_at < 0)
      state = state._replace(params=params, opt_state=opt_state, failed_at=failed_at)
      done = step + 1
      if eval_every == 1:
        state = evaluate(state, done)
      else:
        state = jax.lax.cond(done % eval_every == 0, evaluate, lambda s, _: s, state, done)
      return state, None

    def observe(params):
      return (record(params, params0), params if record_params else None)

    def record_fn(state: _State, r):
      steps = r * cfg.record_every + jnp.arange(cfg.record_every, dtype=jnp.int32)
      state, _ = jax.lax.scan(step_fn, state, steps)
      return state, observe(state.params)

    int32 = lambda v: jnp.full((), v, jnp.int32)
    state0 = _State(params=params0, opt_state=opt.init(params0), failed_at=int32(-1),
                    best_params=params0, best=monitored(params0), best_step=int32(0),
                    bad_evals=int32(0), stopped_at=int32(-1))
    state, recs = jax.lax.scan(record_fn, state0,
                               jnp.arange(cfg.n_records - 1, dtype=jnp.int32))
    obs, params_t = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                                 observe(params0), recs)
    t = cfg.record_steps().astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    traj = Trajectory(t=t, observables=obs, final_params=state.params,
                      failed_at=state.failed_at.astype(t.dtype), params=params_t)
    return EarlyStopped(trajectory=traj, best_params=state.best_params, best_step=state.best_step,
                        best_value=sign * state.best, stopped_at=state.stopped_at)

  return train
