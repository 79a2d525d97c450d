"""Training as one compiled program: ``jax.jit`` + ``lax.scan`` over steps.

An outer scan over recorded times and an inner scan of ``record_every`` steps;
only the caller's observables are stored, never the parameter trajectory unless
``record_params=True``.
"""
import dataclasses
import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from attndyn.dynamics.optimizers import (OPTIMIZERS, Optimizer, base_optimizer, is_optimizer,
                                 masked_optimizer, trainable_mask)
from attndyn.dynamics.trajectory import Trajectory, checked_record
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check, is_concrete_number

__all__ = ["SAMPLING", "TrainConfig", "check_train_args", "guarded_update", "make_train",
           "minibatch", "minibatch_value_and_grad", "steps_per_epoch"]

SAMPLING = ("shuffle", "replacement", "shuffle_keep_last")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """How to train.

  Attributes:
    optimizer: ``gd`` (full-batch gradient descent, the paper), ``sgd``
      (minibatches) or another optax optimiser name. In Python also an
      ``optax.GradientTransformation`` (with its own learning rate or schedule: ``lr``
      is then only the time scale of ``flow_time``) or a function ``lr ->
      optax.GradientTransformation`` (schedules, clipping, chains that a sweep's traced
      ``lr`` reaches).
    lr: learning rate τ, a finite number > 0 (may be traced inside a sweep).
    steps: number of optimiser steps (epochs for full-batch GD), a multiple of
      ``record_every``.
    record_every: record observables every this many steps (and at step 0).
    batch_size: minibatch size for ``sgd`` and the other optimisers, at most
      the training set; unset (``None``) or 0 means the full batch, which ``gd``
      requires.
    sampling: minibatches drawn by reshuffling every epoch, without
      replacement: ``shuffle`` drops the ``n mod batch_size`` samples left at
      the end of each epoch's permutation (drop-last: ``n // batch_size`` steps
      per epoch), ``shuffle_keep_last`` gives them a step of their own, a final
      short batch whose loss is the mean over those samples (``⌈n / batch_size⌉``
      steps per epoch; the same steps as ``shuffle`` when batch_size divides n);
      or independently each step (``replacement``).
    flow_time: if set (> 0), every run stops at the same flow time τ = lr·step: a run
      of learning rate lr takes ⌈flow_time / lr⌉ steps, rounded up to a multiple of
      ``record_every`` (to within a relative 1e-5), and its parameters (and records)
      stay at that step's values up to ``steps``, which must be at least the longest
      run's (the sweep's smallest lr). Unset: every run takes ``steps``. A sweep over
      lr then compares runs at one time of the gradient flow (eqs 5-6), and a chunk of
      runs stops computing once its longest run is done.
  """
  optimizer: Optimizer = "gd"
  lr: float = 0.1
  steps: int = 5000
  record_every: int = 50
  batch_size: Optional[int] = None
  sampling: str = "shuffle"
  flow_time: Optional[float] = None

  def __post_init__(self):
    check(is_optimizer(self.optimizer), "optimizer", self.optimizer,
          f"one of {', '.join(OPTIMIZERS)}, an optax.GradientTransformation, or a function "
          "lr -> optax.GradientTransformation")
    if is_concrete_number(self.lr):
      check(self.lr > 0 and self.lr < float("inf"), "lr", self.lr, "a finite number > 0")
    for name in ("steps", "record_every"):
      value = getattr(self, name)
      check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name, value, "a positive integer")
    check(self.steps % self.record_every == 0, "steps", self.steps,
          f"a multiple of record_every = {self.record_every}", related=("record_every",))
    if self.batch_size is not None:
      check(isinstance(self.batch_size, int) and not isinstance(self.batch_size, bool)
            and self.batch_size >= 0, "batch_size", self.batch_size,
            "a positive integer, or 0 / unset for the full batch")
    check(self.sampling in SAMPLING, "sampling", self.sampling, f"one of {', '.join(SAMPLING)}")
    if self.optimizer == "gd":
      check(not self.batch_size, "batch_size", self.batch_size,
            "0 or unset with optimizer 'gd' (full batch); use optimizer 'sgd' for minibatches")
    if self.flow_time is not None:
      check(is_concrete_number(self.flow_time) and 0 < self.flow_time < float("inf"),
            "flow_time", self.flow_time, "a finite number > 0, or unset")

  @property
  def n_records(self) -> int:
    return self.steps // self.record_every + 1

  def record_steps(self):
    """The recorded step numbers ``0, k, 2k, ..., steps``."""
    return jnp.arange(self.n_records) * self.record_every

  def run_steps(self, lr: float) -> int:
    """Steps a run of learning rate ``lr`` (a number) takes: ``steps``, or with
    ``flow_time`` set, ⌈flow_time / lr⌉ rounded up to a multiple of ``record_every``."""
    if self.flow_time is None:
      return self.steps
    return int(math.ceil(_records_float(self.flow_time, lr, self.record_every))) * self.record_every

  def run_records(self, lr) -> jax.Array:
    """Recorded intervals a run of learning rate ``lr`` (traced or not, any shape) takes
    after step 0, as int32: :meth:`run_steps` / ``record_every``, at most
    ``n_records - 1``."""
    last = self.n_records - 1
    if self.flow_time is None:
      return jnp.full(jnp.shape(lr), last, jnp.int32)
    n = jnp.ceil(_records_float(self.flow_time, jnp.asarray(lr), self.record_every))
    return jnp.minimum(n, last).astype(jnp.int32)


