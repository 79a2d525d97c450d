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

The cache heals (:class:`_Healing`): each entry attndyn writes starts with a digest of its
key and its bytes, and is written atomically through :mod:`attndyn.atomic` (no link
followed). An entry that does not match on reading (truncated by a full disk, garbage,
another program's file copied over it, or written without the digest) is deleted and its
program compiled again, with one warning per process naming the cache. JAX alone would
keep a damaged entry for ever (it never replaces an existing key), and load another key's
program, whose outputs then fail an assertion inside JAX.
"""
import hashlib
import importlib.util
import os
import platform
import sys
import time
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
  the CPU model and instruction-set flags (``/proc/cpuinfo`` where there is one), the
  jax and jaxlib versions and the format of the entries (:func:`_seal`)."""
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
  # the entries' format too (_MAGIC): an attndyn that stores them otherwise uses another folder
  ident = "|".join([platform.machine(), platform.processor(), *sorted(lines),
                    jax.__version__, jaxlib.__version__, _MAGIC.decode().strip()])
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


_MAGIC = b"attndyn-compile-cache-1\n"
_warned = []   # the folders this process has warned about


def _seal(key: str, value: bytes) -> bytes:
  """An entry's bytes as attndyn stores them: magic, sha256(key, value), value."""
  return _MAGIC + hashlib.sha256(key.encode() + b"\0" + value).digest() + value


def _unseal(key: str, data: bytes) -> Optional[bytes]:
  """The value :func:`_seal` sealed under ``key``, or ``None`` when ``data`` is not that."""
  head = len(_MAGIC) + 32
  if len(data) < head or not data.startswith(_MAGIC):
    return None
  value = data[head:]
  if hashlib.sha256(key.encode() + b"\0" + value).digest() != data[len(_MAGIC):head]:
    return None
  return value


def _warn(folder) -> None:
  if str(folder) in _warned:
    return
  _warned.append(str(folder))
  print(f"attndyn: warning: the compile cache {str(folder)!r} held a damaged entry (truncated, "
        f"unreadable or another program's); it was deleted and its program is compiled again "
        f"(results are unaffected; `rm -r` the folder to start it afresh).", file=sys.stderr)


def _healing_class():
  """:class:`_Healing`, made on first use (it subclasses JAX's own cache class)."""
  global _Healing
  if _Healing is not None:
    return _Healing
  from jax._src import lru_cache
  from attndyn import atomic
  # JAX's file names (read now: a JAX without them keeps its own cache, _install_healing)
  entry_suffix, atime_suffix = lru_cache._CACHE_SUFFIX, lru_cache._ATIME_SUFFIX

  class Healing(lru_cache.LRUCache):
    """JAX's least-recently-used file cache, whose entries are sealed (:func:`_seal`),
    checked on reading, deleted when they do not match, and written atomically."""

    def _paths(self, key):   # JAX's path may be an etils path: a local one is a plain Path
      folder = Path(os.fspath(self.path))
      return folder / f"{key}{entry_suffix}", folder / f"{key}{atime_suffix}"

    def _stamp(self, key):
      if self.eviction_enabled:
        stamp = time.time_ns().to_bytes(8, "little")
        atomic.write(self._paths(key)[1], lambda tmp: Path(tmp).write_bytes(stamp))

    # bytes of the entries this process knows of (None: not scanned yet)
    known_bytes = None

    def _evict_if_needed(self, *, additional_size: int = 0) -> None:
      # JAX's version scans every entry (a stat and a stamp read each) before every write, so a
      # cold run that writes N programs reads N²/2 files. Here the first write scans (and
      # evicts), the next ones only add their sizes, and the scan comes again when that count
      # would pass the bound. What other processes write meanwhile is seen at the next scan:
      # runs side by side may take the cache past MAX_BYTES by what they wrote since.
      if not self.eviction_enabled:
        return
      if self.known_bytes is not None and self.known_bytes + additional_size <= self.max_size:
        self.known_bytes += additional_size
        return
      super()._evict_if_needed(additional_size=additional_size)
      folder = Path(os.fspath(self.path))
      self.known_bytes = additional_size + sum(
          p.stat().st_size for p in folder.glob(f"*{entry_suffix}"))

    def get(self, key):
      if not key:
        raise ValueError("key cannot be empty")
      entry, atime = self._paths(key)
      if self.eviction_enabled:
        self.lock.acquire(timeout=self.lock_timeout_secs)
      try:
        try:
          value = _unseal(key, entry.read_bytes()) if not entry.is_symlink() else None
        except FileNotFoundError:
          return None
        except OSError:
          value = None
        if value is None:   # damaged or not this key's: delete it; the program is compiled again
          for path in (entry, atime):
            path.unlink(missing_ok=True)
          _warn(entry.parent)
          return None
        self._stamp(key)
        return value
      finally:
        if self.eviction_enabled:
          self.lock.release()

    def put(self, key, value):
      if not key:
        raise ValueError("key cannot be empty")
      data = _seal(key, value)
      if self.eviction_enabled and len(data) > self.max_size:
        return
      entry, _ = self._paths(key)
      if self.eviction_enabled:
        self.lock.acquire(timeout=self.lock_timeout_secs)
      try:
        if entry.exists():
          return
        self._evict_if_needed(additional_size=len(data))
        # the stamp first: eviction reads the stamp of every entry, and a kill between the two
        # writes must not leave an entry without one (a stamp alone is never read)
        self._stamp(key)
        atomic.write(entry, lambda tmp: Path(tmp).write_bytes(data))
      finally:
        if self.eviction_enabled:
          self.lock.release()

  _Healing = Healing
  return Healing


_Healing = None


def _install_healing() -> bool:
  """Make JAX's persistent cache a :class:`_Healing` one in this process (its next use, or the
  one already made); ``False`` where this JAX has no such cache to replace (then JAX's own
  is used as it is)."""
  try:
    from jax._src import compilation_cache as cc
    from jax._src import config as jax_config
    from jax._src import lru_cache
    cls = _healing_class()
  except (ImportError, AttributeError):
    return False

  def get_file_cache(path):
    cache = cls(path, max_size=jax_config.compilation_cache_max_size.value)
    if jax_config.compilation_cache_check_contents.value:
      return cc.VerificationCache(cache), path
    return cache, path

  cc.get_file_cache = get_file_cache
  if type(getattr(cc, "_cache", None)) is lru_cache.LRUCache:   # made before enable() ran
    old = cc._cache
    cc._cache = cls(str(old.path), max_size=old.max_size if old.eviction_enabled else -1)
  return True


def enabled_here() -> bool:
  """Whether :func:`enable` turned attndyn's cache on in this process."""
  return _enabled[0]


def enable_in_worker() -> None:
  """In a worker process whose JAX settings were copied from a parent where :func:`enable`
  turned the cache on (the Dask worker plugin of :mod:`attndyn.jobs`): the same healing cache and
  silenced JAX warnings, so a damaged entry is one warning here too, not JAX's on every read."""
  warnings.filterwarnings("ignore", message="Error (reading|writing) persistent compilation "
                          "cache entry")
  _enabled[0] = _install_healing()


_enabled = [False]


def _writable(path: Path) -> bool:
  """Whether the cache folder ``path`` exists (made when missing) and takes a file: a probe
  created with ``O_EXCL | O_NOFOLLOW``, so that a link planted at its name is not followed."""
  from attndyn import atomic
  probe = path / f".probe-{os.getpid()}"
  try:
    atomic.make_dirs(path)
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    os.unlink(probe)
  except OSError:   # LinkRefused included: the cache only saves time
    return False
  return True


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
  if not _writable(path):
    return None
  import jax
  jax.config.update("jax_compilation_cache_dir", str(path))
  if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in environ:   # else the user's
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
  jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
  warnings.filterwarnings("ignore", message="Error (reading|writing) persistent compilation "
                          "cache entry")
  _enabled[0] = _install_healing()
  return path
