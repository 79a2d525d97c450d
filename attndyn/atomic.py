"""Atomic file writes, and the one way attndyn creates files and folders: never through a link.

A crash or a kill at any moment leaves either the old file or the new one,
never half of one, and at most a temporary file ``.NAME.XXXXXXXX.tmp`` beside
it, which :func:`remove_leftovers` removes when the next command starts there.

Every file attndyn creates or truncates goes through this module, so that a symbolic link
someone planted where attndyn writes (``DIR/summary.json -> ~/victim``, a lock file, a folder
in a shared ``/tmp``) is refused in one line naming the path, never followed:

* :func:`write` creates its temporary file with ``O_EXCL`` (``mkstemp``) and refuses a link
  at the path it replaces (``os.replace`` would not follow it, but it is not attndyn's to
  remove);
* :func:`open_own` opens a file attndyn keeps open (the lock) with ``O_NOFOLLOW`` and
  refuses anything but a regular file with one link;
* :func:`make_dirs` makes attndyn's own folders (``checkpoints/``, ``runs/NAME``), refusing a
  link in their place; :func:`private_dir` makes a folder in a shared place (``$TMPDIR``)
  with an unpredictable name and mode 0700 (``mkdtemp``).
"""
import errno
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Callable

from attndyn.tasks.errors import ConfigError

__all__ = ["LinkRefused", "refuse_link", "open_own", "make_dirs", "private_dir", "leftover",
           "remove_leftovers", "write", "write_text", "write_json"]


class LinkRefused(ConfigError, OSError):
  """A symbolic link (or another file that is not attndyn's: a hard link, a FIFO) where
  attndyn creates a file or folder. Bad input (exit 2, one line naming the path), and an
  ``OSError`` (``ELOOP``) for the callers that keep computed results when a write fails."""

  def __init__(self, path, what: str = "a symbolic link"):
    message = (f"{str(path)!r} is {what}, which attndyn did not make and does not follow or "
               f"replace: remove it (or pick another directory).")
    ConfigError.__init__(self, message)
    self.errno, self.strerror, self.filename = errno.ELOOP, message, str(path)

  def __str__(self):
    return self.strerror


def refuse_link(path) -> None:
  """Raise :class:`LinkRefused` when ``path`` is a symbolic link (a missing path is fine)."""
  if os.path.islink(path):
    raise LinkRefused(path)


def open_own(path, flags: int = os.O_RDWR | os.O_CREAT, mode: int = 0o644) -> int:
  """``os.open(path)`` that follows no link: a symbolic link at ``path`` is refused
  (``O_NOFOLLOW``), and so is anything but a regular file with one name (a hard link to
  someone's file, a FIFO), whose truncation would reach someone else's data.

  Raises:
    LinkRefused: naming ``path``.
    OSError: any other failure to open it.
  """
  try:
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
  except OSError as err:
    if err.errno == errno.ELOOP or os.path.islink(path):
      raise LinkRefused(path) from None
    raise
  st = os.fstat(fd)
  if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
    os.close(fd)
    raise LinkRefused(path, "not a regular file of its own (a hard link, a FIFO or a device)")
  return fd


def make_dirs(path) -> Path:
  """``path.mkdir(parents=True, exist_ok=True)`` for a folder attndyn makes inside a directory
  it was given (``checkpoints``, ``runs/NAME``): a symbolic link at ``path`` is refused."""
  path = Path(path)
  refuse_link(path)
  path.mkdir(parents=True, exist_ok=True)
  refuse_link(path)   # made by someone else between the two
  return path


def private_dir(prefix: str) -> Path:
  """A new folder ``$TMPDIR/PREFIX<random>`` only this user can enter (``mkdtemp``, mode
  0700): a name nobody can plant a link at in advance."""
  return Path(tempfile.mkdtemp(prefix=prefix))


# The temporary file of write(): "." + the file's name + "." + mkstemp's 8 random characters
# + ".tmp", for the kinds of file attndyn writes (so nobody else's file ever matches).
_LEFTOVER = re.compile(r"\.(.+\.(?:json|npz|png|md|toml|csv))\.[a-z0-9_]{8}\.tmp")


def leftover(name: str) -> bool:
  """Whether ``name`` is the temporary file of a :func:`write` that was killed."""
  return _LEFTOVER.fullmatch(name) is not None


def remove_leftovers(directory, *, recursive: bool = False) -> list:
  """Remove the temporary files that killed :func:`write` calls left in ``directory``.

  Call it only while holding the directory's lock (:mod:`attndyn.lock`): a temporary file
  of a write in progress looks the same.

  Args:
    directory: where to look (nothing happens when it does not exist).
    recursive: look in its subdirectories too.

  Returns:
    The paths removed.
  """
  directory = os.fspath(directory)
  if not os.path.isdir(directory):
    return []
  removed = []
  for root, dirs, files in os.walk(directory):
    for name in sorted(files):
      if leftover(name):
        path = os.path.join(root, name)
        try:
          os.remove(path)
          removed.append(path)
        except FileNotFoundError:
          pass
    if not recursive:
      break
  return removed


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def write(path, write_fn: Callable[[str], None]) -> Path:
  """Call ``write_fn(tmp_path)``, then move the temporary file onto ``path``.

  Args:
    path: the file to (re)place; its directory must exist.
    write_fn: writes the whole content to the path it is given.

  Returns:
    ``path`` as a :class:`pathlib.Path`.
  """
  path = Path(path)
  refuse_link(path)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  os.close(fd)
  try:
    write_fn(tmp)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a normal file's mode
    refuse_link(path)   # planted while the content was written
    os.replace(tmp, path)
  except BaseException as err:
    if os.path.exists(tmp):
      os.remove(tmp)
    if isinstance(err, OSError) and not isinstance(err, LinkRefused) and err.filename is None and err.errno is not None:
      # a write through a file object (zipfile, savefig) names no file: name the one meant
      raise OSError(err.errno, err.strerror or str(err), str(path)) from err
    raise
  return path


def write_text(path, text: str) -> Path:
  """Write ``text`` (UTF-8) to ``path`` atomically."""
  def write_fn(tmp):
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
  return write(path, write_fn)


def write_json(path, doc) -> Path:
  """Write ``doc`` as strict JSON (indent 1, no NaN) to ``path`` atomically."""
  return write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n")
