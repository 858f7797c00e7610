"""The frontier study's report: every landed cell judged by the declared rule (README.md, Method), written to
results/summary.json and results/summary.md, and the three frontier plots.

    python experiments/frontier/report.py

Reads results/cells/*.json (the harness's cells), results/arms.json (`frontier.py describe`: budgets, parameters,
FLOPs) and, for the drift check, the charlm study's committed cells of the same names. Runs on a partial grid: what
has not landed is reported as missing, and a goal needs every declared seed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # frontier.py, beside this file (this study's own plan)

import frontier  # noqa: E402

from sharedbert.verdicts import ON_PAR, paired_comparison  # noqa: E402

RESULTS = HERE / "results"
CHARLM_CELLS = HERE.parent / "charlm" / "results" / "cells"
MARGIN = 0.02  # nats: the charlm study's practical margin
WIDTH_256_RULE = 0.05  # nats: an arm within this of standard (mean, 5 seeds) in both objectives runs at width 256
LEARNS_BELOW_NULL = 0.5  # nats below the context-free null on the selected positions, every seed
DRIFT = 0.01  # nats: a re-run cell further than this from its earlier copy has moved
BUDGETS = {"best": 0.35, "best_at_10": 0.10}
EQUAL_PARAMETERS = ("standard-att1-ffn", "shared-lowrank-query-att1-ffn", "standard-att1-wide")
ORDERS = ("standard-att2-cycle", "standard-att2-cycle-rev")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a study of this design declares: its arms (in the report's order, `standard` first), seeds, results
    folder, the arms compared with `standard` at equal parameters, the sharing orders compared with `orders_reference`,
    the earlier cells its drift check reads (None: the charlm study's), and the models' depth. A follow-up study of
    the frontier (a new design, declared at its own commit) reuses this report with a plan of its own."""

    arms: tuple
    seeds: tuple
    results: Path
    equal_parameters: tuple = ()
    orders: tuple = ()
    orders_reference: str | None = None
    earlier_cells: Path | None = None
    layers: int = frontier.LAYERS

    @property
    def arms_file(self) -> Path:
        return self.results / "arms.json"

    def setting(self, objective: str, width: int) -> str:
        """The harness's setting of this plan's cells for one objective and width."""
        return frontier.setting_name(objective, width, self.layers)


FRONTIER = Plan(arms=frontier.ARMS, seeds=frontier.SEEDS, results=RESULTS, equal_parameters=EQUAL_PARAMETERS,
                orders=ORDERS, orders_reference="standard-att2")


def load_cells(folder: Path) -> dict:
    """{setting: {arm: {seed: cell}}}."""
    cells = {}
    for path in sorted(folder.glob("*.json")):
        cell = json.loads(path.read_text())
        cells.setdefault(cell["setting"], {}).setdefault(cell["arm"], {})[cell["seed"]] = cell
    return cells


def provenance(cells: dict) -> dict:
    """The commit, precision, CPU and torch of the cells; a comparison mixing them is refused (SystemExit)."""
    seen = {key: sorted({str(c.get(key)) for arms in cells.values() for seeds in arms.values()
                         for c in seeds.values()}) for key in ("git_commit", "precision", "cpu", "torch")}
    mixed = {key: values for key, values in seen.items() if key in ("git_commit", "precision") and len(values) > 1}
    if mixed:
        raise SystemExit(f"The frontier's cells must share one commit and precision; these differ: {mixed}. Re-run "
                         "the odd cells at the study's commit (README, Method) or move them out of results/cells.")
    return {key: values[0] if len(values) == 1 else values for key, values in seen.items()}


def losses(seeds: dict, view: str | None = None) -> dict:
    """{seed: loss}: the harness's validation loss, or an MLM view of the model's (e.g. "mask")."""
    if view is None:
        return {seed: cell["final_validation_loss"] for seed, cell in seeds.items()}
    return {seed: cell["validation_views"]["model"][view] for seed, cell in seeds.items()}


def compare(arm_seeds: dict, reference_seeds: dict, view: str | None = None) -> dict:
    return paired_comparison(losses(arm_seeds, view), losses(reference_seeds, view), margin=MARGIN,
                             higher_is_better=False).as_dict()


