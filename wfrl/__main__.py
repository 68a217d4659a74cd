import sys

from wfrl.cli import main

sys.exit(main())
