"""The reproduction figure modules share one Agg grid / panel look / PNG writer (analysis.figure_io)."""
import numpy as np

from attndyn.analysis import lu2021_figures, sgd_figures, snell_figures, yang_figures

PNG = b"\x89PNG\r\n\x1a\n"


def _png(path):
  with open(path, "rb") as f:
    return f.read(8) == PNG


def test_every_reproduction_figure_writes_a_png_into_a_new_folder(tmp_path):
  x = np.arange(5.0)
  runs = np.random.default_rng(0).random((3, 5))
  out = tmp_path / "new" / "folder"
  paths = [
      lu2021_figures.sen_panels({"a": (runs, runs + 1, 20), "b": (runs, runs, 20), "c": (runs, runs, 5)},
                                out / "sen.png", ncols=2, title="t"),
      lu2021_figures.curve_panels([{"title": "loss", "curves": [("TC", x, runs)], "logy": True}],
                                  out / "curves.png"),
      lu2021_figures.twin_panels([{"x": x, "left": ("purity", runs), "right": ("count", runs)}],
                                 out / "twin.png"),
      lu2021_figures.distribution_panels({"Δs": {"FC": runs, "TC": runs + 0.5}}, out / "dist.png"),
      sgd_figures.band_panels([{"title": "s", "curves": [("SGD", x, runs)], "refs": [("GF", x, x)]}],
                              out / "band.png"),
      sgd_figures.shuffle_figure(x, {"SGD": runs[0] + 0.1, "SDE": runs[1] + 0.1},
                                 [("B 3", 20.0, (15.0, 25.0), 21.0), ("B 4", 900.0, (800.0, 1e3),
                                                                      np.inf)], out / "shuffle.png"),
      snell_figures.curve_panels([{"title": "acc", "t": x, "curves": {"perm": runs}}], out / "sn.png"),
      yang_figures.f1_curves(runs, runs, out / "f1.png", title="F1"),
  ]
  assert all(_png(p) for p in paths)


def test_fig3_and_fig5_panels_cut_at_their_plot_steps_and_follow_both_words():
  from attndyn import tasks
  steps = np.arange(0.0, 100.0, 10.0)
  curves = {q: {v: np.ones((2, 10)) for v in ("TC", "KF", "TC dim")} for q in ("score", "norm", "loss")}
  panels = lu2021_figures.fig3_panels(steps, curves, 0, ("TC", "KF"), ("TC dim",), 50, 30)
  assert [len(p["curves"]) for p in panels] == [2, 2, 2, 1, 1]
  assert panels[0]["curves"][0][1].tolist() == [0, 10, 20, 30, 40, 50]
  assert panels[3]["curves"][0][2].shape == (2, 4)
  score = np.cumsum(np.ones((10, 4)), 0) * np.array([0.0, 1.0, 2.0, 0.5])   # [T, V]
  batch = tasks.Batch(np.array([[1, 2, 0]]), np.array([[True, True, False]]), np.array([1]))
  panels = lu2021_figures.fig5_panels("TC", steps, score, score, (("a", 1), ("b", 2)),
                                      np.full(4, 3.0), batch, 0)
  assert [p["title"] for p in panels] == ["TC: SEN of 'b'", "TC: SEN of 'a'", "TC: score",
                                          "TC: ‖v‖", "TC: weights in sentence 0"]
  weights = [c[2][0] for c in panels[-1]["curves"]]
  np.testing.assert_allclose(weights[0] + weights[1], 1.0)             # the sentence's two words
  assert len(lu2021_figures.fig5_panels("TC", steps, score, score, (("a", 1), ("b", 2)),
                                        np.full(4, 3.0), batch, None)) == 4


def test_the_bands_show_three_batch_sizes_and_the_sme_of_the_first():
  tau = np.arange(5.0)
  obs = lambda s: {"score": np.ones((s, 5, 2)), "emb_norm": np.ones((s, 5, 2)), "loss": np.ones((s, 5))}
  sgd = {(1.0, b, "replacement"): obs(3) for b in (4, 8, 16, 32, 64)}
  sde_runs = {(4, "replacement"): obs(3), (64, "replacement"): obs(3), (4, "shuffle"): obs(3)}
  panels = sgd_figures.bands_of_runs(tau, sgd, sde_runs, obs(1), obs(1), 1.0, [4, 8, 16, 32, 64])
  assert [p["title"] for p in panels] == ["score", "emb_norm", "loss"]
  assert [c[0] for c in panels[0]["curves"]] == ["SGD B=4", "SGD B=16", "SGD B=64", "SDE B=4"]
  assert panels[0]["curves"][0][2].shape == (3, 5) and panels[2]["curves"][0][2].shape == (3, 5)