def arm_row(setting: str, arm: str, seeds: dict, described: dict, reference: dict) -> dict:
    values = losses(seeds)
    row = {"arm": arm, "seeds": sorted(seeds), "losses": values, "mean": statistics.fmean(values.values()),
           "budget": described[arm]["attention_projection_parameters"] / reference["attention_projection_parameters"],
           "parameters": described[arm]["parameters"], "width": described[arm]["model"]["width"],
           "training_flops_per_token": described[arm]["training_flops_per_token"]}
    if setting.startswith("mlm"):
        views = {seed: cell["validation_views"] for seed, cell in seeds.items()}
        row["mask_mean"] = statistics.fmean(v["model"]["mask"] for v in views.values())
        null = next(iter(views.values()))["context_free"]["selected"]
        row["learns"] = all(value <= null - LEARNS_BELOW_NULL for value in values.values())
    return row


def judge_setting(setting: str, arms: dict, described: dict, plan: Plan = FRONTIER) -> dict:
    """Every arm's row and its paired comparison with standard (and, in MLM, on the [MASK] positions alone)."""
    standard = arms.get("standard", {})
    rows = {}
    for arm in plan.arms:
        if arm not in arms:
            continue
        row = arm_row(setting, arm, arms[arm], described[setting], described[setting]["standard"])
        if arm != "standard" and standard:
            row["against_standard"] = compare(arms[arm], standard)
            if setting.startswith("mlm"):
                row["against_standard_mask"] = compare(arms[arm], standard, "mask")
        rows[arm] = row
    return rows


def nulls(arms: dict) -> dict | None:
    """The context-free nulls of an MLM setting (the same masks in every cell: one cell's)."""
    for seeds in arms.values():
        for cell in seeds.values():
            views = cell["validation_views"]
            return {name: views[name] for name in ("unigram", "context_free", "positions")}
    return None


def complete(rows: dict, arm: str, plan: Plan = FRONTIER) -> bool:
    return arm in rows and len(rows[arm]["seeds"]) == len(plan.seeds)


def width_256_arms(judged: dict, plan: Plan = FRONTIER) -> dict:
    """The declared rule: standard, shared, and every arm within 0.05 nats of standard (mean over the 5 seeds) in
    both objectives at width 128. {"arms": [...], "pending": [arms without all seeds in both]}."""
    chosen, pending = [arm for arm in ("standard", "shared") if arm in plan.arms], []
    for arm in plan.arms:
        if arm in chosen:
            continue
        rows = [judged.get(plan.setting(objective, 128), {}) for objective in frontier.OBJECTIVES]
        if not all(complete(r, arm, plan) and complete(r, "standard", plan) for r in rows):
            pending.append(arm)
        elif all(r[arm]["against_standard"]["mean"] <= WIDTH_256_RULE for r in rows):
            chosen.append(arm)
    return {"arms": chosen, "pending": pending}


def best_within(budget: float, judged: dict, wide: list[str], described: dict, plan: Plan = FRONTIER) -> dict | None:
    """The declared choice: among arms within `budget` at both widths (and running at width 256 by the rule), the
    smallest mean of the two width-128 mean differences; if none runs at width 256, the best at width 128 alone."""
    def fits(arm):
        return all(described[plan.setting("clm", w)][arm]["attention_projection_parameters"]
                   <= budget * described[plan.setting("clm", w)]["standard"]["attention_projection_parameters"]
                   for w in (128, 256))

    def score(arm):
        rows = [judged.get(plan.setting(o, 128), {}).get(arm, {}) for o in frontier.OBJECTIVES]
        return statistics.fmean(r["against_standard"]["mean"] for r in rows)

    scored = [arm for arm in plan.arms if arm != "standard" and fits(arm)
              and all(complete(judged.get(plan.setting(o, 128), {}), arm, plan) for o in frontier.OBJECTIVES)]
    if not scored:
        return None
    carried = [arm for arm in scored if arm in wide]
    arm = min(carried or scored, key=score)
    verdicts = {f"{objective}-w{width}": judged.get(plan.setting(objective, width), {}).get(arm, {})
                .get("against_standard", {}).get("verdict") for width in (128, 256) for objective in frontier.OBJECTIVES}
    return {"arm": arm, "config": {f"w{w}": described[plan.setting("clm", w)][arm]["config"] for w in (128, 256)},
            "carried_to_width_256": arm in carried,
            "budget": {w: judged.get(plan.setting("clm", w), {}).get(arm, {}).get("budget") for w in (128, 256)},
            "mean_difference_width_128": score(arm), "verdicts": verdicts,
            "met": all(v == ON_PAR for v in verdicts.values())}


