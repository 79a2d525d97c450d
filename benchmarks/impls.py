"""The implementations timed side by side, each as ``build(workload, epochs) -> Impl``.

* ``torch_loop``: PyTorch, one seed after another, autograd on gathered
  embeddings (needs ``torch``; optional).
* ``jax_naive``: the obvious JAX version, ``jit(vmap(scan(value_and_grad)))``
  over seeds with gathered embeddings, written out here without project code.
* ``attndyn``: the project's fast path (:func:`dynamics.make_fast_train`)
  under ``jit(vmap(...))``, exactly as ``dynamics.run_sweep`` calls it.
* ``attndyn_generic``: the project's generic autodiff path (:func:`dynamics.make_train`),
  vmapped over seeds;
* ``attndyn_generic_serial``: the same, the seeds one after another (``lax.map``), as
  ``attndyn run`` maps a chunk on CPU (:func:`attndyn.pipeline.generic_gd_chunk`).

Every JAX implementation is compiled ahead of time (``jit(f).lower(...).compile()``)
so compile time is measured apart from run time.
"""
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import dynamics
from attndyn import models
from benchmarks.workload import Workload

TORCH_HINT = "torch not installed: pip install torch==2.13.0 to include the PyTorch baseline"
RECORD_EVERY = 50


class Impl(NamedTuple):
  """A ready-to-time implementation.

  Attributes:
    run: ``run()`` trains every seed for ``epochs`` and blocks until done;
      returns ``[S, T]`` topic-word scores at the end (for a sanity check).
    compile_s: seconds spent compiling (0 for eager PyTorch).
    xla_mem_bytes: the executable's arguments + outputs + temporaries (XLA's own
      accounting), or ``None``.
    measured_seeds: seeds actually trained per ``run()`` (the per-seed PyTorch
      loop may time a subset; its time is linear in seeds).
  """
  run: Callable[[], Any]
  compile_s: float
  xla_mem_bytes: Optional[int]
  measured_seeds: int


def _aot(fn, *args, compiler_options=None) -> tuple:
  """``(compiled, seconds to lower + compile, XLA memory bytes)``."""
  t0 = time.perf_counter()
  compiled = jax.jit(fn, compiler_options=compiler_options).lower(*args).compile()
  seconds = time.perf_counter() - t0
  try:
    m = compiled.memory_analysis()
    mem = int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes)
  except Exception:  # noqa: BLE001 - not every backend reports it
    mem = None
  return compiled, seconds, mem


def _topic_scores(params, n_topic: int):
  return models.lu.word_scores(params)[:n_topic]


