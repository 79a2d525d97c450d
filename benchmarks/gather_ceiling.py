"""What the full atlas's fast-path GD would cost if a step did nothing but its essential work,
each part at the best rate XLA reaches for it alone on this CPU.

``python -m benchmarks.gather_ceiling [--sentences 800] [--tokens 21] [--vocab 5000] [--atlas DIR]``

A step of the exact fast path (:mod:`dynamics.fast_lu`) gathers, for every token of every
training sentence, one row of a per-word table (channels × a tile of seeds, seeds innermost)
and sums a sentence's rows, forward and backward; and it forms three products over the
vocabulary seen in training (``P = Wᵀx``, ``G = W R`` and ``Σ_w x_w R_wᵀ``: ``3 V_a d K``
multiply-adds a seed). This benchmark times those two kinds of work alone, each in a
program of its own, in the forms tried here (for the gather: ``table[tokens].sum(1)``, the
fast path's unrolled slice sums, a one-hot product; for the products: batched ``einsum``
dots and the fast path's sums of broadcasts), over seed tiles, and keeps the best rate of
each. With the counts of :func:`fast_path_work` over the full grid's fast-path
buckets it prints the minutes those parts alone would take at those rates: a yardstick for
how far the measured atlas (``--atlas DIR``) is from the work it cannot avoid, not a proof
that no faster form exists. Timings depend on the machine's load: run it on idle cores.
"""
import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def _forms(n_tokens: int) -> dict:
  """Gather-and-sum programs: ``(table [V, W], tokens [n, L]) -> [n, W]``."""

  def take_sum(table, tokens):
    return table[tokens].sum(axis=1)

  def slice_sums(table, tokens):
    # The fast path's form (dynamics.fast_lu.xla_cpu): one gather per token position, summed
    # in a chain, since XLA's CPU reduction over a non-minor axis is slow.
    out = table[tokens[:, 0]]
    for l in range(1, n_tokens):
      out = out + table[tokens[:, l]]
    return out

  def one_hot_matmul(table, tokens):
    counts = jax.nn.one_hot(tokens, table.shape[0], dtype=table.dtype).sum(axis=1)
    return counts @ table

  return {"take_sum": take_sum, "slice_sums": slice_sums, "one_hot_matmul": one_hot_matmul}


def time_form(fn, *args, repeats: int = 5) -> float:
  """Best-of-``repeats`` seconds of one jitted call ``fn(*args)`` (compiled and run once before)."""
  f = jax.jit(fn)
  jax.block_until_ready(f(*args))
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    best = min(best, time.perf_counter() - t0)
  return best


def measure(sentences: int, tokens_per: int, vocab: int, channels=(5, 16), tiles=(8, 32, 64),
            skip_dense_above: int = 64) -> list:
  """Gathered floats per second of each form, channel count and seed tile."""
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, vocab, size=(sentences, tokens_per)), jnp.int32)
  rows = []
  for c in channels:
    for s in tiles:
      table = jnp.asarray(rng.standard_normal((vocab, c * s)), jnp.float32)
      for name, fn in _forms(tokens_per).items():
        if name == "one_hot_matmul" and c * s > skip_dense_above:
          continue     # a [n, V] dense product: far slower than a gather at these widths
        sec = time_form(fn, table, tokens)
        floats = sentences * tokens_per * c * s
        rows.append({"form": name, "channels": c, "tile": s, "seconds": sec,
                     "floats_per_s": floats / sec})
        print(f"{name:15s} channels {c:3d} tile {s:3d}: {sec * 1e3:8.3f} ms, "
              f"{floats / sec / 1e9:6.2f} G gathered floats/s", flush=True)
  return rows


def _product_forms() -> dict:
  """The step's three products over the vocabulary, seeds last: ``P = Wᵀx`` ``[V, K, S]``,
  ``G = W R`` ``[V, d, S]`` and ``Σ_w x_w R_wᵀ`` ``[d, K, S]``, for ``x [V, d, S]``,
  ``R [V, K, S]``, ``W [d, K, S]``: as XLA batched dots, and as the fast path writes them."""
  from attndyn.dynamics.fast_lu.xla_cpu import _sum_many_rows, _tree_sum

  def dots(x, r, w):
    p = jnp.einsum("vds,dks->vks", x, w)
    g = jnp.einsum("dks,vks->vds", w, r)
    outer = jnp.einsum("vds,vks->dks", x, r)
    return p, g, outer

  def fast_path(x, r, w):
    d, k = w.shape[0], w.shape[1]
    p = _tree_sum([w[None, a] * x[:, a, None] for a in range(d)])
    g = _tree_sum([w[None, :, j] * r[:, j, None] for j in range(k)])
    outer = _sum_many_rows(lambda i0, i1: x[i0:i1, :, None] * r[i0:i1, None, :], x.shape[0])
    return p, g, outer

  return {"dots": dots, "fast_path_form": fast_path}


