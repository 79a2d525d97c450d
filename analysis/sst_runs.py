"""Section 5.2's runs on SST: Attn-FC and Attn-TC, seeds vmapped, early stopping per seed.

A group is some variants of one classifier × their seeds, one vmapped program. FC trains
the exact ``P = E U`` reduction (:mod:`models.lu_fc_reduced`: the same gradient descent, on
``J``-channel rows instead of ``d``-channel embeddings), TC the full model projected through
``U`` (:func:`models.lu_linear.apply_linear`). One call of :attr:`Group.segment` trains every
point for a segment with :func:`dynamics.make_train_early_stopping` (the dev loss evaluated
every ``eval_every`` epochs; a point stops after ``patience`` evaluations without
improvement), recording every word's score and ``‖v‖``, the attended word of every training
sentence (:func:`analysis.purity.attended_words`, ties broken by one fixed key) and the
losses; :func:`dynamics.segmented.run_segments` chains the segments.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2. https://arxiv.org/abs/2011.10036
"""
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.observables import embedding_norms
from attndyn.analysis.purity import attended_words
from attndyn.dynamics.early_stopping import make_train_early_stopping
from attndyn.dynamics.train import TrainConfig
from attndyn.models import lu
from attndyn.models import lu_fc_reduced as fc_reduced
from attndyn.models.lu_linear import apply_linear
from attndyn.models.objective import accuracy, make_loss

__all__ = ["Group", "make_group", "merge_groups"]


class Group(NamedTuple):
  """The points of one group (variant-major: ``which`` ``[P]`` indexes the model configs,
  ``seed`` ``[P]`` the init seed of each) and its two compiled functions.

  Attributes:
    params0: every point's start (for FC the reduction's ``(b, sigma)``), leaves ``[P, ...]``.
    aux: the FC reduction's constants per point (TC: zeros).
    segment: ``segment(params, aux, batches)``: one segment of early-stopped GD of every point
      (batches ``{"train", "dev"}``).
    evaluate: ``evaluate(params, aux, batch) -> (accuracy [P], score [P, V], norm [P, V])``.
  """
  params0: dict
  aux: object
  seed: np.ndarray
  which: np.ndarray
  segment: Callable
  evaluate: Callable


def make_group(cfgs: Sequence[lu.LuModelConfig], seeds: np.ndarray, train_cfg: TrainConfig, *,
               patience: int, eval_every: int) -> Group:
  """The group of the model configs ``cfgs`` (all FC or all TC) × ``seeds``.

  Each point starts from :func:`models.lu.init_seeds` of its seed under its config (float32,
  as ``attndyn run`` draws it); ``train_cfg`` is one segment's.
  """
  fc = cfgs[0].classifier == "fc"
  seed = np.tile(seeds, len(cfgs))
  which = np.repeat(np.arange(len(cfgs)), len(seeds))
  full0 = [lu.init_seeds(jnp.asarray(seed), c, jnp.float32) for c in cfgs]
  full0 = jax.tree.map(lambda *xs: jnp.stack(xs)[which, np.arange(len(which))], *full0)
  if fc:
    params0, aux = jax.vmap(fc_reduced.reduce)(full0)
    trainable = {"b": True, "sigma": True}
    apply_of = fc_reduced.make_apply
    scores_of = lambda p, c: fc_reduced.scores(p, c)
    norms_of = lambda p, c: fc_reduced.embedding_norms(p, c)
  else:
    params0, aux = full0, jnp.zeros(len(which))
    trainable = cfgs[0].trainable()
    apply_of = lambda c: apply_linear
    scores_of = lambda p, c: lu.word_scores(p)
    norms_of = lambda p, c: embedding_norms(p)
  tie_key = jax.random.PRNGKey(0)

  def one(params, c, batches):
    loss_fn = make_loss(apply_of(c))

    def record(p, p0):
      del p0
      dev_loss, dev_out = loss_fn(p, batches["dev"])
      return {"score": scores_of(p, c), "norm": norms_of(p, c),
              "attended": attended_words(p, batches["train"], tie_key,
                                         lambda q: scores_of(q, c)),
              "train_loss": loss_fn(p, batches["train"])[0], "dev_loss": dev_loss,
              "dev_acc": accuracy(dev_out.logits, batches["dev"].labels)}

    train = make_train_early_stopping(
        loss_fn, batches["train"], batches["dev"], record, train_cfg, trainable,
        patience=patience, eval_every=eval_every, monitor="dev_loss")
    return train(params, tie_key)

  evaluate = jax.jit(jax.vmap(lambda p, c, batch: (
      accuracy(apply_of(c)(p, batch).logits, batch.labels), scores_of(p, c), norms_of(p, c)),
      in_axes=(0, 0, None)))
  return Group(params0, aux, seed, which, jax.jit(jax.vmap(one, in_axes=(0, 0, None))), evaluate)


def merge_groups(parts: Sequence[dict], record_every: int) -> dict:
  """The points of several groups as one: their per-point arrays concatenated, their
  observables ``[P, T, ...]`` too, a group that stopped sooner (fewer records) repeating its
  last record up to the longest, and ``steps [T]`` the recorded epochs."""
  t = max(p["steps"].shape[0] for p in parts)

  def pad(x):   # repeat the last record of a group that stopped sooner
    if x.ndim < 2 or x.shape[1] == t:
      return x
    return np.concatenate([x, np.repeat(x[:, -1:], t - x.shape[1], axis=1)], axis=1)

  out = {k: np.concatenate([p[k] for p in parts]) for k in
         ("variant", "seed", "test_acc", "best_step", "stopped_at", "final_score", "final_norm")}
  out["obs"] = {k: np.concatenate([pad(p["obs"][k]) for p in parts]) for k in parts[0]["obs"]}
  out["steps"] = np.arange(t) * record_every
  return out
