"""The structured-attention experiment's measures on hand-made maps, and its rows on hand-made results.

Budget (CI at ~12 of 15 minutes): a few seconds; no training (a tagger compile alone
takes longer), the training path is ``make_epoch_train``'s, tested elsewhere.
"""
import dataclasses

import numpy as np
import pytest

from attndyn.analysis import structured_attention as sa
from attndyn.reproduce.flavours import structured as exp

TAGS = ("O", "B-NP", "I-NP", "B-VP", "I-VP")


def test_run_length_counts_maximal_runs_of_the_support():
  att = np.array([[0.5, 0.5, 0.0, 0.2, 0.0],     # support {0, 1, 3}: 2 runs, 3/2
                  [0.0, 0.3, 0.3, 0.4, 0.0],     # {1, 2, 3}: 1 run, 3
                  [0.1, 0.0, 0.1, 0.0, 0.9],     # {0, 2}; position 4 is padding: 2 runs, 1
                  [0.0, 0.0, 0.0, 0.0, 0.0]])    # empty support: left out
  mask = np.array([True, True, True, True, False])
  size, runs = sa.run_stats(att, mask)
  np.testing.assert_array_equal(size, [3, 3, 2, 0])
  np.testing.assert_array_equal(runs, [2, 1, 2, 0])
  assert sa.mean_run_length(att, mask) == pytest.approx((1.5 + 3 + 1) / 3)
  assert sa.mean_run_length(att, mask, row_mask=[False, True, False, True]) == 3.0
  assert np.isnan(sa.mean_run_length(att[3:], mask))
  # a full support of n real words is one run of length n
  assert sa.mean_run_length(np.full((2, 5), 0.2), np.ones(5, bool)) == 5.0


def test_zero_fraction_counts_only_real_entries():
  att = np.array([[0.5, 0.0, 0.5, 0.0], [1.0, 0.0, 0.0, 7.0]])
  mask = np.array([True, True, True, False])
  assert sa.zero_fraction(att, mask) == pytest.approx(3 / 6)
  assert sa.zero_fraction(att, mask, row_mask=np.array([True, False])) == pytest.approx(1 / 3)


def test_chunk_segments_follow_conlleval_boundaries():
  tag = {t: i for i, t in enumerate(TAGS)}
  sent = ["B-NP", "I-NP", "O", "B-VP", "I-VP", "I-NP", "O", "O"]   # I-NP after VP opens a chunk
  ids = np.array([[tag[t] for t in sent] + [0, 0]])
  mask = np.array([[True] * 8 + [False, False]])
  np.testing.assert_array_equal(sa.chunk_segments(ids, mask, TAGS)[0],
                                [0, 0, 1, 2, 2, 3, 4, 5, -1, -1])


def test_in_chunk_mass_on_hand_made_maps():
  seg = np.array([[0, 0, 1, 2, 2, 2, -1]])          # chunks {0,1}, {2}, {3,4,5}; one pad
  n = 6
  own = (seg[0, :n, None] == seg[0, None, :n]).astype(float)
  inside = np.zeros((1, 7, 7))
  inside[0, :n, :n] = own / own.sum(-1, keepdims=True)  # all mass on the own chunk
  share, uniform = sa.in_chunk_mass(inside, seg)
  np.testing.assert_allclose(share[0, :n], 1.0)
  np.testing.assert_allclose(uniform[0, :n], [2 / 6, 2 / 6, 1 / 6, 3 / 6, 3 / 6, 3 / 6])
  assert np.isnan(share[0, 6]) and np.isnan(uniform[0, 6])
  # uniform attention scores exactly the uniform baseline, with heads and unnormalised mass
  flat = np.zeros((1, 2, 7, 7))
  flat[0, 0, :n, :n] = 1 / n
  flat[0, 1, :n, :n] = 0.3                          # marginals need not sum to 1
  share, uniform = sa.in_chunk_mass(flat, seg)
  np.testing.assert_allclose(share[0, :, :n], uniform[0, :, :n])
  assert share.shape == uniform.shape == (1, 2, 7)


