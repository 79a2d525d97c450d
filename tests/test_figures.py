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
