"""The directed-attention study's verdicts, by the rule its README declares, from the charlm harness's cells.

    python experiments/directed-attention/verdicts.py     # results/verdicts.json and verdicts.md

For each setting (objective x width) and new type T, paired over the seeds that `standard`, `shared` and T all have
(at least three, else "left open"): per seed e = (loss(T) - loss(standard)) - 1/2 (loss(shared) - loss(standard)),
the excess over half of shared's gap; with mean(e) and SE(e) = sd(e) / sqrt(n),

    "closes at least half" if mean(e) + 2 SE(e) < 0;  "closes less than half" if mean(e) - 2 SE(e) > 0;
    "left open" otherwise, and wherever `shared` does not trail `standard` by the charlm rule (no gap to close).

Beside each verdict: T's paired differences to `standard` and to `shared`, the share of shared's gap T closes, and
the parameters. Cells of one comparison must share precision and CPU; a setting whose cells differ is not judged.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHARLM = HERE.parent / "charlm"
TYPES = ("shared-lowrank-query", "shared-head-query", "shared-kv")  # the harness's arm names of the new types
# The declared settings, and the charlm study's second MLM recipe (three times the iterations, declared later).
SETTINGS = ("clm-cpu", "mlm-cpu", "clm-cpu-w256-h8", "mlm-cpu-w256-h8", "mlm-cpu-i6000")
MIN_SEEDS = 3


def _charlm_report():
    spec = importlib.util.spec_from_file_location("_directed_charlm_report", CHARLM / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The charlm study's aggregation and its rule (mean and standard error, on par / trails / ahead), loaded once.
report = _charlm_report()


def judge(cells: list[dict]) -> dict:
    """{setting: {"shared_gap": {...}, "types": {arm: row}}} for every declared setting with cells."""
    by_setting: dict[str, dict[str, dict[int, dict]]] = {}
    for cell in cells:
        if cell["setting"] in SETTINGS:
            by_setting.setdefault(cell["setting"], {}).setdefault(cell["arm"], {})[cell["seed"]] = cell
    verdicts = {}
    for setting in SETTINGS:
        arms = by_setting.get(setting, {})
        if "standard" not in arms or "shared" not in arms:
            continue
        loss = {arm: {seed: cell["final_validation_loss"] for seed, cell in seeds.items()} for arm, seeds in arms.items()}
        gap_seeds = sorted(set(loss["standard"]) & set(loss["shared"]))
        gap_mean, gap_error = report.mean_and_standard_error([loss["shared"][s] - loss["standard"][s] for s in gap_seeds])
        shared_gap = {"seeds": gap_seeds, "mean": gap_mean, "standard_error": gap_error,
                      "verdict": report.verdict(gap_mean, gap_error)}
        rows = {}
        for arm in TYPES:
            if arm not in loss:
                continue
            seeds = sorted(set(gap_seeds) & set(loss[arm]))
            if not seeds:
                continue
            hardware = {(arms[a][s]["precision"], arms[a][s].get("cpu")) for a in ("standard", "shared", arm) for s in seeds}
            to_standard = [loss[arm][s] - loss["standard"][s] for s in seeds]
            to_shared = [loss[arm][s] - loss["shared"][s] for s in seeds]
            excess = [d - 0.5 * (loss["shared"][s] - loss["standard"][s]) for d, s in zip(to_standard, seeds)]
            e_mean, e_error = report.mean_and_standard_error(excess)
            if len(hardware) > 1:
                verdict = "not judged: cells differ in precision or CPU"
            elif len(seeds) < MIN_SEEDS or shared_gap["verdict"] != "trails" or e_error is None:
                verdict = "left open"
            elif e_mean + 2 * e_error < 0:
                verdict = "closes at least half"
            elif e_mean - 2 * e_error > 0:
                verdict = "closes less than half"
            else:
                verdict = "left open"
            shared_gap_on_seeds = statistics.fmean(loss["shared"][s] - loss["standard"][s] for s in seeds)
            rows[arm] = {
                "seeds": seeds, "losses": [loss[arm][s] for s in seeds],
                "mean": statistics.fmean(loss[arm][s] for s in seeds),
                "parameters": sorted({arms[arm][s]["parameters"] for s in seeds}),
                "to_standard": dict(zip(("mean", "standard_error"), report.mean_and_standard_error(to_standard))),
                "to_shared": dict(zip(("mean", "standard_error"), report.mean_and_standard_error(to_shared))),
                "excess": {"mean": e_mean, "standard_error": e_error},
                # A share of shared's gap only where there is one: where shared does not trail, "closed" means nothing.
                "share_closed": (-statistics.fmean(to_shared) / shared_gap_on_seeds
                                 if shared_gap["verdict"] == "trails" and shared_gap_on_seeds else None),
                "precision": sorted({p for p, _ in hardware}), "verdict": verdict,
            }
        verdicts[setting] = {"shared_gap": shared_gap, "types": rows}
    return verdicts


def _pm(value: dict, digits: int = 3) -> str:
    error = value["standard_error"]
    return f"{value['mean']:+.{digits}f}" + (f" ± {error:.{digits}f}" if error is not None else "")


def markdown(verdicts: dict) -> str:
    lines = ["# Directed attention: verdicts", "",
             "Written by `python experiments/directed-attention/verdicts.py` from the charlm cells, by the rule "
             "declared in README.md. e: the excess over half of shared's gap (negative: more than half closed).", ""]
    for setting, judged in verdicts.items():
        gap = judged["shared_gap"]
        lines += [f"## {setting}", "",
                  f"`shared` to `standard`: {_pm(gap)} over seeds {', '.join(map(str, gap['seeds']))} "
                  f"({gap['verdict']}).", "",
                  "| type | seeds | mean loss | parameters | to `standard` | to `shared` | e | share closed | verdict |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for arm, row in judged["types"].items():
            share = f"{100 * row['share_closed']:.0f}%" if row["share_closed"] is not None else ""
            lines.append(f"| `{arm}` | {', '.join(map(str, row['seeds']))} | {row['mean']:.3f} "
                         f"| {' / '.join(f'{p:,}' for p in row['parameters'])} | {_pm(row['to_standard'])} "
                         f"| {_pm(row['to_shared'])} | {_pm(row['excess'])} | {share} | {row['verdict']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=Path, default=CHARLM / "results" / "cells")
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    from sharedbert.atomic import atomic_write_text

    verdicts = judge(report.load_cells(args.cells))
    atomic_write_text(args.output_dir / "verdicts.json", json.dumps(verdicts, indent=1) + "\n")
    text = markdown(verdicts)
    atomic_write_text(args.output_dir / "verdicts.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