def _results(fused_runs, crf_zeros):
  s = dataclasses.replace(exp.FULL, normalisers=exp.NORMALISERS, f1_level=0.77, epochs=3)
  res = {}
  for k, norm in enumerate(exp.NORMALISERS):
    dev_f1 = np.array([[0.5, 0.8, 0.9], [0.6, 0.7, 0.78], [0.1, 0.2, 0.3]])
    res[norm] = {"f1": np.array([0.8, 0.81, 0.79]) + 0.01 * k, "acc": np.array([0.9, 0.91, 0.9]),
                 "run_length": np.array([1.1, 1.2, 1.0]), "zero_fraction": np.array([0.5, 0.6, 0.4]),
                 "in_chunk": np.array([0.4, 0.5, 0.45]), "uniform": np.array([0.3, 0.3, 0.3]),
                 "dev_f1": dev_f1}
  res["fusedmax"]["run_length"] = np.asarray(fused_runs)
  res["sparsemap"]["run_length"] = np.array([2.0, 2.5, 3.0])
  res["crf"]["zero_fraction"] = np.asarray(crf_zeros)
  return s, res


def test_rows_and_verdicts_from_per_seed_results():
  s, res = _results(fused_runs=[1.5, 1.6, 1.4], crf_zeros=[0.0, 0.0, 0.0])
  rows = {r["id"]: r for r in exp.make_claims(res, s, steps_per_epoch=10, quick=False)}
  for norm in exp.NORMALISERS:
    for what in ("test_f1", "test_acc", "steps_to_level", "dev_f1_auc", "run_length",
                 "zero_fraction", "in_chunk_gain"):
      assert rows[f"structured.{norm}.{what}"]["status"] == "info"
  # dev F1 reaches 0.77 after epoch 2, epoch 3, never: steps 20, 30, NaN
  np.testing.assert_array_equal(res["softmax"]["steps"][:2], [20.0, 30.0])
  assert np.isnan(res["softmax"]["steps"][2])
  assert rows["structured.fusedmax.longer_runs_than_sparsemax"]["status"] == "pass"
  assert rows["structured.sparsemap.longer_runs_than_sparsemax"]["status"] == "pass"
  assert rows["structured.crf.dense"]["status"] == "pass"
  assert rows["structured.sparsemap.sparse"]["status"] == "pass"
  for row in rows.values():
    if row["status"] != "info":
      assert row["tolerance"]["source"].startswith("ours: Treviso et al. lecture")


def test_the_judged_rows_can_fail():
  s, res = _results(fused_runs=[0.5, 0.55, 0.45], crf_zeros=[0.0, 0.1, 0.0])
  rows = {r["id"]: r for r in exp.make_claims(res, s, steps_per_epoch=10, quick=False)}
  assert rows["structured.fusedmax.longer_runs_than_sparsemax"]["status"] == "fail"
  assert rows["structured.crf.dense"]["status"] == "fail"


def test_cap_length_keeps_short_sentences_in_order():
  import jax.numpy as jnp
  from attndyn.tasks.conll2000 import TaggedBatch, cap_length
  mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], bool)
  b = TaggedBatch(jnp.arange(12).reshape(3, 4), jnp.zeros((3, 4), int), jnp.asarray(mask),
                  jnp.zeros((3, 4), int))
  capped = cap_length(b, 3)
  np.testing.assert_array_equal(capped.tokens, [[0, 1, 2], [8, 9, 10]])
  np.testing.assert_array_equal(capped.mask, mask[[0, 2], :3])


def test_mass_share_on_a_hand_made_cross_attention():
  att = np.array([[[0.0, 0.6, 0.2, 0.0],      # target keys {1}: 0.6 of 0.8
                   [0.5, 0.5, 0.0, 9.0]]])    # key 3 is padding: {0, 2} get 0.5 of 1.0
  target = np.array([[[False, True, False, False], [True, False, True, True]]])
  share, uniform = sa.mass_share(att, target, np.array([[True, True, True, False]]))
  np.testing.assert_allclose(share, [[0.75, 0.5]])
  np.testing.assert_allclose(uniform, [[1 / 3, 2 / 3]])


