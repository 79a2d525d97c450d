"""Slides (output relevance): under uniform attention r grows fastest at the keywords, then attracts a.

Lu et al.'s bag-of-words attention classifier on their topic task is the
slides' model with ``h_t = ν_{w_t}``: ``y = Σ_t a_t r_t``, ``r_t = Uᵀν_{w_t}``;
the keywords are the topic words. Two trainings per seed (one vmapped sweep
each): keys frozen at 0 (attention uniform throughout: the uniform-attention
model) and the standard one (keys trained, starting from 0, i.e. uniform).
Read off: the early growth of the relevance ρ at topic words against the
other words under uniform attention; in standard training the lag from the
rise of ρ at the topic words to the rise of their attention score; and whether
the uniform model's most relevant words are the standard model's most
attended words (the topic words).
"""
import dataclasses

import numpy as np

from attndyn import dynamics
from attndyn import models
from attndyn import settings
from attndyn import tasks
from attndyn.analysis import relevance as rel
from attndyn.analysis import replication as rep
from attndyn.analysis import snell_figures as figs
from attndyn import schema
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce import engine
from attndyn.tasks.errors import ConfigError

__all__ = ["NAME", "TITLE", "Settings", "FULL", "QUICK", "SLIDE", "SOURCES", "validate", "run"]

