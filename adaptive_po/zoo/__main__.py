import sys

from adaptive_po.zoo.cli import main

if __name__ == "__main__":
    sys.exit(main())
