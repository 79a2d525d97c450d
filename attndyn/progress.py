"""A tiny progress bar on stderr for sweeps: points done, steps/s, elapsed time and ETA.

It is updated after each chunk of a sweep (``dynamics.run_sweep``'s
``on_chunk``); on a terminal a background thread also redraws the elapsed time
while a chunk (and its compilation) runs. Not on a terminal, it prints one line
per chunk instead of redrawing. A resumed sweep starts the bar at the points
read back from checkpoints; the rate and ETA count only what this process runs.
"""
import contextlib
import errno
import os
import sys
import threading
import time

__all__ = ["ProgressBar"]


def _clock(seconds: float) -> str:
  seconds = int(round(seconds))
  return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds}s"


class ProgressBar:
  """``label [#####-----] done/total points  elapsed  rate steps/s  ETA``.

  Args:
    label: what is running (``"gd"``, ``"reduced"``, ...).
    total: number of sweep points (or other units).
    steps_per_point: optimiser steps (or ODE time) per point, for the rate;
      ``None`` shows no rate.
    enabled: draw nothing when False.
    stream: where to draw (default ``sys.stderr``).
    width: characters of the bar itself.
    initial: units already done before this bar started (a resumed sweep).
    unit: what is counted (``"points"``, ``"figures"``).
    clock: seconds since an arbitrary origin (default ``time.perf_counter``).
    cost: ``cost(done)``, the cumulative cost of the first ``done`` units (non-decreasing;
      default: each unit costs 1), for units of unequal cost: the ETA is the elapsed time
      times the cost left over the cost computed so far.
  """

  def __init__(self, label: str, total: int, *, steps_per_point=1, enabled: bool = True,
               stream=None, width: int = 24, initial: int = 0, unit: str = "points",
               clock=time.perf_counter, cost=None):
    self.label, self.total, self.steps = label, total, steps_per_point
    self.enabled, self.width, self.unit = enabled, width, unit
    stream = sys.stderr if stream is None else stream
    # a closed or full stream silences the bar; it never fails the sweep it reports on
    self.stream = stream if isinstance(stream, Guarded) else Guarded(stream)
    self.initial = self.done = initial
    self.clock = clock
    self.cost = cost if cost is not None else float
    self._ran_cost = 0.0        # cost of the units computed (not read back) so far
    self.start = clock()
    self._tty = enabled and getattr(self.stream, "isatty", lambda: False)()
    self._lock, self._stop = threading.Lock(), threading.Event()
    self._ticker = None
    if self._tty:
      self._ticker = threading.Thread(target=self._tick, daemon=True)
      self._ticker.start()
    self._draw(final=False)

  def _line(self) -> str:
    elapsed = self.clock() - self.start
    filled = self.width * self.done // max(self.total, 1)
    bar = "#" * filled + "-" * (self.width - filled)
    text = f"{self.label:<14} [{bar}] {self.done}/{self.total} {self.unit}  {_clock(elapsed)}"
    if self.initial:
      text += f"  ({self.initial} from checkpoints)"
    ran = self.done - self.initial
    if ran > 0:
      if self.steps:
        text += f"  {ran * self.steps / max(elapsed, 1e-9):,.0f} steps/s"
      if self.done < self.total and self._ran_cost > 0:
        left = self.cost(self.total) - self.cost(self.done)
        text += f"  ETA {_clock(elapsed * left / self._ran_cost)}"
    elif self.unit == "points" and self.done < self.total and elapsed > 0.5:
      text += "  (compiling and running the first chunk)"
    return text

  def _draw(self, final: bool):
    if not self.enabled:
      return
    with self._lock:
      if self._tty:
        self.stream.write("\r\033[K" + self._line() + ("\n" if final else ""))
      elif final or self.done > self.initial:   # a log: a line when something new finished
        self.stream.write(self._line() + "\n")
      self.stream.flush()

  def _tick(self):
    while not self._stop.wait(0.5):
      self._draw(final=False)

  def update(self, done: int, total: int = None, *_):
    """Record that ``done`` units are finished (``on_chunk`` signature)."""
    self._ran_cost += self.cost(done) - self.cost(self.done)
    moved, self.done = done != self.done, done
    if moved and done < self.total:
      self._draw(final=False)

  def read_back(self, done: int):
    """Record that units up to ``done`` are finished but were read back (a resumed run's
    checkpoints), not computed: like ``initial``, they count neither in the rate nor in the
    ETA, and while nothing has been computed yet the clock of the rate restarts."""
    if self.done == self.initial:
      self.start = self.clock()
    moved = done != self.done
    self.initial += done - self.done
    self.done = done
    if moved and done < self.total:
      self._draw(final=False)

  def close(self):
    """Stop redrawing and finish the line."""
    self._stop.set()
    if self._ticker is not None:
      self._ticker.join()
    self._draw(final=True)


class Guarded:
  """A text stream whose failures never reach the caller: output streams are not the
  computation.

  A closed pipe (``| head -1``), a full disk (``2>/dev/full``) or a closed file makes a write
  or flush raise; behind this wrapper it is recorded (:attr:`failed`, the first error) and the
  stream falls silent, so a progress bar or a warning cannot fail a stage, stop a run or cost
  a file. What could not be written is kept (the last :data:`KEPT` lines, :attr:`lost`) for
  the error log. Everything else is the wrapped stream's.
  """

  KEPT = 200

  def __init__(self, stream):
    self._stream = stream
    self.failed = None
    self.lost = []

  def write(self, text):
    if self.failed is None:
      try:
        return self._stream.write(text)
      except (OSError, ValueError) as err:   # ValueError: the file was closed
        self.failed = err
    self.lost = (self.lost + str(text).splitlines(keepends=True))[-self.KEPT:]
    return len(text)

  def flush(self):
    if self.failed is None:
      try:
        self._stream.flush()
      except (OSError, ValueError) as err:
        self.failed = err

  def isatty(self):
    try:
      return self.failed is None and self._stream.isatty()
    except (OSError, ValueError):
      return False

  @property
  def broken_pipe(self) -> bool:
    """Whether the stream failed because its reader went away (``EPIPE``)."""
    return isinstance(self.failed, OSError) and self.failed.errno == errno.EPIPE

  def silence(self) -> None:
    """Point the stream's file descriptor at ``/dev/null`` once it failed, so that the
    interpreter's flush at exit does not fail on the same bytes again."""
    if self.failed is None:
      return
    with contextlib.suppress(OSError, ValueError, AttributeError):
      null = os.open(os.devnull, os.O_WRONLY)
      os.dup2(null, self._stream.fileno())
      os.close(null)

  def __getattr__(self, name):
    return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_streams():
  """``sys.stdout`` and ``sys.stderr`` as :class:`Guarded` streams for the ``with`` block;
  yields ``(stdout, stderr)`` (the guards) and restores the streams afterwards."""
  old = sys.stdout, sys.stderr
  guards = Guarded(sys.stdout), Guarded(sys.stderr)
  sys.stdout, sys.stderr = guards
  try:
    yield guards
  finally:
    for guard in guards:
      guard.flush()
    sys.stdout, sys.stderr = old
