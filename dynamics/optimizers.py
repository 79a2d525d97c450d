"""Optimisers: a name or any optax transformation, with frozen parameters masked out (KF, EF, ...).

Which parameters train (``trainable``) may be given three ways:

* group names -> flag, ``{"embeddings": True, "keys": False, ...}`` (a flag for every
  top-level group; ``LuModelConfig.trainable()``);
* the names of the groups that train, ``["embeddings", "keys"]`` (the rest are frozen);
* a pytree of bools shaped like the parameters or a prefix of them (equinox's filter
  style): a bool per leaf or per subtree, or a bool array per leaf that broadcasts to it
  (``jnp.arange(V)[:, None] < T`` trains only the first ``T`` rows of an embedding table).

:func:`trainable_mask` turns any of them into the last form.
"""
from typing import Any, Callable, Mapping, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attndyn.tasks.errors import ConfigError, check

__all__ = ["OPTIMIZERS", "Optimizer", "base_optimizer", "group_flags", "is_optimizer",
           "masked_optimizer", "optimizer_name", "trainable_mask"]

# ``gd`` is full-batch gradient descent (the paper); ``sgd`` the same update on minibatches.
OPTIMIZERS = ("gd", "sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop",
              "lion", "adabelief", "lamb", "lars", "novograd", "radam", "sm3", "yogi")

# A name from OPTIMIZERS, an optax transformation (with its own learning rate or schedule),
# or a function of the learning rate returning one (so that a sweep can trace lr).
Optimizer = Union[str, optax.GradientTransformation, Callable[[Any], optax.GradientTransformation]]


def is_optimizer(x) -> bool:
  """Whether ``x`` is an :data:`Optimizer`."""
  return ((isinstance(x, str) and x in OPTIMIZERS)
          or isinstance(x, optax.GradientTransformation) or callable(x))


def optimizer_name(x) -> str:
  """A short name of an :data:`Optimizer` for messages."""
  if isinstance(x, str):
    return repr(x)
  if isinstance(x, optax.GradientTransformation):
    return "an optax.GradientTransformation"
  return f"the optimiser function {getattr(x, '__qualname__', type(x).__name__)!r}"


def base_optimizer(name: Optimizer, lr, **kwargs) -> optax.GradientTransformation:
  """The optax transformation for ``name`` with learning rate ``lr`` (may be traced).

  ``name``: one of :data:`OPTIMIZERS`; an ``optax.GradientTransformation``, returned as it
  is (``lr`` is then unused: it has its own learning rate or schedule); or a function
  ``lr -> optax.GradientTransformation``, called with ``lr``.
  """
  if isinstance(name, optax.GradientTransformation):
    return name
  if callable(name) and not isinstance(name, str):
    out = name(lr, **kwargs)
    check(isinstance(out, optax.GradientTransformation), "optimizer", name,
          "a function of the learning rate that returns an optax.GradientTransformation")
    return out
  check(isinstance(name, str) and name in OPTIMIZERS, "optimizer", name,
        f"one of {', '.join(OPTIMIZERS)}, an optax.GradientTransformation, or a function "
        "lr -> optax.GradientTransformation")
  if name in ("gd", "sgd"):
    return optax.sgd(lr, **kwargs)
  if name == "momentum":
    return optax.sgd(lr, momentum=kwargs.pop("momentum", 0.9), **kwargs)
  if name == "nesterov":
    return optax.sgd(lr, momentum=kwargs.pop("momentum", 0.9), nesterov=True, **kwargs)
  return getattr(optax, name)(lr, **kwargs)


def _is_flag(x) -> bool:
  return isinstance(x, (bool, np.bool_)) or (
      hasattr(x, "dtype") and hasattr(x, "shape") and jnp.dtype(x.dtype) == jnp.bool_)


def _trainable_repr(trainable) -> str:
  text = repr(dict(trainable) if isinstance(trainable, Mapping) else trainable)
  return text if len(text) < 120 else text[:117] + "..."


