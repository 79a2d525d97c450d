"""IBM Model 1 by EM (Snell et al., Section 4.2), the agreement measures, and the Multi30k slice."""

import numpy as np
import pytest
from scipy import stats

from attndyn.analysis import agreement, ibm1
from attndyn.tasks.errors import ConfigError
from attndyn.tasks.multi30k import load_multi30k, tokenize


def _pad(rows):
  out = np.zeros((len(rows), max(map(len, rows))), int)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return out


def _naive_em_step(table, pairs):
  """One EM iteration written as the textbook loops (Koehn, SMT, Fig 4.3)."""
  counts = np.zeros_like(table)
  for e, f in pairs:
    for fw in f:
      z = sum(table[ew, fw] for ew in e)
      for ew in e:
        counts[ew, fw] += table[ew, fw] / z
  out = table.copy()
  for ew in range(table.shape[0]):
    if counts[ew].sum() > 0:
      out[ew] = counts[ew] / counts[ew].sum()
  return out


def test_em_matches_textbook_loops():
  rng = np.random.default_rng(0)
  pairs = [(list(rng.integers(1, 6, rng.integers(1, 5))), list(rng.integers(1, 7, rng.integers(1, 5))))
           for _ in range(12)]
  src, tgt = _pad([p[0] for p in pairs]), _pad([p[1] for p in pairs])
  table = np.full((6, 7), 1 / 7)
  for it in (1, 2, 3):
    table = _naive_em_step(table, pairs)
    ours = ibm1.train_ibm1(src, src > 0, tgt, 6, 7, iterations=it)
    np.testing.assert_allclose(ours[1:], table[1:], rtol=1e-12, atol=1e-14)


def test_em_recovers_dictionary():
  # das Haus / das Buch / ein Buch (Koehn's example): co-occurrence alone disambiguates.
  the, house, book, a = 1, 2, 3, 4
  das, haus, buch, ein = 1, 2, 3, 4
  src = np.array([[the, house], [the, book], [a, book]])
  tgt = np.array([[das, haus], [das, buch], [ein, buch]])
  t = ibm1.train_ibm1(src, src > 0, tgt, 5, 5, iterations=30)
  assert t[the, das] > 0.9 and t[house, haus] > 0.9 and t[book, buch] > 0.9 and t[a, ein] > 0.9
  post = ibm1.alignment_posterior(t, src, src > 0, tgt)
  np.testing.assert_allclose(post.sum(-1), 1.0)
  assert post[0, 0, 0] > 0.9 and post[0, 1, 1] > 0.9       # das→the, Haus→house


def test_first_e_step_is_uniform_cooccurrence():
  src, tgt = np.array([[1, 2, 0], [1, 3, 3]]), np.array([[1, 2], [2, 0]])
  t = ibm1.train_ibm1(src, src > 0, tgt, 4, 3, iterations=1)
  # word 1 occurs in both sentences: target 1 once (weight 1/2), target 2 twice (1/2 + 1/3)
  np.testing.assert_allclose(t[1], np.array([0, 0.5, 0.5 + 1 / 3]) / (1 + 1 / 3))


def test_kendall_tau_matches_scipy():
  rng = np.random.default_rng(1)
  x = rng.integers(0, 4, (6, 7)).astype(float)
  y = rng.normal(size=(6, 7))
  mask = rng.random((6, 7)) > 0.2
  tau = agreement.kendall_tau_rows(x, y, mask)
  for r in range(6):
    ref = stats.kendalltau(x[r][mask[r]], y[r][mask[r]]).statistic
    assert tau[r] == pytest.approx(ref, abs=1e-12) or (np.isnan(tau[r]) and np.isnan(ref))
  assert np.isnan(agreement.kendall_tau_rows(np.ones((1, 3)), y[:1, :3], np.ones((1, 3), bool))[0])


def test_top_k_match():
  x = np.array([[0.1, 0.5, 0.4], [0.9, 0.05, 0.05]])
  y = np.array([[0.0, 0.2, 0.8], [0.1, 0.1, 0.8]])
  m = np.ones_like(x, bool)
  assert list(agreement.top_k_match(x, y, m, 1)) == [False, False]
  assert list(agreement.top_k_match(x, y, m, 2)) == [True, False]
  m2 = np.array([[1, 1, 0], [1, 1, 1]], bool)
  assert agreement.top_k_match(x, y, m2, 1)[0]        # masked position 2 cannot be the argmax


def test_multi30k_slice(tmp_path):
  d = load_multi30k(max_len=8, min_count=2, n_pairs=50)
  assert d.batch.tokens.shape == (50, 8) and d.batch.labels.shape == (50, 8)
  assert d.src_words[:2] == ("<pad>", "<unk>") and np.array_equal(d.batch.mask, d.batch.tokens > 0)
  assert tokenize("Two men, outside.") == ["two", "men", ",", "outside", "."]
  (tmp_path / "x.en").write_text("a b\nc\n")
  (tmp_path / "x.de").write_text("a\n")
  with pytest.raises(ConfigError, match="line-aligned"):
    load_multi30k(tmp_path, stem="x")
  with pytest.raises(ConfigError, match="does not exist"):
    load_multi30k(tmp_path, stem="missing")
  with pytest.raises(ConfigError, match="max_len"):
    load_multi30k(max_len=0)


def test_agreement_by_seed_scores_each_seed_and_the_next_seeds_attention():
  """A comparison equal to the seed's own attention agrees perfectly (τ = 1, top-1 = 1); the
  'other_seed' comparison reads the next seed's attention (cyclically) and is left out with
  one seed; :func:`mean_tau` is the τ of the same rows."""
  rng = np.random.default_rng(0)
  src_mask = np.array([[True, True, True, False], [True, True, True, True]])
  tgt = np.array([[3, 4, 0], [5, 6, 7]])
  att = [rng.random((2, 3, 4)) for _ in range(2)]
  per_seed = [{"attention": a, "same": a.copy()} for a in att]
  fixed = {"random": rng.random((2, 3, 4))}
  tau, top1 = agreement.agreement_by_seed(per_seed, fixed, ["same", "other_seed", "random"],
                                          src_mask, tgt)
  np.testing.assert_allclose(tau["same"], [1.0, 1.0])
  np.testing.assert_allclose(top1["same"], [1.0, 1.0])
  for i in range(2):
    assert tau["other_seed"][i] == agreement.mean_tau(att[1 - i], att[i], src_mask, tgt)
    assert tau["random"][i] == agreement.mean_tau(fixed["random"], att[i], src_mask, tgt)
  alone, _ = agreement.agreement_by_seed(per_seed[:1], fixed, ["other_seed"], src_mask, tgt)
  assert alone == {"other_seed": []}
