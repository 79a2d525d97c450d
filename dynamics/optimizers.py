"""Optimisers: any optax optimiser, with frozen parameter groups masked out (KF, EF, ...)."""
from typing import Mapping

import optax

from tasks.errors import ConfigError, check

# ``gd`` is full-batch gradient descent (the paper); ``sgd`` the same update on minibatches.
OPTIMIZERS = ("gd", "sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop",
              "lion", "adabelief", "lamb", "lars", "novograd", "radam", "sm3", "yogi")


def base_optimizer(name: str, lr, **kwargs) -> optax.GradientTransformation:
  """The optax transformation called ``name`` with learning rate ``lr`` (may be traced)."""
  check(name in OPTIMIZERS, "optimizer", name, f"one of {', '.join(OPTIMIZERS)}")
  if name in ("gd", "sgd"):
    return optax.sgd(lr, **kwargs)
  if name == "momentum":
    return optax.sgd(lr, momentum=kwargs.pop("momentum", 0.9), **kwargs)
  if name == "nesterov":
    return optax.sgd(lr, momentum=kwargs.pop("momentum", 0.9), nesterov=True, **kwargs)
  return getattr(optax, name)(lr, **kwargs)


def masked_optimizer(inner: optax.GradientTransformation,
                     trainable: Mapping[str, bool]) -> optax.GradientTransformation:
  """Apply ``inner`` to the trainable top-level groups; frozen groups get zero updates.

  Args:
    inner: the optimiser of the trainable parameters.
    trainable: group name (top-level key of the params dict) -> trainable; every
      group of the parameters needs a flag.

  Raises:
    ConfigError (a ValueError), at ``init``/``update``: a parameter group has no
      flag in ``trainable`` (optax's masking would fail with a bare ``KeyError``).
  """
  labels = {group: ("train" if flag else "freeze") for group, flag in trainable.items()}

  def label(params):
    missing = [group for group in params if group not in labels]
    if missing:
      raise ConfigError(f"trainable = {dict(trainable)!r} does not say whether {missing} train: "
                        f"give a flag for every parameter group of {list(params)} (e.g. "
                        f"LuModelConfig.trainable() for the Lu model).")
    return {group: labels[group] for group in params}

  return optax.multi_transform({"train": inner, "freeze": optax.set_to_zero()}, label)
