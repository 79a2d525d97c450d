"""Training on translation pairs (Snell et al., Sections 3.2 and 4.2, on Multi30k): the LSTM
encoder–decoder by :func:`dynamics.make_train`, and the bag-of-words proxy by full-batch Adam.

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns", 2021.
  https://arxiv.org/abs/2103.07601
"""
from typing import Callable

import jax
import optax

from attndyn.dynamics.train import TrainConfig, make_train
from attndyn.models import bow_proxy, seq2seq
from attndyn.tasks.batch import Batch

__all__ = ["seq2seq_point", "train_bow_proxy"]


def seq2seq_point(cfg: seq2seq.Seq2SeqConfig, data: Batch, tc: TrainConfig,
                  loss_pairs: int) -> Callable:
  """``one(seed) -> {"loss": [R], "params": final}``: the encoder–decoder trained on ``data``
  by ``make_train`` from ``init(k_init)`` with the key ``k_run`` (``k_init, k_run =
  split(PRNGKey(seed))``). The recorded loss is on the first ``loss_pairs`` pairs: the whole
  set's logits (``[n_pairs, length, vocabulary]`` per seed, vmapped over seeds) do not fit
  in memory at Multi30k's size."""
  loss = seq2seq.make_seq_loss(cfg)
  sample = jax.tree.map(lambda x: x[:loss_pairs], data)
  record = lambda p, p0: {"loss": loss(p, sample)[0]}
  train = make_train(loss, data, record, tc, cfg.trainable())

  def one(seed):
    ki, ko = jax.random.split(jax.random.PRNGKey(seed))
    traj = train(seq2seq.init(ki, cfg), ko)
    return {"loss": traj.observables["loss"], "params": traj.final_params}

  return one


def train_bow_proxy(data: Batch, src_vocab: int, tgt_vocab: int, lr: float, steps: int) -> dict:
  """The bag-of-words proxy (:mod:`models.bow_proxy`) after ``steps`` full-batch Adam steps
  of rate ``lr`` on ``data``, from γ = 0.

  A second loop beside :func:`dynamics.make_train`: its own ``optax`` scan, with no
  records, no minibatches and no divergence guard (the proxy's loss is convex in γ);
  no test pins it to ``make_train``.
  """
  opt = optax.adam(lr)
  g0 = bow_proxy.init(src_vocab, tgt_vocab)
  grad = jax.jit(jax.grad(lambda p: bow_proxy.loss(p, data)[0]))

  def proxy_step(carry, _):
    p, st = carry
    u, st = opt.update(grad(p), st, p)
    return (optax.apply_updates(p, u), st), None

  (gamma, _), _ = jax.lax.scan(proxy_step, (g0, opt.init(g0)), None, length=steps)
  return gamma
