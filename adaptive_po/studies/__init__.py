"""A pre-registered study as data: its plan file and the protocol every study shares.

* :mod:`.plan`: the plan file (``docs/results/<study>/plan.toml``), its schema and its loader (the
  standard library only: a malformed plan is one ``ValueError`` naming the file and the key);
* :mod:`.pilot`: the pilot's qualification rule, the selection and the pilot's text;
* :mod:`.cuts`: the registered cut order under the core-hour limit, and the check of a cuts file.

The generic runner (:mod:`adaptive_po.bench.study`) trains from a plan; the generic report
(:mod:`adaptive_po.analysis.study_report`) checks the committed table against it and writes the
verdicts. This layer sits beside the contract: torch-free, below the bench and the analysis.
"""
