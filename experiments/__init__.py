"""The thesis' reproductions: the synthetic experiments of its sections 3 and 4.1.

Each module is a script run from the repository root (``python -m experiments.<name>``,
``--help`` for its options); the package is not installed with ``sklearn_rnn``:

- :mod:`experiments.figures_3`: the figures of section 3 (temporal gradients, loss
  surface, spectral radius);
- :mod:`experiments.figure_4_1`: figure 4.1, updates to success against the sequence
  length;
- :mod:`experiments.table_4_1`: table 4.1, the anti-gradient against the simplex method
  with and without switching;
- :mod:`experiments.bench_temporal_order` and :mod:`experiments.bench_early_radius`:
  the reference temporal-order task at length 50 and the early spectral radius;
- :mod:`experiments._stream`: the streaming training every one of them shares.

They use the estimators' public attributes only. The user guide's page "Thesis
experiments" shows the commands and the recorded results (``experiments/results``).
"""
