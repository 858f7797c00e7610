"""The frontier's fourth follow-up (depth/README.md is its report): the frontier's recipe at eight layers, where one
stored multi-query attention layer is under a tenth of standard's projections. Its cells are the char-level
harness's at `--layers 8`, run by the frontier's grid into depth/results/cells; its report is the frontier's with
this study's arms, seeds, folder and depth.

    python experiments/frontier/depth.py grid               # the width-128 grid, seed by seed, resumable
    python experiments/frontier/depth.py grid --width 256 --arms ...   # the arms the declared rule picks
    python experiments/frontier/depth.py describe           # depth/results/arms.json
    python experiments/frontier/depth.py report             # depth/results/summary.{json,md}, the plot

Two copies of `grid` may run at once (one per core): the harness claims each cell with a lock.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the frontier's grid and report, and the first follow-up's runner, beside this file

import frontier  # noqa: E402
import query_rank  # noqa: E402
import report  # noqa: E402

RESULTS = HERE / "depth" / "results"
LAYERS = 8
# All four at eight layers, so no cell of an earlier study shares a name with these (the drift check finds none):
# standard, plain attention stored once, one key/value head stored once, and the last with its savings spent on
# width (the harness's DEPTH_ARMS), in the order the grid runs them within a seed.
ARMS = ("standard", "standard-att1", "mqa-att1", "mqa-att1-wide")
PLAN = report.Plan(arms=ARMS, seeds=frontier.SEEDS, results=RESULTS, equal_parameters=("mqa-att1-wide",),
                   earlier_cells=HERE / "results" / "cells", layers=LAYERS)


def main(argv=None) -> int:
    return query_rank.run(PLAN, "Eight layers, one stored attention layer", list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