def comparisons_between(judged: dict, arms: tuple, reference: str, cells: dict) -> dict:
    out = {}
    for setting, rows in judged.items():
        for arm in arms:
            if arm in cells.get(setting, {}) and reference in cells.get(setting, {}):
                out.setdefault(setting, {})[arm] = compare(cells[setting][arm], cells[setting][reference])
    return out


def drift(cells: dict, earlier_cells: Path | None = None) -> dict:
    """Per cell that an earlier study also ran (same name; by default the charlm study): new − old, with both cells'
    CPU, precision and commit. `other_precision` lists the pairs whose precisions differ: their difference measures
    the commit and the arithmetic together."""
    earlier_cells = CHARLM_CELLS if earlier_cells is None else earlier_cells
    rows = []
    for arms in cells.values():
        for seeds in arms.values():
            for cell in seeds.values():
                old_path = earlier_cells / f"{cell['name']}.json"
                if old_path.exists():
                    old = json.loads(old_path.read_text())
                    rows.append({"cell": cell["name"], "new": cell["final_validation_loss"],
                                 "old": old["final_validation_loss"],
                                 "difference": cell["final_validation_loss"] - old["final_validation_loss"],
                                 "old_commit": old.get("git_commit"), "old_cpu": old.get("cpu"),
                                 "old_precision": old.get("precision"), "new_precision": cell.get("precision")})
    moved = [row["cell"] for row in rows if abs(row["difference"]) > DRIFT]
    other_precision = [row["cell"] for row in rows if row["old_precision"] != row["new_precision"]]
    return {"threshold": DRIFT, "cells": rows, "moved": moved, "other_precision": other_precision,
            "max_abs_difference": max((abs(r["difference"]) for r in rows), default=None)}


def summarise(cells: dict, described: dict, plan: Plan = FRONTIER) -> dict:
    judged = {setting: judge_setting(setting, arms, described, plan) for setting, arms in sorted(cells.items())}
    wide = width_256_arms(judged, plan)
    return {
        "provenance": provenance(cells), "margin": MARGIN, "settings": judged,
        "nulls": {setting: nulls(arms) for setting, arms in cells.items() if setting.startswith("mlm")},
        "width_256_rule": {"threshold": WIDTH_256_RULE, **wide},
        "best": best_within(BUDGETS["best"], judged, wide["arms"], described, plan),
        "best_at_10": best_within(BUDGETS["best_at_10"], judged, wide["arms"], described, plan),
        "equal_parameters": comparisons_between(judged, plan.equal_parameters, "standard", cells),
        "sharing_orders": (comparisons_between(judged, plan.orders, plan.orders_reference, cells)
                           if plan.orders else {}),
        "drift": drift(cells, plan.earlier_cells),
    }


