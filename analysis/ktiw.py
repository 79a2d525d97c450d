"""The lexical probe β (KTIW) of Snell et al. and the copying-task metrics built on it.

Snell et al., Section 2.2: the model's knowledge to translate the individual
input word at position l into the correct output ``o_t`` is the probability
the output layer gives ``o_t`` when the decoder at step t attends only to l:

.. math:: \\beta_{t,l} = p(o_t \\mid c_t = h_l, d_t)
   = \\mathrm{softmax}(W_s \\tanh(W_c [h_l; d_t]) + b_s)_{o_t}

(with K heads every head's context is set to ``h_l``). Normalising β over l
gives the alignment the probe predicts, ``α_{t,l} = β_{t,l} / Σ_l' β_{t,l'}``.

References:
  Snell, Zhong, Klein & Steinhardt, "Approximating How Single Head Attention Learns",
  arXiv:2103.07601.
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.models import seq2seq
from attndyn.tasks.batch import Batch

__all__ = ["lexical_probe", "probe_alignment", "copy_metrics", "copy_record", "attention_and_probes"]


def lexical_probe(params: dict, cfg: seq2seq.Seq2SeqConfig, out: seq2seq.Seq2SeqOutput,
                  labels: jax.Array) -> jax.Array:
  """``β [n, T, L]``: probability of the correct output ``o_t`` when attending only to l.

  Args:
    params: the model's parameters.
    cfg: its configuration.
    out: its forward pass on the pairs (encoder and decoder states are reused).
    labels: ``[n, T]`` the correct outputs.
  """
  enc, dec = out.enc, out.dec                                      # [n,L,d], [n,T,d]
  ctx = jnp.broadcast_to(enc[:, None, :, None, :],
                         (enc.shape[0], dec.shape[1], enc.shape[1], cfg.heads, enc.shape[2]))
  logits = seq2seq.readout(params, ctx, dec[:, :, None, :])         # [n,T,L,V]
  logp = jax.nn.log_softmax(logits, -1)
  return jnp.exp(jnp.take_along_axis(logp, labels[:, :, None, None], -1)[..., 0])


def probe_alignment(beta: jax.Array, mask: jax.Array) -> jax.Array:
  """``α [n, T, L] = β / Σ_l β`` over real source words (Snell et al., Fig 1)."""
  b = jnp.where(mask[:, None, :], beta, 0.0)
  return b / jnp.maximum(b.sum(-1, keepdims=True), 1e-30)


def copy_metrics(out: seq2seq.Seq2SeqOutput, beta: jax.Array, batch: Batch) -> dict:
  """Per-batch copying metrics (scalars), averaged over sequences and target steps.

  * ``token_acc``: argmax output = target.
  * ``attn_acc``: the source word at the (best head's) argmax attention is the
    correct output (for permutations this is "argmax on position t").
  * ``attn_pos_acc``: argmax attention is exactly position t.
  * ``attn_on_target``: attention mass on source words equal to the target.
  * ``beta_acc``: the source word at ``argmax_l β_{t,l}`` is the correct output
    (the probe, on its own, finds the word to copy).
  * ``beta_correct``: mean ``β_{t,l}`` over positions holding the correct word.
  * ``beta_other``: mean ``β_{t,l}`` over the other positions.
  """
  x, y = batch.tokens, batch.labels
  valid = (y > 0).astype(beta.dtype)
  nv = jnp.maximum(valid.sum(), 1)
  mean = lambda v: (v * valid).sum() / nv
  same = (x[:, None, :] == y[:, :, None]) & batch.mask[:, None, :]          # [n,T,L]
  t = jnp.arange(y.shape[1])
  arg = jnp.argmax(out.attention, -1)                                       # [n,K,T]
  hit = jnp.take_along_axis(same[:, None], arg[..., None], -1)[..., 0]      # [n,K,T]
  mass = (out.attention * same[:, None]).sum(-1)                            # [n,K,T]
  bhit = jnp.take_along_axis(same, jnp.argmax(beta, -1)[..., None], -1)[..., 0]
  sf = same.astype(beta.dtype)
  b_corr = (beta * sf).sum(-1) / jnp.maximum(sf.sum(-1), 1)
  b_oth = (beta * (1 - sf)).sum(-1) / jnp.maximum((1 - sf).sum(-1), 1)
  return {
      "token_acc": mean(jnp.argmax(out.logits, -1) == y),
      "attn_acc": mean(hit.max(1)),
      "attn_pos_acc": mean((arg == t[None, None, :]).max(1)),
      "attn_on_target": mean(mass.max(1)),
      "beta_acc": mean(bhit),
      "beta_correct": mean(b_corr),
      "beta_other": mean(b_oth),
  }


def copy_record(cfg: seq2seq.Seq2SeqConfig, eval_batch: Batch):
  """``record(params, params0) -> dict`` of :func:`copy_metrics` and the loss on a fixed batch."""
  def record(params, params0):
    del params0
    out = seq2seq.apply(params, eval_batch, cfg)
    beta = lexical_probe(params, cfg, out, eval_batch.labels)
    m = copy_metrics(out, beta, eval_batch)
    m["loss"] = seq2seq.seq_loss(out.logits, eval_batch.labels)
    return m
  return record


def attention_and_probes(p_std: dict, cfg_std: seq2seq.Seq2SeqConfig, p_uni: dict,
                         cfg_uni: seq2seq.Seq2SeqConfig, batch: Batch) -> dict:
  """On the pairs ``batch``, each ``[n, T, L]`` (NumPy): the attention of a standardly
  trained model (head 0), the lexical probe β of a model trained with uniform attention
  (``beta_uniform``) and that of the standard model (``beta_standard``): Section 3.2's
  comparison."""
  out_s = seq2seq.apply(p_std, batch, cfg_std)
  out_u = seq2seq.apply(p_uni, batch, cfg_uni)
  return {"attention": np.asarray(out_s.attention[:, 0]),
          "beta_uniform": np.asarray(lexical_probe(p_uni, cfg_uni, out_u, batch.labels)),
          "beta_standard": np.asarray(lexical_probe(p_std, cfg_std, out_s, batch.labels))}
