import sys

from adaptive_po.cli import main

sys.exit(main())
