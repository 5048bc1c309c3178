import sys

from suite.cli import main

# Guarded: worker processes are spawned, and spawn re-imports the main module.
if __name__ == "__main__":
    sys.exit(main())