def _records_float(flow_time, lr, record_every):
  # flow_time / lr / record_every, less a relative 1e-5 (float32 rounding of a traced lr
  # is ~1e-7), so that lr = flow_time / n, rounded to a float, gives n steps, not
  # n + record_every.
  return flow_time / lr / record_every * (1 - 1e-5)


class TrainState(NamedTuple):
  params: Any
  opt_state: Any
  step: jax.Array       # shape=(), int32
  failed_at: jax.Array  # shape=(), int32; -1 while finite


def _all_finite(tree) -> jax.Array:
  leaves = jax.tree.leaves(tree)
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def guarded_update(opt: optax.GradientTransformation, grads, loss, params, opt_state,
                   failed_at: jax.Array, step: jax.Array, running=True):
  """One optimiser step that freezes a run at its last finite parameters.

  The step is taken only while the run has not failed (``failed_at < 0``) and
  its loss and new parameters are finite; the first step that is not records
  ``failed_at = step`` (only while ``running``; early stopping passes whether the
  run still trains), and the run keeps the parameters and optimiser state it
  had. Every autodiff training loop (:func:`make_train`,
  :func:`dynamics.make_train_early_stopping`, :func:`dynamics.make_epoch_train`)
  takes its steps through this one function; the fast path's closed-form step
  (:mod:`dynamics.fast_lu`) applies the same rule to its own state.

  Returns:
    ``(params, opt_state, failed_at, moved)``: ``moved`` is whether the step was
    taken (a stopped run, ``running`` false, does not move either).
  """
  updates, new_opt = opt.update(grads, opt_state, params)
  new_params = optax.apply_updates(params, updates)
  ok = (failed_at < 0) & jnp.isfinite(loss) & _all_finite(new_params)
  failed_at = jnp.where(running & (failed_at < 0) & ~ok, step.astype(failed_at.dtype), failed_at)
  move = ok & running
  keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(move, a, b), new, old)
  return keep(new_params, params), keep(new_opt, opt_state), failed_at, move


