"""The compile cache of attndyn's commands (attndyn.compile_cache): where it goes, that it is
left off quietly when it cannot be made, and that a rerun loads its programs from it and
computes the same numbers (bit for bit) as the run that compiled them."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from attndyn import compile_cache

# A tiny `attndyn run` with the reduced ODE beside GD: its ODE program is the one JAX would
# not cache were equinox's runtime checks host callbacks (compile_cache.enable).
ARGS = ["run", "--preset", "quick", "--no-progress"] + [
    arg for item in ("task.vocab_size=12", "task.n_nontopic=3", "task.n_train=16",
                     "task.n_test=8", "model.embed_dim=4", "model.key_dim=4",
                     "model.embed_std=0.1", "train.lr=0.5", "train.steps=40",
                     "train.record_every=10", "ode.kind=reduced", "sweep.seeds=2")
    for arg in ("--set", item)]


def test_directory_follows_the_environment(tmp_path):
  host = compile_cache.host_folder()
  assert host.startswith("cpu-") and host == compile_cache.host_folder()
  assert compile_cache.directory({compile_cache.ENV: str(tmp_path)}) == tmp_path / host
  assert compile_cache.directory({"XDG_CACHE_HOME": str(tmp_path)}) == \
      tmp_path / "attndyn" / "xla" / host
  for off in ("off", "OFF", "0", "none"):
    assert compile_cache.directory({compile_cache.ENV: off}) is None
  # JAX's own setting is left to JAX.
  assert compile_cache.directory({"JAX_COMPILATION_CACHE_DIR": str(tmp_path),
                                  compile_cache.ENV: str(tmp_path)}) is None


def test_a_cache_that_cannot_be_made_is_left_off(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("not a directory")
  assert compile_cache.enable({compile_cache.ENV: str(blocker / "cache")}) is None


def _cached(folder: Path) -> dict:
  """Each cached program's last-use stamp (JAX rewrites it on every load)."""
  return {p.name: p.read_bytes() for p in folder.rglob("*-atime")}


def test_a_rerun_loads_its_programs_and_computes_the_same(tmp_path):
  env = {k: v for k, v in os.environ.items()
         if k not in ("JAX_COMPILATION_CACHE_DIR", "EQX_ON_ERROR")}
  # JAX then logs each program it compiles for want of a cache entry; every program is
  # cached, however fast it compiles (else one near the threshold would make this flaky).
  env.update(JAX_PLATFORMS="cpu", JAX_EXPLAIN_CACHE_MISSES="true",
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             **{compile_cache.ENV: str(tmp_path / "cache")})
  attndyn = str(Path(sys.executable).with_name("attndyn"))
  outs, misses = [], []
  for i in range(2):
    out = tmp_path / f"run{i}"
    done = subprocess.run([attndyn, *ARGS, "--out", str(out)], env=env, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "host callbacks" not in done.stderr, done.stderr
    misses.append(done.stderr.count("PERSISTENT COMPILATION CACHE MISS"))
    outs.append(out)
    if i == 0:
      first = _cached(tmp_path / "cache")
  second = _cached(tmp_path / "cache")
  assert misses[0] >= 2 and misses[1] == 0, misses   # the rerun compiled nothing ...
  assert first and set(first) == set(second)
  assert sum(first[k] != second[k] for k in first) >= 2      # ... it loaded
  with np.load(outs[0] / "trajectories.npz") as a, np.load(outs[1] / "trajectories.npz") as b:
    assert sorted(a.files) == sorted(b.files) and any(k.startswith("reduced") for k in a.files)
    for k in a.files:
      np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_the_cache_stays_bounded_and_scans_only_when_its_count_passes_the_bound(tmp_path):
  # JAX's LRU cache scans every entry before every write (N²/2 file reads for N programs);
  # ours scans at its first write and then only when the bytes it knows of would pass
  # max_size, evicting the least recently used as JAX does.
  from jax._src import lru_cache
  cls = compile_cache._healing_class()
  cache = cls(str(tmp_path), max_size=10_000)
  scans = []
  original = lru_cache.LRUCache._evict_if_needed

  def counted(self, **kwargs):
    scans.append(kwargs)
    return original(self, **kwargs)

  lru_cache.LRUCache._evict_if_needed = counted
  try:
    sizes = []
    for i in range(40):
      cache.put(f"k{i}", bytes(900))   # ~1 kB sealed: about 10 fit
      sizes.append(sum(p.stat().st_size for p in tmp_path.glob("*-cache")))
      assert sizes[-1] <= 10_000
  finally:
    lru_cache.LRUCache._evict_if_needed = original
  entry = (tmp_path / "k39-cache").stat().st_size
  fit = 10_000 // entry
  assert len(scans) == 1 + (40 - fit)          # the first write, then one per write once full
  # the least recently used went first: the newest entries that fit are kept
  assert {p.name for p in tmp_path.glob("*-cache")} == {f"k{i}-cache" for i in range(40 - fit, 40)}


def test_parsing_a_command_does_not_import_equinox():
  # compile_cache.enable sets EQX_ON_ERROR=nan only if equinox is not imported yet: were the
  # parser to import it (through a module of a subcommand), every ODE program would hold a
  # host callback and none would be cached.
  code = ("import sys\nfrom attndyn import cli\n"
          "cli._parser().parse_args(['run', '--preset', 'quick', '--out', 'x'])\n"
          "print(sorted(m for m in ('equinox', 'diffrax') if m in sys.modules))")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == "[]"
