"""Training on Snell et al.'s copying task: the authors' loop, and one seed of each model as a sweep point.

Two models (``docs/snell-copying.md`` lists how they differ):

* the authors' (:mod:`models.seq2seq_snell`), trained by their loop (:func:`authors_train`:
  a fresh batch every step, an evaluation after the update of every ``every``-th step on
  a fresh batch); one seed: :func:`authors_point`.
* ours, "no EOS, Glorot" (:mod:`models.seq2seq`), trained by :func:`dynamics.make_train`
  with a fixed evaluation batch; one seed: :func:`copying_point`.

The records are the caller's (the metrics live in ``analysis``: ``copying_stats``, ``ktiw``).

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns", 2021.
  https://arxiv.org/abs/2103.07601
"""
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from attndyn.dynamics.optimizers import base_optimizer
from attndyn.dynamics.train import TrainConfig, make_train
from attndyn.models import seq2seq, seq2seq_snell
from attndyn.tasks.batch import Batch
from attndyn.tasks.copying import CopyingConfig, copying_dataset, sample_copying
from attndyn.tasks.errors import check

__all__ = ["authors_train", "authors_point", "copying_point"]


def authors_train(loss_fn: Callable, sample: Callable, evaluate: Callable,
                  opt: optax.GradientTransformation, steps: int, every: int,
                  record: str = "after"):
  """The authors' training loop (``seq2seq.py`` ``train_loop``): ``train(params0, key) -> records``.

  ``for step in range(steps)``: one optimiser update on the fresh batch
  ``sample(fold_in(k_data, step))``; then, if ``step % every == 0``,
  ``evaluate(params, fold_in(k_eval, step))`` (a fresh evaluation batch). Records
  ``[steps // every]`` belong to steps ``0, every, ...`` and see the parameters
  after ``step + 1`` updates (the last, step ``steps − every``, is followed by
  ``every − 1`` unrecorded updates, as in the authors' loop). With
  ``record="before"`` (``multihead.py``'s ``can_learn``) each record is taken before
  that step's update instead, so record i sees ``every · i`` updates.

  A second loop beside ``dynamics.make_train`` because that one records before the
  first update and every ``record_every`` updates after it, and its ``record`` sees
  neither the step nor a key (so no fresh evaluation batch); its update is the same,
  pinned by ``tests/test_copying.py::test_authors_train_updates_and_records_as_make_train``.

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    sample: ``sample(key) -> Batch``, one training batch.
    evaluate: ``evaluate(params, key) -> pytree`` of observables.
    opt: the optimiser (the authors': ``torch.optim.Adam`` defaults, ``optax.adam(1e-3)``).
    steps: updates in all, a multiple of ``every``.
    every: evaluate after the update of every ``every``-th step.
    record: ``"after"`` (``seq2seq.py``) or ``"before"`` (``multihead.py``) that update.
  """
  check(record in ("after", "before"), "record", record, "'after' or 'before'")
  grad = jax.grad(lambda p, b: loss_fn(p, b)[0])

  def train(params0, key):
    k_data, k_eval = jax.random.split(key)

    def update(carry, step):
      params, state = carry
      g = grad(params, sample(jax.random.fold_in(k_data, step)))
      updates, state = opt.update(g, state, params)
      return (optax.apply_updates(params, updates), state), None

    def block(carry, first):
      if record == "before":
        rec = evaluate(carry[0], jax.random.fold_in(k_eval, first))
        carry, _ = jax.lax.scan(update, carry, first + jnp.arange(every))
        return carry, rec
      carry, _ = update(carry, first)
      rec = evaluate(carry[0], jax.random.fold_in(k_eval, first))
      carry, _ = jax.lax.scan(update, carry, first + 1 + jnp.arange(every - 1))
      return carry, rec

    _, recs = jax.lax.scan(block, (params0, opt.init(params0)), jnp.arange(0, steps, every))
    return recs

  return train


def authors_point(cfg: seq2seq_snell.SnellSeq2SeqConfig, task: CopyingConfig, evaluate: Callable,
                  *, batch: int, lr: float, steps: int, record_every: int) -> Callable:
  """``one(seed) -> records``: the authors' model from ``init(k_init, cfg)``, trained by
  :func:`authors_train` (Adam ``lr``, batches of ``batch`` fresh pairs of ``task``) with the
  key ``k_run``, where ``k_init, k_run = split(PRNGKey(seed))``."""
  train = authors_train(seq2seq_snell.make_loss(cfg), lambda k: sample_copying(k, task, batch),
                        evaluate, base_optimizer("adam", lr), steps, record_every)

  def one(seed):
    k_init, k_run = jax.random.split(jax.random.PRNGKey(seed))
    return train(seq2seq_snell.init(k_init, cfg), k_run)

  return one


def copying_point(cfg: seq2seq.Seq2SeqConfig, task: CopyingConfig, record: Callable,
                  tc: TrainConfig, evaluation: Optional[Batch] = None) -> Callable:
  """``one({"seed": s[, "head_seeds": [K]]})``: our model trained by :func:`make_train` on
  fresh batches of ``task`` (``tc.steps`` of ``tc.batch_size`` pairs).

  Seed s draws the training data, the initialisation and the minibatch order
  (``split(PRNGKey(s), 3)``); with ``head_seeds``, head k's ``W_a`` is the head a
  single-head model of seed ``head_seeds[k]`` starts with (:func:`seq2seq.single_head_key`).
  Returns the observables of ``record``, or with ``evaluation`` ``{"obs": observables,
  "attention": the trained model's attention on evaluation}``.
  """
  loss = seq2seq.make_seq_loss(cfg)

  def keys(seed):
    return jax.random.split(jax.random.PRNGKey(seed), 3)    # data, init, minibatch order

  def one(inp):
    kd, ki, ko = keys(inp["seed"])
    hk = (jax.vmap(lambda h: seq2seq.single_head_key(keys(h)[1]))(inp["head_seeds"])
          if "head_seeds" in inp else None)
    train = make_train(loss, copying_dataset(kd, task, tc.steps, tc.batch_size), record, tc,
                       cfg.trainable())
    traj = train(seq2seq.init(ki, cfg, head_keys=hk), ko)
    if evaluation is None:
      return traj.observables
    return {"obs": traj.observables,
            "attention": seq2seq.apply(traj.final_params, evaluation, cfg).attention}

  return one
