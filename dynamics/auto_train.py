"""The CLI's ``gd_path = "auto"`` for Python users: the exact fast path where it applies.

:func:`make_auto_train` takes :func:`dynamics.make_train`'s arguments and
returns the fast path's trainer (:func:`dynamics.make_fast_train`) only when
:func:`dynamics.fast_path_applies` says it computes the same trajectory, the
generic autodiff trainer otherwise, with the path taken and the reason.
"""
from typing import Callable, NamedTuple

from dynamics.fast_lu import fast_path_applies, make_fast_train
from dynamics.train import TrainConfig, make_train
from tasks.batch import Batch


class TrainChoice(NamedTuple):
  """The trainer :func:`make_auto_train` built.

  Attributes:
    train: ``train(params0, key, lr=None) -> Trajectory``, as from
      :func:`dynamics.make_train` (jit/vmap it the same way).
    path: ``"fast"`` (:func:`dynamics.make_fast_train`) or ``"generic"``
      (:func:`dynamics.make_train`).
    reason: why, one line (:class:`dynamics.FastPathCheck`'s reason).
  """
  train: Callable
  path: str
  reason: str


def make_auto_train(loss_fn: Callable, batch: Batch, record: Callable, cfg: TrainConfig,
                    trainable: dict, *, model_cfg=None, record_params: bool = False) -> TrainChoice:
  """Build a trainer on the exact fast path when it applies, on autodiff otherwise.

  Both paths give the same trajectory to float rounding where the fast path
  applies (``tests/test_fast_path.py``). It applies only to the Lu model
  trained on its own cross-entropy, ``models.make_loss(models.lu.apply)``,
  with a fixed query and full-batch gradient descent on a concrete dataset
  (:func:`dynamics.fast_path_applies`); a custom loss or model always trains
  with :func:`dynamics.make_train`.

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    batch: the training set.
    record: ``record(params, params0) -> pytree`` of observables.
    cfg: training configuration.
    trainable: parameter group -> trainable.
    model_cfg: the Lu model's :class:`models.LuModelConfig`; without it the
      fast path is not considered.
    record_params: also store the parameters at every recorded step.

  Returns:
    A :class:`TrainChoice` ``(train, path, reason)``.
  """
  if model_cfg is None:
    return TrainChoice(make_train(loss_fn, batch, record, cfg, trainable,
                                  record_params=record_params),
                       "generic", "no model_cfg given (the fast path needs the Lu model's config)")
  verdict = fast_path_applies(model_cfg, cfg, trainable, batch, loss_fn=loss_fn)
  if verdict:
    train = make_fast_train(loss_fn, batch, record, cfg, trainable, model_cfg=model_cfg,
                            record_params=record_params)
    return TrainChoice(train, "fast", verdict.reason)
  return TrainChoice(make_train(loss_fn, batch, record, cfg, trainable,
                                record_params=record_params), "generic", verdict.reason)