def test_copying_rows_and_learning_speed():
  from attndyn.reproduce.flavours import structured_copying as cp
  acc = np.array([[0.1, 0.5, 0.95, 0.97], [0.1, 0.2, 0.3, 0.4], [0.2, 0.9, 0.9, 0.99]])
  r = {"t": np.array([0.0, 10.0, 20.0, 30.0]), "token_acc": acc, "acc": acc[:, -1],
       "run_length": np.ones(3), "zero_fraction": np.zeros(3),
       "on_target": np.array([0.9, 0.8, 0.95]), "uniform": np.full(3, 0.1)}
  rows = cp.copying_claims({"crf": r}, dataclasses.replace(cp.FULL, acc_level=0.9), quick=False)
  assert [row["id"] for row in rows] == [f"structured_copying.crf.{k}" for k in (
      "token_acc", "steps_to_level", "run_length", "on_target_gain")]
  np.testing.assert_array_equal(r["steps"][[0, 2]], [20.0, 10.0])
  assert np.isnan(r["steps"][1]) and all(row["status"] == "info" for row in rows)


@pytest.mark.parametrize("item, message", [
    ('structured.normalisers=["softmax", "sparsemaxx"]',
     "structured.normalisers = ['softmax', 'sparsemaxx'] is not allowed: a list drawn from "
     "'softmax', 'sparsemax', 'fusedmax', 'crf', 'sparsemap'"),
    ("structured.max_len=1", "structured.max_len = 1 is not allowed: an integer >= 2"),
    ("structured.model.block=fancy",
     "structured.model.block = 'fancy' is not allowed: one of 'paper', 'full'"),
    ("structured.model.heads=2", "structured.model has no setting 'heads'. Did you mean 'n_heads'?"),
    ("structured_copying.distribution=uniform", "structured_copying.distribution = 'uniform' is "
     "not allowed: one of 'permutation', 'iid', 'subset'"),
    ('sparse_sen.normalisers=["crf"]', "sparse_sen.normalisers = ['crf'] is not allowed: a list "
     "drawn from 'softmax', 'sparsemax', 'entmax15'"),
    ('jain_wallace.normalisers=["entmax"]', "jain_wallace.normalisers = ['entmax'] is not "
     "allowed"),   # entmax needs alpha: only the normalisers named alone
])
def test_flavours_settings_are_checked_before_anything_runs(tmp_path, capsys, item, message):
  """Each setting's kind (its annotation, or ``validate``) refuses a bad value in one line."""
  from attndyn import cli
  code = cli.main(["reproduce", "flavours", "--out", str(tmp_path / "x"), "--quick", "--quiet",
                   "--set", item])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and message in err, err
  assert not (tmp_path / "x").exists()


def test_a_data_limit_may_be_unset_and_settings_are_recorded_as_json():
  from attndyn import settings
  from attndyn.reproduce import runner
  s = runner.settings_for(exp, quick=True, items=["structured.data.limit=none",
                                                  "structured.normalisers=[\"crf\"]"])
  assert s.data.limit is None and s.data.test_limit == exp.QUICK.data.test_limit
  assert s.normalisers == ("crf",)
  doc = settings.as_json(s)
  assert doc["data"] == {"min_count": 2, "limit": None, "test_limit": 400}
  assert doc["normalisers"] == ["crf"] and doc["model"]["block"] == "paper"


def test_copying_measures_on_hand_made_cross_attention():
  """Attention all on the source word to copy scores share 1 and one run per row; uniform
  attention scores exactly uniform's share; padded keys and target steps are left out."""
  from attndyn.tasks.batch import Batch
  tokens = np.array([[2, 3, 4, 0]])
  labels = np.array([[2, 3, 4, 0]])                          # copy; the last step is padding
  batch = Batch(tokens=tokens, mask=tokens > 0, labels=labels)
  onto = np.zeros((1, 1, 1, 4, 4))
  onto[0, 0, 0, np.arange(3), np.arange(3)] = 1.0           # step t on source word t
  uniform = np.zeros((1, 1, 1, 4, 4))
  uniform[..., :3] = 1 / 3
  got = sa.copying_measures(np.concatenate([onto, uniform]), batch)
  np.testing.assert_allclose(got["on_target"], [1.0, 1 / 3])
  np.testing.assert_allclose(got["uniform"], [1 / 3, 1 / 3])
  np.testing.assert_allclose(got["run_length"], [1.0, 3.0])
  np.testing.assert_allclose(got["zero_fraction"], [2 / 3, 0.0])
