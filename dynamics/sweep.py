"""Sweeps: one function vmapped over a sweep axis, sharded over devices, run in chunks.

The sweep axis (seeds × data seeds × hyperparameter points, flattened) is the
leading axis of every input leaf. Each chunk is one compiled call of
``jit(vmap(fn))`` whose inputs are laid out with a ``NamedSharding`` over a 1-D
mesh of all visible devices, so on a machine with several devices each holds
a slice of the sweep. Across hosts the same code runs unchanged after
``jax.distributed.initialize()`` (see docs/multihost.md): ``jax.devices()``
is then the global device list and every process runs this function.
"""
import math
import threading
import time
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from attndyn.dynamics import xla_options
from attndyn.tasks.errors import ConfigError, check

__all__ = ["SWEEP_AXIS", "sweep_mesh", "call_interruptibly", "wait_ready", "chunk_length",
           "chunk_bounds", "run_sweep"]

SWEEP_AXIS = "sweep"


def sweep_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
  """A 1-D mesh named ``sweep`` over ``devices`` (default: all visible devices)."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (SWEEP_AXIS,))


def _pad(tree, size: int):
  """Pad axis 0 of every leaf to ``size`` by repeating the last row."""
  def pad(x):
    n = x.shape[0]
    if n == size:
      return x
    return jnp.concatenate([x, jnp.repeat(x[-1:], size - n, axis=0)])
  return jax.tree.map(pad, tree)


def _to_host(x) -> np.ndarray:
  """A NumPy copy of ``x``; across hosts, first gather the slices other processes hold."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    x = multihost_utils.process_allgather(x, tiled=True)
  return np.asarray(x)


def _poll(done: Callable[[], bool], poll: float) -> None:
  """Sleep until ``done()``, checking from 1 ms, doubling up to ``poll`` seconds."""
  pause = 1e-3
  while not done():
    time.sleep(pause)
    pause = min(2 * pause, poll)


def call_interruptibly(executable: Callable, *args, poll: float = 0.05) -> Any:
  """``executable(*args)`` with its arrays computed, while Ctrl-C and SIGTERM stay prompt.

  A fetch that waits inside XLA holds Python's signal handlers until the
  computation ends (minutes for a long ODE solve). JAX dispatches a compiled
  call asynchronously, but not one with a host callback (diffrax's and
  equinox's runtime checks are callbacks): that call itself runs to the end.
  So the call runs on a worker thread and the caller's thread sleeps in short
  steps, where a signal raises at once; the interrupted computation is left to
  finish on its own (the ``attndyn`` command then exits without waiting for it).
  ``executable`` must already be compiled: JAX's config (``enable_x64``) is
  per thread, so tracing on the worker could change dtypes.
  """
  box = {}

  def target():
    try:
      box["out"] = executable(*args)
    except BaseException as err:  # re-raised on the caller's thread
      box["err"] = err

  worker = threading.Thread(target=target, name="attndyn-sweep-chunk", daemon=True)
  worker.start()
  _poll(lambda: not worker.is_alive(), poll)
  if "err" in box:
    raise box["err"]
  return wait_ready(box["out"], poll)


def wait_ready(out: Any, poll: float = 0.05) -> Any:
  """``out`` once every array in it is computed, waiting in short sleeps where Ctrl-C and
  SIGTERM raise at once (a fetch would hold them until the computation ends). Enough on
  its own for a compiled call JAX dispatched asynchronously (one without host callbacks).
  """
  for x in jax.tree.leaves(out):
    if hasattr(x, "is_ready"):
      _poll(x.is_ready, poll)
  return out


def chunk_length(total: int, chunk_size: Optional[int] = None, n_devices: int = 1) -> int:
  """Points per compiled call: ``chunk_size`` (default all ``total``) rounded up to the devices."""
  chunk = total if chunk_size is None else max(1, min(chunk_size, total))
  return math.ceil(chunk / n_devices) * n_devices


def chunk_bounds(total: int, chunk_size: Optional[int] = None, n_devices: int = 1) -> list:
  """``[(start, stop), ...]``: the sweep points of each chunk :func:`run_sweep` runs, in order.

  A pure function of its arguments, so a resumed sweep cuts the same chunks.
  """
  chunk = chunk_length(total, chunk_size, n_devices)
  return [(start, min(start + chunk, total)) for start in range(0, total, chunk)]


