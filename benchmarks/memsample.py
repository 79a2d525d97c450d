"""Peak resident memory of this process, sampled by a background thread."""
import os
import threading
import time

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
  """Current resident set size (Linux ``/proc/self/statm``; 0 elsewhere)."""
  try:
    with open("/proc/self/statm") as f:
      return int(f.read().split()[1]) * _PAGE
  except OSError:
    return 0


class PeakRSS:
  """Context manager: ``peak`` (bytes) and ``base`` (bytes at entry), sampled every ``every`` s.

  Example::

    with PeakRSS() as mem:
      run()
    print((mem.peak - mem.base) / 2**20, "MiB above the level at entry")
  """

  def __init__(self, every: float = 0.002):
    self.every = every
    self.base = self.peak = 0
    self._stop = threading.Event()
    self._thread = None

  def _loop(self):
    while not self._stop.is_set():
      self.peak = max(self.peak, rss_bytes())
      time.sleep(self.every)

  def __enter__(self):
    self.base = self.peak = rss_bytes()
    self._stop.clear()
    self._thread = threading.Thread(target=self._loop, daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()
    self.peak = max(self.peak, rss_bytes())
    return False
