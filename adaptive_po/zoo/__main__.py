import sys

from adaptive_po.zoo.cli import main

sys.exit(main())
