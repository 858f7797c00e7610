"""`python -m sharedbert.cli` (what launchers such as `accelerate launch -m` run)."""

import sys

from . import main

sys.exit(main())
