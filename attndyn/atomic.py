"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

A crash or a kill at any moment leaves either the old file or the new one,
never half of one, and at most a temporary file ``.NAME.XXXXXXXX.tmp`` beside
it, which :func:`remove_leftovers` removes when the next command starts there.
"""
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["leftover", "remove_leftovers", "write", "write_text", "write_json"]


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
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  os.close(fd)
  try:
    write_fn(tmp)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a normal file's mode
    os.replace(tmp, path)
  except BaseException as err:
    if os.path.exists(tmp):
      os.remove(tmp)
    if isinstance(err, OSError) and err.filename is None and err.errno is not None:
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
