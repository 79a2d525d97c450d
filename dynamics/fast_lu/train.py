"""The fast-path trainers: :func:`make_fast_sweep_train` (seeds innermost) and :func:`make_fast_train`."""
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.fast_lu.applies import _loss_mismatch, fast_path_applies
from attndyn.dynamics.fast_lu import sparse
from attndyn.dynamics.fast_lu.plan import HEAVY_COUNT, _plan_for
from attndyn.dynamics.fast_lu.step import (_Layout, _initial_rows, _make_step, _to_params,
                                           _to_rows, _to_state, _unpacker, frozen_first_layer,
                                           projected_forward_pays)
from attndyn.dynamics.train import TrainConfig, check_train_args
from attndyn.dynamics.trajectory import Trajectory, checked_record
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError

__all__ = ["SEED_TILE", "COMPILER_OPTIONS", "default_seed_tile", "make_fast_sweep_train",
           "make_fast_train"]

# Seeds per tile on a CPU: a tile's state ([V, d, S] float32) should stay in the last-level
# cache, so seeds are advanced in tiles rather than all at once (`python -m
# benchmarks.xla_options` times SEED_TILE against one tile of all seeds; `benchmarks/run.py`
# the default's speed). An accelerator has no such cache to keep and runs tiles one after
# another, so there a tile is as many seeds as run at full speed (default_seed_tile).
SEED_TILE = 16
# On an accelerator, the share of its memory a tile's seeds may take, and how many times a
# seed's state and per-token channels (seed_bytes) a step holds at once (state, gradients,
# the forward and backward channels): a bound for choosing the tile, not a measurement.
MEMORY_SHARE = 0.25
STEP_COPIES = 4
# The most seeds per tile on an accelerator: on one H200 the text TC preset ran several times
# faster per seed in one tile of 1,024 seeds than in one of 4,096 (`python -m benchmarks.gpu`;
# its rows are in docs/usage.md), so larger sweeps run in tiles of at most this many.
ACCELERATOR_SEED_TILE = 1024


def seed_bytes(plan, lay, itemsize: int) -> int:
  """Bytes one seed's step touches (×STEP_COPIES): the weighted embeddings and scores of the
  ``V_a(+1)`` rows, their ``K``-channel projections and backward sums, and each token's
  ``K + 1`` forward channels."""
  rows = len(plan.words) + int(plan.dummy)
  tokens = int(np.asarray(plan.row_tokens).size)
  elements = 2 * rows * (lay.d + 1) + 2 * rows * lay.k + tokens * (lay.k + 1) \
      + 2 * rows * (lay.k + 1)
  return STEP_COPIES * itemsize * elements


def _layout(plan, model_cfg) -> _Layout:
  """The static sizes of the fast state for ``model_cfg`` on ``plan``'s sentences."""
  kind, n_cls = model_cfg.classifier, model_cfg.n_classes
  return _Layout(plan.n, model_cfg.embed_dim, model_cfg.hidden_dim if kind == "tl" else n_cls,
                 n_cls, kind)


def seed_tile_for(model_cfg, batch: Batch, n_seeds: int, dtype=jnp.float32) -> int:
  """The seeds per tile :func:`make_fast_sweep_train` takes by default for ``n_seeds`` seeds
  of ``model_cfg`` on ``batch`` (:func:`default_seed_tile` of :func:`seed_bytes`)."""
  plan = _plan_for(batch, HEAVY_COUNT)
  per_seed = seed_bytes(plan, _layout(plan, model_cfg), jnp.dtype(dtype).itemsize)
  return default_seed_tile(n_seeds, per_seed)


