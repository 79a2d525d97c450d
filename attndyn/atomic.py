"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

A crash or a kill at any moment leaves either the old file or the new one,
never half of one.
"""
import json
import os
import tempfile
from pathlib import Path
from typing import Callable


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
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
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