def trainable_mask(trainable: Any, params: Any) -> Any:
  """``trainable`` (any form in the module docstring) as a pytree shaped like ``params``
  whose leaves are Python bools (a whole leaf trains or not) or bool arrays that broadcast
  to the leaf (per entry).

  Raises:
    ConfigError: a group without a flag, an unknown group name, a leaf that is not a bool,
      a mask that does not broadcast to its parameter, or ``trainable`` of no allowed form.
  """
  if isinstance(trainable, (list, tuple, set, frozenset)) and all(
      isinstance(g, str) for g in trainable):
    check(isinstance(params, Mapping), "trainable", trainable,
          "group names only for parameters that are a dict of groups")
    unknown = sorted(set(trainable) - set(params))
    check(not unknown, "trainable", sorted(trainable),
          f"names of parameter groups, of {list(params)} (not {unknown})")
    trainable = {g: g in trainable for g in params}
  if isinstance(trainable, Mapping) and isinstance(params, Mapping):
    missing = [g for g in params if g not in trainable]
    if missing:
      raise ConfigError(f"trainable = {_trainable_repr(trainable)} does not say whether "
                        f"{missing} train: give a flag for every parameter group of "
                        f"{list(params)} (e.g. LuModelConfig.trainable() for the Lu model).")
    extra = [g for g in trainable if g not in params]
    check(not extra, "trainable", _trainable_repr(trainable),
          f"flags for the parameter groups {list(params)} only (not {extra})")
    trainable = {g: trainable[g] for g in params}
  elif isinstance(trainable, str) or not (_is_flag(trainable) or jax.tree.leaves(trainable)):
    raise ConfigError(f"trainable = {_trainable_repr(trainable)} is not allowed: a dict of "
                      "group -> bool, a list of the group names that train, or a pytree of "
                      "bools shaped like the parameters.")

  def expand(flag, sub):
    check(_is_flag(flag), "trainable", _trainable_repr(trainable),
          "bools (or bool arrays) at its leaves")
    if isinstance(flag, (bool, np.bool_)):
      return jax.tree.map(lambda _: bool(flag), sub)

    def per_leaf(x):
      check(jnp.broadcast_shapes(jnp.shape(flag), jnp.shape(x)) == jnp.shape(x), "trainable",
            f"a mask of shape {jnp.shape(flag)}",
            f"a bool mask that broadcasts to its parameter's shape {jnp.shape(x)}")
      return flag
    return jax.tree.map(per_leaf, sub)

  try:
    return jax.tree.map(expand, trainable, params, is_leaf=lambda x: x is None)
  except ValueError as err:
    if isinstance(err, ConfigError):
      raise
    raise ConfigError(f"trainable = {_trainable_repr(trainable)} is not allowed: its "
                      f"structure is not the parameters' (or a prefix of it): "
                      f"{str(err).splitlines()[0]}") from None


def group_flags(trainable: Any, params: Any = None) -> Optional[dict]:
  """``{group: bool}`` when ``trainable`` trains or freezes whole top-level groups, else
  ``None`` (a group partly frozen). A dict of bools needs no ``params``."""
  if isinstance(trainable, Mapping) and all(isinstance(v, (bool, np.bool_))
                                            for v in trainable.values()):
    if params is None or not isinstance(params, Mapping):
      return {g: bool(v) for g, v in trainable.items()}
  if params is None or not isinstance(params, Mapping):
    return None
  mask = trainable_mask(trainable, params)
  flags = {}
  for g in params:
    leaves = jax.tree.leaves(mask[g])
    if not all(isinstance(f, bool) for f in leaves) or len(set(leaves)) > 1:
      return None
    flags[g] = bool(leaves[0]) if leaves else False
  return flags


def masked_optimizer(inner: optax.GradientTransformation, trainable: Any) -> optax.GradientTransformation:
  """Apply ``inner`` to the trainable parameters; frozen ones get zero updates.

  Args:
    inner: the optimiser of the trainable parameters.
    trainable: which parameters train, in any form of the module docstring. Whole
      leaves frozen are not seen by ``inner`` (``optax.multi_transform``); entries frozen
      by a bool array have their gradient zeroed before ``inner`` and their update
      zeroed after it.

  Raises:
    ConfigError (a ValueError), at ``init``/``update``: see :func:`trainable_mask`.
  """
  def mask_of(params):
    return trainable_mask(trainable, params)

  def per_leaf(mask) -> bool:
    return all(isinstance(f, bool) for f in jax.tree.leaves(mask))

  def labels(params):
    return jax.tree.map(lambda f: "train" if f else "freeze", mask_of(params))

  by_leaf = optax.multi_transform({"train": inner, "freeze": optax.set_to_zero()}, labels)

  def zero_frozen(tree, mask):
    return jax.tree.map(lambda x, f: jnp.where(f, x, jnp.zeros_like(x)), tree, mask)

  def init(params):
    if per_leaf(mask_of(params)):
      return by_leaf.init(params)
    return inner.init(params)

  def update(grads, state, params=None):
    if params is None:
      raise ConfigError("masked_optimizer's update needs params (to know which train).")
    mask = mask_of(params)
    if per_leaf(mask):
      return by_leaf.update(grads, state, params)
    updates, state = inner.update(zero_frozen(grads, mask), state, params)
    return zero_frozen(updates, mask), state

  return optax.GradientTransformation(init, update)
