#!/usr/bin/env python
"""Publish a trained SharedBert on the Hugging Face Hub: the `sharedbert upload` command, kept at the top of the
repository where users expect it.

    python upload.py MODEL_DIR --repo-id owner/name [--private] [--revision BRANCH] [--commit-message MSG]
    python upload.py MODEL_DIR --repo-id owner/name --dry-run OUT_DIR

See `python upload.py --help`. The options are sharedbert/cli/upload.py's, the work is sharedbert.hub's.
"""

import sys

from sharedbert.cli.upload import main

if __name__ == "__main__":
    sys.exit(main())
