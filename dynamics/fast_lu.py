"""Exact fast gradient descent for the Lu et al. model with a fixed query, seeds innermost.

The generic path (:func:`dynamics.train.make_train`) differentiates the model
with autodiff and vmaps over seeds. When the query is fixed, training is
full-batch gradient descent and every seed shares one dataset, the same
trajectory can be computed with far less memory traffic; this module does that,
as an exact reformulation of the same update (agreement to float rounding is
tested in ``tests/test_fast_path.py``).

Algebra (one seed; sentence ``i`` has words ``w_il``, ``n`` sentences,
``C_iw`` = count of word ``w`` in sentence ``i``, ``τ`` the learning rate):

1. **Only the scores move in the keys.** With ``s_w = qᵀκ_w`` and ``q`` fixed,
   ``∂L/∂κ_w = (∂L/∂s_w) q``, so gradient descent on ``κ_w`` is

   .. math::
      κ_w(t) = κ_w(0) + \\frac{s_w(t) - s_w(0)}{‖q‖^2} q, \\qquad
      s_w \\leftarrow s_w - τ ‖q‖^2 \\, g_w, \\quad g_w = ∂L/∂s_w,

   and the state per word is ``(ν_w, s_w)``: ``d + 1`` numbers, not ``d + d'``.

2. **Factored softmax.** With ``e_w = exp(s_w − c)`` for any per-seed shift ``c``,

   .. math::
      Z_i = Σ_w C_{iw} e_w, \\quad N_i = Σ_w C_{iw} e_w ν_w, \\quad
      \\bar ν_i = N_i / Z_i,

   a sparse product ``C·[e ⊙ ν, e]`` computed as ``m + 1`` row gathers per
   sentence (rare words) plus a small dense product over the few frequent
   words (``heavy``: the topic words here), never a ``[n, L, d]`` tensor.

3. **Backward through the classifier's first linear map.** Let the classifier
   start with ``pre_i = Wᵀ \\bar ν_i`` (``W = U`` for FC/TC, ``W = U_1`` for TL,
   ``K`` columns) and let ``δ_i = ∂L/∂pre_i`` (``(p_i − y_i)/n`` for FC/TC;
   ``1[h_i > 0] ⊙ U_2 (p_i − y_i)/n`` for TL). Then ``∂L/∂\\bar ν_i = W δ_i`` and
   with ``R_w = Σ_i C_{iw} [δ_i, pre_i·δ_i] / Z_i`` (``K + 1`` channels),

   .. math::
      ∂L/∂ν_w = e_w \\, G_w, \\quad G_w = W R_w^{(:K)}, \\qquad
      ∂L/∂s_w = e_w \\, (ν_w · G_w − R_w^{(K)}),

   using ``\\bar ν_i · W δ_i = pre_i · δ_i``. ``R = Cᵀ Y`` is again gathers
   (words grouped by count, each group a padded table of its sentences) plus
   the dense product for the heavy words.

4. **Only ``Wᵀ\\bar ν_i`` is needed forward.** ``pre_i = Σ_w C_{iw} P_w / Z_i``
   with ``P_w = Wᵀx_w`` (``K`` channels, and ``P`` is needed anyway for
   ``ν_w·G_w = P_w·R_w^{(:K)}/e_w`` in step 3), so the forward pass can gather
   ``[e_w, P_w]`` (``K + 1`` channels) instead of ``[e_w, x_w]`` (``d + 1``).
   :func:`projected_forward_pays` picks the cheaper form per problem (both are
   exact): FC/TC/TL at the text preset gather ``P``.

5. **Classifier gradients.** The later layers' over sentences
   (``∂L/∂U_2 = Σ_i h_i (p_i − y_i)ᵀ/n``, ``b_1``, ``b_2``). The first layer's
   ``∂L/∂W = Σ_i \\bar ν_i δ_iᵀ`` over sentences when the forward pass formed
   ``\\bar ν_i``; otherwise over words, with the ``R`` of step 3:

   .. math::
      ∂L/∂W = Σ_i \\frac{Σ_w C_{iw} x_w}{Z_i} δ_iᵀ = Σ_w x_w R_w^{(:K)ᵀ}.

   Sums over the sentence or word axis are unrolled slice sums (XLA's CPU
   reduction over a non-minor axis is slow: ``∂L/∂U`` over 5,009 words × 16
   seeds, d = 15, K = 4, took 3.7 ms as ``jnp.sum(axis=0)`` and 0.2 ms sliced).

Every array keeps the seed axis innermost (``[..., S]``) so each elementwise
loop vectorises across seeds; seeds are processed in tiles of ``seed_tile``
(``lax.map`` over tiles) so a tile's state stays in cache. The shift ``c`` is
each seed's largest score at every step (any constant gives the same
trajectory; this one guards ``exp`` against overflow). The one limit of the
factored form: a sentence whose words all score more than ~87 (float32;
~708 in float64) below the vocabulary's top score underflows to ``Z_i = 0``;
that step is then non-finite and reported in ``failed_at`` (the generic path,
which shifts per sentence, would go on).

Failures: a step whose forward pass is non-finite (checked through
``Σ_i pre_i·δ_i`` and the classifier gradients) is not applied, and the run
stays frozen from then on with ``failed_at`` set to that step, as in the
generic path. The generic path also checks the updated parameters; here a
parameter that overflows shows up one step later, through the next forward
pass (so ``failed_at`` can be one step later in that corner case).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
import dataclasses
import functools
import hashlib
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np

from dynamics.train import TrainConfig
from dynamics.trajectory import Trajectory
from models import lu, lu_linear
from tasks.batch import Batch
from tasks.errors import ConfigError

# Words that occur more often than this go through a dense [H, n] product.
HEAVY_COUNT = 16
# Channels gathered together in one forward fusion: a CPU tuning (the results do not depend
# on it), chosen on a 2-core AVX2 CPU.
CHANNEL_GROUP = 4
# A gathered float costs about this many multiply-adds (projected_forward_pays): the model
# behind gathering Wᵀx instead of x, which pays for FC and TC (K = n_classes < d) and not for
# TL. A CPU cost model; either form is exact.
GATHER_COST = 6
# Seeds per tile: a tile's state ([V, d, S] float32) should stay in the last-level cache, so
# seeds are advanced in tiles rather than all at once (`python -m benchmarks.xla_options`
# times SEED_TILE against one tile of all seeds; `benchmarks/run.py` the default's speed).
SEED_TILE = 16
# XLA options for compiling the fast path (pass to jax.jit or dynamics.run_sweep): LLVM at -O1.
# Its kernels are sums of gathers and elementwise loops, where -O2's extra LLVM passes buy no
# speed for more compile time (`python -m benchmarks.xla_options` times both ways).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


# ----------------------------------------------------------------------------------------
# When it applies.


@dataclasses.dataclass(frozen=True)
class FastPathCheck:
  """Whether :func:`make_fast_train` applies; truthy iff it does.

  Attributes:
    applies: the fast path gives the same trajectory as the generic one.
    reason: why (or why not), one line.
  """
  applies: bool
  reason: str

  def __bool__(self) -> bool:
    return self.applies


def _loss_mismatch(loss_fn, model_cfg) -> Optional[str]:
  """Why ``loss_fn`` may differ from the Lu cross-entropy the fast path computes (None: it is that).

  Only losses built by ``models.make_loss`` from a Lu forward pass known to be
  the same function (``models.lu.apply``; ``models.lu_linear.apply_linear``
  for the linear classifiers) are accepted: any other function, even one
  that happens to compute the same loss, cannot be checked and is refused.
  """
  apply_fn = getattr(loss_fn, "apply_fn", None)
  if apply_fn is lu.apply:
    return None
  if apply_fn is lu_linear.apply_linear:
    classifier = getattr(model_cfg, "classifier", None)
    if classifier in ("fc", "tc"):
      return None
    return (f"loss_fn is the cross-entropy of models.lu_linear.apply_linear, which needs a "
            f"linear classifier (fc or tc), not {classifier!r}")
  name = lambda f: getattr(f, "__qualname__", type(f).__name__)
  if loss_fn is None:
    what = "loss_fn is None"
  elif apply_fn is not None:
    what = f"loss_fn is the cross-entropy of {name(apply_fn)!r}, not of models.lu.apply"
  else:
    what = f"loss_fn {name(loss_fn)!r} is not models.make_loss(models.lu.apply)"
  return (f"a custom loss ({what}): the fast path computes the Lu model's own "
          "cross-entropy in closed form and cannot check that another loss equals it")


def fast_path_applies(model_cfg, train_cfg: TrainConfig, trainable: Optional[dict] = None,
                      batch: Optional[Batch] = None, *, loss_fn: Any = "lu") -> FastPathCheck:
  """Decide whether the exact fast path can replace :func:`dynamics.make_train`.

  It applies to the Lu model (:class:`models.LuModelConfig`) trained on its own
  cross-entropy (``models.make_loss(models.lu.apply)``) with a fixed query,
  any of the FC/TC/TL classifiers, any frozen subset of embeddings/keys/classifier,
  and full-batch gradient descent on one dataset shared by every seed. Any
  other loss function is refused: the fast path never calls it, so it cannot
  prove that it computes the same thing.

  Args:
    model_cfg: the model configuration.
    train_cfg: the training configuration.
    trainable: parameter group -> trainable (default ``model_cfg.trainable()``).
    batch: the training set, if known: it must be concrete (not traced), i.e.
      shared by all seeds of the sweep.
    loss_fn: the loss that would be handed to :func:`dynamics.make_train`; the
      default ``"lu"`` means the Lu model's own cross-entropy (what the CLI and
      :func:`make_fast_sweep_train` train).

  Returns:
    A :class:`FastPathCheck` (truthy iff it applies) with the reason.
  """
  trainable = model_cfg.trainable() if trainable is None else trainable
  if not hasattr(model_cfg, "classifier") or model_cfg.classifier not in ("fc", "tc", "tl"):
    return FastPathCheck(False, "not the Lu attention model with an fc/tc/tl classifier")
  if not (isinstance(loss_fn, str) and loss_fn == "lu"):
    mismatch = _loss_mismatch(loss_fn, model_cfg)
    if mismatch:
      return FastPathCheck(False, mismatch)
  normaliser = getattr(model_cfg, "normaliser", "softmax")
  if normaliser != "softmax":
    return FastPathCheck(False, f"the attention normaliser is {normaliser!r} (the fast path "
                                "factors the softmax)")
  if train_cfg.optimizer not in ("gd", "sgd"):
    return FastPathCheck(False, f"optimizer {train_cfg.optimizer!r} is not plain gradient descent")
  if train_cfg.batch_size and (batch is None or train_cfg.batch_size < batch.tokens.shape[0]):
    return FastPathCheck(False, f"minibatches of {train_cfg.batch_size} (the fast path is full-batch)")
  if trainable.get("query", False):
    return FastPathCheck(False, "the query is trained, so keys move off the query direction")
  if batch is not None and any(isinstance(x, jax.core.Tracer) for x in batch):
    return FastPathCheck(False, "the training data is traced (differs between sweep points)")
  return FastPathCheck(True, f"fixed query, full-batch GD, {model_cfg.classifier} classifier, "
                             "shared data")


# ----------------------------------------------------------------------------------------
# Host-side plan of the shared dataset.


class WordPlan(NamedTuple):
  """The dataset's sparse structure, computed once on the host (NumPy).

  The ``V_a`` words that occur in the training set become rows ``0 .. V_a − 1``
  of the fast state: first the ``H`` heavy words (count > ``HEAVY_COUNT``; their
  backward sums use a dense ``[H, n]`` count matrix), then the light words by
  decreasing count (their backward sums gather the sentences each occurs in);
  row ``V_a`` is a padding word with weight 0 when sentences differ in length.

  Attributes:
    words: ``[V_a]`` the word id of each row.
    n_heavy: ``H``.
    heavy_counts: ``[H, n]`` counts ``C_iw`` of the heavy words.
    row_tokens: ``[n, L]`` each sentence's words as rows (``V_a`` pads).
    buckets: per group of light words with similar counts, ``(start, occ)``:
      rows ``start .. start+len(occ)`` and ``occ [k, c]`` the sentences each
      occurs in (with multiplicity; ``n`` pads, a zero row).
    dummy: whether the state carries the padding row ``V_a``.
    n: number of sentences.
  """
  words: np.ndarray
  n_heavy: int
  heavy_counts: np.ndarray
  row_tokens: np.ndarray
  buckets: tuple
  dummy: bool
  n: int


def _count_groups(counts: np.ndarray, max_groups: int = 4):
  """Split decreasing counts into ≤ ``max_groups`` runs, each padded to its largest count.

  Minimises the padded total ``Σ_runs len(run) · max(run)`` by dynamic
  programming over the distinct counts (few kernels compile fast; padding
  costs gathers of a zero row).

  Returns:
    ``[(start, stop), ...]`` index ranges into ``counts``.
  """
  if not len(counts):
    return []
  values, starts = np.unique(-counts, return_index=True)      # distinct counts, decreasing
  values = -values
  ends = np.append(starts[1:], len(counts))
  m = len(values)
  best = {(0, 0): (0, None)}
  # best[(i, g)]: least padded total covering distinct values [0, i) with g runs.
  for g in range(1, max_groups + 1):
    for i in range(1, m + 1):
      options = [(best[(j, g - 1)][0] + values[j] * (ends[i - 1] - starts[j]), j)
                 for j in range(i) if (j, g - 1) in best]
      if options:
        best[(i, g)] = min(options)
  g = min((g for g in range(1, max_groups + 1) if (m, g) in best), key=lambda g: best[(m, g)][0])
  cuts, i = [], m
  while i > 0:
    j = best[(i, g)][1]
    cuts.append((int(starts[j]), int(ends[i - 1])))
    i, g = j, g - 1
  return cuts[::-1]


def plan_words(tokens, mask, heavy_count: int = HEAVY_COUNT) -> WordPlan:
  """Build the :class:`WordPlan` of a concrete training set.

  Args:
    tokens: ``[n, L]`` word ids.
    mask: ``[n, L]`` True for real words.
    heavy_count: words occurring more often than this are heavy.
  """
  tokens = np.asarray(tokens)
  mask = np.asarray(mask, bool)
  n, length = tokens.shape
  sent = np.broadcast_to(np.arange(n)[:, None], (n, length))[mask]
  words = tokens[mask].astype(np.int64)
  n_vocab = int(words.max()) + 1 if words.size else 1
  counts = np.bincount(words, minlength=n_vocab)
  order = np.argsort(-counts, kind="stable")
  order = order[counts[order] > 0]
  n_heavy = int(np.sum(counts[order] > heavy_count))
  n_active = len(order)
  row = np.full(n_vocab, -1)
  row[order] = np.arange(n_active)

  heavy_counts = np.zeros((n_heavy, n), np.float64)
  occ_row = row[words]
  hit = occ_row < n_heavy
  np.add.at(heavy_counts, (occ_row[hit], sent[hit]), 1.0)

  # Each sentence's words as rows, real words first, padded with the dummy row.
  per_sentence = mask.sum(1)
  width = int(per_sentence.max()) if n else 0
  first_real = np.argsort(~mask, axis=1, kind="stable")[:, :width]
  row_tokens = np.where(np.take_along_axis(mask, first_real, 1),
                        row[np.take_along_axis(np.where(mask, tokens, 0), first_real, 1)],
                        n_active).astype(np.int32)
  dummy = bool(width and (per_sentence < width).any())

  # Occurrences of each light word: sentences sorted by (row, sentence).
  occ_row, occ_sent = occ_row[~hit], sent[~hit]
  by = np.lexsort((occ_sent, occ_row))
  occ_row, occ_sent = occ_row[by], occ_sent[by]
  light_counts = counts[order[n_heavy:]]
  first = np.concatenate([[0], np.cumsum(light_counts)[:-1]]).astype(int)
  buckets = []
  for start, stop in _count_groups(light_counts):
    occ = np.full((stop - start, int(light_counts[start])), n, np.int32)
    for k, r in enumerate(range(start, stop)):
      occ[k, :light_counts[r]] = occ_sent[first[r]:first[r] + light_counts[r]]
    buckets.append((n_heavy + start, occ))
  return WordPlan(order.astype(np.int32), n_heavy, heavy_counts, row_tokens, tuple(buckets),
                  dummy, n)


@functools.lru_cache(maxsize=8)
def _cached_plan(digest: str, tokens_bytes: bytes, mask_bytes: bytes, shape: tuple,
                 heavy_count: int) -> WordPlan:
  del digest
  tokens = np.frombuffer(tokens_bytes, np.int32).reshape(shape)
  mask = np.frombuffer(mask_bytes, bool).reshape(shape)
  return plan_words(tokens, mask, heavy_count)


def _plan_for(batch: Batch, heavy_count: int) -> WordPlan:
  """:func:`plan_words` of a concrete batch, cached on its contents."""
  tokens = np.ascontiguousarray(np.asarray(batch.tokens), np.int32)
  mask = np.ascontiguousarray(np.asarray(batch.mask), bool)
  digest = hashlib.sha1(tokens.tobytes() + mask.tobytes()).hexdigest()
  return _cached_plan(digest, tokens.tobytes(), mask.tobytes(), tokens.shape, heavy_count)


# ----------------------------------------------------------------------------------------
# Seeds-last helpers (every array is [..., S]).


def _sum_rows(x_fn, n: int):
  """``Σ_i x_fn(i0, i1)`` over rows ``i < n`` as unrolled slice sums (two levels).

  ``x_fn(a, b)`` returns rows ``a:b`` of the summand (``[b − a, ...]``); this
  avoids XLA's slow CPU reduction over a non-minor axis. Blocks of ``b`` rows,
  ``b`` a divisor of ``n`` near ``√n`` when there is one.
  """
  root = int(np.sqrt(n))
  divisors = [b for b in range(max(1, root // 2), 2 * root + 2) if n % b == 0]
  block = min(divisors, key=lambda b: b + n // b) if divisors else max(1, root)
  full = n // block
  part = _tree_sum([x_fn(b * block, (b + 1) * block) for b in range(full)])
  tail = n - full * block
  if tail:
    rest = x_fn(full * block, n)
    part = rest if part is None else part.at[:tail].add(rest)
  rows = part.shape[0]
  return _tree_sum([part[k] for k in range(rows)])


def _sum_many_rows(x_fn, n: int, parts: int = 8):
  """``Σ_i x_fn(i0, i1)`` over rows ``i < n`` for large ``n`` (a sum over words): three levels.

  First ``parts`` slices of ``n // parts`` rows are added (one kernel, the
  remainder rows added into the first ones), then :func:`_sum_rows` sums those
  rows: fewer slices than :func:`_sum_rows` alone (``2√n``). ``∂L/∂U`` over
  5,009 words × 16 seeds: 0.21 vs 0.38 ms a call, compile 0.23 vs 0.36 s; the
  text preset's whole program at S=64 lowered and compiled in 1.53 vs 1.81 s
  (median of 5).
  """
  rows = n // parts
  if rows < parts:
    return _sum_rows(x_fn, n)
  part = _tree_sum([x_fn(k * rows, (k + 1) * rows) for k in range(parts)])
  if n > parts * rows:
    part = part.at[:n - parts * rows].add(x_fn(parts * rows, n))
  return _sum_rows(lambda a, b: part[a:b], rows)


def _tree_sum(xs):
  xs = [x for x in xs if x is not None]
  if not xs:
    return None
  while len(xs) > 1:
    xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]


def _materialize(pred, fn, *args):
  """``fn(*args)``, computed in its own fused kernels and stored.

  XLA:CPU fuses a cheap sum of gathers into each of its consumers, recomputing
  the gathers per consumer; a ``lax.cond`` on a predicate that is always true at
  run time (``pred``, traced, so XLA cannot fold it) is a fusion boundary.
  ``fn`` is traced once (its jaxpr is replayed as the taken branch), not once
  for the output shapes and again for the branch.
  """
  closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
  out_tree = jax.tree.structure(out_shape)
  computed = lambda *leaves: jax.tree.unflatten(out_tree, jax_core.jaxpr_as_fun(closed)(*leaves))
  zeros = lambda *_: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), out_shape)
  return jax.lax.cond(pred, computed, zeros, *jax.tree.leaves(args))


def _rows(table, index):
  """``table[index]``: rows of ``table [R, ...]`` at ``index [n, 1]`` (NumPy int32, in bounds).

  The gather ``jnp`` indexing emits, bound directly: the step holds over a
  hundred of these, and ``jnp``'s general indexing machinery was about half of
  its trace time (text preset, S=64: tracing 0.30 s before, 0.14 s after, with
  the single trace of :func:`_materialize`).
  """
  dims = jax.lax.GatherDimensionNumbers(offset_dims=tuple(range(1, table.ndim)),
                                        collapsed_slice_dims=(0,), start_index_map=(0,))
  return jax.lax.gather(table, index, dims, (1,) + table.shape[1:],
                        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _columns(index):
  """The columns of a NumPy index table ``[n, K]`` as ``K`` int32 arrays ``[n, 1]`` for :func:`_rows`."""
  index = np.asarray(index, np.int32)
  return [np.ascontiguousarray(index[:, k:k + 1]) for k in range(index.shape[1])]


def _gather_sum(table, columns):
  """``Σ_k table[index[:, k]]``: ``[n, ...]`` from ``table [R, ...]``, ``columns = _columns(index)``."""
  return _tree_sum([_rows(table, c) for c in columns])


class _Layout(NamedTuple):
  """Static sizes of one problem."""
  n: int          # sentences
  d: int          # embedding dim
  k: int          # columns of W (J for fc/tc, hidden for tl)
  n_classes: int  # J
  kind: str       # fc | tc | tl


class _State(NamedTuple):
  """Training state of a seed tile; every leaf has the seed axis last.

  For the rows of :class:`WordPlan`: ``x [V_a(+1), d, S]`` the weighted
  embeddings ``x_w = e_w ν_w`` with ``e_w = exp(s_w − c)``, ``score [V_a(+1), S]``
  the scores ``s_w``, ``weight [V_a(+1), S]`` the weights ``e_w`` and ``shift [S]``
  the shift ``c = max_w s_w``; ``cls`` the classifier with seeds last; ``step``
  shape=(), int32; ``failed_at [S]`` int32, −1 while finite.
  """
  x: Any
  score: Any
  weight: Any
  shift: Any
  cls: Any
  step: Any
  failed_at: Any


def _finite_per_seed(x):
  """``[S]``: whether every entry of a seeds-last array ``x [..., S]`` is finite."""
  return jnp.all(jnp.isfinite(x.reshape(-1, x.shape[-1])), axis=0)


def _seeds_last(x):
  return jnp.moveaxis(x, 0, -1)


def _seeds_first(x):
  return jnp.moveaxis(x, -1, 0)


# ----------------------------------------------------------------------------------------
# One gradient-descent step.


def projected_forward_pays(plan: WordPlan, lay: _Layout, trainable: dict) -> bool:
  """Whether the forward pass gathers ``Wᵀx_w`` (``K + 1`` channels) rather than ``x_w`` (``d + 1``).

  A cost model in multiply-adds per seed and step, with a gathered float
  counted as ``GATHER_COST`` of them. Gathering ``x``: ``n L (d + 1)``
  gathered floats, ``pre = Wᵀν̄`` and ``∂L/∂W`` over sentences (``n d K``
  each), ``Wᵀx`` over words when the keys train. Gathering ``Wᵀx``:
  ``n L (K + 1)`` gathered floats, ``Wᵀx`` and ``∂L/∂W`` over words
  (``V_a d K`` each).
  """
  n, d, kk = lay.n, lay.d, lay.k
  tokens = plan.row_tokens.size
  rows = len(plan.words)
  cls = int(trainable["classifier"])
  keys = int(trainable["keys"])
  gather_x = GATHER_COST * tokens * (d + 1) + n * d * kk * (1 + cls) + rows * d * kk * keys
  gather_proj = GATHER_COST * tokens * (kk + 1) + rows * d * kk * (1 + cls)
  return gather_proj < gather_x


def _make_step(plan: WordPlan, lay: _Layout, labels_onehot, trainable: dict, dtype,
               projected: bool):
  """``step(state, lr [S], qq [S]) -> state``: one exact full-batch GD step.

  ``projected``: the forward pass gathers ``[e_w, Wᵀx_w]`` and ``∂L/∂W`` is a sum
  over words (see :func:`projected_forward_pays`); otherwise it gathers
  ``[e_w, x_w]`` and ``∂L/∂W`` is a sum over sentences.
  """
  n, d, kk, n_cls = lay.n, lay.d, lay.k, lay.n_classes
  n_heavy = plan.n_heavy
  heavy_counts = jnp.asarray(plan.heavy_counts, dtype)           # [H, n]
  positions = _columns(plan.row_tokens)                          # L × [n, 1]
  buckets = [_columns(occ) for _, occ in plan.buckets]
  starts = [start for start, _ in plan.buckets]
  n_rows = len(plan.words) + int(plan.dummy)
  width = kk if projected else d
  groups = [(a, min(a + CHANNEL_GROUP, width)) for a in range(0, width, CHANNEL_GROUP)]
  onehot = jnp.asarray(labels_onehot, dtype)[:, :, None]         # [n, J, 1]
  inv_n = 1.0 / n
  first_layer = "U1" if lay.kind == "tl" else "U"

  def forward(table, es):
    """``Z [n, S]`` and ``Σ_w C_iw t_w`` as channel groups ``[n, b − a, S]`` for ``table [V, c, S]``.

    Every kernel here is a plain sum of row gathers (one per word position)
    from a stored array: XLA:CPU fuses neither a gather of a computed value
    nor a gather shared between consumers (hence slices of rows per group).
    """
    z = _tree_sum([_rows(es, p) for p in positions])
    return z, [_tree_sum([jax.lax.slice_in_dim(_rows(table, p), a, b, axis=1) for p in positions])
               for a, b in groups]

  def backward(y):
    """``R = Cᵀ y``: ``[V_a(+1), c, S]`` for ``y [n, c, S]``; each part written in place."""
    yp = jnp.concatenate([y, jnp.zeros((1,) + y.shape[1:], y.dtype)], 0)
    r = jnp.zeros((n_rows,) + y.shape[1:], y.dtype)
    if n_heavy:
      r = jax.lax.dynamic_update_slice_in_dim(r, jnp.tensordot(heavy_counts, y, axes=(1, 0)), 0, 0)
    for start, occ in zip(starts, buckets):
      r = jax.lax.dynamic_update_slice_in_dim(r, _gather_sum(yp, occ), start, 0)
    return r

  def project(w, v):
    """``Wᵀv``: ``[R, K, S]`` for ``v [R, d, S]``."""
    return _tree_sum([w[None, a] * v[:, a, None] for a in range(d)])

  def outer_sum(u, v, rows, summed):
    """``Σ_r u_r v_rᵀ``: ``[a, b, S]`` for ``u [rows, a, S]``, ``v [rows, b, S]``."""
    return summed(lambda i0, i1: u[i0:i1, :, None] * v[i0:i1, None, :], rows)

  def classifier_head(cls, pre):
    """Logits ``[n, J, S]`` from ``pre [n, K, S]``, and the TL hidden layer."""
    if lay.kind != "tl":
      return pre, None
    hpre = pre + cls["b1"][None]
    h = jnp.maximum(hpre, 0)
    logits = _tree_sum([cls["U2"][None, k] * h[:, k, None] for k in range(kk)]) + cls["b2"][None]
    return logits, (hpre, h)

  def sentences(cls, z, sums, failed_at):
    """Per-sentence pass: ``y = [δ, pre·δ]/Z [n, K+1, S]``, the classifier grads
    that are sums over sentences, ``ok [S]``."""
    inv_z = 1.0 / z                                                    # [n, S]
    avg = jnp.concatenate(sums, 1) * inv_z[:, None]                    # [n, K or d, S]
    pre = avg if projected else project(cls[first_layer], avg)         # [n, K, S]
    logits, hidden = classifier_head(cls, pre)
    top = functools.reduce(jnp.maximum, [logits[:, j] for j in range(n_cls)])
    ex = jnp.exp(logits - top[:, None])
    prob = ex / _tree_sum([ex[:, j] for j in range(n_cls)])[:, None]
    dl = (prob - onehot) * inv_n                                       # [n, J, S]
    if lay.kind == "tl":
      hpre, h = hidden
      back = _tree_sum([cls["U2"][None, :, j] * dl[:, j, None] for j in range(n_cls)])
      delta = jnp.where(hpre > 0, back, 0)                             # [n, H, S]
    else:
      delta = dl
    pd = _tree_sum([pre[:, k] * delta[:, k] for k in range(kk)])       # [n, S]
    y = jnp.concatenate([delta * inv_z[:, None], (pd * inv_z)[:, None]], 1)  # [n, K+1, S]
    grads = {}
    if trainable["classifier"]:
      if lay.kind == "tl":
        grads = {"b1": _sum_rows(lambda a, b: delta[a:b], n),
                 "U2": outer_sum(hidden[1], dl, n, _sum_rows),
                 "b2": _sum_rows(lambda a, b: dl[a:b], n)}
      if not projected:                                                # avg = ν̄
        grads[first_layer] = outer_sum(avg, delta, n, _sum_rows)
    ok = jnp.isfinite(_sum_rows(lambda a, b: pd[a:b], n))              # [S]
    for g in grads.values():
      ok &= _finite_per_seed(g)
    return y, grads, ok

  def step(state: _State, lr, qq) -> _State:
    # Stages end in lax.cond on an always-true traced predicate (see _materialize):
    # otherwise XLA:CPU re-fuses cheap producers (sums of gathers, per-seed flags)
    # into every element of their big consumers.
    pred = state.step >= 0
    c = state.cls
    x, es = state.x, state.weight
    w = c[first_layer]
    proj = None                                                        # P = Wᵀx [V, K, S]
    if projected:
      proj = _materialize(pred, project, w, x)
    elif trainable["keys"]:
      proj = project(w, x)
    z, sums = _materialize(pred, forward, proj if projected else x, es)
    y, grads, ok = _materialize(pred, sentences, c, z, sums, state.failed_at)
    r = _materialize(pred, backward, y)                                # [V, K+1, S]
    if projected and trainable["classifier"]:
      # ∂L/∂W = Σ_i ν̄_i δ_iᵀ = Σ_w x_w R_w^(:K)ᵀ, since ν̄_i = Σ_w C_iw x_w / Z_i.
      first = outer_sum(x, r[:, :kk], x.shape[0], _sum_many_rows)
      grads = dict(grads, **{first_layer: first})
      ok &= _finite_per_seed(first)
    live = ok & (state.failed_at < 0)
    score, shift, es_new = state.score, state.shift, es
    if trainable["keys"]:
      # ∂L/∂s_w = e_w ν_w·G_w − e_w R_w^(K) = x_w·G_w − e_w R_w^(K), x·G = (Wᵀx)·R^(:K).
      grad_s = _tree_sum([proj[:, k] * r[:, k] for k in range(kk)]) - es * r[:, kk]
      score = jnp.where(live, score - (lr * qq) * grad_s, score)
      shift = jnp.max(score, axis=0)                                   # keeps e_w ≤ 1
      es_new = jnp.exp(score - shift)
    # x' = e'ν' = (e'/e) x − τ e' e G, with ν' = ν − τ e G and G = W R^(:K).
    g = _tree_sum([w[None, :, k] * r[:, k, None] for k in range(kk)])  # [V, d, S]
    x_new = x
    if trainable["keys"]:
      x_new = jnp.exp((score - shift) - (state.score - state.shift))[:, None] * x
    if trainable["embeddings"]:
      x_new = x_new - (lr * es_new * es)[:, None] * g
    x_new = jnp.where(live, x_new, x)
    cls = {k: (jnp.where(live, v - lr * grads[k], v) if k in grads else v) for k, v in c.items()}
    failed_at = jnp.where((state.failed_at < 0) & ~ok, state.step, state.failed_at)
    return _State(x_new, score, es_new, shift, cls, state.step + 1, failed_at)

  return step


# ----------------------------------------------------------------------------------------
# Conversions between ordinary parameters and the fast state.


def _to_state(plan: WordPlan, params0, dtype) -> _State:
  """Seeds-first parameter pytree (leaves ``[S, ...]``) -> seeds-last fast state."""
  words = plan.words
  emb = jnp.transpose(params0["embeddings"][:, words], (1, 2, 0))    # [V_a, d, S]
  score = jnp.einsum("svk,sk->vs", params0["keys"][:, words], params0["query"])
  n_seeds = emb.shape[-1]
  if plan.dummy:
    # The padding word: embedding 0, score −10³⁰ (weight 0; finite, so 0·s = 0).
    emb = jnp.concatenate([emb, jnp.zeros((1,) + emb.shape[1:], emb.dtype)], 0)
    score = jnp.concatenate([score, jnp.full((1, n_seeds), -1e30, score.dtype)], 0)
  shift = jnp.max(score, axis=0)
  weight = jnp.exp(score - shift)
  cls = jax.tree.map(_seeds_last, params0["classifier"])
  return _State(emb * weight[:, None], score, weight, shift, cls, jnp.zeros((), jnp.int32),
                -jnp.ones((n_seeds,), jnp.int32))


class _Unpack(NamedTuple):
  """What :func:`_to_params` needs besides the state, computed once per seed tile.

  Attributes:
    order: ``[V]`` row of each vocabulary word in ``[active rows, inactive words]``.
    rest_emb: ``[V − V_a, d, S]`` embeddings of the words absent from the data.
    score0: ``[V_a(+1), S]`` the initial scores (``s − s(0)`` is exactly 0 for unmoved words).
    params0: the initial parameters (leaves ``[S, ...]``).
  """
  order: Any
  rest_emb: Any
  score0: Any
  params0: Any


def _unpacker(plan: WordPlan, params0) -> _Unpack:
  n_vocab = params0["embeddings"].shape[1]
  rest = np.setdiff1d(np.arange(n_vocab), plan.words)
  order = np.empty(n_vocab, np.int32)
  order[np.concatenate([plan.words, rest]).astype(np.int64)] = np.arange(n_vocab)
  emb0 = params0["embeddings"]
  score0 = jnp.einsum("svk,sk->vs", params0["keys"][:, plan.words], params0["query"])
  return _Unpack(jnp.asarray(order), jnp.transpose(emb0[:, rest], (1, 2, 0)), score0, params0)


def _to_params(plan: WordPlan, state: _State, un: _Unpack, trainable: dict):
  """Seeds-last fast state -> seeds-first ordinary parameters (leaves ``[S, ...]``).

  ``ν_w = x_w / e_w``; words absent from the training set keep their initial
  embedding and key; ``κ_w = κ_w(0) + (s_w − s_w(0)) q / ‖q‖²``. Rows go back
  to vocabulary order with a gather (XLA:CPU scatters are slow). Frozen groups
  are returned unchanged, bit for bit.
  """
  n_active = len(plan.words)
  keys0, query = un.params0["keys"], un.params0["query"]
  emb = un.params0["embeddings"]
  if trainable["embeddings"]:
    active = state.x[:n_active] / state.weight[:n_active, None]              # ν = x / e
    rows = jnp.concatenate([active, un.rest_emb], 0)[un.order]              # [V, d, S]
    emb = jnp.transpose(rows, (2, 0, 1))
  keys = keys0
  if trainable["keys"]:
    ds = state.score[:n_active] - un.score0                                 # [V_a, S]
    ds = jnp.concatenate([ds, jnp.zeros((len(un.order) - n_active, ds.shape[1]), ds.dtype)], 0)
    ds = jnp.transpose(ds[un.order], (1, 0))                                # [S, V]
    unit = query / jnp.sum(query * query, axis=-1, keepdims=True)           # q / ‖q‖²
    keys = keys0 + ds[:, :, None] * unit[:, None, :]
  cls = jax.tree.map(_seeds_first, state.cls)
  return {"embeddings": emb, "keys": keys, "query": query, "classifier": cls}


# ----------------------------------------------------------------------------------------
# Builders.


def _check_batch(batch: Batch):
  if any(isinstance(x, jax.core.Tracer) for x in batch):
    raise ConfigError("the fast path needs the training data as concrete arrays shared by "
                      "every seed (it precomputes the sparse word structure on the host); "
                      "use dynamics.make_train when each sweep point has its own data")


def make_fast_sweep_train(model_cfg, batch: Batch, record: Callable, cfg: TrainConfig,
                          trainable: Optional[dict] = None, *, record_params: bool = False,
                          seed_tile: int = SEED_TILE, unroll: int = 1,
                          project: Optional[bool] = None):
  """Build ``train_batch(params0, lr=None) -> Trajectory`` for S seeds sharing ``batch``.

  The batched form of :func:`make_fast_train`: the seeds are a leading axis of
  every input leaf and of every output leaf, and are laid out innermost
  internally (see the module docstring for the algebra). A caller with more
  seeds than fit in memory calls it once per chunk (``dynamics.run_sweep`` with
  ``chunk_size`` does, through :func:`make_fast_train`'s vmap rule).

  Args:
    model_cfg: the Lu model's configuration (its classifier kind and sizes).
    batch: the training set, concrete (shared by every seed).
    record: ``record(params, params0) -> pytree``, called per seed on ordinary
      parameter pytrees at step 0 and every ``cfg.record_every`` steps.
    cfg: training configuration (full-batch ``gd``).
    trainable: parameter group -> trainable (default ``model_cfg.trainable()``).
    record_params: also return the parameters at every recorded step.
    seed_tile: seeds advanced together; larger sweeps run tile after tile
      (``lax.map``) inside the same compiled program.
    unroll: steps unrolled per iteration of the inner ``lax.scan``.
    project: gather ``Wᵀx_w`` in the forward pass (True) or ``x_w`` (False);
      default: whichever :func:`projected_forward_pays` says is cheaper. Both
      give the same trajectory.

  Returns:
    ``train_batch(params0, lr=None)``: ``params0`` leaves ``[S, ...]``; ``lr``
    a scalar or ``[S]`` (default ``cfg.lr``). Returns a :class:`Trajectory`
    whose leaves all have the leading axis ``S`` (``t`` is ``[S, T]``).

  Raises:
    ConfigError: if :func:`fast_path_applies` says no, or the data is traced.
  """
  trainable = model_cfg.trainable() if trainable is None else dict(trainable)
  verdict = fast_path_applies(model_cfg, cfg, trainable, batch)
  if not verdict:
    raise ConfigError(f"the fast path does not apply: {verdict.reason}")
  _check_batch(batch)
  plan = _plan_for(batch, HEAVY_COUNT)
  labels = np.asarray(batch.labels)
  n_cls = model_cfg.n_classes
  kind = model_cfg.classifier
  kk = model_cfg.hidden_dim if kind == "tl" else n_cls
  lay = _Layout(plan.n, model_cfg.embed_dim, kk, n_cls, kind)
  projected = projected_forward_pays(plan, lay, trainable) if project is None else bool(project)
  onehot = np.eye(n_cls)[labels]
  t = cfg.record_steps().astype(jax.dtypes.canonicalize_dtype(jnp.float64))

  def run_tile(params0, lr):
    dtype = params0["embeddings"].dtype
    step = _make_step(plan, lay, onehot, trainable, dtype, projected)
    qq = jnp.sum(params0["query"] ** 2, axis=-1)                      # [S]
    lr = lr.astype(dtype)

    def advance(state):
      return jax.lax.scan(lambda s_, _: (step(s_, lr, qq), None), state, None,
                          length=cfg.record_every, unroll=unroll)[0]

    def block(carry, r):
      # Observe the current state, then advance to the next recorded step (not
      # after the last record): record and the unpacking are traced once, and
      # the last observed parameters are the final ones.
      state, _ = carry
      params = _to_params(plan, state, unpack, trainable)
      obs = jax.vmap(record)(params, params0)
      state = jax.lax.cond(r < cfg.n_records - 1, advance, lambda s_: s_, state)
      return (state, params), (obs, params if record_params else None)

    state0 = _to_state(plan, params0, dtype)
    unpack = _unpacker(plan, params0)
    (state, final), (obs, params_t) = jax.lax.scan(block, (state0, params0), jnp.arange(cfg.n_records))
    seeds_first = lambda x: jnp.moveaxis(x, 0, 1)                     # [T, S, ...] -> [S, T, ...]
    return (jax.tree.map(seeds_first, obs), jax.tree.map(seeds_first, params_t), final,
            state.failed_at.astype(t.dtype))

  def train_batch(params0, lr=None):
    n_seeds = jax.tree.leaves(params0)[0].shape[0]
    lr = cfg.lr if lr is None else lr
    lr = jnp.broadcast_to(jnp.asarray(lr), (n_seeds,))
    tile = max(1, min(seed_tile, n_seeds))
    n_tiles = -(-n_seeds // tile)
    if n_tiles == 1:
      obs, params_t, final, failed = run_tile(params0, lr)
    else:
      pad = n_tiles * tile - n_seeds
      grow = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) if pad else x
      split = lambda x: grow(x).reshape((n_tiles, tile) + x.shape[1:])
      out = jax.lax.map(lambda a: run_tile(*a), (jax.tree.map(split, params0), split(lr)))
      obs, params_t, final, failed = jax.tree.map(
          lambda x: x.reshape((n_tiles * tile,) + x.shape[2:])[:n_seeds], out)
    return Trajectory(t=jnp.broadcast_to(t, (n_seeds,) + t.shape), observables=obs,
                      final_params=final, failed_at=failed, params=params_t)

  return train_batch


def make_fast_train(loss_fn: Callable, batch: Batch, record: Callable, cfg: TrainConfig,
                    trainable: dict, *, model_cfg, record_params: bool = False,
                    seed_tile: int = SEED_TILE, unroll: int = 1,
                    project: Optional[bool] = None):
  """Drop-in for :func:`dynamics.make_train` on the Lu model with a fixed query.

  Same arguments and the same ``train(params0, key, lr=None) -> Trajectory``;
  ``loss_fn`` must be the model's cross-entropy (``models.make_loss(models.lu.apply)``),
  which the fast path evaluates in closed form (it is not called); any other
  loss is refused. ``key`` is unused (full-batch GD draws nothing). Under
  ``jax.vmap`` over seeds (as in :func:`dynamics.run_sweep`), a custom vmap
  rule runs all seeds together with :func:`make_fast_sweep_train` instead of
  batching the one-seed program. :func:`dynamics.make_auto_train` picks this
  or :func:`dynamics.make_train` from :func:`fast_path_applies`.

  Args:
    loss_fn: ``models.make_loss(models.lu.apply)`` (or of
      ``models.lu_linear.apply_linear`` for FC/TC); checked, not called.
    batch: the training set, concrete and shared by every seed.
    record: ``record(params, params0) -> pytree`` of observables.
    cfg: training configuration; see :func:`fast_path_applies`.
    trainable: parameter group -> trainable.
    model_cfg: the Lu model's configuration.
    record_params: also return the parameters at every recorded step.
    seed_tile: seeds advanced together (see :func:`make_fast_sweep_train`).
    unroll: inner-scan unroll.
    project: the forward pass's form (see :func:`make_fast_sweep_train`).

  Returns:
    ``train(params0, key, lr=None)``.

  Raises:
    ConfigError (a ValueError): ``loss_fn`` is not the Lu cross-entropy, or
      :func:`fast_path_applies` says no for another reason.
  """
  mismatch = _loss_mismatch(loss_fn, model_cfg)
  if mismatch:
    raise ConfigError(f"the fast path does not apply: {mismatch}")
  train_batch = make_fast_sweep_train(model_cfg, batch, record, cfg, trainable,
                                      record_params=record_params, seed_tile=seed_tile,
                                      unroll=unroll, project=project)
  default_lr = cfg.lr

  @jax.custom_batching.custom_vmap
  def run(params0, lr):
    out = train_batch(jax.tree.map(lambda x: x[None], params0), lr[None])
    return jax.tree.map(lambda x: x[0], out)

  @run.def_vmap
  def run_vmap(axis_size, in_batched, params0, lr):
    p_batched, lr_batched = in_batched
    params0 = jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + x.shape), params0, p_batched)
    lr = lr if lr_batched else jnp.broadcast_to(lr, (axis_size,))
    out = train_batch(params0, lr)
    return out, jax.tree.map(lambda _: True, out)

  def train(params0, key, lr=None):
    del key
    dtype = jax.tree.leaves(params0)[0].dtype
    lr = jnp.asarray(default_lr if lr is None else lr, dtype)
    return run(params0, lr)

  return train
