"""SharedBert against transformers' BertModel: the same as `python -m sharedbert.bench` / `sharedbert bench`
(options and method in sharedbert/bench.py). Run from the repository root: `python benchmarks/bench.py --help`."""

import sys

from sharedbert.bench import main

if __name__ == "__main__":
    sys.exit(main())
