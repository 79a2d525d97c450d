"""The authors' multi-head protocol (``SequenceCopying/multihead.py``), on the one engine.

Their experiment, step by step, and how each step is run here:

1. **One body.** One ``Seq2Seq`` (GRU encoder and decoder, separate embeddings, the
   ``[c; d]`` readout) is initialised once and every run starts from it; only the
   attention heads (``Attn_head``: ``attn_proj``, ``enc_proj``, each ``nn.Linear(h, h)``)
   differ. Here: ``models.seq2seq_snell`` with ``cell="gru", shared_embedding=False,
   context_first=True``, the body from ``PRNGKey(body_seed)``, head ``i`` from
   ``fold_in(PRNGKey(head_seed), i)`` (PyTorch's default inits throughout).
2. **Label single heads.** A fresh head is trained alone from the body on three data
   orders (``random.seed(0..2)``), ``steps`` Adam updates on fresh permutation batches,
   evaluated on one fixed validation set *before* every ``every``-th update. A run is
   *good* when an evaluation's token accuracy exceeds ``good_above`` (0.95; their loop
   returns there), *bad* when it never does and the last evaluation is below
   ``bad_below`` (0.6). A head is good (bad) when all three runs are; else neither.
   Theirs draws heads until it has 20 of each; here ``candidates`` heads are labelled in
   one vmapped sweep and the first ``pool`` good and bad ones (in draw order) are kept.
3. **Combinations.** For ``idx < combos``: ``K`` bad heads, ``K − 1`` bad + 1 good, and
   ``K`` of ``random_heads`` fresh heads, chosen by their exact Python ``random`` calls
   (``random.seed(3·idx + j)``, ``shuffle``; the lists are shuffled in place across idx,
   as theirs are), each trained on data order 0 for all ``steps`` updates. The outcome
   is the final evaluation's token accuracy.

Deliberately different (``docs/snell-copying.md``): data and validation set come from
JAX keys (theirs: Python's unseeded ``random``), and a fixed number of candidates is
labelled instead of drawing until 20 of each label are found (so a pool can be smaller).

Every function's ``s`` is the ``multihead`` experiment's settings
(:class:`attndyn.reproduce.snell.multihead.Settings`, its preset laid over them).
"""
import random
from typing import Dict, List

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis import copying_stats as cs
from attndyn.reproduce import engine
from attndyn.dynamics import copying
from attndyn.dynamics.optimizers import base_optimizer
from attndyn.models import seq2seq_snell
from attndyn.tasks.copying import CopyingConfig, sample_copying

__all__ = ["COMBOS", "model_config", "head_key", "point", "settings_of", "label_heads",
           "combinations", "run_combinations", "protocol"]

VAL_KEY, BODY_KEY, HEAD_KEY, RANDOM_HEAD_KEY, DATA_KEY = 11, 12, 13, 14, 15
COMBOS = ("bad", "bad+good", "random")


def model_config(task: CopyingConfig, s, heads: int) -> seq2seq_snell.SnellSeq2SeqConfig:
  """``multihead.py``'s ``Seq2Seq`` with ``heads`` attention heads."""
  return seq2seq_snell.SnellSeq2SeqConfig(task.vocab, task.sos, hidden=s.hidden, heads=heads,
                                          cell="gru", shared_embedding=False,
                                          context_first=True)


def head_key(s, i):
  """Candidate heads are ``0, 1, ...``; the random heads of step 3 are ``-1, -2, ...``."""
  base = jnp.where(i >= 0, s.head_seed, s.head_seed + RANDOM_HEAD_KEY)
  return jax.random.fold_in(jax.random.PRNGKey(base), jnp.abs(i))


def point(task: CopyingConfig, s, heads: int):
  """``one({"heads": [K] ids, "order": o}) -> {"token_acc": [R], "attn_acc": [R, K]}``."""
  cfg = model_config(task, s, heads)
  body = seq2seq_snell.init(jax.random.PRNGKey(s.body_seed + BODY_KEY), cfg)
  val = sample_copying(jax.random.PRNGKey(s.body_seed + VAL_KEY), task, s.eval_size)
  train = copying.authors_train(seq2seq_snell.make_loss(cfg),
                                lambda k: sample_copying(k, task, s.batch),
                                cs.multihead_evaluation(cfg, val), base_optimizer("adam", s.lr),
                                s.steps, s.record_every, record="before")

  def one(inp):
    hs = jax.vmap(lambda i: seq2seq_snell.attention_head(head_key(s, i), s.hidden))(inp["heads"])
    params = {**body, "attention": hs["attention"], "project": hs["project"]}
    data = jax.random.fold_in(jax.random.PRNGKey(s.body_seed + DATA_KEY), inp["order"])
    return train(params, data)

  return one