def default_seed_tile(n_seeds: int, per_seed_bytes: int, device=None) -> int:
  """Seeds advanced together when the caller names no tile: :data:`SEED_TILE` on a CPU
  (cache-sized tiles); on an accelerator, at most :data:`ACCELERATOR_SEED_TILE` and as many
  as :data:`MEMORY_SHARE` of its memory holds at ``per_seed_bytes`` each, the tiles made
  equal so the last is padded by fewer seeds than there are tiles."""
  device = jax.devices()[0] if device is None else device
  if device.platform == "cpu":
    return max(1, min(SEED_TILE, n_seeds))
  try:
    limit = (device.memory_stats() or {}).get("bytes_limit")
  except Exception:   # noqa: BLE001 - not every backend reports memory
    limit = None
  most = min(n_seeds, ACCELERATOR_SEED_TILE)
  if limit:
    most = max(1, min(most, int(MEMORY_SHARE * limit // max(1, per_seed_bytes))))
  n_tiles = -(-n_seeds // most)
  return -(-n_seeds // n_tiles)


# XLA options for compiling the fast path (pass to jax.jit or dynamics.run_sweep): LLVM at -O1.
# Its kernels are sums of gathers and elementwise loops, where -O2's extra LLVM passes buy no
# speed for more compile time (`python -m benchmarks.xla_options` times both ways).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


def _check_batch(batch: Batch):
  if any(isinstance(x, jax.core.Tracer) for x in batch):
    raise ConfigError("the fast path needs the training data as concrete arrays shared by "
                      "every seed (it precomputes the sparse word structure on the host); "
                      "use dynamics.make_train when each sweep point has its own data")


def make_fast_sweep_train(model_cfg, batch: Batch, record: Callable, cfg: TrainConfig,
                          trainable: Optional[dict] = None, *, record_params: bool = False,
                          seed_tile: Optional[int] = None, unroll: int = 1,
                          project: Optional[bool] = None):
  """Build ``train_batch(params0, lr=None) -> Trajectory`` for S seeds sharing ``batch``.

  The batched form of :func:`make_fast_train`: the seeds are a leading axis of
  every input leaf and of every output leaf, and are laid out innermost
  internally (see the module docstring for the algebra). A caller with more
  seeds than fit in memory calls it once per chunk (``dynamics.run_sweep`` with
  ``chunk_size`` does, through :func:`make_fast_train`'s vmap rule).

  Args:
    model_cfg: the Lu model's configuration (its classifier kind and sizes).
    batch: the training set, concrete (shared by every seed).
    record: ``record(params, params0) -> pytree``, called per seed on ordinary
      parameter pytrees at step 0 and every ``cfg.record_every`` steps. A record with a
      ``seeds_last(rows, rows0)`` attribute is read through that instead, once for all the
      tile's seeds: ``rows`` and ``rows0`` the current and initial :class:`WordRows`, and it
      returns what ``jax.vmap(record)`` would (leaves ``[S, ...]``), without converting the
      state to ordinary parameters (:func:`analysis.topic_observables` has one).
    cfg: training configuration (full-batch ``gd``).
    trainable: parameter group -> trainable (default ``model_cfg.trainable()``). With a
      trainable query, ``params0``'s keys must be zero (``key_std = 0``), so that every key
      stays on the query's line (checked when ``params0`` is concrete; a traced ``params0``
      from ``model_cfg``'s initialiser has them zero when ``fast_path_applies`` says yes).
    record_params: also return the parameters at every recorded step.
    seed_tile: seeds advanced together; larger sweeps run tile after tile
      (``lax.map``) inside the same compiled program. Default
      (:func:`default_seed_tile`): :data:`SEED_TILE` on a CPU, up to
      :data:`ACCELERATOR_SEED_TILE` that the memory holds on an accelerator. The
      trajectory does not depend on it.
    unroll: steps unrolled per iteration of the inner ``lax.scan``.
    project: gather ``Wᵀx_w`` in the forward pass (True) or ``x_w`` (False);
      default: whichever :func:`projected_forward_pays` says is cheaper. Both
      give the same trajectory. With sparsemax attention (:mod:`dynamics.fast_lu.sparse`)
      the forward pass always gathers ``Wᵀν_w``.

  Returns:
    ``train_batch(params0, lr=None)``: ``params0`` leaves ``[S, ...]``; ``lr``
    a scalar or ``[S]`` (default ``cfg.lr``). Returns a :class:`Trajectory`
    whose leaves all have the leading axis ``S`` (``t`` is ``[S, T]``).

  Raises:
    ConfigError: if :func:`fast_path_applies` says no, or the data is traced.
  """
  trainable = model_cfg.trainable() if trainable is None else dict(trainable)
  seeds_last = getattr(record, "seeds_last", None)
  record = checked_record(record)
  verdict = fast_path_applies(model_cfg, cfg, trainable, batch)
  if not verdict:
    raise ConfigError(f"the fast path does not apply: {verdict.reason}")
  _check_batch(batch)
  plan = _plan_for(batch, HEAVY_COUNT)
  labels = np.asarray(batch.labels)
  n_cls = model_cfg.n_classes
  lay = _layout(plan, model_cfg)
  sparsemax = getattr(model_cfg, "normaliser", "softmax") == "sparsemax"
  projected = projected_forward_pays(plan, lay, trainable) if project is None else bool(project)
  onehot = np.eye(n_cls)[labels]
  t = cfg.record_steps().astype(jax.dtypes.canonicalize_dtype(jnp.float64))

  def run_tile(params0, lr):
    records = cfg.run_records(lr)                                      # [S]
    last = jnp.max(records)      # the tile's compute stops with its longest run
    dtype = params0["embeddings"].dtype
    step = (sparse.make_step(plan, lay, onehot, trainable, dtype) if sparsemax
            else _make_step(plan, lay, onehot, trainable, dtype, projected))
    qq = jnp.sum(params0["query"] ** 2, axis=-1)                      # [S]
    lr = lr.astype(dtype)

    def advance(state):
      return jax.lax.scan(lambda s_, _: (step(s_, lr, qq), None), state, None,
                          length=cfg.record_every, unroll=unroll)[0]

    def look(state):
      """The parameters (when asked for, or for ``record``) and the observables."""
      params = None
      if record_params or seeds_last is None:
        params = _to_params(plan, state, unpack, trainable)
      if seeds_last is None:
        return params, jax.vmap(record)(params, params0)
      return params, seeds_last(_to_rows(plan, state, unpack, trainable), rows0)

    def block(carry, r):
      # Observe the current state, then advance to the next recorded step (not
      # after the last record): record and the unpacking are traced once, and
      # the state after the last record is the final one. The parameters are
      # not carried: unpacked into the carry, every record would write them out.
      state, obs = carry
      if cfg.flow_time is None or record_params:
        params, obs = look(state)
      else:   # past the tile's longest run nothing moves, so its records repeat
        params = None
        obs = jax.lax.cond(r <= last, lambda s_: look(s_)[1], lambda _: obs, state)
      new = jax.lax.cond(r < last, advance, lambda s_: s_, state)
      if cfg.flow_time is not None:   # a seed stops after its own intervals (seeds last)
        new = jax.tree.map(lambda a, b: jnp.where(r < records, a, b) if jnp.ndim(a) else a,
                           new, state)
      state = new
      return (state, obs), (obs, params if record_params else None)

    state0 = _to_state(plan, params0, dtype,
                       frozen_first_layer(projected, trainable) and not sparsemax,
                       query=bool(trainable.get("query", False)), weighted=not sparsemax)
    unpack = _unpacker(plan, params0)
    rows0 = None if seeds_last is None else _initial_rows(unpack)
    obs0 = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                        jax.eval_shape(lambda s_: look(s_)[1], state0))
    (state, _), (obs, params_t) = jax.lax.scan(block, (state0, obs0), jnp.arange(cfg.n_records))
    final = _to_params(plan, state, unpack, trainable)
    seeds_first = lambda x: jnp.moveaxis(x, 0, 1)                     # [T, S, ...] -> [S, T, ...]
    return (jax.tree.map(seeds_first, obs), jax.tree.map(seeds_first, params_t), final,
            state.failed_at.astype(t.dtype))

  def train_batch(params0, lr=None):
    keys0 = params0["keys"]
    if trainable.get("query", False) and not isinstance(keys0, jax.core.Tracer) \
        and np.any(np.asarray(keys0)):
      raise ConfigError("the fast path trains the query only from keys that start at zero "
                        "(key_std = 0): other keys move off the query's line")
    n_seeds = jax.tree.leaves(params0)[0].shape[0]
    lr = cfg.lr if lr is None else lr
    lr = jnp.broadcast_to(jnp.asarray(lr), (n_seeds,))
    if seed_tile is None:
      itemsize = jnp.dtype(params0["embeddings"].dtype).itemsize
      tile = default_seed_tile(n_seeds, seed_bytes(plan, lay, itemsize))
    else:
      tile = max(1, min(seed_tile, n_seeds))
    n_tiles = -(-n_seeds // tile)
    if n_tiles == 1:
      obs, params_t, final, failed = run_tile(params0, lr)
    else:
      pad = n_tiles * tile - n_seeds
      grow = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) if pad else x
      split = lambda x: grow(x).reshape((n_tiles, tile) + x.shape[1:])
      out = jax.lax.map(lambda a: run_tile(*a), (jax.tree.map(split, params0), split(lr)))
      obs, params_t, final, failed = jax.tree.map(
          lambda x: x.reshape((n_tiles * tile,) + x.shape[2:])[:n_seeds], out)
    return Trajectory(t=jnp.broadcast_to(t, (n_seeds,) + t.shape), observables=obs,
                      final_params=final, failed_at=failed, params=params_t)

  return train_batch


def make_fast_train(loss_fn: Callable, batch: Batch, record: Callable, cfg: TrainConfig,
                    trainable: dict, *, model_cfg, record_params: bool = False,
                    seed_tile: Optional[int] = None, unroll: int = 1,
                    project: Optional[bool] = None):
  """Drop-in for :func:`dynamics.make_train` on the Lu model with a fixed query (or a trained
  one from zero keys).

  Same arguments and the same ``train(params0, key, lr=None) -> Trajectory``;
  ``loss_fn`` must be the model's cross-entropy (``models.make_loss(models.lu.apply)``),
  which the fast path evaluates in closed form (it is not called); any other
  loss is refused. ``key`` is unused (full-batch GD draws nothing). Under
  ``jax.vmap`` over seeds (as in :func:`dynamics.run_sweep`), a custom vmap
  rule runs all seeds together with :func:`make_fast_sweep_train` instead of
  batching the one-seed program. :func:`dynamics.make_auto_train` picks this
  or :func:`dynamics.make_train` from :func:`fast_path_applies`.

  Args:
    loss_fn: ``models.make_loss(models.lu.apply)`` (or of
      ``models.lu_linear.apply_linear`` for FC/TC); checked, not called.
    batch: the training set, concrete and shared by every seed.
    record: ``record(params, params0) -> pytree`` of observables.
    cfg: training configuration; see :func:`fast_path_applies`.
    trainable: parameter group -> trainable.
    model_cfg: the Lu model's configuration.
    record_params: also return the parameters at every recorded step.
    seed_tile: seeds advanced together (see :func:`make_fast_sweep_train`).
    unroll: inner-scan unroll.
    project: the forward pass's form (see :func:`make_fast_sweep_train`).

  Returns:
    ``train(params0, key, lr=None)``.

  Raises:
    ConfigError (a ValueError): ``loss_fn`` is not the Lu cross-entropy, or
      :func:`fast_path_applies` says no for another reason.
  """
  mismatch = _loss_mismatch(loss_fn, model_cfg)
  if mismatch:
    raise ConfigError(f"the fast path does not apply: {mismatch}")
  check_train_args("make_fast_train", loss_fn, batch, record, cfg, trainable)
  train_batch = make_fast_sweep_train(model_cfg, batch, record, cfg, trainable,
                                      record_params=record_params, seed_tile=seed_tile,
                                      unroll=unroll, project=project)
  default_lr = cfg.lr

  @jax.custom_batching.custom_vmap
  def run(params0, lr):
    out = train_batch(jax.tree.map(lambda x: x[None], params0), lr[None])
    return jax.tree.map(lambda x: x[0], out)

  @run.def_vmap
  def run_vmap(axis_size, in_batched, params0, lr):
    p_batched, lr_batched = in_batched
    params0 = jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + x.shape), params0, p_batched)
    lr = lr if lr_batched else jnp.broadcast_to(lr, (axis_size,))
    out = train_batch(params0, lr)
    return out, jax.tree.map(lambda _: True, out)

  def train(params0, key, lr=None):
    del key
    dtype = jax.tree.leaves(params0)[0].dtype
    lr = jnp.asarray(default_lr if lr is None else lr, dtype)
    return run(params0, lr)

  return train