def steps_per_epoch(n: int, batch_size: int, sampling: str) -> int:
  """Optimiser steps in one epoch of a shuffled ``sampling``: ``n // batch_size`` with drop-last
  (``"shuffle"``), ``⌈n / batch_size⌉`` with a final short batch (``"shuffle_keep_last"``)."""
  check(sampling in ("shuffle", "shuffle_keep_last"), "sampling", sampling,
        "'shuffle' or 'shuffle_keep_last' (sampling with replacement has no epochs)")
  check(isinstance(batch_size, int) and 1 <= batch_size <= n, "batch_size", batch_size,
        f"an integer in 1..n = {n}")
  return -(-n // batch_size) if sampling == "shuffle_keep_last" else n // batch_size


def minibatch(batch: Batch, key: jax.Array, step: jax.Array, batch_size: int, sampling: str) -> Batch:
  """The minibatch of ``step``: a slice of this epoch's permutation (drop-last), or an i.i.d. draw.

  ``sampling`` is ``"shuffle"`` or ``"replacement"``: every minibatch has
  ``batch_size`` samples. A final short batch (``"shuffle_keep_last"``) has
  another shape, so its steps go through :func:`minibatch_value_and_grad`.
  """
  check(sampling in ("shuffle", "replacement"), "sampling", sampling,
        "'shuffle' or 'replacement' (minibatches of batch_size samples; "
        "'shuffle_keep_last' is drawn by minibatch_value_and_grad)")
  n = batch.tokens.shape[0]
  if sampling == "replacement":
    idx = jax.random.randint(jax.random.fold_in(key, step), (batch_size,), 0, n)
  else:
    per_epoch = steps_per_epoch(n, batch_size, "shuffle")
    perm = jax.random.permutation(jax.random.fold_in(key, step // per_epoch), n)
    idx = jax.lax.dynamic_slice(perm, ((step % per_epoch) * batch_size,), (batch_size,))
  return jax.tree.map(lambda x: x[idx], batch)


def minibatch_value_and_grad(value_and_grad: Callable, params, batch: Batch, key: jax.Array,
                             step: jax.Array, batch_size: int, sampling: str):
  """``value_and_grad(params, b)`` on the minibatch ``b`` of ``step``, for every ``sampling``.

  ``"shuffle"`` and ``"replacement"`` evaluate it on :func:`minibatch` (drop-last
  for ``"shuffle"``). ``"shuffle_keep_last"`` with ``r = n mod batch_size > 0``
  makes every epoch ``n // batch_size + 1`` steps of one permutation: full slices
  of ``batch_size`` and then the ``r`` samples left, a step whose loss is the mean
  over those ``r`` (the step of a data loader that keeps its last batch). With
  ``r = 0`` it is ``"shuffle"``, step for step.

  Args:
    value_and_grad: ``value_and_grad(params, batch) -> (loss, grads)``.
    params: the parameters the gradient is taken at.
    batch: the training set.
    key: the run's minibatch-order key.
    step: the optimiser step (an int32 scalar, traced or not).
    batch_size: ``B``.
    sampling: one of :data:`SAMPLING`.
  """
  check(sampling in SAMPLING, "sampling", sampling, f"one of {', '.join(SAMPLING)}")
  n = batch.tokens.shape[0]
  r = n % batch_size
  if sampling != "shuffle_keep_last" or r == 0:
    drawn = "replacement" if sampling == "replacement" else "shuffle"
    return value_and_grad(params, minibatch(batch, key, step, batch_size, drawn))
  per_epoch = steps_per_epoch(n, batch_size, sampling)
  perm = jax.random.permutation(jax.random.fold_in(key, step // per_epoch), n)
  within = step % per_epoch
  take = lambda idx: jax.tree.map(lambda x: x[idx], batch)

  def full_batch(_):
    idx = jax.lax.dynamic_slice(perm, (within * batch_size,), (batch_size,))
    return value_and_grad(params, take(idx))

  def last_batch(_):
    return value_and_grad(params, take(perm[n - r:]))

  return jax.lax.cond(within == per_epoch - 1, last_batch, full_batch, None)


def _describe(x) -> str:
  if hasattr(x, "shape") and hasattr(x, "dtype"):
    return f"an array of shape {tuple(x.shape)} and dtype {x.dtype}"
  return f"a {type(x).__name__}"


def check_train_args(where: str, loss_fn, batch, record, cfg, trainable) -> None:
  """One line naming the argument when a ``make_*train`` is called with arguments in the
  wrong order or of the wrong kind: ``(loss_fn, batch, record, cfg, trainable)``."""
  order = "(loss_fn, batch, record, cfg, trainable, *, options)"
  check(callable(loss_fn), "loss_fn", _describe(loss_fn),
        f"a function loss_fn(params, batch) -> (loss, aux); {where} takes {order}")
  check(hasattr(batch, "tokens") and hasattr(batch, "labels"), "batch", _describe(batch),
        f"a tasks.Batch (e.g. dataset.train); {where} takes {order}")
  check(callable(record), "record", _describe(record),
        f"a function record(params, params0) -> pytree; {where} takes {order}")
  check(isinstance(cfg, TrainConfig), "cfg", _describe(cfg),
        f"a dynamics.TrainConfig; {where} takes {order}")
  check(trainable is not None and not isinstance(trainable, (str, TrainConfig)) and
        not callable(trainable), "trainable", _describe(trainable),
        "a dict group -> bool, a list of the group names that train, or a pytree of bools "
        "like the parameters")


def _is_key(x) -> bool:
  dtype = getattr(x, "dtype", None)
  if dtype is None:
    return False
  return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) or (
      dtype == jnp.uint32 and getattr(x, "shape", ())[-1:] == (2,))


def check_train_call(params0, key) -> None:
  """One line for ``train(key, params0)``: the arguments swapped."""
  if _is_key(params0) and not _is_key(key):
    raise ConfigError(f"train(params0, key): params0 is {_describe(params0)}, which is a PRNG "
                      f"key, and key is {_describe(key)}: the arguments are swapped; call "
                      "train(params0, key).")
  if key is not None and not _is_key(key):
    raise ConfigError(f"train(params0, key): key is {_describe(key)}, not a PRNG key "
                      "(jax.random.PRNGKey(seed) or jax.random.key(seed)).")


def make_train(loss_fn: Callable, batch: Batch, record: Callable, cfg: TrainConfig,
               trainable: Any, *, record_params: bool = False):
  """Build ``train(params0, key, lr=cfg.lr) -> Trajectory`` (pure; jit/vmap it).

  The ``make_*train`` family takes one argument order: ``(loss_fn, batch, record, cfg,
  trainable, *, options)`` (:func:`dynamics.make_auto_train`, :func:`dynamics.make_fast_train`;
  :func:`dynamics.make_train_early_stopping` adds ``dev_batch`` after ``batch``), every
  option keyword-only.

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    batch: the training set (minibatches are drawn from it).
    record: ``record(params, params0) -> pytree`` of observables; called at
      step 0 and every ``cfg.record_every`` steps.
    cfg: training configuration; its ``optimizer`` a name, an
      ``optax.GradientTransformation`` or a function ``lr -> GradientTransformation``.
    trainable: which parameters train (frozen ones get zero updates): a dict group ->
      bool, a list of the group names that train, or a pytree of bools like the
      parameters (equinox's filter style; bool arrays freeze single entries, e.g. rows);
      see :mod:`dynamics.optimizers`.
    record_params: also store the full parameters at every recorded step.

  Returns:
    ``train(params0, key, lr=None, bound=None)``: ``key`` drives minibatch order only;
    ``lr`` (traced or not) overrides ``cfg.lr``. With ``cfg.flow_time`` set, the run
    stops after ``cfg.run_records(lr)`` recorded intervals and its later records repeat
    its final state; ``bound`` (an unbatched int, e.g. the largest ``run_records`` of a
    vmapped chunk) skips the intervals after it for every run, so a chunk's compute
    ends with its longest run (under ``vmap`` a run's own end alone cannot skip work).

  Raises:
    ConfigError: arguments of the wrong kind or order (one line naming the argument);
      from ``train``: ``params0`` and ``key`` swapped, ``trainable`` that does not fit
      the parameters, ``record`` returning ``None``.
  """
  check_train_args("make_train", loss_fn, batch, record, cfg, trainable)
  checked = checked_record(record)
  grad_fn = jax.value_and_grad(lambda p, b: loss_fn(p, b)[0])
  full = not cfg.batch_size or cfg.batch_size >= batch.tokens.shape[0]

  def train(params0, key, lr=None, bound=None):
    check_train_call(params0, key)
    trainable_mask(trainable, params0)           # fits the parameters: one line if not
    check(lr is None or not isinstance(cfg.optimizer, optax.GradientTransformation), "lr", lr,
          "unset when cfg.optimizer is an optax.GradientTransformation (it holds its own "
          "learning rate); give a function lr -> GradientTransformation to sweep lr")
    lr = cfg.lr if lr is None else lr
    records = None if cfg.flow_time is None else cfg.run_records(lr)
    opt = masked_optimizer(base_optimizer(cfg.optimizer, lr), trainable)

    def step_fn(state: TrainState, _):
      if full:
        loss, grads = grad_fn(state.params, batch)
      else:
        loss, grads = minibatch_value_and_grad(grad_fn, state.params, batch, key, state.step,
                                               cfg.batch_size, cfg.sampling)
      params, opt_state, failed_at, _ = guarded_update(
          opt, grads, loss, state.params, state.opt_state, state.failed_at, state.step)
      return TrainState(params, opt_state, state.step + 1, failed_at), None

    def observe(params):
      return (checked(params, params0), params if record_params else None)

    def advance(state: TrainState) -> TrainState:
      return jax.lax.scan(step_fn, state, None, length=cfg.record_every)[0]

    def record_fn(carry, r):
      state, seen = carry
      if bound is None:
        new = advance(state)
      else:
        new = jax.lax.cond(r < bound, advance, lambda s_: s_, state)
      if records is not None:   # flow_time: the run stops after its own intervals
        new = jax.tree.map(lambda a, b: jnp.where(r < records, a, b), new, state)
      if bound is None or record_params:
        seen = observe(new.params)
      else:   # past the bound nothing moves, so the records repeat
        seen = jax.lax.cond(r < bound, lambda p: observe(p), lambda _: seen, new.params)
      return (new, seen), seen

    state0 = TrainState(params0, opt.init(params0), jnp.zeros((), jnp.int32),
                        -jnp.ones((), jnp.int32))
    first = observe(params0)
    (state, _), recs = jax.lax.scan(record_fn, (state0, first), jnp.arange(cfg.n_records - 1))
    obs, params_t = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                                 first, recs)
    t = cfg.record_steps().astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    return Trajectory(t=t, observables=obs, final_params=state.params,
                      failed_at=state.failed_at.astype(t.dtype), params=params_t)

  return train
