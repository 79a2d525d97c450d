"""The copying sweep shared by the Snell et al. experiments: every seed one point of one vmapped call.

A point is ``{"seed": s, "head_seeds": [K]}``: seed s draws the training data
(a fresh batch every step), the minibatch order and every parameter but the
attention heads; head k's ``W_a`` is the head a single-head model of seed
``head_seeds[k]`` starts with (so single-head seed s is ``head_seeds = [s]``).
"""
from typing import Dict, Optional

import jax
import numpy as np

import dynamics
from analysis import ktiw
from models import seq2seq
from tasks.copying import CopyingConfig, copying_dataset, sample_copying

EVAL_KEY = 10 ** 6


def merge_preset(settings: dict, presets: Dict[str, dict]) -> dict:
  """``settings`` with the values of ``presets[settings["preset"]]`` laid over them."""
  from tasks.errors import check
  check(settings["preset"] in presets, "preset", settings["preset"], f"one of {', '.join(presets)}")
  return {**settings, **presets[settings["preset"]]}


def task_config(dist: dict) -> CopyingConfig:
  return CopyingConfig(dist["distribution"], dist["n_tokens"], dist["length"])


def model_config(task: CopyingConfig, s: dict, heads: int = 1, attention: str = "general"):
  return seq2seq.Seq2SeqConfig(task.vocab, task.vocab, hidden=s["hidden"], heads=heads,
                               attention=attention, shared_embedding=True)


def copy_sweep(task: CopyingConfig, s: dict, seeds: np.ndarray,
               head_seeds: Optional[np.ndarray] = None) -> dict:
  """Train one model per point; returns ``{metric: [P, R]}`` and ``"t": [R]`` (NumPy).

  Args:
    task: the copying distribution.
    s: settings with ``hidden, steps, batch, lr, record_every, eval_size``.
    seeds: ``[P]`` seeds.
    head_seeds: ``[P, K]`` seeds of the heads (default ``seeds[:, None]``).
  """
  seeds = np.asarray(seeds, np.uint32)
  head_seeds = seeds[:, None] if head_seeds is None else np.asarray(head_seeds, np.uint32)
  cfg = model_config(task, s, heads=head_seeds.shape[1])
  ev = sample_copying(jax.random.PRNGKey(EVAL_KEY), task, s["eval_size"])
  record = ktiw.copy_record(cfg, ev)
  tc = dynamics.TrainConfig(optimizer="adam", lr=s["lr"], steps=s["steps"],
                            record_every=s["record_every"], batch_size=s["batch"])
  loss = seq2seq.make_seq_loss(cfg)

  def keys(seed):
    return jax.random.split(jax.random.PRNGKey(seed), 3)    # data, init, minibatch order

  def one(inp):
    kd, ki, ko = keys(inp["seed"])
    hk = jax.vmap(lambda h: seq2seq.single_head_key(keys(h)[1]))(inp["head_seeds"])
    data = copying_dataset(kd, task, s["steps"], s["batch"])
    train = dynamics.make_train(loss, data, record, tc, cfg.trainable())
    return train(seq2seq.init(ki, cfg, head_keys=hk), ko).observables

  obs = dynamics.run_sweep(one, {"seed": seeds, "head_seeds": head_seeds},
                           chunk_size=s.get("chunk"))
  obs = {k: np.asarray(v, float) for k, v in obs.items()}
  obs["t"] = np.asarray(tc.record_steps(), float)
  return obs


def success(obs: dict, s: dict) -> np.ndarray:
  """``[P]`` bool: the run learned to copy (final ``s["success_metric"]`` ≥ ``s["success_at"]``)."""
  return obs[s["success_metric"]][:, -1] >= s["success_at"]
