"""Small-scale replication of the paper's comparison (standard / shared / symmetric / pairwise attention, and
cross-layer sharing modes): MLM pretraining, GLUE fine-tuning, typo robustness; resumable cell by cell.

Usage (from the repository root):

    python benchmarks/replicate.py --quick                 # minutes; tiny sizes (CI)
    python benchmarks/replicate.py                         # the full study (hours); re-run to resume
    python benchmarks/replicate.py --report-only           # rewrite replication.md / .png from the JSON

Same as `sharedbert replicate`; the implementation is sharedbert/replicate.py.
"""

import sys

from sharedbert.replicate import main

if __name__ == "__main__":
    sys.exit(main())
