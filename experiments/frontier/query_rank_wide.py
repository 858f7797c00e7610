"""The frontier's second follow-up (query-rank-wide/README.md is its report): the rank-r query of the first
follow-up, stored once for every layer, with the parameters it saves spent on the model's width. Its cells are the
char-level harness's, run by the frontier's grid into query-rank-wide/results/cells; its report is the frontier's
with this study's arms, seeds and folder.

    python experiments/frontier/query_rank_wide.py grid               # the width-128 grid, seed by seed, resumable
    python experiments/frontier/query_rank_wide.py grid --width 256 --arms ...   # the arms the declared rule picks
    python experiments/frontier/query_rank_wide.py describe           # query-rank-wide/results/arms.json
    python experiments/frontier/query_rank_wide.py report             # query-rank-wide/results/summary.{json,md}

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

RESULTS = HERE / "query-rank-wide" / "results"
# standard and the first follow-up's eighth-rank arm again at this study's commit (no comparison pairs cells of two
# commits), then the new arm (the harness's QUERY_RANK_WIDE_ARMS).
ARMS = ("standard", "mqa-query-eighth-att1", "mqa-query-eighth-att1-wide")
PLAN = report.Plan(arms=ARMS, seeds=frontier.SEEDS, results=RESULTS, equal_parameters=("mqa-query-eighth-att1-wide",),
                   earlier_cells=HERE / "query-rank" / "results" / "cells")


def main(argv=None) -> int:
    return query_rank.run(PLAN, "A rank-r query stored once, its savings spent on width",
                          list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
