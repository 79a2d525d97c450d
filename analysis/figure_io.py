"""Figure plumbing shared by the figure modules: an Agg grid of axes and a PNG writer.

Figures are drawn on the Agg backend with no pyplot state, so they are safe in
threads and under tests.
"""
import os

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["grid", "save", "dress", "finish"]


def grid(nrows: int, ncols: int, width: float = 4.2, height: float = 3.4):
  """``(figure, axes [nrows, ncols])`` with panels ``width × height`` inches each."""
  fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
  FigureCanvasAgg(fig)
  return fig, fig.subplots(nrows, ncols, squeeze=False)


def save(fig: Figure, path, dpi: int = 100) -> str:
  """Write ``fig`` as a PNG to ``path`` (creating its directory); returns the path."""
  path = os.fspath(path)
  if os.path.dirname(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
  fig.savefig(path, format="png", dpi=dpi)
  return path


def dress(ax, title: str = "", xlabel: str = "", ylabel: str = "", *, legend: bool = True) -> None:
  """The house look of one panel: a medium title, axis labels, a light grid and a small legend."""
  ax.set_title(title, fontsize="medium")
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3)
  if legend:
    ax.legend(fontsize="x-small")


def finish(fig: Figure, axes, n_used: int, path, title: str = "", dpi: int = 100) -> str:
  """Hide the grid's unused panels after the first ``n_used``, add the title, write the PNG."""
  for ax in axes.ravel()[n_used:]:
    ax.set_visible(False)
  if title:
    fig.suptitle(title)
  return save(fig, path, dpi)
