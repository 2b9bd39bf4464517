"""Re-issue a published suite report's verdicts from its committed per-run table alone.

``python -m adaptive_po.analysis.reports.reissue docs/results/quick --readme docs/results/README.md``
(``make quick-from-table``) rewrites the verdicts section of ``report.md`` and ``results.md`` in the
folder, and of the README block that copies ``results.md``, from ``per_run.csv``; everything else
in them (the pooled tables, the figures) was drawn from the run folders and stays as it is.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ...contract import report_folder
from ..verdicts import reissue


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.reissue", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the published report folder (docs/results/quick)")
    parser.add_argument("--readme", default=None, help="also the README block that copies its results.md")
    parser.add_argument("--baseline", default="ppo")
    args = parser.parse_args(argv)
    reissue(report_folder(args.folder), Path(args.readme) if args.readme else None, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