def run_sweep(fn: Callable, inputs: Any, *, chunk_size: Optional[int] = None,
              devices: Optional[Sequence[jax.Device]] = None,
              on_chunk: Optional[Callable[[int, int, Any], None]] = None,
              done: Sequence[Any] = (), batched: bool = False,
              compiler_options: Optional[dict] = None) -> Any:
  """Evaluate ``vmap(fn)`` over the leading axis of ``inputs``, chunked and sharded.

  Args:
    fn: a pure function of one sweep point (a pytree without the sweep axis);
      with ``batched``, a function of a whole chunk (leaves ``[chunk, ...]`` in
      and out) that maps over the points itself.
    inputs: pytree whose leaves share a leading sweep axis of size P.
    chunk_size: points per compiled call (default: all P). Rounded up to a
      multiple of the device count; the last chunk is padded and trimmed.
    devices: devices to shard over (default: all visible).
    on_chunk: called as ``on_chunk(done, total, chunk_outputs)`` after each chunk
      that is run (progress bars, checkpoints).
    done: the outputs of the first ``len(done)`` chunks of :func:`chunk_bounds`,
      already computed (e.g. read back from a checkpoint): those chunks are not
      run again and their outputs are used as given. Resuming this way gives
      the same result as an uninterrupted sweep.
    batched: ``fn`` already maps over the leading axis (e.g. the fast path of
      :mod:`dynamics.fast_lu`, which advances all seeds together), so it is
      jitted as is rather than vmapped.
    compiler_options: XLA options for the compiled call (``jax.jit``'s), e.g.
      :data:`dynamics.reduced_ode.COMPILER_OPTIONS`; those the installed XLA
      does not know are dropped (:func:`dynamics.xla_options.supported`).

  Returns:
    ``fn``'s outputs stacked over the P points, as NumPy arrays on the host.

  Raises:
    ConfigError (a ValueError): ``fn`` not callable, no input leaves, a leaf without the
      sweep axis (a list of Python numbers), or leaves of different lengths.
    ValueError: ``done`` does not match the chunks.
  """
  check(callable(fn), "fn", type(fn).__name__,
        "a function of one sweep point; run_sweep takes (fn, inputs, *, options)")
  leaves = jax.tree.leaves(inputs)
  if not leaves:
    raise ConfigError("inputs = {} is not allowed: run_sweep needs at least one input leaf "
                      "carrying the sweep axis (e.g. jax.random.split(key, n)).")
  shapeless = [x for x in leaves if not getattr(x, "shape", ())]
  if shapeless:
    example = repr(inputs)
    example = example if len(example) < 60 else example[:57] + "..."
    raise ConfigError(f"inputs = {example} is not allowed: every leaf must be an array whose "
                      f"first axis is the sweep (a Python number such as {shapeless[0]!r} has "
                      "none): pass an array, e.g. jnp.asarray([0, 1, 2]), not a list of numbers.")
  total = leaves[0].shape[0]
  sizes = sorted({x.shape[0] for x in leaves})
  check(len(sizes) == 1, "inputs", f"leaves with first axes {sizes}",
        "leaves that share the first (sweep) axis")
  mesh = sweep_mesh(devices)
  n_dev = mesh.devices.size
  chunk = chunk_length(total, chunk_size, n_dev)
  bounds = chunk_bounds(total, chunk_size, n_dev)
  if len(done) > len(bounds):
    raise ValueError(f"{len(done)} chunks given as done; the sweep has only {len(bounds)}")
  for i, out in enumerate(done):
    sizes = {x.shape[0] for x in jax.tree.leaves(out)}
    if sizes != {bounds[i][1] - bounds[i][0]}:
      raise ValueError(f"done chunk {i} has {sizes} points; chunk {i} is {bounds[i]}")
  sharding = NamedSharding(mesh, PartitionSpec(SWEEP_AXIS))
  # Every chunk is padded to one length, so one trace serves them all; a second would
  # recompile the whole sweep program (seconds to minutes), so it raises instead. (Counted
  # per call: chex.assert_max_traces counts per definition site, across calls.)
  mapped = fn if batched else jax.vmap(fn)
  traces = []

  def traced_once(part):
    traces.append(None)
    if len(traces) > 1:
      raise AssertionError("run_sweep traced its compiled call twice: a chunk changed shape "
                           "or dtype, so the sweep would compile again")
    return mapped(part)

  compiled = jax.jit(traced_once, compiler_options=xla_options.supported(compiler_options))
  outputs = list(done)
  executable = None
  for start, stop in bounds[len(done):]:
    part = jax.tree.map(lambda x: x[start:stop], inputs)
    part = jax.device_put(_pad(part, chunk), sharding)
    if executable is None:  # traced and compiled here, under the caller's JAX config
      executable = compiled.lower(part).compile()
      signature = jax.tree.map(lambda x: (x.shape, x.dtype), part)
    elif jax.tree.map(lambda x: (x.shape, x.dtype), part) != signature:
      traced_once(part)     # another shape or dtype would need a second compile: raises
    out = call_interruptibly(executable, part)       # Ctrl-C / SIGTERM within 50 ms
    out = jax.tree.map(lambda x: _to_host(x)[: stop - start], out)
    outputs.append(out)
    if on_chunk is not None:
      on_chunk(stop, total, out)
  return jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *outputs)
