"""``attndyn reproduce PAPER``: rerun a paper's experiments and write a replication table.

Layout: :mod:`attndyn.reproduce.runner` orchestrates (settings, overrides,
per-experiment results, timing), :mod:`attndyn.reproduce.report` writes
``replication.md`` / ``replication.json``, and each paper is a subpackage
holding one experiment per file (settings as data plus a small ``run``
function that calls :mod:`tasks`, :mod:`models`, :mod:`dynamics` and
:mod:`analysis`): one subpackage per entry of ``PAPERS``.
"""

__all__ = ["PAPERS"]
PAPERS = {"lu2021": "attndyn.reproduce.lu2021", "yang": "attndyn.reproduce.yang",
          "sgd": "attndyn.reproduce.sgd", "flavours": "attndyn.reproduce.flavours",
          "snell": "attndyn.reproduce.snell"}

import sys as _sys  # noqa: E402

import attndyn as _attndyn  # noqa: E402

_attndyn._callable(_sys.modules[__name__])   # ad.reproduce(...) runs the study (attndyn.api.reproduce)
