"""Yang, "Is Attention Points Out the Only 'Path'? An Analysis on Transformers": every experiment.

One module per experiment, run in this order (``attndyn reproduce yang``):

* ``tagger``: Section 4.1 / Table 1 "original": the 1-layer 4-head transformer
  tagger on CoNLL-2000 (chunk-level F1, conlleval), seeds vmapped; the
  other-seed baseline of Wiegreffe & Pinter (attention JSD, prediction TVD).
* ``adversary``: Section 4.2 / Table 1: the global adversary swept over λ in one
  vmapped call (KL(adversary ‖ original), the bounded direction); Section 4.3 /
  Table 2: probing classifiers on stored original / adversarial / uniform
  attention.

References:
  Yang, Zijiao. "Is Attention Points Out the Only 'Path'? An Analysis on
  Transformers" (course project, University of Colorado Boulder).
  Wiegreffe & Pinter, "Attention is not not Explanation", EMNLP 2019. https://arxiv.org/abs/1908.04626
"""

__all__ = ["TITLE", "EXPERIMENTS"]
TITLE = 'Yang, "Is Attention Points Out the Only \'Path\'? An Analysis on Transformers" (CoNLL-2000 chunking, adversarial attention)'
EXPERIMENTS = ("tagger", "adversary")
