"""``.npz`` files of plain arrays: written byte-for-byte reproducibly, read without pickle.

:func:`write` stores each array uncompressed with a fixed zip timestamp, so the
same arrays always give the same bytes; it refuses object arrays (which would
need pickle). :func:`read` loads every array with ``allow_pickle=False`` and
turns a truncated, corrupt or pickled file into one :class:`tasks.ConfigError`
naming the file.
"""
import json
import os
import zipfile
from typing import Mapping, Optional

import numpy as np

from attndyn.tasks.errors import ConfigError

__all__ = ["write", "read", "comment", "run_id"]

_DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's epoch: no wall-clock time in the file


def write(file, arrays: Mapping[str, np.ndarray], *, run_id: Optional[str] = None,
          meta: Optional[Mapping] = None) -> None:
  """Write ``name -> array`` to ``file`` (a path or a binary file object) as an ``.npz``.

  ``np.load(file, allow_pickle=False)`` reads it back; entries keep the order given.
  ``run_id`` and ``meta`` (JSON fields, e.g. a checkpoint chunk's computing seconds) go in
  the zip comment (:func:`run_id`, :func:`comment` read it), not in an array, so readers
  that know nothing of them (``np.load``, older attndyn) see the same arrays.

  Raises:
    ValueError: an object (pickled) array, or a name ``np.load`` could not give back.
  """
  with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED) as zf:
    doc = dict(meta or {}, **({"run_id": run_id} if run_id is not None else {}))
    if doc:
      zf.comment = json.dumps(doc).encode()
    for name, value in arrays.items():
      value = np.asanyarray(value)
      if value.dtype.hasobject:
        raise ValueError(f"array {name!r} has dtype object; only plain arrays are written")
      if not name or name.endswith(".npy"):
        raise ValueError(f"array name {name!r} is not allowed")
      info = zipfile.ZipInfo(name + ".npy", date_time=_DATE)
      info.compress_type = zipfile.ZIP_STORED
      info.external_attr = 0o644 << 16
      with zf.open(info, "w", force_zip64=True) as f:
        np.lib.format.write_array(f, value, allow_pickle=False)


def read(path, *, what: str = "") -> dict:
  """Every array of the ``.npz`` file ``path``, read eagerly with ``allow_pickle=False``.

  Args:
    path: the file.
    what: how to name the file in errors (default: its path).

  Returns:
    ``{name: np.ndarray}`` in the file's order.

  Raises:
    ConfigError: the file is missing, not an ``.npz``, truncated or corrupt
      (a CRC error), or holds an object array (which would need pickle).
  """
  what = what or repr(os.fspath(path))
  if not os.path.isfile(path):
    raise ConfigError(f"{what} is missing (or is not a file).")
  with open(path, "rb") as f:
    head = f.read(6)
  if head.startswith(b"\x93NUMPY"):
    raise ConfigError(f"{what} is a single .npy array, not an .npz archive of named arrays.")
  if not head.startswith(b"PK"):
    raise ConfigError(f"{what} is not an .npz file (it is empty, or does not start with the "
                      f"zip signature).")
  try:
    with np.load(path, allow_pickle=False) as z:
      return {name: z[name] for name in z.files}
  except ValueError as err:
    if "pickle" in str(err):
      raise ConfigError(f"{what} holds an object array, which only pickle can read; attndyn "
                        f"never unpickles (np.load(..., allow_pickle=False)).") from None
    raise ConfigError(f"{what} is not a readable .npz file (truncated or corrupt: {err}).") \
        from None
  except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
    raise ConfigError(f"{what} is not a readable .npz file (truncated or corrupt: "
                      f"{type(err).__name__}: {err}).") from None


def comment(path) -> dict:
  """The JSON fields :func:`write` put in ``path``'s zip comment; ``{}`` when there are none
  (a file of an older attndyn) or the file is not a readable zip."""
  try:
    with zipfile.ZipFile(path) as zf:
      text = zf.comment
  except (OSError, EOFError, zipfile.BadZipFile):
    return {}
  try:
    doc = json.loads(text.decode("utf-8"))
  except ValueError:
    return {}
  return doc if isinstance(doc, dict) else {}


def run_id(path) -> Optional[str]:
  """The run id :func:`write` put in ``path``'s zip comment; ``None`` when there is none
  (a file of an attndyn that wrote no run ids) or the file is not a readable zip."""
  value = comment(path).get("run_id")
  return value if isinstance(value, str) else None
