"""Per-seed success/failure, failure rates with a Wilson interval, and the two-stage lag statistic.

Snell et al. (Section 3.3) count how often training on the copying task fails;
with n seeds a rate is a binomial proportion, reported with the Wilson score
interval (it stays inside [0, 1] and is not degenerate at 0/n or n/n):

.. math:: \\frac{\\hat p + \\frac{z^2}{2n} \\pm z\\sqrt{\\frac{\\hat p(1-\\hat p)}{n} + \\frac{z^2}{4n^2}}}{1 + z^2/n}

The two-stage story (KTIW first, attention second) is checked per seed by the
first recorded step at which the probe's accuracy and the attention's accuracy
cross a threshold: ``lag = t_attention − t_probe`` (> 0: the probe came first).
"""
from typing import Callable, Tuple

import jax.numpy as jnp
import numpy as np

from attndyn.analysis import replication
from attndyn.models import seq2seq_snell
from attndyn.tasks.batch import Batch
from attndyn.tasks.copying import CopyingConfig, sample_copying
from attndyn.tasks.errors import check

__all__ = ["wilson_interval", "first_crossing", "stage_lag", "rate_text", "authors_metrics",
           "authors_evaluation", "multihead_evaluation", "multihead_labels"]


def wilson_interval(k: int, n: int) -> Tuple[float, float]:
  """``(low, high)`` of the 95% Wilson score interval for ``k`` successes in ``n`` trials
  (:func:`analysis.replication.wilson_interval`, with the counts checked)."""
  check(isinstance(n, (int, np.integer)) and n >= 1, "n", n, "a positive integer")
  check(0 <= k <= n, "k", k, f"between 0 and n = {n}")
  return replication.wilson_interval(k, n)


def first_crossing(curves: np.ndarray, t: np.ndarray, threshold: float) -> np.ndarray:
  """``[S]`` the first ``t`` at which each row of ``curves [S, R]`` is ≥ threshold (NaN if never)."""
  c = np.asarray(curves) >= threshold
  idx = np.argmax(c, axis=1)
  return np.where(c.any(1), np.asarray(t, float)[idx], np.nan)


def stage_lag(probe: np.ndarray, attention: np.ndarray, t: np.ndarray,
              threshold: float = 0.5) -> np.ndarray:
  """``[S]`` ``first_crossing(attention) − first_crossing(probe)``; NaN where either never crosses."""
  return first_crossing(attention, t, threshold) - first_crossing(probe, t, threshold)


def rate_text(flags) -> str:
  """``"k/n = p (Wilson 95% [lo, hi])"`` for an array of booleans."""
  flags = np.asarray(flags, bool).ravel()
  k, n = int(flags.sum()), int(flags.size)
  lo, hi = wilson_interval(k, n)
  return f"{k}/{n} = {k / n:.2f} (Wilson 95% [{lo:.2f}, {hi:.2f}])"


def authors_metrics(out, beta, batch) -> dict:
  """The authors' evaluation (``seq2seq.py`` ``eval_acc``) on one teacher-forced batch, and the probe's.

  Every target position counts, EOS included (no padding in the authors' copying data).

  * ``token_acc``: argmax output = target (their ``acc``).
  * ``attn_acc``: the argmax of the attention is position t (their ``attn_acc``; with
    K heads, the best head).
  * ``attn_word_acc``: the source word under the argmax attention is the correct output
    (= ``attn_acc`` when a sentence's words are distinct).
  * ``beta_acc``: the source word under ``argmax_l β_{t,l}`` is the correct output.
  * ``beta_correct`` / ``beta_other``: mean β over positions holding / not holding it.

  Args:
    out: the model's output (``logits [n, T, V]``, ``attention [n, K, T, L]``).
    beta: ``[n, T, L]`` the lexical probe.
    batch: the pairs (``tokens [n, L]``, ``labels [n, T]``).
  """
  x, y = batch.tokens, batch.labels
  same = x[:, None, :] == y[:, :, None]                                     # [n,T,L]
  arg = jnp.argmax(out.attention, -1)                                       # [n,K,T]
  t = jnp.arange(y.shape[1])
  hit = jnp.take_along_axis(same[:, None], arg[..., None], -1)[..., 0]      # [n,K,T]
  bhit = jnp.take_along_axis(same, jnp.argmax(beta, -1)[..., None], -1)[..., 0]
  sf = same.astype(beta.dtype)
  return {
      "token_acc": jnp.mean(jnp.argmax(out.logits, -1) == y),
      "attn_acc": jnp.mean((arg == t).max(1)),
      "attn_word_acc": jnp.mean(hit.max(1)),
      "beta_acc": jnp.mean(bhit),
      "beta_correct": jnp.mean((beta * sf).sum(-1) / jnp.maximum(sf.sum(-1), 1)),
      "beta_other": jnp.mean((beta * (1 - sf)).sum(-1) / jnp.maximum((1 - sf).sum(-1), 1)),
  }


def authors_evaluation(cfg: seq2seq_snell.SnellSeq2SeqConfig, task: CopyingConfig,
                       eval_size: int) -> Callable:
  """``evaluate(params, key) -> dict``: the authors' evaluation of their model on
  ``eval_size`` fresh pairs of ``task`` drawn from ``key`` (:func:`authors_metrics`, with the
  lexical probe β of :func:`models.seq2seq_snell.probe`) and the pairs' ``loss``."""
  def evaluate(params, key):
    ev = sample_copying(key, task, eval_size)
    out = seq2seq_snell.apply(params, ev, cfg)
    m = authors_metrics(out, seq2seq_snell.probe(params, cfg, out, ev.labels), ev)
    m["loss"] = seq2seq_snell.nll(out.logits, ev.labels)
    return m

  return evaluate


def multihead_evaluation(cfg: seq2seq_snell.SnellSeq2SeqConfig, val: Batch) -> Callable:
  """``evaluate(params, key) -> {"token_acc": [], "attn_acc": [K]}``: the authors'
  ``multihead.py`` evaluation on one fixed validation set ``val`` (``key`` unused): token
  accuracy, and per head the fraction of steps whose argmax attention is position t (the EOS
  step left out), their ``attn_acc``."""
  gold = jnp.arange(val.tokens.shape[1] - 1)

  def evaluate(params, key):
    del key   # one fixed validation set, as theirs
    out = seq2seq_snell.apply(params, val, cfg)
    arg = jnp.argmax(out.attention, -1)[..., :-1]                  # [n, K, T-1]: EOS step off
    return {"token_acc": jnp.mean(jnp.argmax(out.logits, -1) == val.labels),
            "attn_acc": jnp.mean(arg == gold, axis=(0, 2))}        # per head, their attn_acc

  return evaluate


def multihead_labels(acc: np.ndarray, good_above: float, bad_below: float) -> dict:
  """``multihead.py``'s ``can_learn`` / ``is_good_single_head`` on records ``acc [heads, orders, R]``.

  A run is good when any record exceeds ``good_above`` (their loop returns there), bad
  when none does and the last is below ``bad_below``; a head is good (bad) when every
  order's run is. Returns the per-run flags and the good and bad head indices.
  """
  good_run = acc.max(-1) > good_above
  bad_run = ~good_run & (acc[..., -1] < bad_below)
  return {"good_run": good_run, "bad_run": bad_run,
          "good": np.flatnonzero(good_run.all(1)), "bad": np.flatnonzero(bad_run.all(1))}
