"""The benchmark: from a sweep request to run folders, one module per job.

* what to run: :mod:`~adaptive_po.bench.config` (one YAML file per environment, validated),
  :mod:`~adaptive_po.bench.suites` (named grids), :mod:`~adaptive_po.bench.variants` (knob values
  other than the defaults), :mod:`~adaptive_po.bench.grid` (a request expanded into runs);
* what is done already and what it costs: :mod:`~adaptive_po.bench.resume` (the resume plan),
  :mod:`~adaptive_po.bench.estimate` (the dry run and its measured speeds);
* how runs execute: :mod:`~adaptive_po.bench.jobs` (runs grouped into jobs),
  :mod:`~adaptive_po.bench.local_executor` (worker processes), :mod:`~adaptive_po.bench.ray_executor`
  and :mod:`~adaptive_po.bench.ray_reaper` (a Ray cluster), :mod:`~adaptive_po.bench.sweep` (the
  sweep with progress);
* one run or one population: :mod:`~adaptive_po.bench.process_engine` (the SB3 class),
  :mod:`~adaptive_po.bench.population_engine` (many runs stacked in one process),
  :mod:`~adaptive_po.bench.run_folder` (a run's identity and its folder's life),
  :mod:`~adaptive_po.bench.recorder` (progress and evaluation records),
  :mod:`~adaptive_po.bench.divergence` (non-finite values named), :mod:`~adaptive_po.bench.locks`
  (one writer per folder, workers that die with their driver);
* studies: :mod:`~adaptive_po.bench.tuning` (equal tuning with held-out selection),
  :mod:`~adaptive_po.bench.trace` (per-epoch traces inside updates).

The bench imports the library below it, never the analysis or the command line above it
(``tests/test_architecture.py``). Importing this package imports nothing else.
"""
