import sys

from adaptive_po.harness.cli import main

sys.exit(main())