def settings_of(task: CopyingConfig, s) -> dict:
  keys = ("hidden", "steps", "batch", "lr", "record_every", "eval_size", "body_seed", "head_seed")
  return {"task": {"n_tokens": task.n_tokens, "length": task.length},
          **{k: getattr(s, k) for k in keys}}


def label_heads(ctx, task: CopyingConfig, s) -> dict:
  """Step 2: every candidate on ``orders`` data orders; the labels by ``multihead.py``'s rules."""
  n, orders = s.candidates, s.orders
  inputs = {"heads": np.repeat(np.arange(n, dtype=np.int32), orders)[:, None],
            "order": np.tile(np.arange(orders, dtype=np.int32), n)}
  obs = engine.sweep(ctx, "multihead-authors-single", point(task, s, 1), inputs,
                     settings_of(task, s), chunk_size=s.chunk or None, what="runs")
  acc = np.asarray(obs["token_acc"], float).reshape(n, orders, -1)
  return {"acc": acc, **cs.multihead_labels(acc, s.good_above, s.bad_below)}


def combinations(good: List[int], bad: List[int], n_random: int, heads: int,
                 combos: int) -> Dict[str, list]:
  """Step 3's head lists, by ``multihead.py``'s ``run()``: the same ``random`` calls on lists of
  the same lengths choose the same positions (random heads are ids ``-1 … -n_random``)."""
  good, bad, rand = list(good), list(bad), [-(i + 1) for i in range(n_random)]
  out = {name: [] for name in COMBOS}
  for idx in range(combos):
    random.seed(3 * idx)
    random.shuffle(bad)
    out["bad"].append(bad[:heads])
    random.seed(3 * idx + 1)
    random.shuffle(bad)
    random.shuffle(good)
    out["bad+good"].append(bad[:heads - 1] + good[:1])
    random.seed(3 * idx + 2)
    random.shuffle(rand)
    out["random"].append(rand[:heads])
  return out


def run_combinations(ctx, task: CopyingConfig, s, lists: Dict[str, list]) -> dict:
  """Every list of ``lists`` trained on data order 0; ``{name: final token accuracy [n]}``."""
  names = [name for name in COMBOS if lists.get(name)]
  if not names:
    return {}
  ids = np.asarray([ids for name in names for ids in lists[name]], np.int32)
  obs = engine.sweep(ctx, "multihead-authors-combos", point(task, s, s.heads),
                     {"heads": ids, "order": np.zeros(len(ids), np.int32)},
                     settings_of(task, s), chunk_size=s.chunk or None, what="runs")
  final = np.asarray(obs["token_acc"], float)[:, -1]
  out, start = {}, 0
  for name in names:
    out[name] = final[start:start + len(lists[name])]
    start += len(lists[name])
  return out


def protocol(ctx, task: CopyingConfig, s) -> dict:
  """Steps 2 and 3: the labels, the pools, the head lists run, the final token accuracy of
  every combination (``finals``) and of every single-head run (``single_final``)."""
  found = label_heads(ctx, task, s)
  good, bad = found["good"][:s.pool].tolist(), found["bad"][:s.pool].tolist()
  k = s.heads
  lists = combinations(good, bad, s.random_heads, k, s.combos)
  if len(bad) < k:       # theirs needs K bad heads for both bad combinations
    lists.pop("bad"), lists.pop("bad+good")
  elif not good:
    lists.pop("bad+good")
  skipped = [name for name in COMBOS if name not in lists]
  ctx.log(f"multihead: {len(found['good'])} good, {len(found['bad'])} bad of "
          f"{s.candidates} heads; combinations {', '.join(lists)}" +
          (f" ({', '.join(skipped)} skipped: pools of {len(good)} good, {len(bad)} bad)"
           if skipped else ""))
  finals = run_combinations(ctx, task, s, lists)
  return {"labels": found, "pools": {"good": good, "bad": bad}, "lists": lists,
          "finals": finals, "skipped": skipped,
          "single_final": found["acc"][..., -1].ravel()}   # every candidate × order, last record
