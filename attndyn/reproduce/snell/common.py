"""The copying sweeps shared by the Snell et al. experiments: every seed one point of one vmapped call.

Two models (``docs/snell-copying.md`` lists how they differ):

* ``authors`` (:func:`authors_sweep`): the authors' model (:mod:`models.seq2seq_snell`),
  data encoding (EOS/SOS) and evaluation (:func:`authors_train`), checkpointed per
  chunk of seeds with the engine's :class:`attndyn.checkpoint.Checkpoints`.
* ``ours`` (:func:`copy_sweep`): the earlier variant "ours: no EOS, Glorot"
  (:mod:`models.seq2seq`, ``dynamics.make_train``, a fixed evaluation batch).

For ``ours`` a point is ``{"seed": s, "head_seeds": [K]}``: seed s draws the training data
(a fresh batch every step), the minibatch order and every parameter but the
attention heads; head k's ``W_a`` is the head a single-head model of seed
``head_seeds[k]`` starts with (so single-head seed s is ``head_seeds = [s]``).
"""
import dataclasses
from typing import Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attndyn import dynamics
from attndyn import settings as study_settings
from attndyn.analysis import copying_stats as cs
from attndyn.analysis import ktiw
from attndyn.reproduce import engine
from attndyn.dynamics.optimizers import base_optimizer
from attndyn.models import seq2seq, seq2seq_snell
from attndyn.tasks.copying import CopyingConfig, copying_dataset, sample_copying
from attndyn.tasks.errors import check

__all__ = ["EVAL_KEY", "SUCCESS_METRICS", "merge_preset", "task_config", "model_config",
           "copy_sweep", "success", "authors_train", "authors_model", "authors_point",
           "authors_sweep"]

EVAL_KEY = 10 ** 6
# The accuracies both models (``authors`` and ``ours``) record at every logged step: the
# metrics :func:`success` may judge a run by.
SUCCESS_METRICS = ("token_acc", "attn_acc", "beta_acc")


def merge_preset(s, presets: Mapping[str, Mapping], experiment: str):
  """The settings ``s`` (a frozen dataclass with a ``preset`` field) with the values of
  ``presets[s.preset]`` laid over them (a bad preset is named as ``--set`` names it:
  ``EXPERIMENT.preset``; the field's ``Literal`` of the preset names refuses it first)."""
  check(s.preset in presets, f"{experiment}.preset", s.preset, f"one of {', '.join(presets)}")
  return dataclasses.replace(s, **presets[s.preset])


def task_config(dist: dict, encoding: str = "ours") -> CopyingConfig:
  return CopyingConfig(dist["distribution"], dist["n_tokens"], dist["length"], encoding)


def model_config(task: CopyingConfig, s, heads: int = 1, attention: str = "general"):
  return seq2seq.Seq2SeqConfig(task.vocab, task.vocab, hidden=s.hidden, heads=heads,
                               attention=attention, shared_embedding=True)


