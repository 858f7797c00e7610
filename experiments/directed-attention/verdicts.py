"""The directed-attention study's verdicts, by the rule its README declares, from the charlm harness's cells.

    python experiments/directed-attention/verdicts.py     # results/verdicts.json and verdicts.md

For each setting (objective x width) and new type T, paired over the seeds that `standard`, `shared` and T all have
(at least three, else "left open"): per seed e = (loss(T) - loss(standard)) - 1/2 (loss(shared) - loss(standard)),
the excess over half of shared's gap, judged by `sharedbert.verdicts.gap_closure` on its 95% Student-t interval
(df = n - 1):

    "closes at least half" if the interval lies below 0;  "closes less than half" if it lies above 0;
    "left open" otherwise, and wherever `shared` does not trail `standard` by the charlm rule (no gap to close).

Beside each verdict: T's paired comparisons to `standard` (the charlm rule, margin 0.02 nats) and to `shared`, each
with its per-seed differences, interval and verdict, the share of shared's gap T closes, the parameters, and the
verdict of the study's first rule (mean ± 2 SE, "verdict_2se"); verdicts.md lists those the interval changed. Cells
of one comparison must share precision and CPU; a setting whose cells differ is not judged.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from sharedbert.verdicts import Comparison, gap_closure, paired_comparison

HERE = Path(__file__).resolve().parent
# The charlm study's committed cell files (its harness wrote them): read as results, its code is not imported.
CHARLM_CELLS = HERE.parent / "charlm" / "results" / "cells"
MARGIN = 0.02  # nats: the charlm study's rule and margin (a test checks the two agree)
TYPES = ("shared-lowrank-query", "shared-head-query", "shared-kv")  # the harness's arm names of the new types
# The declared settings, and the charlm study's second MLM recipe (three times the iterations, declared later).
SETTINGS = ("clm-cpu", "mlm-cpu", "clm-cpu-w256-h8", "mlm-cpu-w256-h8", "mlm-cpu-i6000")
MIN_SEEDS = 3


def load_cells(cells_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(Path(cells_dir).glob("*.json"))]


def compare(losses: dict, baseline: dict) -> Comparison:
    """loss(arm) - loss(baseline) paired by seed, judged by the charlm rule (lower loss is better)."""
    return paired_comparison(losses, baseline, margin=MARGIN, higher_is_better=False)


def recorded(comparison: Comparison) -> dict:
    """A comparison as the results files keep it: every field, and the first rule's verdict (mean ± 2 SE) beside."""
    return {**comparison.as_dict(), "verdict_2se": comparison.verdict_at(2)}


def _old_rule(closure, n: int) -> str:
    """The study's first rule, mean ± 2 SE, for listing what the t interval changed."""
    if n < MIN_SEEDS or closure.gap.verdict_at(2) != "trails":
        return "left open"
    return {"ahead": "closes at least half", "trails": "closes less than half"}.get(closure.excess.verdict_at(2),
                                                                                    "left open")


def type_row(loss: dict, arms: dict, arm: str, seeds: list) -> dict:
    """One new type's row at one setting: its comparisons, the gap closure and both rules' verdicts."""
    on = {name: {s: loss[name][s] for s in seeds} for name in ("standard", "shared", arm)}
    closure = gap_closure(on[arm], on["shared"], on["standard"], share=0.5, margin=MARGIN,
                          higher_is_better=False, min_n=MIN_SEEDS)
    hardware = {(arms[a][s]["precision"], arms[a][s].get("cpu")) for a in ("standard", "shared", arm) for s in seeds}
    verdict = "not judged: cells differ in precision or CPU" if len(hardware) > 1 else closure.verdict
    return {
        "seeds": seeds, "losses": [loss[arm][s] for s in seeds], "mean": statistics.fmean(on[arm].values()),
        "parameters": sorted({arms[arm][s]["parameters"] for s in seeds}),
        "to_standard": recorded(compare(on[arm], on["standard"])),
        "to_shared": recorded(compare(on[arm], on["shared"])),
        "excess": recorded(closure.excess),
        "gap_on_these_seeds": recorded(closure.gap),
        # A share of shared's gap only where there is one: where shared does not trail, "closed" means nothing.
        "share_closed": closure.share_closed,
        "precision": sorted({p for p, _ in hardware}), "verdict": verdict,
        "verdict_2se": verdict if len(hardware) > 1 else _old_rule(closure, len(seeds)),
    }


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
        shared_gap = recorded(compare(loss["shared"], loss["standard"]))
        rows = {}
        for arm in TYPES:
            seeds = sorted(set(shared_gap["seeds"]) & set(loss.get(arm, {})))
            if seeds:
                rows[arm] = type_row(loss, arms, arm, seeds)
        verdicts[setting] = {"shared_gap": shared_gap, "types": rows}
    return verdicts


