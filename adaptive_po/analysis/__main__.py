"""``python -m adaptive_po.analysis <suite_root> [--out DIR]``: the suite report
(:mod:`adaptive_po.analysis.reports.suite`): figures, tables and report.md."""

import sys

from .reports.suite import main

if __name__ == "__main__":
    sys.exit(main())