def copy_sweep(task: CopyingConfig, s, seeds: np.ndarray,
               head_seeds: Optional[np.ndarray] = None, *, ctx=None,
               name: Optional[str] = None) -> dict:
  """Train one model per point; returns ``{metric: [P, R]}`` and ``"t": [R]`` (NumPy).

  With a reproduction's ``ctx``, checkpointed under ``DIR/runs/NAME``
  (:func:`attndyn.reproduce.engine.sweep`; ``--resume`` reads finished chunks back).

  Args:
    task: the copying distribution.
    s: settings with ``hidden, steps, batch, lr, record_every, eval_size, chunk`` (seeds
      per compiled call; 0 or ``None``: all at once).
    seeds: ``[P]`` seeds.
    head_seeds: ``[P, K]`` seeds of the heads (default ``seeds[:, None]``).
  """
  seeds = np.asarray(seeds, np.uint32)
  head_seeds = seeds[:, None] if head_seeds is None else np.asarray(head_seeds, np.uint32)
  cfg = model_config(task, s, heads=head_seeds.shape[1])
  ev = sample_copying(jax.random.PRNGKey(EVAL_KEY), task, s.eval_size)
  record = ktiw.copy_record(cfg, ev)
  tc = dynamics.TrainConfig(optimizer="adam", lr=s.lr, steps=s.steps,
                            record_every=s.record_every, batch_size=s.batch)
  loss = seq2seq.make_seq_loss(cfg)

  def keys(seed):
    return jax.random.split(jax.random.PRNGKey(seed), 3)    # data, init, minibatch order

  def one(inp):
    kd, ki, ko = keys(inp["seed"])
    hk = jax.vmap(lambda h: seq2seq.single_head_key(keys(h)[1]))(inp["head_seeds"])
    data = copying_dataset(kd, task, s.steps, s.batch)
    train = dynamics.make_train(loss, data, record, tc, cfg.trainable())
    return train(seq2seq.init(ki, cfg, head_keys=hk), ko).observables

  inputs = {"seed": seeds, "head_seeds": head_seeds}
  if ctx is None:
    obs = dynamics.run_sweep(one, inputs, chunk_size=s.chunk or None)
  else:
    settings = {"task": dataclasses.asdict(task), "settings": study_settings.as_json(s)}
    obs = engine.sweep(ctx, name, one, inputs, settings, chunk_size=s.chunk or None, what="seeds")
  obs = {k: np.asarray(v, float) for k, v in obs.items()}
  obs["t"] = np.asarray(tc.record_steps(), float)
  return obs


def success(obs: dict, s) -> np.ndarray:
  """``[P]`` bool: the run learned to copy (final ``s.success_metric`` ≥ ``s.success_at``)."""
  return obs[s.success_metric][:, -1] >= s.success_at


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


def authors_model(task: CopyingConfig, s) -> seq2seq_snell.SnellSeq2SeqConfig:
  return seq2seq_snell.SnellSeq2SeqConfig(task.vocab, task.sos, hidden=s.hidden)


def authors_point(task: CopyingConfig, s):
  """``one(seed) -> {metric: [R]}``: one seed of the authors' setting (init, data, evaluation)."""
  cfg = authors_model(task, s)

  def evaluate(params, key):
    ev = sample_copying(key, task, s.eval_size)
    out = seq2seq_snell.apply(params, ev, cfg)
    m = cs.authors_metrics(out, seq2seq_snell.probe(params, cfg, out, ev.labels), ev)
    m["loss"] = seq2seq_snell.nll(out.logits, ev.labels)
    return m

  train = authors_train(seq2seq_snell.make_loss(cfg), lambda k: sample_copying(k, task, s.batch),
                        evaluate, base_optimizer("adam", s.lr), s.steps, s.record_every)

  def one(seed):
    k_init, k_run = jax.random.split(jax.random.PRNGKey(seed))
    return train(seq2seq_snell.init(k_init, cfg), k_run)

  return one


def authors_sweep(task: CopyingConfig, s, seeds: np.ndarray, *, ctx=None,
                  name: Optional[str] = None) -> dict:
  """The authors' setting for every seed; returns ``{metric: [P, R]}`` and ``"t": [R]`` (NumPy).

  With a reproduction's ``ctx``, the sweep runs through :func:`attndyn.reproduce.engine.sweep`:
  each finished chunk of ``s.chunk`` seeds is checkpointed under ``DIR/runs/NAME``, and
  ``--resume`` reads back the chunks already there (same settings) instead of running them.
  """
  seeds = np.asarray(seeds, np.uint32)
  one = authors_point(task, s)
  t = np.arange(0, s.steps, s.record_every, dtype=float)
  if ctx is None:
    obs = dynamics.run_sweep(one, seeds, chunk_size=s.chunk or None)
  else:
    settings = {"task": dataclasses.asdict(task),
                "settings": {k: getattr(s, k) for k in ("hidden", "steps", "batch", "lr",
                                                        "record_every", "eval_size")}}
    obs = engine.sweep(ctx, name, one, seeds, settings, chunk_size=s.chunk or None, what="seeds")
  obs = {k: np.asarray(v, float) for k, v in obs.items()}
  obs["t"] = t
  return obs
