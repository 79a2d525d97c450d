"""SGD as a stochastic process: minibatch SGD over hundreds of seeds vs gradient flow and the SME.

One experiment (``attndyn reproduce sgd``):

* ``noise``: the Lu topic task (a smaller text preset), every seed starting
  from the same parameters so that the spread is the minibatch noise alone;
  SGD's mean against gradient flow as B grows, the across-seed variance of
  ``s_t`` against ``lr/B`` (log-log slope with a bootstrap interval), the
  stochastic modified equation (:mod:`dynamics.sde`) against SGD, take-off
  times, Theorem 1's drift and Corollary 1 per seed.

References:
  Li, Tai & E, "Stochastic Modified Equations and Adaptive Stochastic Gradient
  Algorithms", ICML 2017. https://arxiv.org/abs/1511.06251
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""

__all__ = ["TITLE", "EXPERIMENTS"]
TITLE = ("SGD as a stochastic process: minibatch SGD over hundreds of seeds vs gradient flow "
         "and the stochastic modified equation (Lu et al. 2021 topic task)")
EXPERIMENTS = ("noise",)