NAME = "relevance"
TITLE = "Slides: output relevance r grows at keywords under uniform attention, then attracts a"
# Keys of the run schema's sections that the experiment sets itself: the task is Lu et al.'s
# topic task; the keys are frozen (uniform attention) or trained (standard).
_OWN_KEYS = {"task": ("kind",), "model": ("freeze",)}


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set relevance.KEY=VALUE``).

  Attributes:
    task: Lu et al.'s topic task (keys of the run schema's ``[task]``).
    model: the bag-of-words attention classifier (keys of the run schema's ``[model]``).
    lr: the full-batch GD learning rate.
    steps: GD epochs.
    record_every: epochs between records.
    seeds: seeds (seed i draws task and initialisation).
    early: the uniform model's relevance ratio is read at this fraction of ``steps``.
    ratio_at_least: the ratio the keyword-growth row needs.
  """
  task: settings.section("task")
  model: settings.section("model")
  lr: settings.Number
  steps: settings.Count
  record_every: settings.Count
  seeds: settings.Count
  early: settings.Number
  ratio_at_least: settings.Number


FULL = Settings(task={"n_topics": 4, "words_per_topic": 2, "vocab_size": 1000, "n_nontopic": 20,
                      "n_train": 800, "n_test": 200},
                model={"embed_dim": 15, "key_dim": 15, "embed_std": 1e-3, "key_std": 0.0,
                       "query_std": 1.0, "query_norm": 1.0, "classifier": "tc"},
                lr=0.1, steps=3000, record_every=50, seeds=4, early=0.1, ratio_at_least=3.0)
QUICK = dataclasses.replace(FULL, steps=1000, record_every=50, seeds=2)
SLIDE = "slides, “Attention a and Output Relevance r”"
SOURCES = {
    "growth": rep.from_paper(SLIDE, "Under uniform attention, r increases faster at “keyword” "
                             "positions") + "; ‘faster’ as at least 3× is ours: a clear margin, "
                             "not any ratio above 1",
    "lag": rep.from_paper(SLIDE, "r increases faster at “keyword” positions, then attracts a"),
    "top": rep.from_paper("slides, “Increasing r Under Uniform Attention”",
                          "r′ still correlates with standard attention a"),
}


def _configs(s: Settings):
  """The topic task, the training and the two models (``uniform``: keys frozen; ``standard``)."""
  for table, keys in _OWN_KEYS.items():
    for key in keys:
      if key in getattr(s, table):
        raise ConfigError(f"{NAME}.{table}.{key} is not allowed: the experiment sets it.")
  with schema.at(f"{NAME}.task"):
    tcfg = tasks.TopicTaskConfig(**s.task)
  with schema.at(NAME):
    tc = dynamics.TrainConfig(lr=s.lr, steps=s.steps, record_every=s.record_every)
  cfgs = {}
  for kind, freeze in (("uniform", ("keys",)), ("standard", ())):
    with schema.at(f"{NAME}.model"):
      cfgs[kind] = models.LuModelConfig(n_words=tcfg.n_words, n_classes=tcfg.n_topics,
                                        freeze=freeze, **s.model)
  return tcfg, tc, cfgs


def validate(s: Settings) -> None:
  """The settings make valid configs (the runner calls this before anything runs)."""
  _configs(s)


def run(ctx, s) -> Outcome:
  tcfg, tc, cfgs = _configs(s)
  n_topic = tcfg.n_topic_words
  seeds = np.arange(s.seeds)
  runs = {}
  for kind, cfg in cfgs.items():
    ctx.log(f"{NAME}: {kind} attention, {len(seeds)} seeds x {s.steps} epochs")
    runs[kind] = {k: np.asarray(v, float) for k, v in
                  engine.sweep(ctx, f"{NAME}-{kind}", rel.relevance_point(tcfg, cfg, tc),
                               seeds.astype(np.uint32),
                               settings.as_json(s), what="seeds").items()}
  t = np.asarray(tc.record_steps(), float)
  u, st = runs["uniform"], runs["standard"]
  early = int(np.argmin(np.abs(t - s.early * s.steps)))
  ratio = u["rho_topic"][:, early] / u["rho_other"][:, early]
  # Standard training: half-rise times of relevance and of attention at the topic words.
  t_rho, t_att = rel.half_rise_time(st["rho_topic"], t), rel.half_rise_time(st["score_topic"], t)
  lag = t_att - t_rho
  top_u = np.argsort(-u["rho"][:, -1], 1)[:, :n_topic]
  top_s = np.argsort(-st["score"][:, -1], 1)[:, :n_topic]
  same = np.array([set(a) == set(b) == set(range(n_topic)) for a, b in zip(top_u, top_s)])
  claims = [
      rep.claim(f"{NAME}.uniform.keyword_growth", f"uniform attention, epoch {t[early]:g}: mean "
                "relevance ρ at topic words / at other words", paper="r grows faster at keywords",
                ours=rep.mean_ci(ratio), tolerance=rep.Tolerance(
                    "at_least", s.ratio_at_least, f"ratio ≥ {s.ratio_at_least:g}",
                    source=SOURCES["growth"]),
                figure="slides", quick=ctx.quick),
      rep.claim(f"{NAME}.standard.lag", "standard training: epochs from the half-rise of ρ at the "
                "topic words to the half-rise of their attention score",
                paper="> 0: relevance first, then attention", ours=rep.mean_ci(lag),
                tolerance=rep.Tolerance("at_least", 0.0, "mean lag ≥ 0", source=SOURCES["lag"]),
                figure="slides",
                quick=ctx.quick, note=f"half-rise epochs ρ {t_rho.tolist()}, score {t_att.tolist()}"),
      rep.claim(f"{NAME}.top_words", f"the {n_topic} most relevant words of the uniform model are "
                f"the {n_topic} most attended words of the standard model (= the topic words)",
                paper="r′ correlates with the standard attention", ours=rep.mean_ci(same),
                tolerance=rep.Tolerance("all_true", source=SOURCES["top"]), figure="slides",
                quick=ctx.quick),
  ]
  fig = figs.relevance_figure(u, st, t, t[early], ctx.path("relevance.png"))
  details = {"ratio_early": ratio.tolist(), "lag": lag.tolist(), "early_epoch": float(t[early]),
             "final_topic_attention": {k: runs[k]["topic_attention"][:, -1].tolist() for k in runs},
             "notes": [f"Topic task {s.task}; Attn-TC {s.model}; GD lr {s.lr} × "
                       f"{s.steps} epochs; {len(seeds)} seeds (seed i draws task and init)."]}
  return Outcome(claims, [fig.rsplit("/", 1)[-1]], details)