def table(summary: dict, declared_seeds: int = len(FRONTIER.seeds)) -> str:
    """summary.md: every arm per setting; a verdict is interim (and says so, with its seeds) until the arm has every
    declared seed, as the README's rule draws none before then."""
    def verdict(row, key):
        word = row.get(key, {}).get("verdict", "—")
        return word if word == "—" or len(row["seeds"]) >= declared_seeds else (
            f"interim: {word} ({len(row['seeds'])} of {declared_seeds} seeds)")

    lines = []
    for setting, rows in summary["settings"].items():
        lines += [f"### {setting}", "", "| arm | budget | parameters | seeds | mean loss | − standard (95% t) | "
                  "verdict |" + (" [MASK] − standard | [MASK] verdict | learns |" if setting.startswith("mlm") else ""),
                  "|---|---|---|---|---|---|---|" + ("---|---|---|" if setting.startswith("mlm") else "")]
        for arm, row in sorted(rows.items(), key=lambda item: -item[1]["budget"]):
            lines.append(f"| `{arm}` | {row['budget']:.1%} | {row['parameters']:,} | {len(row['seeds'])} | "
                         f"{row['mean']:.4f} | {interval(row.get('against_standard'))} | "
                         f"{verdict(row, 'against_standard')} |"
                         + (f" {interval(row.get('against_standard_mask'))} | "
                            f"{verdict(row, 'against_standard_mask')} | "
                            f"{'yes' if row['learns'] else 'no'} |" if setting.startswith("mlm") else ""))
        lines.append("")
    return "\n".join(lines)


def interval(comparison: dict | None) -> str:
    if not comparison:
        return "—"
    if comparison.get("interval") is None:
        return f"{comparison['mean']:+.3f} (n = {comparison['n']})"
    low, high = comparison["interval"]
    return f"{comparison['mean']:+.3f} [{low:+.3f}, {high:+.3f}]"


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both axes (smaller x and smaller loss), by increasing x."""
    front, best = [], math.inf
    for x, loss in sorted(points):
        if loss < best:
            front.append((x, loss))
            best = loss
    return front


def plot(summary: dict, path: Path, title: str = "The frontier", plan: Plan = FRONTIER) -> None:
    """Validation loss against budget, total parameters and training FLOPs per token; one row per objective."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_of = (("budget", "stored self-attention projections (share of standard's)"),
               ("parameters", "total parameters"), ("training_flops_per_token", "training FLOPs per token"))
    figure, axes = plt.subplots(2, 3, figsize=(16, 9), squeeze=False)
    for row, objective in enumerate(frontier.OBJECTIVES):
        for column, (key, label) in enumerate(axes_of):
            axis = axes[row][column]
            for width, marker in ((128, "o"), (256, "s")):
                rows = summary["settings"].get(plan.setting(objective, width), {})
                for arm, entry in rows.items():
                    axis.scatter(entry[key], entry["mean"], marker=marker, color="C3" if arm == "standard" else "C0")
                    axis.annotate(arm, (entry[key], entry["mean"]), fontsize=6, xytext=(2, 2),
                                  textcoords="offset points")
                envelope = pareto_front([(entry[key], entry["mean"]) for entry in rows.values()])
                if len(envelope) > 1:
                    axis.step(*zip(*envelope), where="post", color="grey", linewidth=0.8, alpha=0.7)
            axis.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter() if key != "budget"
                                           else matplotlib.ticker.PercentFormatter(1.0))
            axis.set_xlabel(label)
            axis.set_ylabel(f"{objective.upper()} validation loss (mean over seeds)")
    figure.suptitle(f"{title}: circles width 128, squares width 256; red: standard; grey: the lower envelope")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(plan: Plan = FRONTIER, title: str = "The frontier", plot_name: str = "frontier.png") -> int:
    cells = load_cells(plan.results / "cells")
    if not cells:
        raise SystemExit(f"No cells in {plan.results / 'cells'}: run the study's grid first.")
    described = json.loads(plan.arms_file.read_text())
    summary = summarise(cells, described, plan)
    (plan.results / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    text = table(summary, len(plan.seeds))
    (plan.results / "summary.md").write_text(text + "\n")
    plot(summary, plan.results / plot_name, title, plan)
    print(text)
    print(f"width 256 by the rule: {summary['width_256_rule']['arms']} (pending: "
          f"{len(summary['width_256_rule']['pending'])} arms)")
    print(f"best (<= 35%): {summary['best']}\nbest_at_10: {summary['best_at_10']}")
    print(f"drift: {len(summary['drift']['cells'])} cells, max |difference| {summary['drift']['max_abs_difference']}, "
          f"moved: {summary['drift']['moved']}, in another precision: {summary['drift']['other_precision']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
