"""Lu, Mao & Nayak (ICLR 2021), "On the Dynamics of Training Attention Models": every experiment.

One module per experiment, run in this order (``attndyn reproduce lu2021``):

* ``synthetic``: Section 5.1, Attn-FC/TC/TL, 100% test accuracy, Fig 1
  (Assumption 1), Fig 2 (Corollary 1), classifier capacity.
* ``theorem2``: Attn-FC with orthonormal U trained long: loss → 0, attention →
  topic word.
* ``ablation``: Fig 3, Attn-TC vs -KF vs -EF (mutual enhancement) and a
  constructed mutual-diminution start (Eq (8)).
* ``trainable_query``: Appendix B / Fig 10, query N(0, σ²), σ² ∈ {0.1, 0.5, 1, 2}.
* ``cnn``: Appendix A / Figs 8-9, Attn-TC-CNN on the Markov word-pair task.
* ``sst``: Section 5.2, SST-2 / SST-5 test accuracy (masked padding, and the
  authors' unmasked pad word), early stopping on the dev loss inside the
  vmapped sweep, Fig 4.
* ``purity``: topic purity, Fig 5 (best vs powerful), Figs 6-7.

References:
  https://arxiv.org/abs/2011.10036
"""

__all__ = ["EXPERIMENTS"]
EXPERIMENTS = ("synthetic", "theorem2", "ablation", "trainable_query", "cnn", "sst", "purity")
