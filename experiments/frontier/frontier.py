"""The frontier study's plan and its grid (README.md is the report). The cells are the char-level harness's
(experiments/charlm/study.py, run as a program, not imported), written to this study's results/cells.

    python experiments/frontier/frontier.py grid                     # the width-128 grid, seed by seed, resumable
    python experiments/frontier/frontier.py grid --seeds 1 --objectives clm --dry-run   # print the commands only
    python experiments/frontier/frontier.py grid --width 256 --arms ...   # the width-256 arms the declared rule picks
    python experiments/frontier/frontier.py describe                 # results/arms.json: budgets, parameters, FLOPs

Two copies may run at once (one per core): the harness claims each cell with a lock, so each takes the next free one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HARNESS = REPO / "experiments" / "charlm" / "study.py"
RESULTS_DIR = HERE / "results" / "cells"
ARMS_FILE = HERE / "results" / "arms.json"

# Every arm at width 128, in the order the grid runs them within a seed (the harness's ARMS defines each).
ARMS = (
    "standard", "shared", "shared-kv", "shared-head-query", "shared-lowrank-query",
    "gqa-2", "mqa", "standard-att2", "standard-att1", "shared-kv-att2",
    "shared-att1", "shared-lowrank-query-att1", "shared-head-query-att1", "mqa-att1",
    "standard-narrow", "standard-att1-ffn", "shared-lowrank-query-att1-ffn", "standard-att1-wide",
    "standard-att2-cycle", "standard-att2-cycle-rev",
)
# Each objective's harness options: causal LM at the CPU recipe, MLM at three times its iterations (mlm-cpu-i6000).
OBJECTIVES = {"clm": [], "mlm": ["--iters", "6000"]}
SEEDS = (1, 2, 3, 4, 5)
# Width 256 keeps the head size (32): 8 heads.
WIDE = {256: ["--width", "256", "--heads", "8"]}
LAYERS = 4  # the CPU recipe's depth; a follow-up at another depth passes --layers, and its settings say so ("-l8")


def depth(layers: int) -> list[str]:
    return [] if layers == LAYERS else ["--layers", str(layers)]


def harness_commands(arms, seeds, objectives, width: int, results_dir: Path, threads: int,
                     layers: int = LAYERS) -> list[list[str]]:
    """One harness call per (seed, objective), seed-major: every arm gets each seed before any arm gets the next."""
    commands = []
    for seed in seeds:
        for objective in objectives:
            commands.append([sys.executable, str(HARNESS), "--grid", "--objective", objective, *OBJECTIVES[objective],
                             *WIDE.get(width, []), *depth(layers), "--arms", *arms, "--seeds", str(seed),
                             "--threads", str(threads), "--results-dir", str(results_dir)])
    return commands


def setting_name(objective: str, width: int, layers: int = LAYERS) -> str:
    """The harness's name of a setting (its `Cell.setting`): objective, recipe, then the overrides in its order."""
    return (f"{objective}-cpu" + ("-w256-h8" if width == 256 else "") + (f"-l{layers}" if layers != LAYERS else "")
            + ("-i6000" if objective == "mlm" else ""))


def describe_arms(arms, widths=(128, 256), layers: int = LAYERS) -> dict:
    """{setting: {arm: the harness's --describe}} for every objective and width: what each arm stores and costs."""
    described = {}
    for width in widths:
        for objective in OBJECTIVES:
            command = [sys.executable, str(HARNESS), "--describe", "--objective", objective, *OBJECTIVES[objective],
                       *WIDE.get(width, []), *depth(layers), "--arms", *arms]
            output = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            assert output["setting"] == setting_name(objective, width, layers), output["setting"]
            described[output["setting"]] = output["arms"]
    return described


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    grid = commands.add_parser("grid", help="run the missing cells (finished ones are skipped)")
    grid.add_argument("--arms", nargs="+", default=list(ARMS))
    grid.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    grid.add_argument("--objectives", nargs="+", choices=list(OBJECTIVES), default=list(OBJECTIVES))
    grid.add_argument("--width", type=int, choices=(128, *WIDE), default=128)
    grid.add_argument("--layers", type=int, default=LAYERS, help="the model's depth (default: the CPU recipe's)")
    grid.add_argument("--threads", type=int, default=1)
    grid.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    grid.add_argument("--dry-run", action="store_true", help="print the harness commands, run nothing")
    describe = commands.add_parser("describe", help=f"write {ARMS_FILE.relative_to(REPO)}: every arm's parameters, "
                                   "stored attention projections and training FLOPs per token, at both widths")
    describe.add_argument("--arms", nargs="+", default=list(ARMS))
    describe.add_argument("--out", type=Path, default=ARMS_FILE, help="the JSON file to write (a follow-up's own)")
    describe.add_argument("--layers", type=int, default=LAYERS, help="the model's depth (default: the CPU recipe's)")
    args = parser.parse_args(argv)
    if args.command == "describe":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(describe_arms(args.arms, layers=args.layers), indent=1) + "\n")
        print(f"wrote {args.out}")
        return 0
    for command in harness_commands(args.arms, args.seeds, args.objectives, args.width, args.results_dir,
                                    args.threads, args.layers):
        print(" ".join(command), flush=True)
        if not args.dry_run:
            subprocess.run(command, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
