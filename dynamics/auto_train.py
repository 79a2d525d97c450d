"""The CLI's ``gd_path = "auto"`` for Python users: the exact fast path where it applies.

:func:`make_auto_train` takes :func:`dynamics.make_train`'s arguments and
returns the fast path's trainer (:func:`dynamics.make_fast_train`) only when
:func:`dynamics.fast_path_applies` says it computes the same trajectory (decided by
the loss's type, :class:`models.LuCrossEntropy`) and one step of it equals one step
of autodiff at the first parameters; the generic autodiff trainer otherwise, with
the path taken and the reason.
"""
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from attndyn.dynamics.fast_lu import fast_path_applies, make_fast_sweep_train, make_fast_train
from attndyn.dynamics.fast_lu.applies import _loss_mismatch
from attndyn.dynamics.optimizers import group_flags
from attndyn.dynamics.train import TrainConfig, check_train_args, make_train
from attndyn.models import lu
from attndyn.tasks.batch import Batch

__all__ = ["FIRST_STEP_RTOL", "TrainChoice", "first_step_gap", "make_auto_train"]

# The fast path's first step may differ from autodiff's only by float64 rounding: both are
# the same update summed in another order, a few hundred ulp (2.2e-16 each) of the update
# at most. A missing or extra term of the loss moves it by far more.
FIRST_STEP_RTOL = 1e-9


class TrainChoice(NamedTuple):
  """The trainer :func:`make_auto_train` built.

  Attributes:
    train: ``train(params0, key, lr=None) -> Trajectory``, as from
      :func:`dynamics.make_train` (jit/vmap it the same way).
    path: ``"fast"`` (:func:`dynamics.make_fast_train`) or ``"generic"``
      (:func:`dynamics.make_train`).
    reason: why, one line (:class:`dynamics.FastPathCheck`'s reason, or the first-step
      check's).
  """
  train: Callable
  path: str
  reason: str


def first_step_gap(loss_fn: Callable, batch: Batch, cfg: TrainConfig, trainable: dict,
                   model_cfg, params0: Any) -> float:
  """``‖Δ_fast − Δ_autodiff‖ / ‖Δ_autodiff‖`` of one gradient-descent step from ``params0``, in float64.

  ``Δ_fast`` is the parameter change of one step of the fast path's own trainer
  (:func:`dynamics.make_fast_sweep_train`, one seed, ``steps = record_every = 1``);
  ``Δ_autodiff = −lr ∇loss_fn(params0)`` on the trainable groups (0 on the frozen
  ones), one ``jax.grad`` of the loss handed in. Cheap: one step of one seed and one
  gradient, not a run; the fast path's program for one step is compiled once here.
  Norms over every parameter together.
  """
  with jax.enable_x64(True):
    p0 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params0)
    one = TrainConfig(optimizer="gd", lr=float(cfg.lr), steps=1, record_every=1)
    step = make_fast_sweep_train(model_cfg, batch, lambda p, q: jnp.zeros(()), one, trainable)
    fast = jax.tree.map(lambda x: x[0], step(jax.tree.map(lambda x: x[None], p0)).final_params)
    grads = jax.grad(lambda p: loss_fn(p, batch)[0])(p0)
    ref = {g: (jax.tree.map(lambda x, d: x - one.lr * d, p0[g], grads[g]) if trainable[g]
               else p0[g]) for g in p0}
    sq = lambda tree: sum(float(jnp.sum(x ** 2)) for x in jax.tree.leaves(tree))
    diff = jax.tree.map(lambda a, b: a - b, fast, ref)
    update = jax.tree.map(lambda a, b: a - b, ref, p0)
    return (sq(diff) / max(sq(update), 1e-300)) ** 0.5


def make_auto_train(loss_fn: Callable, batch: Batch, record: Callable, cfg: TrainConfig,
                    trainable: Any, *, model_cfg=None, record_params: bool = False,
                    params0: Optional[Any] = None) -> TrainChoice:
  """Build a trainer on the exact fast path when it applies, on autodiff otherwise.

  Both paths give the same trajectory to float rounding where the fast path
  applies (``tests/test_fast_path.py``). It applies only to the Lu model
  trained on its own cross-entropy, an object of exactly the class
  :class:`models.LuCrossEntropy` made by ``models.make_loss(models.lu.apply)``, or of
  ``models.lu.apply_for(model_cfg)`` with sparsemax attention (a
  subclass, ``functools.partial`` or ``functools.wraps`` wrapper of it is another loss),
  with a fixed query and full-batch gradient descent on a concrete dataset
  (:func:`dynamics.fast_path_applies`); a custom loss or model always trains
  with :func:`dynamics.make_train`. Before the fast path is trusted, one step of it is
  compared with one autodiff step of ``loss_fn`` (:func:`first_step_gap`, float64,
  relative gap at most :data:`FIRST_STEP_RTOL`); if they differ, it trains on autodiff
  and the reason says by how much.

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    batch: the training set.
    record: ``record(params, params0) -> pytree`` of observables.
    cfg: training configuration.
    trainable: parameter group -> trainable, or a pytree of bools like the parameters
      (see :func:`dynamics.make_train`).
    model_cfg: the Lu model's :class:`models.LuModelConfig`; without it the
      fast path is not considered.
    record_params: also store the parameters at every recorded step.
    params0: the parameters the first-step check starts from (default: the model's
      initialisation of seed 0, ``models.lu.init(PRNGKey(0), model_cfg)``).

  Returns:
    A :class:`TrainChoice` ``(train, path, reason)``.

  Raises:
    ConfigError: the arguments are not what :func:`dynamics.make_train` takes.
  """
  check_train_args("make_auto_train", loss_fn, batch, record, cfg, trainable)
  generic = lambda reason: TrainChoice(
      make_train(loss_fn, batch, record, cfg, trainable, record_params=record_params),
      "generic", reason)
  if model_cfg is None:
    return generic("no model_cfg given (the fast path needs the Lu model's config)")
  if hasattr(model_cfg, "classifier"):
    mismatch = _loss_mismatch(loss_fn, model_cfg)   # by type, before the Lu parameters
    if mismatch:
      return generic(mismatch)
  if params0 is None and hasattr(model_cfg, "classifier"):
    params0 = lu.init(jax.random.PRNGKey(0), model_cfg)
  flags = group_flags(trainable, params0) if params0 is not None else None
  if flags is None:
    return generic("trainable freezes part of a parameter group (the fast path trains "
                   "whole groups)")
  verdict = fast_path_applies(model_cfg, cfg, flags, batch, loss_fn=loss_fn)
  if not verdict:
    return generic(verdict.reason)
  gap = first_step_gap(loss_fn, batch, cfg, flags, model_cfg, params0)
  if not gap <= FIRST_STEP_RTOL:
    return generic(f"the fast path's first step differs from autodiff's by {gap:.2e} "
                   f"(relative, float64; allowed {FIRST_STEP_RTOL:g})")
  train = make_fast_train(loss_fn, batch, record, cfg, flags, model_cfg=model_cfg,
                          record_params=record_params)
  return TrainChoice(train, "fast", f"{verdict.reason}; first step equals autodiff's "
                                    f"(relative gap {gap:.1e})")
