"""Benchmarks: the Lu text preset timed across implementations (``python -m benchmarks.run``).

* :mod:`benchmarks.workload` — the workload (task, model, seeds sharing one dataset).
* :mod:`benchmarks.impls` — the implementations timed side by side: a PyTorch
  per-seed loop (optional), the obvious JAX version, the project's fast path and
  its generic autodiff path.
* :mod:`benchmarks.stream` — a STREAM-like triad for the machine's memory bandwidth.
* :mod:`benchmarks.memsample` — peak resident memory sampled during a call.
* :mod:`benchmarks.run` — the command line: table, ``bench.json``, scaling plot.
* :mod:`benchmarks.ode_check` — GD vs the reduced ODE vs the gradient flow.
"""
