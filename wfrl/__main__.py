import sys

from wfrl.cli import main

# Guarded: spawned collector workers re-import the main module under another name.
if __name__ == "__main__":
    sys.exit(main())
