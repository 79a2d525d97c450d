"""One exact gradient-descent step on the fast state, and conversions to and from ordinary parameters."""
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.fast_lu.plan import WordPlan
from attndyn.dynamics.fast_lu.xla_cpu import (_columns, _finite_per_seed, _gather_sum, _materialize,
                                      _rows, _seeds_first, _seeds_last, _sum_many_rows,
                                      _sum_rows, _tree_sum, _weighted_row_sum)

__all__ = ["GATHER_COST", "projected_forward_pays", "frozen_first_layer"]

# A gathered float costs about this many multiply-adds (projected_forward_pays): the model
# behind gathering Wᵀx instead of x, which pays for FC and TC (K = n_classes < d) and for TL
# (K = hidden_dim) only on long sentences. A CPU cost model; either form is exact.
GATHER_COST = 6


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

  With the first layer ``W`` frozen (FC; :func:`frozen_first_layer`) every update of
  ``ν_w`` lies in ``W``'s column space (``∂L/∂ν_w = e_w W R_w``), so ``ν_w = ν_w(0) + W c_w``
  and the state holds ``x [V_a(+1), K, S]`` the coordinates ``c_w`` (not weighted) and
  ``base [V_a(+1), K, S]`` the fixed ``Wᵀν_w(0)``: ``Wᵀν_w = base_w + WᵀW c_w``, ``K`` numbers
  a word instead of ``d``, and no product over ``d`` per step. Otherwise ``base`` is ``None``.

  With a trainable query (keys on its line: see the step) ``qscale [S]`` is ``β``
  with ``q = β q(0)``; otherwise ``None``.
  """
  x: Any
  score: Any
  weight: Any
  shift: Any
  cls: Any
  step: Any
  failed_at: Any
  base: Any = None
  qscale: Any = None


def projected_forward_pays(plan: WordPlan, lay: _Layout, trainable: dict) -> bool:
  """Whether the forward pass gathers ``Wᵀx_w`` (``K + 1`` channels) rather than ``x_w`` (``d + 1``).

  A cost model in multiply-adds per seed and step, with a gathered float
  counted as ``GATHER_COST`` of them, over the work that differs between the
  two forms. Gathering ``x``: ``n L (d + 1)`` gathered floats, ``pre = Wᵀν̄``
  and ``∂L/∂W`` over sentences (``n d K`` each), ``x·G`` over words (``V_a d``)
  when the scores move (keys or query train), and ``G = W R`` (``V_a d K``) when they do and the
  embeddings do not (else the update forms it in both). Gathering ``Wᵀx``:
  ``n L (K + 1)`` gathered floats, ``Wᵀx`` and ``∂L/∂W`` over words
  (``V_a d K`` each), ``(Wᵀx)·R`` over words (``V_a K``) when the scores move.
  """
  n, d, kk = lay.n, lay.d, lay.k
  tokens = plan.row_tokens.size
  rows = len(plan.words)
  cls = int(trainable["classifier"])
  moves = int(trainable["keys"] or trainable.get("query", False))   # the scores move
  g_for_scores = moves * (1 - int(trainable["embeddings"]))   # G formed for the scores alone
  gather_x = (GATHER_COST * tokens * (d + 1) + n * d * kk * (1 + cls)
              + rows * d * (moves + kk * g_for_scores))
  gather_proj = GATHER_COST * tokens * (kk + 1) + rows * d * kk * (1 + cls) + rows * kk * moves
  return gather_proj < gather_x


def frozen_first_layer(projected: bool, trainable: dict) -> bool:
  """Whether the state is each word's coordinates in ``W``'s column space (see :class:`_State`):
  the forward pass gathers ``Wᵀx`` and ``W`` (FC's ``U``, or a frozen TC/TL classifier's first
  layer) does not train."""
  return projected and not trainable["classifier"]


def _project(w, v):
  """``Wᵀv``: ``[R, K, S]`` for ``w [d, K, S]`` and ``v [R, d, S]`` (a sum over ``d``)."""
  return _tree_sum([w[None, a] * v[:, a, None] for a in range(w.shape[0])])


def _combine(w, c):
  """``W c``: ``[R, d, S]`` for ``w [d, K, S]`` and ``c [R, ≥K, S]`` (its first ``K``
  channels; a sum over ``K``)."""
  return _tree_sum([w[None, :, k] * c[:, k, None] for k in range(w.shape[1])])


def _outer_sum(u, v, rows, summed):
  """``Σ_r u_r v_rᵀ``: ``[a, b, S]`` for ``u [rows, a, S]``, ``v [rows, b, S]``."""
  return summed(lambda i0, i1: u[i0:i1, :, None] * v[i0:i1, None, :], rows)


def _classifier_backward(lay: _Layout, onehot, trainable: dict, cls: dict, pre):
  """The classifier from its first layer's output ``pre = Wᵀν̄ [n, K, S]`` to the mean
  cross-entropy, and back: ``δ = ∂L/∂pre [n, K, S]`` (``(π − y)/n`` for FC/TC,
  ``1[h > 0] ⊙ U₂(π − y)/n`` for TL) and the gradients of the classifier's parameters
  after ``W`` (TL's ``b1``, ``U2``, ``b2``; none for FC/TC), sums over sentences.
  ``onehot [n, J, 1]`` the labels. Shared by the softmax and the sparsemax steps."""
  n, kk, n_cls = lay.n, lay.k, lay.n_classes
  logits, hidden = pre, None
  if lay.kind == "tl":
    hpre = pre + cls["b1"][None]
    hidden = jnp.maximum(hpre, 0)
    logits = (_tree_sum([cls["U2"][None, k] * hidden[:, k, None] for k in range(kk)])
              + cls["b2"][None])
  top = functools.reduce(jnp.maximum, [logits[:, j] for j in range(n_cls)])
  ex = jnp.exp(logits - top[:, None])
  prob = ex / _tree_sum([ex[:, j] for j in range(n_cls)])[:, None]
  dl = (prob - onehot) * (1.0 / n)                                      # [n, J, S]
  if lay.kind != "tl":
    return dl, {}
  back = _tree_sum([cls["U2"][None, :, j] * dl[:, j, None] for j in range(n_cls)])
  delta = jnp.where(hpre > 0, back, 0)                                  # [n, H, S]
  grads = {}
  if trainable["classifier"]:
    grads = {"b1": _sum_rows(lambda a, b: delta[a:b], n),
             "U2": _outer_sum(hidden, dl, n, _sum_rows),
             "b2": _sum_rows(lambda a, b: dl[a:b], n)}
  return delta, grads


def _make_step(plan: WordPlan, lay: _Layout, labels_onehot, trainable: dict, dtype,
               projected: bool):
  """``step(state, lr [S], qq0 [S]) -> state``: one exact full-batch GD step (``qq0 = ‖q(0)‖²``).

  ``projected``: the forward pass gathers ``[e_w, Wᵀx_w]`` and ``∂L/∂W`` is a sum
  over words (see :func:`projected_forward_pays`); otherwise it gathers
  ``[e_w, x_w]`` and ``∂L/∂W`` is a sum over sentences.
  """
  n, d, kk = lay.n, lay.d, lay.k
  n_heavy = plan.n_heavy
  heavy_counts = jnp.asarray(plan.heavy_counts, dtype)           # [H, n]
  positions = _columns(plan.row_tokens)                          # L × [n, 1]
  buckets = [_columns(occ) for _, occ in plan.buckets]
  starts = [start for start, _ in plan.buckets]
  n_rows = len(plan.words) + int(plan.dummy)
  onehot = jnp.asarray(labels_onehot, dtype)[:, :, None]         # [n, J, 1]
  first_layer = "U1" if lay.kind == "tl" else "U"
  frozen = frozen_first_layer(projected, trainable)
  query = bool(trainable.get("query", False))
  scores_move = bool(trainable["keys"]) or query

  def forward(table, es):
    """``Z [n, S]`` and ``Σ_w C_iw t_w [n, c, S]`` for ``table [V, c, S]``.

    Each is a plain sum of row gathers (one per word position) from a stored
    array, every channel in one kernel: XLA:CPU fuses a gather into its sum only
    when the sum is its one consumer (a gather shared by kernels, e.g. one per
    group of channels, is written out whole first) and not when it gathers a
    computed value.
    """
    z = _tree_sum([_rows(es, p) for p in positions])
    return z, _tree_sum([_rows(table, p) for p in positions])

  def backward(y):
    """``R = Cᵀ y``: ``[V_a(+1), c, S]`` for ``y [n, c, S]``; each part written in place."""
    yp = jnp.concatenate([y, jnp.zeros((1,) + y.shape[1:], y.dtype)], 0)
    r = jnp.zeros((n_rows,) + y.shape[1:], y.dtype)
    if n_heavy:
      r = jax.lax.dynamic_update_slice_in_dim(r, jnp.tensordot(heavy_counts, y, axes=(1, 0)), 0, 0)
    for start, occ in zip(starts, buckets):
      r = jax.lax.dynamic_update_slice_in_dim(r, _gather_sum(yp, occ), start, 0)
    return r

  def project_frozen(base, coords, w, es):
    """``e_w Wᵀν_w = e_w (base_w + WᵀW c_w)``: ``[R, K, S]`` (a frozen ``W``)."""
    gram = _tree_sum([w[a, :, None] * w[a, None, :] for a in range(d)])      # [K, K, S]
    p = base + _tree_sum([coords[:, k, None] * gram[None, k] for k in range(kk)])
    return es[:, None] * p

  def sentences(pred, cls, z, sums, failed_at):
    """Per-sentence pass: ``y = [δ, pre·δ]/Z [n, K+1, S]``, the classifier grads
    that are sums over sentences, ``ok [S]``."""
    inv_z = 1.0 / z                                                    # [n, S]
    avg = sums * inv_z[:, None]                                        # [n, K or d, S]
    # Stored, or XLA:CPU recomputes Wᵀν̄ within the softmax for every logit and its max.
    pre = avg if projected else _materialize(pred, _project, cls[first_layer], avg)  # [n,K,S]
    delta, grads = _classifier_backward(lay, onehot, trainable, cls, pre)
    pd = _tree_sum([pre[:, k] * delta[:, k] for k in range(kk)])       # [n, S]
    y = jnp.concatenate([delta * inv_z[:, None], (pd * inv_z)[:, None]], 1)  # [n, K+1, S]
    if trainable["classifier"] and not projected:                      # avg = ν̄
      grads[first_layer] = _outer_sum(avg, delta, n, _sum_rows)
    ok = jnp.isfinite(_sum_rows(lambda a, b: pd[a:b], n))              # [S]
    for g in grads.values():
      ok &= _finite_per_seed(g)
    return y, grads, ok

  def step(state: _State, lr, qq0) -> _State:
    # Stages end in lax.cond on an always-true traced predicate (see _materialize):
    # otherwise XLA:CPU re-fuses cheap producers (sums of gathers, per-seed flags)
    # into every element of their big consumers.
    pred = state.step >= 0
    qq = qq0 if state.qscale is None else qq0 * state.qscale ** 2     # ‖q‖² [S]
    c = state.cls
    x, es = state.x, state.weight
    w = c[first_layer]
    proj = None                                                        # P = Wᵀx [V, K, S]
    if frozen:
      proj = _materialize(pred, project_frozen, state.base, x, w, es)
    elif projected:
      proj = _materialize(pred, _project, w, x)
    z, sums = _materialize(pred, forward, proj if projected else x, es)
    y, grads, ok = _materialize(pred, sentences, pred, c, z, sums, state.failed_at)
    r = _materialize(pred, backward, y)                                # [V, K+1, S]
    if projected and trainable["classifier"]:
      # ∂L/∂W = Σ_i ν̄_i δ_iᵀ = Σ_w x_w R_w^(:K)ᵀ, since ν̄_i = Σ_w C_iw x_w / Z_i.
      # Stored (_materialize): both the update and the finiteness check read it.
      first = _materialize(pred, lambda x, r: _outer_sum(x, r[:, :kk], x.shape[0], _sum_many_rows),
                           x, r)
      grads = dict(grads, **{first_layer: first})
      ok &= _finite_per_seed(first)
    g = None                                                           # G = W R^(:K) [V, d, S]
    if not frozen and (trainable["embeddings"] or (scores_move and not projected)):
      # Stored where both the score's and the embeddings' update read it.
      g = (_materialize(pred, _combine, w, r) if scores_move and not projected
           else _combine(w, r))
    score, shift, es_new, qscale = state.score, state.shift, es, state.qscale
    if scores_move:
      # ∂L/∂s_w = e_w ν_w·G_w − e_w R_w^(K) = x_w·G_w − e_w R_w^(K), with x·G = (Wᵀx)·R^(:K)
      # where Wᵀx is at hand (K products a word, not d).
      xg = (_tree_sum([proj[:, k] * r[:, k] for k in range(kk)]) if projected
            else _tree_sum([x[:, a] * g[:, a] for a in range(d)]))
      grad_s = xg - es * r[:, kk]
      new_score = score - (lr * qq) * grad_s if trainable["keys"] else score
      if query:
        # Keys on the query's line (κ_w = (s_w/‖q‖²) q) stay on it: ∂L/∂q = Σ_w g_w κ_w
        # = (Σ_w g_w s_w/‖q‖²) q, so q' = β q with β = 1 − τ Σ_w g_w s_w/‖q‖², and
        # s_w' = q'ᵀκ_w' = β (s_w − τ ‖q‖² g_w) (module docstring, step 1). The padding
        # row (plan.dummy) is no word: its score stays −10³⁰ whatever β's sign.
        n_words = len(plan.words)
        gs = _sum_many_rows(lambda a, b: grad_s[a:b] * score[a:b], n_words)    # [S]
        beta = 1 - lr * gs / qq
        ok &= jnp.isfinite(beta)
        new_score = jnp.concatenate([beta * new_score[:n_words], new_score[n_words:]], 0)
    live = ok & (state.failed_at < 0)
    if scores_move:
      score = jnp.where(live, new_score, score)
      if query:
        qscale = jnp.where(live, beta * qscale, qscale)
      shift = jnp.max(score, axis=0)                                   # keeps e_w ≤ 1
      es_new = jnp.exp(score - shift)
    x_new = x
    if frozen:
      # ν' = ν − τ e G with G = W R^(:K), so c' = c − τ e R^(:K).
      if trainable["embeddings"]:
        x_new = x - (lr * es)[:, None] * r[:, :kk]
    else:
      # x' = e'ν' = (e'/e) x − τ e' e G, with ν' = ν − τ e G and G = W R^(:K).
      if scores_move:
        x_new = jnp.exp((score - shift) - (state.score - state.shift))[:, None] * x
      if trainable["embeddings"]:
        x_new = x_new - (lr * es_new * es)[:, None] * g
    x_new = jnp.where(live, x_new, x)
    cls = {k: (jnp.where(live, v - lr * grads[k], v) if k in grads else v) for k, v in c.items()}
    failed_at = jnp.where((state.failed_at < 0) & ~ok, state.step, state.failed_at)
    return _State(x_new, score, es_new, shift, cls, state.step + 1, failed_at, state.base,
                  qscale)

  return step


# ----------------------------------------------------------------------------------------
# Conversions between ordinary parameters and the fast state.


def _first_layer(cls: dict):
  """The classifier's first linear map ``W`` (TL's ``U1``, FC/TC's ``U``)."""
  return cls["U1" if "U1" in cls else "U"]


def _to_state(plan: WordPlan, params0, dtype, frozen: bool = False,
              query: bool = False, weighted: bool = True) -> _State:
  """Seeds-first parameter pytree (leaves ``[S, ...]``) -> seeds-last fast state.

  ``frozen``: :func:`frozen_first_layer` (the state holds coordinates in ``W``'s columns);
  ``query``: the query trains (the state holds its scale, 1 at the start); ``weighted=False``:
  the sparsemax step's state (:mod:`dynamics.fast_lu.sparse`), ``x = ν`` with weight 1 and no
  shift (so :func:`_to_params`' ``ν = x / e`` is exact)."""
  words = plan.words
  emb = jnp.transpose(params0["embeddings"][:, words], (1, 2, 0))    # [V_a, d, S]
  score = jnp.einsum("svk,sk->vs", params0["keys"][:, words], params0["query"])
  n_seeds = emb.shape[-1]
  if plan.dummy:
    # The padding word: embedding 0, score −10³⁰ (weight 0; finite, so 0·s = 0).
    emb = jnp.concatenate([emb, jnp.zeros((1,) + emb.shape[1:], emb.dtype)], 0)
    score = jnp.concatenate([score, jnp.full((1, n_seeds), -1e30, score.dtype)], 0)
  cls = jax.tree.map(_seeds_last, params0["classifier"])
  step, failed_at = jnp.zeros((), jnp.int32), -jnp.ones((n_seeds,), jnp.int32)
  if not weighted:
    return _State(emb, score, jnp.ones_like(score), jnp.zeros((n_seeds,), score.dtype), cls,
                  step, failed_at)
  shift = jnp.max(score, axis=0)
  weight = jnp.exp(score - shift)
  qscale = jnp.ones((n_seeds,), score.dtype) if query else None
  if frozen:
    w = _first_layer(cls)                                                # [d, K, S]
    base = _project(w, emb)                                              # Wᵀν(0)
    return _State(jnp.zeros_like(base), score, weight, shift, cls, step, failed_at, base,
                  qscale)
  return _State(emb * weight[:, None], score, weight, shift, cls, step, failed_at, None, qscale)


class _Unpack(NamedTuple):
  """What :func:`_to_params` and :func:`_to_rows` need besides the state, computed once per
  seed tile.

  Attributes:
    order: ``[V]`` row of each vocabulary word in ``[active rows, inactive words]``.
    rest_emb: ``[V − V_a, d, S]`` embeddings of the words absent from the data.
    score0: ``[V_a, S]`` the initial scores (``s − s(0)`` is exactly 0 for unmoved words).
    params0: the initial parameters (leaves ``[S, ...]``).
    active_emb: ``[V_a, d, S]`` the initial embeddings of the words in the data (``ν(0)``
      of a state in ``W``'s coordinates).
    row_of: ``order`` on the host (NumPy), for :class:`WordRows`.
    rest_score0: ``[V − V_a, S]`` the initial scores of the words absent from the data.
    query_norm0: ``[S]`` ``‖q(0)‖``.
  """
  order: Any
  rest_emb: Any
  score0: Any
  params0: Any
  active_emb: Any
  row_of: Any
  rest_score0: Any
  query_norm0: Any


class WordRows(NamedTuple):
  """Every vocabulary word's parameters with the seed axis last: what the fast path hands a
  record's seeds-last form (``record.seeds_last(rows, rows0)``; see
  :func:`dynamics.fast_lu.make_fast_sweep_train`) instead of ordinary parameters.

  Attributes:
    row_of: ``[V]`` (NumPy, static) the row of each vocabulary word in the arrays below.
    embeddings: ``[V, d, S]`` the embeddings ``ν_w``.
    scores: ``[V, S]`` the scores ``s_w = qᵀκ_w``.
    query_norm: ``[S]`` ``‖q‖``.
    classifier: the classifier's parameters, every leaf's seed axis last.
    weighted_sum: ``weighted_sum(weights [n, L, S], table [V, c, S], rows [n, L]) -> [n, c,
      S]``, ``Σ_l weights[:, l] ⊙ table[rows[:, l]]`` for a NumPy ``rows`` (e.g. ``row_of``
      of a batch's tokens): each sentence's weighted sum of its words' rows, in the form
      XLA:CPU runs fast (one fused gather per position, the result stored).
  """
  row_of: Any
  embeddings: Any
  scores: Any
  query_norm: Any
  classifier: Any
  weighted_sum: Any


def _unpacker(plan: WordPlan, params0) -> _Unpack:
  n_vocab = params0["embeddings"].shape[1]
  rest = np.setdiff1d(np.arange(n_vocab), plan.words)
  order = np.empty(n_vocab, np.int32)
  order[np.concatenate([plan.words, rest]).astype(np.int64)] = np.arange(n_vocab)
  emb0 = params0["embeddings"]
  score0 = jnp.einsum("svk,sk->vs", params0["keys"][:, plan.words], params0["query"])
  rest_score0 = jnp.einsum("svk,sk->vs", params0["keys"][:, rest], params0["query"])
  return _Unpack(jnp.asarray(order), jnp.transpose(emb0[:, rest], (1, 2, 0)), score0, params0,
                 jnp.transpose(emb0[:, plan.words], (1, 2, 0)), order, rest_score0,
                 jnp.linalg.norm(params0["query"], axis=-1))


def _active_embeddings(plan: WordPlan, state: _State, un: _Unpack):
  """``[V_a, d, S]`` the current embeddings of the words in the data (the embeddings train):
  ``ν_w = x_w / e_w``, or ``ν_w(0) + W c_w`` in ``W``'s coordinates."""
  n_active = len(plan.words)
  if state.base is None:
    return state.x[:n_active] / state.weight[:n_active, None]
  return un.active_emb + _combine(_first_layer(state.cls), state.x[:n_active])


def _to_rows(plan: WordPlan, state: _State, un: _Unpack, trainable: dict) -> WordRows:
  """Seeds-last fast state -> :class:`WordRows`: the words in the data, then the others,
  which keep their initial embedding and key (with a trainable query ``q = β q(0)`` their
  scores are ``β s_w(0)``)."""
  n_active = len(plan.words)
  emb = _active_embeddings(plan, state, un) if trainable["embeddings"] else un.active_emb
  rest_score, query_norm = un.rest_score0, un.query_norm0
  if state.qscale is not None:
    rest_score, query_norm = rest_score * state.qscale, query_norm * jnp.abs(state.qscale)
  return WordRows(un.row_of, jnp.concatenate([emb, un.rest_emb], 0),
                  jnp.concatenate([state.score[:n_active], rest_score], 0), query_norm,
                  state.cls, functools.partial(_weighted_row_sum, state.step >= 0))


def _initial_rows(un: _Unpack) -> WordRows:
  """:class:`WordRows` of the initial parameters."""
  return WordRows(un.row_of, jnp.concatenate([un.active_emb, un.rest_emb], 0),
                  jnp.concatenate([un.score0, un.rest_score0], 0), un.query_norm0,
                  jax.tree.map(_seeds_last, un.params0["classifier"]),
                  functools.partial(_weighted_row_sum, jnp.asarray(True)))


def _to_params(plan: WordPlan, state: _State, un: _Unpack, trainable: dict):
  """Seeds-last fast state -> seeds-first ordinary parameters (leaves ``[S, ...]``).

  ``ν_w = x_w / e_w`` (``ν_w(0) + W c_w`` in ``W``'s coordinates); words absent from the
  training set keep their initial embedding and key; ``κ_w = κ_w(0) + (s_w − s_w(0)) q /
  ‖q‖²``, and with a trainable query ``q = β q(0)`` and ``κ_w = κ_w(0) + (s_w/β − s_w(0))
  q(0)/‖q(0)‖²`` (keys on the query's line). Rows go back
  to vocabulary order with a gather (XLA:CPU scatters are slow). Frozen groups
  are returned unchanged, bit for bit.
  """
  n_active = len(plan.words)
  keys0, query = un.params0["keys"], un.params0["query"]
  emb = un.params0["embeddings"]
  if trainable["embeddings"]:
    active = _active_embeddings(plan, state, un)
    rows = jnp.concatenate([active, un.rest_emb], 0)[un.order]              # [V, d, S]
    emb = jnp.transpose(rows, (2, 0, 1))
  keys = keys0
  if trainable["keys"]:
    score = state.score[:n_active]
    if state.qscale is not None:
      score = score / state.qscale                                          # s_w / β
    ds = score - un.score0                                                  # [V_a, S]
    ds = jnp.concatenate([ds, jnp.zeros((len(un.order) - n_active, ds.shape[1]), ds.dtype)], 0)
    ds = jnp.transpose(ds[un.order], (1, 0))                                # [S, V]
    unit = query / jnp.sum(query * query, axis=-1, keepdims=True)           # q / ‖q‖²
    keys = keys0 + ds[:, :, None] * unit[:, None, :]
  if state.qscale is not None:
    query = query * state.qscale[:, None]                                   # q = β q(0)
  cls = jax.tree.map(_seeds_first, state.cls)
  return {"embeddings": emb, "keys": keys, "query": query, "classifier": cls}
