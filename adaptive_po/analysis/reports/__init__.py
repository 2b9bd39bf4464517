"""The published reports, one module per report, each runnable as
``python -m adaptive_po.analysis.reports.<name>``; every number comes from the core
(:mod:`adaptive_po.analysis`), and no report imports another.

* :mod:`.suite`: one suite's report: learning curves, ablations, the aggregate table, the verdicts
  against PPO (``python -m adaptive_po.analysis <suite_root>``, ``make plot``, ``make readme``)
* :mod:`.paper`: the paper report over several suites: IQM per condition, staleness and mismatch
  level, performance profiles, the tuning tax (``make paper-report``)
* :mod:`.staleness_and_paper_verdicts`: the staleness and paper suites' per-task verdicts against
  PPO, rebuilt from the committed run table (``make classic-from-table``)
* :mod:`.equal_tuning`: equal tuning with held-out selection: default against default, tuned
  against tuned, the retuning tax (``make tuned-report``, ``make tuned-from-table``)
* :mod:`.minatar`: the MinAtar tier's verdicts and our PPO beside published PPO
  (``make minatar-report``, ``make minatar-from-table``)
* :mod:`.r2vpo`: after R2VPO on the staleness grid, its verdicts against the published PPO runs
  (``make bench-r2vpo``, ``make r2vpo-from-table``)
* :mod:`.fresh_data`: why the ESS objective loses on fresh data (per-epoch traces) and the verdicts
  of the variants pre-registered to fix it (``make fresh-data-diagnosis``, ``make fresh-data-from-table``)
"""