def measure_products(words: int, d: int, k: int, tiles=(8, 32, 64)) -> list:
  """Multiply-adds per second of the three vocabulary products (``3 V d K`` per seed)."""
  rng = np.random.default_rng(1)
  rows = []
  for s in tiles:
    x = jnp.asarray(rng.standard_normal((words, d, s)), jnp.float32)
    r = jnp.asarray(rng.standard_normal((words, k, s)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((d, k, s)), jnp.float32)
    for name, fn in _product_forms().items():
      best = time_form(fn, x, r, w)
      macs = 3 * words * d * k * s
      rows.append({"form": name, "tile": s, "d": d, "k": k, "seconds": best,
                   "macs_per_s": macs / best})
      print(f"{name:15s} d {d:3d} K {k:3d} tile {s:3d}: {best * 1e3:8.3f} ms, "
            f"{macs / best / 1e9:6.2f} G multiply-adds/s", flush=True)
  return rows


def fast_path_work(s, bucket) -> tuple:
  """``(run_steps, gathered, products)`` of an atlas bucket on the fast path: σ × seeds × Σ run
  lengths; floats gathered per run-step (sentences × (m + 1) tokens × channels: ``2 (J + 1)``
  for FC/TC, ``(d + 1) + (hidden + 1)`` for TL); multiply-adds per run-step of the three
  ``V_a × d × K`` products over the words seen in training (``V_a ≈ M (1 − e^{−n m / M})``)."""
  import math

  from attndyn import atlas, presets
  v = bucket.values
  sigmas, lengths = atlas.continuous(s, bucket)
  tokens = v["n_train"] * (v["n_nontopic"] + 1)
  d, vocab = v["embed_dim"], v["vocab_size"]
  seen = vocab * -math.expm1(-v["n_train"] * v["n_nontopic"] / vocab) \
      + v["n_topics"] * v["words_per_topic"]
  if v["classifier"] == "tl":
    k = presets.preset("lu2021-text-tl")["model"]["hidden_dim"]
    channels = (d + 1) + (k + 1)
  else:
    k = v["n_topics"]
    channels = 2 * (k + 1)
  return len(sigmas) * s.seeds * sum(lengths), tokens * channels, 3 * seen * d * k


def full_grid_work() -> dict:
  """The full atlas's fast-path GD work, per kind (``"fc/tc"``, ``"tl"``): ``floats``
  gathered and ``macs``, the multiply-adds of the products over the vocabulary, summed over
  run-steps (:func:`fast_path_work`).
  ``channels`` and ``k``: the per-token channels and K of the kind at the paper's base (the
  rates are measured at those)."""
  from attndyn import atlas, presets
  s = atlas.settings()
  hidden = presets.preset("lu2021-text-tl")["model"]["hidden_dim"]
  base = s.base
  work = {"fc/tc": {"floats": 0.0, "macs": 0.0, "channels": base.n_topics + 1,
                    "k": base.n_topics},
          "tl": {"floats": 0.0, "macs": 0.0, "channels": hidden + 1, "k": hidden}}
  for b in atlas.buckets(s):
    if not atlas.fast_path(b):
      continue
    run_steps, gathered, products = fast_path_work(s, b)
    kind = "tl" if b.values["classifier"] == "tl" else "fc/tc"
    work[kind]["floats"] += run_steps * gathered
    work[kind]["macs"] += run_steps * products
  return work


def atlas_fast_seconds(out: Path) -> float:
  """Computing seconds of a finished atlas's fast-path buckets (its atlas.json)."""
  from attndyn import atlas
  doc = json.loads((out / "atlas.json").read_text())
  s = atlas.settings()
  fast = {f"bucket-{b.index:04d}" for b in atlas.buckets(s) if atlas.fast_path(b)}
  return sum(v for k, v in doc["seconds"].items() if k in fast)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sentences", type=int, default=800)
  parser.add_argument("--tokens", type=int, default=21, help="tokens per sentence (m + 1)")
  parser.add_argument("--vocab", type=int, default=5000)
  parser.add_argument("--atlas", type=Path, default=None,
                      help="a finished full atlas's directory, for its measured rate")
  args = parser.parse_args(argv)
  work = full_grid_work()
  from attndyn import atlas
  d = atlas.settings().base.embed_dim
  gathers = measure(args.sentences, args.tokens, args.vocab,
                    channels=sorted({w["channels"] for w in work.values()}))
  products = []
  for k in sorted({w["k"] for w in work.values()}):
    products += measure_products(args.vocab, d, k)
  minutes = {}
  print()
  for kind, w in work.items():
    g = max(r["floats_per_s"] for r in gathers if r["channels"] == w["channels"])
    p = max(r["macs_per_s"] for r in products if r["k"] == w["k"])
    minutes[kind] = (w["floats"] / g + w["macs"] / p) / 60
    print(f"{kind:6s}: {w['floats']:.3g} gathered floats at {g / 1e9:.2f} G/s + {w['macs']:.3g} "
          f"multiply-adds at {p / 1e9:.2f} G/s = {minutes[kind]:.1f} min")
  total = sum(minutes.values())
  print(f"full atlas, fast-path GD doing nothing but its gathers and vocabulary products, each "
        f"at the best rate measured for it alone (one core): {total:.1f} min; with both cores "
        f"fully used: {total / 2:.1f} min")
  if args.atlas is not None:
    sec = atlas_fast_seconds(args.atlas)
    print(f"measured ({args.atlas}): fast-path buckets {sec / 60:.1f} min of computing "
          f"(GD, compiles and reduced ODEs)")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
