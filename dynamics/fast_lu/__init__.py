"""Exact fast gradient descent for the Lu et al. model (a fixed query, or a trained one from
zero keys), seeds innermost.

The generic path (:func:`dynamics.train.make_train`) differentiates the model
with autodiff and vmaps over seeds. When the query is fixed (or trains from zero keys),
training is full-batch gradient descent and every seed shares one dataset, the same
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
   A trainable query (Appendix B) keeps this form when every key starts on the query's
   line (zero keys, ``key_std = 0``): then ``∂L/∂q = Σ_w g_w κ_w = (Σ_w g_w s_w/‖q‖²) q``,
   so ``q ← β q`` with ``β = 1 − τ Σ_w g_w s_w/‖q‖²`` and

   .. math::
      s_w \\leftarrow β (s_w - τ ‖q‖^2 g_w), \\qquad ‖q‖^2 \\leftarrow β^2 ‖q‖^2,

   every key staying on the query's line; the state adds the query's scale ``β`` per seed.

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
   with ``P_w = Wᵀx_w`` (``K`` channels, which then also give
   ``ν_w·G_w = P_w·R_w^{(:K)}/e_w`` in step 3), so the forward pass can gather
   ``[e_w, P_w]`` (``K + 1`` channels) instead of ``[e_w, x_w]`` (``d + 1``; then
   ``ν_w·G_w = x_w·G_w/e_w`` with the ``G`` of the update). :func:`projected_forward_pays`
   picks the cheaper form per problem (both are exact): FC/TC at the text preset
   gather ``P``, TL (``K = 10`` hidden units, d = 15) ``x``. When ``W`` is frozen (FC) every
   update of ``ν_w`` is ``W`` times a ``K``-vector, so the state is ``ν_w = ν_w(0) + W c_w``
   with ``P_w = Wᵀν_w(0) + WᵀW c_w``: ``K`` numbers a word, not ``d``
   (:class:`~dynamics.fast_lu.step._State`).

5. **Classifier gradients.** The later layers' over sentences
   (``∂L/∂U_2 = Σ_i h_i (p_i − y_i)ᵀ/n``, ``b_1``, ``b_2``). The first layer's
   ``∂L/∂W = Σ_i \\bar ν_i δ_iᵀ`` over sentences when the forward pass formed
   ``\\bar ν_i``; otherwise over words, with the ``R`` of step 3:

   .. math::
      ∂L/∂W = Σ_i \\frac{Σ_w C_{iw} x_w}{Z_i} δ_iᵀ = Σ_w x_w R_w^{(:K)ᵀ}.

   Sums over the sentence or word axis are unrolled slice sums (XLA's CPU
   reduction over a non-minor axis is slow; :mod:`dynamics.fast_lu.xla_cpu`).

Every array keeps the seed axis innermost (``[..., S]``) so each elementwise
loop vectorises across seeds; on a CPU seeds are processed in tiles of ``seed_tile``
(``lax.map`` over tiles) so a tile's state stays in cache; on an accelerator a tile is
up to ``ACCELERATOR_SEED_TILE`` seeds that its memory holds (``default_seed_tile``).
The shift ``c`` is each seed's largest score at every step (any constant gives the same
trajectory; this one guards ``exp`` against overflow). The one limit of the
factored form: a sentence whose words all score more than ~87 (float32;
~708 in float64) below the vocabulary's top score underflows to ``Z_i = 0``;
that step is then non-finite and reported in ``failed_at`` (the generic path,
which shifts per sentence, would go on).

Recording: at every recorded step the state is converted to ordinary parameters (seeds
first) and ``record`` runs per seed under ``vmap``, unless the record has a
``seeds_last(rows, rows0)`` form (:func:`analysis.topic_observables` does): that reads every
seed of the tile at once from :class:`WordRows` (each vocabulary word's ``ν_w``, ``s_w``,
with the seed axis last) and never forms ordinary parameters. The topic observables gather
each sentence's ``d``-channel embeddings twice a record (its context and Theorem 1's);
per seed that was a large share of a run (``python -m benchmarks.record``).

Failures: a step whose forward pass is non-finite (checked through
``Σ_i pre_i·δ_i`` and the classifier gradients) is not applied, and the run
stays frozen from then on with ``failed_at`` set to that step, as in the
generic path. The generic path also checks the updated parameters; here a
parameter that overflows shows up one step later, through the next forward
pass (so ``failed_at`` can be one step later in that corner case).

Sparsemax attention (``model.normaliser = "sparsemax"``, a fixed query): the weights do not
factor per word, so :mod:`~dynamics.fast_lu.sparse` keeps ``ν_w`` itself (weight 1), forms each
sentence's threshold from its gathered scores, and sums per-occurrence values over each word's
occurrences in the backward pass; the classifier's part (steps 3 and 5) is shared.

Files: :mod:`~dynamics.fast_lu.applies` (when it applies),
:mod:`~dynamics.fast_lu.plan` (the host-side word plan), :mod:`~dynamics.fast_lu.xla_cpu`
(seeds-last helpers and XLA:CPU workarounds), :mod:`~dynamics.fast_lu.step` (the algebra above:
one step, and the fast state), :mod:`~dynamics.fast_lu.sparse` (the step with sparsemax
attention), :mod:`~dynamics.fast_lu.train` (the trainers).

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
from attndyn.dynamics.fast_lu.applies import FastPathCheck as FastPathCheck
from attndyn.dynamics.fast_lu.applies import fast_path_applies as fast_path_applies
from attndyn.dynamics.fast_lu.plan import HEAVY_COUNT as HEAVY_COUNT
from attndyn.dynamics.fast_lu.plan import WordPlan as WordPlan
from attndyn.dynamics.fast_lu.plan import plan_words as plan_words
from attndyn.dynamics.fast_lu.step import GATHER_COST as GATHER_COST
from attndyn.dynamics.fast_lu.step import WordRows as WordRows
from attndyn.dynamics.fast_lu.step import projected_forward_pays as projected_forward_pays
from attndyn.dynamics.fast_lu import sparse as sparse
from attndyn.dynamics.fast_lu.train import COMPILER_OPTIONS as COMPILER_OPTIONS
from attndyn.dynamics.fast_lu.train import SEED_TILE as SEED_TILE
from attndyn.dynamics.fast_lu.train import default_seed_tile as default_seed_tile
from attndyn.dynamics.fast_lu.train import make_fast_sweep_train as make_fast_sweep_train
from attndyn.dynamics.fast_lu.train import make_fast_train as make_fast_train

__all__ = ["FastPathCheck", "fast_path_applies", "HEAVY_COUNT", "WordPlan", "WordRows",
           "plan_words", "GATHER_COST", "projected_forward_pays", "COMPILER_OPTIONS", "SEED_TILE",
           "default_seed_tile",
           "make_fast_sweep_train", "make_fast_train"]
