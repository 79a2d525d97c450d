"""One attndyn command at a time per output directory: ``DIR/.attndyn.lock``.

:func:`hold` takes an exclusive ``fcntl.flock`` on the lock file for the whole
command. The kernel drops a flock when its process dies, however it dies
(``kill -9`` included), so a lock is never left held by a dead process: the
file it leaves behind is taken over by the next command, which says whose it
was. The holder writes its pid, host and start time into the file, so a
second command refused the directory names who holds it.

The file is removed on release (and the directory too when :func:`hold`
created it and nothing else was written there), so a finished command leaves
no trace. A process that opened the file just before its holder removed it
could lock the removed inode; :func:`hold` therefore checks, once locked, that
the path still names the file it locked, and tries again if not. A symbolic link (or a
hard link) at the lock's path is refused (:func:`attndyn.atomic.open_own`): its target is
never truncated, and the link is left where it is.
"""
import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from attndyn import atomic
from attndyn.tasks.errors import ConfigError

__all__ = ["LOCKFILE", "Busy", "hold"]

LOCKFILE = ".attndyn.lock"


class Busy(ConfigError):
  """The directory is in use by another attndyn process."""


def _holder(fd: int) -> dict:
  """What the lock file of ``fd`` says about its holder ({} when empty or unreadable)."""
  try:
    os.lseek(fd, 0, os.SEEK_SET)
    doc = json.loads(os.read(fd, 4096).decode("utf-8"))
  except (OSError, ValueError):
    return {}
  return doc if isinstance(doc, dict) else {}


def _describe(doc: dict) -> str:
  if not doc.get("pid"):
    return "another attndyn process"
  host = doc.get("host")
  where = "" if not host or host == socket.gethostname() else f" on {host}"
  return f"attndyn pid {doc['pid']}{where} (started {doc.get('started', '?')})"


def _acquire(path: Path, what: str, flag: str) -> int:
  """Lock ``path`` (created if missing) without waiting; return the open fd."""
  while True:
    fd = atomic.open_own(path)   # a symbolic link planted there is refused, not followed
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
      if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        os.close(fd)
        raise
      holder = _holder(fd)
      os.close(fd)
      raise Busy(f"{what} is in use by {_describe(holder)}; wait for it or pick another "
                 f"{flag}.") from None
    try:
      same = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      return fd
    os.close(fd)  # the holder removed the file between our open and our lock: start over


@contextlib.contextmanager
def hold(directory, *, flag: str = "--out", create: bool = True):
  """Hold ``DIR/.attndyn.lock`` for the ``with`` block.

  Args:
    directory: the output directory (created, with its parents, when missing
      and ``create``; removed again on exit when it is still empty then).
    flag: the option errors name the directory by (``--out 'DIR'``).
    create: create a missing directory; ``False``: a missing one is not locked.

  Yields:
    The directory as a :class:`pathlib.Path`.

  Raises:
    Busy: another process holds the lock (one line naming it: pid, host, start time).
    ConfigError: the directory is a file or cannot be created.
  """
  out = Path(directory)
  what = f"{flag} {str(out)!r}"
  if out.exists() and not out.is_dir():
    raise ConfigError(f"{what} is a file, not a directory.")
  made = None
  if not out.exists():
    if not create:
      yield out
      return
    made = out
    while not made.parent.exists():  # the topmost directory this call creates
      made = made.parent
    try:
      out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
      raise ConfigError(f"{what} cannot be created: {err.strerror or err}.") from None
  path = out / LOCKFILE
  try:
    fd = _acquire(path, what, flag)
  except atomic.LinkRefused:
    raise
  except OSError as err:
    raise ConfigError(f"{what}: cannot create its lock file {str(path)!r} "
                      f"({err.strerror or err}).") from None
  stale = _holder(fd)
  if stale.get("pid"):  # a process killed while holding it left the file; the kernel freed it
    print(f"attndyn: note: {what} was left locked by {_describe(stale)}, which is no longer "
          f"running; taking it over.", file=sys.stderr)
  started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
  info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                     "started": started}).encode()
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, info, 0)
  except OSError:
    pass  # a full disk: the lock holds all the same, only its holder goes unnamed
  try:
    yield out
  finally:
    with contextlib.suppress(OSError):
      os.unlink(path)  # while still locked, so nobody locks a file that is about to vanish
    os.close(fd)
    if made is not None:
      for d in [out, *out.parents]:  # what this call created, if nothing else was put there
        with contextlib.suppress(OSError):
          d.rmdir()
        if d == made:
          break
