"""The frontier's follow-up study (query-rank/README.md is its report): multi-query attention with a rank-r query,
stored once for every layer. Its cells are the char-level harness's, run by the frontier's grid into
query-rank/results/cells; its report is the frontier's with this study's arms, seeds and folder.

    python experiments/frontier/query_rank.py grid               # the width-128 grid, seed by seed, resumable
    python experiments/frontier/query_rank.py grid --width 256 --arms ...   # the arms the declared rule picks
    python experiments/frontier/query_rank.py describe           # query-rank/results/arms.json
    python experiments/frontier/query_rank.py report             # query-rank/results/summary.{json,md}, the plot

Two copies of `grid` may run at once (one per core): the harness claims each cell with a lock.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the frontier's grid and report, beside this file, which this study reuses

import frontier  # noqa: E402
import report  # noqa: E402

RESULTS = HERE / "query-rank" / "results"
# standard and mqa-att1 again at this study's commit (its comparisons never pair cells of two commits); then the
# new arms (the harness's QUERY_RANK_ARMS), in the order the grid runs them within a seed.
ARMS = ("standard", "mqa-att1", "mqa-query-quarter", "mqa-query-quarter-att1", "mqa-query-eighth-att1",
        "mqa-query-quarter-att1-ffn")
PLAN = report.Plan(arms=ARMS, seeds=frontier.SEEDS, results=RESULTS, equal_parameters=("mqa-query-quarter-att1-ffn",),
                   earlier_cells=HERE / "results" / "cells")


def run(plan: report.Plan, title: str, argv: list[str]) -> int:
    """The frontier's grid, describe and report for a follow-up study's plan: its arms, its folder."""
    if argv[:1] == ["report"]:
        return report.main(plan, title=title, plot_name="frontier.png")
    if argv[:1] == ["grid"] and "--arms" not in argv:
        argv += ["--arms", *plan.arms]
    if argv[:1] == ["grid"] and "--results-dir" not in argv:
        argv += ["--results-dir", str(plan.results / "cells")]
    if argv[:1] == ["describe"]:
        argv = ["describe", "--arms", *plan.arms, "--out", str(plan.arms_file), *argv[1:]]
    if argv[:1] in (["grid"], ["describe"]) and "--layers" not in argv:
        argv += ["--layers", str(plan.layers)]
    return frontier.main(argv)


def main(argv=None) -> int:
    return run(PLAN, "Multi-query attention with a rank-r query", list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
