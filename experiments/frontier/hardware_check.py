"""The frontier's hardware check (README.md, "Hardware check"): the width-128 causal-LM cells of seed 1 run again at
the study's commit on a machine without native bf16, where `precision="auto"` takes fp32, and compared cell by cell
with the study's own (bf16, on a machine with native bf16).

    python experiments/frontier/frontier.py grid --seeds 1 --objectives clm \
        --results-dir experiments/frontier/results/hardware-check/cells     # from a worktree at the study's commit
    python experiments/frontier/hardware_check.py                          # results/hardware-check/summary.{json,md}

Nothing here is pooled with the study's cells or changes a verdict: it measures how far a cell, and an arm's
difference to `standard`, moves with the precision and the machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the frontier's plan, beside this file: its arms' order

import frontier  # noqa: E402

STUDY_CELLS = HERE / "results" / "cells"
CHECK = HERE / "results" / "hardware-check"
SETTINGS, SEED, REFERENCE = ("clm-cpu", "mlm-cpu-i6000"), 1, "standard"


def load(folder: Path, setting: str) -> dict[str, dict]:
    """{arm: cell} of the setting's seed-1 cells in `folder`."""
    cells = {}
    for path in sorted(folder.glob(f"{setting.split('-')[0]}-*-seed{SEED}.json")):
        cell = json.loads(path.read_text())
        if cell["setting"] == setting and cell["seed"] == SEED:
            cells[cell["arm"]] = cell
    return cells


def summarise(study: dict[str, dict], check: dict[str, dict], setting: str = "clm-cpu") -> dict:
    """Per arm run in both: each run's loss, precision, CPU and commit; the loss's change (check − study); and the
    change in the arm's seed-1 difference to `standard` (what the study's paired comparisons read)."""
    if REFERENCE not in study or REFERENCE not in check:
        raise SystemExit(f"`{REFERENCE}` must be in both sets of cells: its loss is what each arm is compared with.")
    commits = {cell["git_commit"] for cell in check.values()}
    if commits - {study[REFERENCE]["git_commit"]}:
        raise SystemExit(f"the check's cells must run at the study's commit {study[REFERENCE]['git_commit']}; "
                         f"they record {sorted(commits)}.")

    def loss(cells, arm):
        return cells[arm]["final_validation_loss"]

    rows = {}
    for arm in [a for a in frontier.ARMS if a in study and a in check]:
        rows[arm] = {
            "study": {"loss": loss(study, arm), "precision": study[arm]["precision"], "cpu": study[arm]["cpu"]},
            "check": {"loss": loss(check, arm), "precision": check[arm]["precision"], "cpu": check[arm]["cpu"]},
            "loss_change": loss(check, arm) - loss(study, arm),
            "difference_to_standard": {"study": loss(study, arm) - loss(study, REFERENCE),
                                       "check": loss(check, arm) - loss(check, REFERENCE)},
        }
        rows[arm]["difference_change"] = (rows[arm]["difference_to_standard"]["check"]
                                          - rows[arm]["difference_to_standard"]["study"])
    changes = [abs(r["loss_change"]) for r in rows.values()]
    differences = [abs(r["difference_change"]) for a, r in rows.items() if a != REFERENCE]
    return {"setting": setting, "seed": SEED, "commit": study[REFERENCE]["git_commit"], "arms": rows,
            "arms_compared": len(rows), "max_abs_loss_change": max(changes, default=None),
            "mean_loss_change": sum(r["loss_change"] for r in rows.values()) / len(rows) if rows else None,
            "max_abs_difference_change": max(differences, default=None)}


def markdown(summary: dict) -> str:
    lines = [f"## {summary['setting']}", "", f"Width 128, seed 1, commit {summary['commit'][:7]}: the study's cell "
             "and the same cell on the check's machine.", "",
             "| arm | study: loss (precision) | check: loss (precision) | change | − standard, study | − standard, check "
             "| change |", "|---|---|---|---|---|---|---|"]
    for arm, row in summary["arms"].items():
        d = row["difference_to_standard"]
        lines.append(f"| `{arm}` | {row['study']['loss']:.4f} ({row['study']['precision']}) | "
                     f"{row['check']['loss']:.4f} ({row['check']['precision']}) | {row['loss_change']:+.4f} | "
                     f"{d['study']:+.4f} | {d['check']:+.4f} | {row['difference_change']:+.4f} |")
    lines += ["", f"{summary['arms_compared']} arms; largest |loss change| {summary['max_abs_loss_change']:.4f} nats, "
              f"mean change {summary['mean_loss_change']:+.4f}; largest |change| of a difference to `standard` "
              f"{summary['max_abs_difference_change']:.4f}."]
    return "\n".join(lines)


def main() -> int:
    summaries = {setting: summarise(load(STUDY_CELLS, setting), check, setting) for setting in SETTINGS
                 if (check := load(CHECK / "cells", setting))}
    text = "\n\n".join(["# The frontier's hardware check\n\nWritten by `python experiments/frontier/hardware_check.py`; "
                        "declared in [../../README.md](../../README.md) (\"Hardware check\"); the check's machine: "
                        "[machine.json](machine.json)."] + [markdown(s) for s in summaries.values()])
    (CHECK / "summary.json").write_text(json.dumps(summaries, indent=1) + "\n")
    (CHECK / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
