"""The copying sweeps shared by the Snell et al. experiments: every seed one point of one vmapped call.

Two models (``docs/snell-copying.md`` lists how they differ):

* ``authors`` (:func:`authors_sweep`): the authors' model (:mod:`models.seq2seq_snell`),
  data encoding (EOS/SOS), loop (:func:`dynamics.copying.authors_train`) and evaluation
  (:func:`analysis.copying_stats.authors_evaluation`), checkpointed per chunk of seeds.
* ``ours`` (:func:`copy_sweep`): the earlier variant "ours: no EOS, Glorot"
  (:mod:`models.seq2seq`, :func:`dynamics.copying.copying_point`, a fixed evaluation batch).

For ``ours`` a point is ``{"seed": s, "head_seeds": [K]}``: seed s draws the training data
(a fresh batch every step), the minibatch order and every parameter but the
attention heads; head k's ``W_a`` is the head a single-head model of seed
``head_seeds[k]`` starts with (so single-head seed s is ``head_seeds = [s]``).
"""
import dataclasses
from typing import Mapping, Optional

import jax
import numpy as np

from attndyn import dynamics
from attndyn import settings as study_settings
from attndyn.analysis import copying_stats as cs
from attndyn.analysis import ktiw
from attndyn.reproduce import engine
from attndyn.dynamics import copying
from attndyn.models import seq2seq, seq2seq_snell
from attndyn.tasks.copying import CopyingConfig, sample_copying
from attndyn.tasks.errors import check

__all__ = ["EVAL_KEY", "SUCCESS_METRICS", "merge_preset", "task_config", "model_config",
           "copy_sweep", "success", "authors_model", "authors_point", "authors_sweep"]

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
  tc = dynamics.TrainConfig(optimizer="adam", lr=s.lr, steps=s.steps,
                            record_every=s.record_every, batch_size=s.batch)
  one = copying.copying_point(cfg, task, ktiw.copy_record(cfg, ev), tc)
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


def authors_model(task: CopyingConfig, s) -> seq2seq_snell.SnellSeq2SeqConfig:
  return seq2seq_snell.SnellSeq2SeqConfig(task.vocab, task.sos, hidden=s.hidden)


def authors_point(task: CopyingConfig, s):
  """``one(seed) -> {metric: [R]}``: one seed of the authors' setting (init, data, evaluation)."""
  cfg = authors_model(task, s)
  return copying.authors_point(cfg, task, cs.authors_evaluation(cfg, task, s.eval_size),
                               batch=s.batch, lr=s.lr, steps=s.steps, record_every=s.record_every)


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
