"""JAX's persistent compilation cache for attndyn's commands: a rerun loads its compiled
programs instead of compiling them again.

On a CPU, XLA's compiling is a large share of a small job (the README's main job, a quick
atlas, a ``--resume`` after a kill); the programs are the same from one run to the next,
so every ``attndyn`` command keeps them in a cache on disk. A loaded program is the
compiled program itself, so the results are bit-identical with or without the cache.

Where:

* ``ATTNDYN_COMPILE_CACHE=DIR`` puts it in ``DIR``; ``ATTNDYN_COMPILE_CACHE=off`` turns it
  off (what the benchmarks do, to time a fresh machine).
* Else ``$XDG_CACHE_HOME/attndyn/xla`` (``~/.cache/attndyn/xla``).
* JAX's own ``JAX_COMPILATION_CACHE_DIR``, when set, wins and is used as it is.

Each host gets a folder of its own (:func:`host_folder`): a program compiled for one
CPU's instruction set must not be loaded on another, which a home directory shared by
several machines would otherwise do. The cache is bounded (``MAX_BYTES``; JAX evicts the
least recently used programs, and ``filelock`` guards its reads and writes across
processes, so runs side by side share it safely). A cache that cannot be created is left
off without a word: it only saves time; JAX turns a failed read or write into a warning
and compiles, which :func:`enable` silences for the same reason. For the ODE programs to
be cached, :func:`enable` turns equinox's runtime checks into NaN (its docstring says why).
"""
import hashlib
import importlib.util
import os
import platform
import sys
import warnings
from pathlib import Path
from typing import Mapping, Optional

__all__ = ["ENV", "MAX_BYTES", "MIN_COMPILE_SECONDS", "host_folder", "directory", "enable"]

ENV = "ATTNDYN_COMPILE_CACHE"
MAX_BYTES = 2 * 1024 ** 3
# Programs that compile faster than this (single array operations, a few milliseconds) are
# not worth a file: each write scans the cache to keep it under MAX_BYTES. JAX's default is
# 1 s, which would leave out most of a small job's programs.
MIN_COMPILE_SECONDS = 0.05


def host_folder() -> str:
  """A name for this host's CPU and JAX: ``cpu-<16 hex digits>``, from the machine type,
  the CPU model and instruction-set flags (``/proc/cpuinfo`` where there is one) and the
  jax and jaxlib versions."""
  import jax
  import jaxlib
  lines = []
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key = line.split(":", 1)[0].strip()
        if key in ("model name", "flags", "Features", "CPU part") and line not in lines:
          lines.append(line)
  except OSError:
    pass
  ident = "|".join([platform.machine(), platform.processor(), *sorted(lines),
                    jax.__version__, jaxlib.__version__])
  return "cpu-" + hashlib.sha256(ident.encode()).hexdigest()[:16]


def directory(environ: Mapping[str, str] = os.environ) -> Optional[Path]:
  """Where this process's cache goes, or ``None`` when it is off (see the module's
  docstring); JAX's ``JAX_COMPILATION_CACHE_DIR`` is left to JAX (``None`` here)."""
  if environ.get("JAX_COMPILATION_CACHE_DIR"):
    return None
  chosen = environ.get(ENV, "").strip()
  if chosen.lower() in ("off", "0", "no", "false", "none"):
    return None
  if chosen:
    root = Path(chosen).expanduser()
  else:
    try:
      base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:   # no home directory to be found: no cache
      return None
    root = Path(base).expanduser() / "attndyn" / "xla"
  return root / host_folder()


def enable(environ: Mapping[str, str] = os.environ) -> Optional[Path]:
  """Turns the cache on for this process (before its first compile); returns its folder,
  or ``None`` when it is off or cannot be created.

  Also sets ``EQX_ON_ERROR=nan`` (unless it is set, and before equinox is imported),
  with or without the cache, so that a command behaves the same either way: equinox's
  runtime checks inside diffrax's solves (``saveat`` times increasing and within
  ``[t0, t1]``, the sign of ``dt0``: inputs attndyn builds and validates itself) are
  otherwise host callbacks, and JAX never caches a program that holds one, so every ODE
  program would be compiled again on every run. A check that fails then makes that
  solve's output NaN instead of raising.
  """
  if "equinox" not in sys.modules:
    os.environ.setdefault("EQX_ON_ERROR", "nan")
  path = directory(environ)
  if path is None:
    return None
  if importlib.util.find_spec("filelock") is None:   # JAX needs it to bound and lock the cache
    return None
  try:
    path.mkdir(parents=True, exist_ok=True)
    probe = path / f".probe-{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()
  except OSError:
    return None
  import jax
  jax.config.update("jax_compilation_cache_dir", str(path))
  if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in environ:   # else the user's
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
  jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
  warnings.filterwarnings("ignore", message="Error (reading|writing) persistent compilation "
                          "cache entry")
  return path
