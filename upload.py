#!/usr/bin/env python
"""Publish a trained SharedBert on the Hugging Face Hub: the `sharedbert upload` command, kept at the top of the
repository where users expect it.

    python upload.py MODEL_DIR --repo-id owner/name [--private] [--revision BRANCH] [--commit-message MSG]
    python upload.py MODEL_DIR --repo-id owner/name --dry-run OUT_DIR

See `python upload.py --help`. The options are sharedbert/cli/upload.py's, the work is sharedbert.hub's.
"""

import sys

try:
    from sharedbert.cli.upload import main
except ModuleNotFoundError as error:
    # Transitional (issue 13): until sharedbert/cli/ is a package, load its upload.py from the package folder.
    # Delete this branch when the cli package is merged.
    if error.name != "sharedbert.cli.upload":
        raise
    import importlib.util
    from pathlib import Path

    import sharedbert

    _spec = importlib.util.spec_from_file_location(
        "sharedbert.cli.upload", Path(sharedbert.__file__).parent / "cli" / "upload.py"
    )
    _command = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _command
    _spec.loader.exec_module(_command)
    main = _command.main

if __name__ == "__main__":
    sys.exit(main())