def jax_naive(w: Workload, epochs: int) -> Impl:
  """``jit(vmap(scan(value_and_grad)))`` over seeds, embeddings gathered per token.

  The loss of one seed, written the obvious way (TC classifier, fixed query):

  .. math:: L = -\\frac1n Σ_i \\log \\mathrm{softmax}(Uᵀ Σ_l a_{il} ν_{w_{il}})_{y_i},
            \\quad a_{il} = \\mathrm{softmax}_l(κ_{w_{il}}·q)
  """
  tokens, labels = w.data.train.tokens, w.data.train.labels
  n_topic = w.task.n_topic_words

  def loss(p):
    scores = p["keys"][tokens] @ p["query"]                         # [n, L]
    attn = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("nl,nld->nd", attn, p["embeddings"][tokens])
    logits = ctx @ p["classifier"]["U"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

  def train(p0):
    def step(p, _):
      value, g = jax.value_and_grad(loss)(p)
      g = dict(g, query=jnp.zeros_like(g["query"]))
      return jax.tree.map(lambda a, b: a - w.lr * b, p, g), value
    p, losses = jax.lax.scan(step, p0, None, length=epochs)
    return _topic_scores(p, n_topic), losses

  compiled, seconds, mem = _aot(jax.vmap(train), w.params0)
  return Impl(lambda: jax.block_until_ready(compiled(w.params0))[0], seconds, mem, w.seeds)


def _record(n_topic: int):
  return lambda params, params0: {"score": _topic_scores(params, n_topic)}


def _train_config(w: Workload, epochs: int):
  return dynamics.TrainConfig(lr=w.lr, steps=epochs, record_every=min(RECORD_EVERY, epochs))


def _seeds_impl(w: Workload, fn, compiler_options=None) -> Impl:
  """``fn(params0, keys)`` over all of ``w``'s seeds, compiled ahead of time."""
  compiled, seconds, mem = _aot(fn, w.params0, w.keys, compiler_options=compiler_options)
  return Impl(lambda: jax.block_until_ready(compiled(w.params0, w.keys)), seconds, mem, w.seeds)


def attndyn(w: Workload, epochs: int, seed_tile=None) -> Impl:
  """The fast path as ``attndyn run`` runs it: all seeds of a chunk advanced together, in
  tiles of ``seed_tile`` (default :func:`dynamics.fast_lu.default_seed_tile`)."""
  train_batch = dynamics.make_fast_sweep_train(w.model_cfg, w.data.train,
                                               _record(w.task.n_topic_words),
                                               _train_config(w, epochs), w.model_cfg.trainable(),
                                               seed_tile=seed_tile)
  return _seeds_impl(w, lambda p, k: train_batch(p).observables["score"][:, -1],
                     compiler_options=dynamics._FAST_COMPILER_OPTIONS)


def _generic_train(w: Workload, epochs: int):
  """One seed's run on the generic autodiff path (:func:`dynamics.make_train`)."""
  return dynamics.make_train(models.make_loss(models.lu.apply), w.data.train,
                             _record(w.task.n_topic_words), _train_config(w, epochs),
                             w.model_cfg.trainable())


def attndyn_generic(w: Workload, epochs: int) -> Impl:
  """The generic autodiff path (:func:`dynamics.make_train`), ``jit(vmap(train))``."""
  train = _generic_train(w, epochs)
  return _seeds_impl(w, jax.vmap(lambda p, k: train(p, k).observables["score"][-1]))


def attndyn_generic_serial(w: Workload, epochs: int) -> Impl:
  """The generic autodiff path (:func:`dynamics.make_train`), ``jit(lax.map(train))``."""
  train = _generic_train(w, epochs)
  return _seeds_impl(w, lambda p, k: jax.lax.map(lambda a: train(*a).observables["score"][-1],
                                                 (p, k)))


def torch_available() -> bool:
  try:
    import torch  # noqa: F401
  except ImportError:
    return False
  return True


def torch_loop(w: Workload, epochs: int, max_seeds: int = 4) -> Impl:
  """A PyTorch training loop, one seed at a time (float32, CPU, autograd).

  Times ``min(S, max_seeds)`` seeds; the loop's cost is linear in seeds, so
  its throughput in seed·epochs/s does not depend on ``S``.
  """
  import torch

  tokens = torch.from_numpy(np.asarray(w.data.train.tokens).astype(np.int64))
  labels = torch.from_numpy(np.asarray(w.data.train.labels).astype(np.int64))
  n_topic = w.task.n_topic_words
  seeds = min(w.seeds, max_seeds)
  p0 = jax.tree.map(np.asarray, w.params0)

  def one_seed(i):
    emb = torch.tensor(p0["embeddings"][i], requires_grad=True)
    keys = torch.tensor(p0["keys"][i], requires_grad=True)
    query = torch.tensor(p0["query"][i])
    u = torch.tensor(p0["classifier"]["U"][i], requires_grad=True)
    params = (emb, keys, u)
    for _ in range(epochs):
      scores = keys[tokens] @ query
      attn = torch.softmax(scores, dim=-1)
      ctx = torch.einsum("nl,nld->nd", attn, emb[tokens])
      loss = torch.nn.functional.cross_entropy(ctx @ u, labels)
      grads = torch.autograd.grad(loss, params)
      with torch.no_grad():
        for p, g in zip(params, grads):
          p -= w.lr * g
    return (keys.detach() @ query)[:n_topic].numpy()

  return Impl(lambda: np.stack([one_seed(i) for i in range(seeds)]), 0.0, None, seeds)


IMPLS = {"torch_loop": torch_loop, "jax_naive": jax_naive, "attndyn": attndyn,
         "attndyn_generic": attndyn_generic, "attndyn_generic_serial": attndyn_generic_serial}
