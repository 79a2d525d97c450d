"""Attention flavours on the Lu et al. (2021) topic task: sparse normalisers and the Jain & Wallace checks.

Not a paper's replication but new results on the same setting (``attndyn
reproduce flavours``):

* ``sparse_sen``: Lemma 2 / Corollary 1 re-derived for sparsemax and 1.5-entmax
  attention (``docs/sparsemax_sen.md``): the derived SEN relation against GD,
  the derived ODE (:mod:`dynamics.sparsemax_ode`) against GD, and the
  sparsemax score freezing at ``s = 1``.
* ``jain_wallace``: Kendall τ-b of attention vs gradient and leave-one-out
  importance, and per-sentence adversarial attention at bounded output change,
  for the trained Attn-TC with softmax, sparsemax and 1.5-entmax attention.
* ``structured``: the lecture's structured attention (fusedmax, CRF marginals,
  SparseMAP) against softmax and sparsemax in a CoNLL-2000 chunking tagger:
  F1, learning speed, contiguity of the support, agreement with the gold chunks.
* ``structured_copying``: the same five normalisers in the LSTM seq2seq on copying.

References:
  Lu, Mao & Nayak, ICLR 2021. https://arxiv.org/abs/2011.10036
  Jain & Wallace, NAACL 2019. https://arxiv.org/abs/1902.10186
  Peters, Niculae & Martins, ACL 2019. https://arxiv.org/abs/1905.05702
"""

__all__ = ["TITLE", "EXPERIMENTS"]
TITLE = 'Attention flavours: sparsemax/entmax SEN and the Jain & Wallace checks on the Lu et al. (2021) topic task; structured attention on CoNLL-2000 and copying'
EXPERIMENTS = ("sparse_sen", "jain_wallace", "structured", "structured_copying")
