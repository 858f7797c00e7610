"""The frontier's third follow-up (query-norm/README.md is its report): the rank-r query of the first follow-up with
its code RMS-normalised before the up-projection (`query_latent_norm`, as multi-head latent attention has it), stored
once for every layer. Its cells are the char-level harness's, run by the frontier's grid into query-norm/results/cells;
its report is the frontier's with this study's arms, seeds and folder.

    python experiments/frontier/query_norm.py grid               # the width-128 grid, seed by seed, resumable
    python experiments/frontier/query_norm.py grid --width 256 --arms ...   # the arms the declared rule picks
    python experiments/frontier/query_norm.py describe           # query-norm/results/arms.json
    python experiments/frontier/query_norm.py report             # query-norm/results/summary.{json,md}, the plot
    python experiments/frontier/query_norm.py plateau [FOLDER]   # per MLM setting: when each cell leaves the plateau,
                                                                 # and how fast it still falls at the end

Two copies of `grid` may run at once (one per core): the harness claims each cell with a lock.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the frontier's grid and report, and the first follow-up's runner, beside this file

import frontier  # noqa: E402
import query_rank  # noqa: E402
import report  # noqa: E402

RESULTS = HERE / "query-norm" / "results"
# standard and the first follow-up's quarter-rank arm (the same attention without the norm) again at this study's
# commit, so that no comparison pairs cells of two commits; then the new arms (the harness's QUERY_NORM_ARMS).
ARMS = ("standard", "mqa-query-quarter-att1", "mqa-query-quarter-norm-att1", "mqa-query-eighth-norm-att1")
PLAN = report.Plan(arms=ARMS, seeds=frontier.SEEDS, results=RESULTS,
                   earlier_cells=HERE / "query-rank" / "results" / "cells")
# MLM's validation loss sits near the context-free null (about 3.09 nats on these masks) until attention starts to
# use the context; a cell has left that plateau at the first evaluation (every 250 iterations) below this.
PLATEAU_EXIT_LOSS = 2.9


def mlm_settings(folder: Path) -> dict:
    """{setting: {arm: {seed: cell}}} for the MLM settings of the cells in `folder` (report.load_cells)."""
    return {setting: arms for setting, arms in report.load_cells(Path(folder)).items() if setting.startswith("mlm-")}


def mlm_cells(folder: Path, setting: str | None = None) -> list[dict]:
    """The MLM cells in `folder` of one setting (e.g. "mlm-cpu-i6000"). Without a setting the folder must hold only
    one: a width-256 cell read among width 128's would stand in for a seed of the same arm."""
    settings = mlm_settings(folder)
    if setting is None and len(settings) > 1:
        raise ValueError(f"{folder} holds MLM cells of several settings ({', '.join(sorted(settings))}): name one")
    chosen = settings.get(setting, {}) if setting is not None else next(iter(settings.values()), {})
    return [cell for seeds in chosen.values() for cell in seeds.values()]


def plateau_exits(folder: Path, setting: str | None = None) -> dict:
    """{arm: {"seeds": {seed: iteration or None}, "mean": mean over the seeds that left}} for every MLM cell of
    `setting` in `folder`: the first evaluated iteration whose validation loss is below PLATEAU_EXIT_LOSS (None:
    never)."""
    exits: dict = {}
    for cell in mlm_cells(folder, setting):
        first = next((point["iteration"] for point in cell["curve"] if point["loss"] < PLATEAU_EXIT_LOSS), None)
        exits.setdefault(cell["arm"], {"seeds": {}})["seeds"][cell["seed"]] = first
    for entry in exits.values():
        left = [iteration for iteration in entry["seeds"].values() if iteration is not None]
        entry["mean"] = statistics.fmean(left) if left else None
    return exits


def end_falls(folder: Path, span: int = 1000, setting: str | None = None) -> dict:
    """{arm: {"seeds": {seed: fall}, "mean": ...}} for every MLM cell of `setting` in `folder`: how far the validation
    loss falls over the last `span` iterations of its curve. An arm that started late still falls fast at the end."""
    falls: dict = {}
    for cell in mlm_cells(folder, setting):
        curve = {point["iteration"]: point["loss"] for point in cell["curve"]}
        end = max(curve)
        falls.setdefault(cell["arm"], {"seeds": {}})["seeds"][cell["seed"]] = curve[end - span] - curve[end]
    for entry in falls.values():
        entry["mean"] = statistics.fmean(entry["seeds"].values())
    return falls


def plateau_table(exits: dict) -> str:
    lines = [f"| arm | seeds: first iteration below {PLATEAU_EXIT_LOSS} nats | mean |", "|---|---|---|"]
    for arm, entry in exits.items():
        seeds = ", ".join(f"{seed}: {'never' if it is None else f'{it:,}'}"
                          for seed, it in sorted(entry["seeds"].items()))
        mean = "—" if entry["mean"] is None else f"{entry['mean']:,.0f}"
        lines.append(f"| `{arm}` | {seeds} | {mean} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plateau"]:
        folder = Path(argv[1]) if len(argv) > 1 else RESULTS / "cells"
        for setting in sorted(mlm_settings(folder)):
            print(f"### {setting}\n\n{plateau_table(plateau_exits(folder, setting))}")
            print("\n| arm | mean fall of the loss over the last 1,000 iterations |\n|---|---|")
            for arm, entry in end_falls(folder, setting=setting).items():
                print(f"| `{arm}` | {entry['mean']:.3f} |")
            print()
        return 0
    return query_rank.run(PLAN, "The rank-r query with its code normalised", argv)


if __name__ == "__main__":
    sys.exit(main())
