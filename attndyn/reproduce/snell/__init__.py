"""Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns" (and the
slides "Understanding Attention Training via Output Relevance"): every experiment.

One module per experiment, run in this order (``attndyn reproduce snell``):

* ``copying``: Section 3.3, sequence copying with the authors' LSTM encoder–decoder
  (their code's model, EOS/SOS encoding, PyTorch initialisers and evaluation;
  ``docs/snell-copying.md``) on three training distributions (permutations, i.i.d.,
  40 distinct of 60): per-seed success / failure, failure rates with Wilson
  intervals, and the two-stage story (the lexical probe β finds the word to
  copy before the attention does) as curves and a lag statistic. Our earlier
  model ("ours: no EOS, Glorot") is the preset ``ours`` / ``ours-cpu``.
* ``multihead``: Section 5.2, on permutations, by the authors' ``multihead.py``
  protocol and model (GRUs, separate embeddings, one body; single heads labelled
  good / bad on three data orders; 8 bad, 7 bad + 1 good and 8 random heads):
  K random heads succeed more often than one. The earlier variant (our model,
  heads of good / bad single-head seeds) is the preset ``ours`` / ``ours-cpu``.
* ``multi30k``: Sections 3.2 and 4.2 on real text (Multi30k en→de slice): β of
  a uniform-attention model, the bag-of-words proxy and IBM Model 1 alignments
  against the attention of a standardly trained model (Kendall τ, top-1).
* ``relevance``: the slides' classification view, y = Σ a_t r_t with
  r_t = W_p h_t: under uniform attention r grows fastest at the keywords, and
  then attracts the attention (Lu et al.'s bag-of-words attention model on
  the topic task).

Presets: ``FULL`` is the authors' setting (LSTM hidden 256, Adam 1e-3, batch
128, length 40, 20 seeds), about 1.7 h per distribution on a 2-core CPU.
``--set copying.preset=cpu`` (and ``multihead.preset=cpu``) selects the
cheaper setting the shipped measurements used (see each module).

References:
  https://arxiv.org/abs/2103.07601
"""

__all__ = ["TITLE", "EXPERIMENTS"]
TITLE = 'Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns"'
EXPERIMENTS = ("copying", "multihead", "multi30k", "relevance")