def flips(verdicts: dict) -> list[dict]:
    """Every verdict the t interval changed from the first rule (mean ± 2 SE): the gap's, then each type's."""
    changed = [{"setting": setting, "arm": "shared (its gap to standard)", "was": judged["shared_gap"]["verdict_2se"],
                "now": judged["shared_gap"]["verdict"]}
               for setting, judged in verdicts.items()
               if judged["shared_gap"]["verdict"] != judged["shared_gap"]["verdict_2se"]]
    return changed + [{"setting": setting, "arm": arm, "was": row["verdict_2se"], "now": row["verdict"]}
                      for setting, judged in verdicts.items() for arm, row in judged["types"].items()
                      if row["verdict"] != row["verdict_2se"]]


def _pm(value: dict, digits: int = 3) -> str:
    error = value["standard_error"]
    return f"{value['mean']:+.{digits}f}" + (f" ± {error:.{digits}f}" if error is not None else "")


def _interval(value: dict) -> str:
    return f"[{value['interval'][0]:+.3f}, {value['interval'][1]:+.3f}]" if value.get("interval") else "–"


def _was(row: dict) -> str:
    return "" if row["verdict"] == row["verdict_2se"] else f" (was: {row['verdict_2se']} with 2 SE)"


def markdown(verdicts: dict) -> str:
    lines = ["# Directed attention: verdicts", "",
             "Written by `python experiments/directed-attention/verdicts.py` from the charlm cells, by the rule "
             "declared in README.md on 95% Student-t intervals (`sharedbert.verdicts`). e: the excess over half of "
             "shared's gap (negative: more than half closed); to `standard`: the charlm rule's verdict (margin "
             f"{MARGIN} nats). Where the first rule (mean ± 2 SE) said otherwise, it is given as \"was\".", ""]
    for setting, judged in verdicts.items():
        gap = judged["shared_gap"]
        lines += [f"## {setting}", "",
                  f"`shared` to `standard`: {_pm(gap)} over seeds {', '.join(map(str, gap['seeds']))}, 95% interval "
                  f"{_interval(gap)} ({gap['verdict']}{_was(gap)}).", "",
                  "| type | seeds | mean loss | parameters | to `standard` | to `shared` | e | 95% interval of e "
                  "| share closed | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
        for arm, row in judged["types"].items():
            share = f"{100 * row['share_closed']:.0f}%" if row["share_closed"] is not None else ""
            lines.append(f"| `{arm}` | {', '.join(map(str, row['seeds']))} | {row['mean']:.3f} "
                         f"| {' / '.join(f'{p:,}' for p in row['parameters'])} "
                         f"| {_pm(row['to_standard'])} ({row['to_standard']['verdict']}) "
                         f"| {_pm(row['to_shared'])} | {_pm(row['excess'])} | {_interval(row['excess'])} | {share} "
                         f"| {row['verdict']}{_was(row)} |")
        lines.append("")
    changed = flips(verdicts)
    lines += ["## Verdicts the 95% t interval changed (was: mean ± 2 SE)", ""]
    lines += [f"- {c['setting']}, `{c['arm']}`: {c['was']} -> {c['now']}" for c in changed] or ["None."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=Path, default=CHARLM_CELLS)
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    from sharedbert.atomic import atomic_write_text

    verdicts = judge(load_cells(args.cells))
    atomic_write_text(args.output_dir / "verdicts.json",
                      json.dumps({**verdicts, "flips": flips(verdicts)}, indent=1) + "\n")
    text = markdown(verdicts)
    atomic_write_text(args.output_dir / "verdicts.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
