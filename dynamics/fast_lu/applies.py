"""When the fast path computes exactly what autodiff gradient descent would (:func:`fast_path_applies`)."""
import dataclasses
import functools
from typing import Any, Optional

import jax

from attndyn.dynamics.optimizers import group_flags, optimizer_name
from attndyn.dynamics.train import TrainConfig
from attndyn.models import lu, lu_linear
from attndyn.models.objective import LuCrossEntropy
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import is_concrete_number

__all__ = ["FastPathCheck", "fast_path_applies"]


@dataclasses.dataclass(frozen=True)
class FastPathCheck:
  """Whether :func:`make_fast_train` applies; truthy iff it does.

  Attributes:
    applies: the fast path gives the same trajectory as the generic one.
    reason: why (or why not), one line.
  """
  applies: bool
  reason: str

  def __bool__(self) -> bool:
    return self.applies


def _loss_mismatch(loss_fn, model_cfg) -> Optional[str]:
  """Why ``loss_fn`` may differ from the Lu cross-entropy the fast path computes (None: it is that).

  Chosen by type, never by an attribute: only an object of exactly the class
  :class:`models.LuCrossEntropy` (what ``models.make_loss`` returns) whose ``apply_fn`` is a
  Lu forward pass known to be the same function, with the model's normaliser
  (``models.lu.apply`` or ``models.lu.apply_for``'s partial of it, :func:`models.lu.normaliser_of`;
  ``models.lu_linear.apply_linear`` for the linear classifiers with softmax) is accepted. A subclass, a
  ``functools.partial`` or a ``functools.wraps`` wrapper (which copies ``apply_fn`` onto a
  function that may add terms) is another loss, even when it computes the same values.
  """
  if type(loss_fn) is LuCrossEntropy:
    apply_fn = loss_fn.apply_fn
    normaliser = getattr(model_cfg, "normaliser", "softmax")
    own = "softmax" if apply_fn is lu_linear.apply_linear else lu.normaliser_of(apply_fn)
    if own is not None and own != normaliser:
      return (f"loss_fn is the cross-entropy of the model with {own} attention, while the "
              f"model's normaliser is {normaliser!r}")
    if own is not None and apply_fn is not lu_linear.apply_linear:
      return None
    if apply_fn is lu_linear.apply_linear:
      classifier = getattr(model_cfg, "classifier", None)
      if classifier in ("fc", "tc"):
        return None
      return (f"loss_fn is the cross-entropy of models.lu_linear.apply_linear, which needs a "
              f"linear classifier (fc or tc), not {classifier!r}")
    name = getattr(apply_fn, "__qualname__", type(apply_fn).__name__)
    what = f"loss_fn is the cross-entropy of {name!r}, not of models.lu.apply"
  elif loss_fn is None:
    what = "loss_fn is None"
  elif isinstance(loss_fn, LuCrossEntropy):
    what = (f"loss_fn is a {type(loss_fn).__qualname__}, a subclass of models.LuCrossEntropy, "
            "whose __call__ may differ")
  elif isinstance(loss_fn, functools.partial):
    what = "loss_fn is a functools.partial, not models.make_loss(models.lu.apply) itself"
  elif hasattr(loss_fn, "__wrapped__"):
    what = (f"loss_fn {_name(loss_fn)!r} wraps another function (functools.wraps), so it "
            "may add terms to it")
  else:
    what = f"loss_fn {_name(loss_fn)!r} is not models.make_loss(models.lu.apply)"
  return (f"a custom loss ({what}): the fast path computes the Lu model's own "
          "cross-entropy in closed form and cannot check that another loss equals it")


def _name(f) -> str:
  return getattr(f, "__qualname__", type(f).__name__)


def fast_path_applies(model_cfg, train_cfg: TrainConfig, trainable: Optional[dict] = None,
                      batch: Optional[Batch] = None, *, loss_fn: Any = "lu") -> FastPathCheck:
  """Decide whether the exact fast path can replace :func:`dynamics.make_train`.

  It applies to the Lu model (:class:`models.LuModelConfig`) with softmax attention trained
  on its own cross-entropy (``models.make_loss(models.lu.apply)``) with a fixed query, or a
  trainable one when the keys start at zero (``key_std = 0``: every key then stays on
  the query's line, and GD scales the query); with sparsemax attention and a fixed query
  (:mod:`dynamics.fast_lu.sparse`; its own loss is ``models.make_loss(models.lu.apply_for(
  model_cfg))``),
  any of the FC/TC/TL classifiers, any frozen subset of embeddings/keys/classifier,
  and full-batch gradient descent on one dataset shared by every seed. Any
  other loss function is refused: the fast path never calls it, so it cannot
  prove that it computes the same thing.

  Args:
    model_cfg: the model configuration.
    train_cfg: the training configuration.
    trainable: parameter group -> trainable (default ``model_cfg.trainable()``).
    batch: the training set, if known: it must be concrete (not traced), i.e.
      shared by all seeds of the sweep.
    loss_fn: the loss that would be handed to :func:`dynamics.make_train`; the
      default ``"lu"`` means the Lu model's own cross-entropy (what the CLI and
      :func:`make_fast_sweep_train` train).

  Returns:
    A :class:`FastPathCheck` (truthy iff it applies) with the reason.
  """
  trainable = model_cfg.trainable() if trainable is None else group_flags(trainable)
  if trainable is None:
    return FastPathCheck(False, "trainable is not a dict of group -> bool (the fast path trains "
                                "whole groups)")
  if not hasattr(model_cfg, "classifier") or model_cfg.classifier not in ("fc", "tc", "tl"):
    return FastPathCheck(False, "not the Lu attention model with an fc/tc/tl classifier")
  if not (isinstance(loss_fn, str) and loss_fn == "lu"):
    mismatch = _loss_mismatch(loss_fn, model_cfg)
    if mismatch:
      return FastPathCheck(False, mismatch)
  normaliser = getattr(model_cfg, "normaliser", "softmax")
  if normaliser not in ("softmax", "sparsemax"):
    return FastPathCheck(False, f"the attention normaliser is {normaliser!r} (the fast path "
                                "has softmax and sparsemax)")
  if not (isinstance(train_cfg.optimizer, str) and train_cfg.optimizer in ("gd", "sgd")):
    return FastPathCheck(False, f"optimizer {optimizer_name(train_cfg.optimizer)} is not plain "
                                "gradient descent")
  if train_cfg.batch_size and (batch is None or train_cfg.batch_size < batch.tokens.shape[0]):
    return FastPathCheck(False, f"minibatches of {train_cfg.batch_size} (the fast path is full-batch)")
  query = bool(trainable.get("query", False))
  key_std = getattr(model_cfg, "key_std", None)
  if query and normaliser != "softmax":
    return FastPathCheck(False, f"the query is trained with {normaliser} attention (the fast "
                                "path trains a query with softmax attention only)")
  if query and not (is_concrete_number(key_std) and key_std == 0):
    start = (f"key_std = {key_std!r}, not 0" if is_concrete_number(key_std)
             else "key_std is not a number here: swept or traced")
    return FastPathCheck(False, f"the query is trained and the keys may start off its line "
                                f"({start}), so they would leave it")
  if batch is not None and any(isinstance(x, jax.core.Tracer) for x in batch):
    return FastPathCheck(False, "the training data is traced (differs between sweep points)")
  how = "trained query from zero keys" if query else "fixed query"
  return FastPathCheck(True, f"{how}, full-batch GD, {model_cfg.classifier} classifier, "
                             f"{normaliser} attention, shared data")
