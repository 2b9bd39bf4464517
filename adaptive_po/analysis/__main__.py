"""``python -m adaptive_po.analysis <suite_root> [--out DIR]``: write figures, tables and report.md."""

import sys

from .report import main

if __name__ == "__main__":
    sys.exit(main())
