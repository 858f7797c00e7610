"""Aggregate the character-level study's cell files (results/cells/*.json) into results/summary.json, summary.md and
one learning-curve plot per setting (results/curves-SETTING.png).

    python experiments/charlm/report.py [--cells DIR] [--output-dir DIR]

Per setting (objective, recipe and overrides) and arm: the final validation loss, mean ± standard error over seeds,
parameters and training tokens/s; per arm, the paired difference to `standard` (d = loss(arm) - loss(standard) on each
seed both have; its mean ± standard error) and the verdict by the rule declared in README.md:

    with lo = mean(d) - 2 SE and hi = mean(d) + 2 SE and the margin m = 0.02 nats,
    "on par"  if -m <= lo and hi <= m;  "trails" if lo > m;  "ahead" if hi < -m;  otherwise "left open"
    (also "left open" with fewer than two paired seeds, where SE is undefined).

And how `shared`'s gap to `standard` changes along the declared causal-LM series (width at head size 32, heads at
width 256), on seeds 1-3 of every setting: between settings A and B, D = g(B) - g(A), SE(D) = sqrt(SE(A)^2 + SE(B)^2),
"grows" if D - 2 SE(D) > m, "shrinks" if D + 2 SE(D) < -m, "stays" if both lie in [-m, m], else "left open".
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELLS_DIR = HERE / "results" / "cells"
MARGIN = 0.02  # nats: a difference smaller than this is of no practical consequence at this scale
BASELINE = "standard"
TREND_ARM = "shared"
TREND_SEEDS = (1, 2, 3)
# The declared series: (name, settings in order). Width 128 with 4 heads is the CPU recipe itself.
SERIES = (
    ("width at head size 32", ("clm-cpu", "clm-cpu-w256-h8", "clm-cpu-w384-h12")),
    ("heads at width 256", ("clm-cpu-w256-h2", "clm-cpu-w256-h4", "clm-cpu-w256-h8")),
)


def mean_and_standard_error(values: list[float]) -> tuple[float, float | None]:
    """The mean and its standard error (sample standard deviation / sqrt(n)); None with one value."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)


def verdict(mean: float, standard_error: float | None, margin: float = MARGIN) -> str:
    if standard_error is None:
        return "left open"
    low, high = mean - 2 * standard_error, mean + 2 * standard_error
    if -margin <= low and high <= margin:
        return "on par"
    if low > margin:
        return "trails"
    if high < -margin:
        return "ahead"
    return "left open"


def trend_verdict(change: float, standard_error: float | None, margin: float = MARGIN) -> str:
    if standard_error is None:
        return "left open"
    low, high = change - 2 * standard_error, change + 2 * standard_error
    if low > margin:
        return "grows"
    if high < -margin:
        return "shrinks"
    if -margin <= low and high <= margin:
        return "stays"
    return "left open"


def gap(summary: dict, setting: str) -> dict | None:
    """`shared`'s paired gap to `standard` at `setting` over TREND_SEEDS (only seeds both arms have), with the gap as a
    share of standard's distance below the unigram model; None where the setting has no such pair yet."""
    arms = summary.get(setting, {}).get("arms", {})
    if BASELINE not in arms or TREND_ARM not in arms:
        return None
    losses = {arm: dict(zip(arms[arm]["seeds"], arms[arm]["losses"])) for arm in (BASELINE, TREND_ARM)}
    seeds = [seed for seed in TREND_SEEDS if all(seed in by_seed for by_seed in losses.values())]
    if not seeds:
        return None
    differences = [losses[TREND_ARM][seed] - losses[BASELINE][seed] for seed in seeds]
    mean, standard_error = mean_and_standard_error(differences)
    standard_mean = statistics.fmean(losses[BASELINE][seed] for seed in seeds)
    below_unigram = summary[setting]["unigram_validation_loss"] - standard_mean
    return {"setting": setting, "seeds": seeds, "standard": standard_mean, "mean": mean,
            "standard_error": standard_error, "share_of_learning": mean / below_unigram}


def scaling(summary: dict) -> list[dict]:
    """Each declared series: the gap at each setting that has cells, and a verdict per step and first to last."""
    series_rows = []
    for name, settings in SERIES:
        present = [g for g in (gap(summary, setting) for setting in settings) if g is not None]
        steps = []
        pairs = list(zip(present, present[1:]))
        if len(present) > 2:
            pairs.append((present[0], present[-1]))
        for first, second in pairs:
            change = second["mean"] - first["mean"]
            errors = (first["standard_error"], second["standard_error"])
            error = None if None in errors else math.sqrt(errors[0] ** 2 + errors[1] ** 2)
            steps.append({"from": first["setting"], "to": second["setting"], "change": change,
                          "standard_error": error, "verdict": trend_verdict(change, error)})
        series_rows.append({"series": name, "settings": list(settings), "gaps": present, "steps": steps,
                            "complete": len(present) == len(settings)
                            and all(g["seeds"] == list(TREND_SEEDS) for g in present)})
    return series_rows


def load_cells(cells_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(Path(cells_dir).glob("*.json"))]


def summarise(cells: list[dict]) -> dict:
    """{setting: {"arms": {arm: row}, "unigram": loss}}; each row has the per-seed losses, their mean and SE, and
    (beside `standard`) the paired difference and its verdict."""
    settings: dict[str, dict] = {}
    for cell in cells:
        setting = settings.setdefault(cell["setting"], {"arms": {}, "unigram": cell["unigram_validation_loss"]})
        setting["arms"].setdefault(cell["arm"], {})[cell["seed"]] = cell
    summary = {}
    for name, setting in sorted(settings.items()):
        baseline = {seed: cell["final_validation_loss"] for seed, cell in setting["arms"].get(BASELINE, {}).items()}
        rows = {}
        for arm, by_seed in sorted(setting["arms"].items(), key=lambda item: (item[0] != BASELINE, item[0])):
            losses = {seed: cell["final_validation_loss"] for seed, cell in sorted(by_seed.items())}
            mean, standard_error = mean_and_standard_error(list(losses.values()))
            row = {"seeds": list(losses), "losses": list(losses.values()), "mean": mean,
                   "standard_error": standard_error,
                   "parameters": sorted({cell["parameters"] for cell in by_seed.values()}),
                   "train_tokens_per_second": statistics.fmean(c["train_tokens_per_second"] for c in by_seed.values()),
                   "precision": sorted({cell["precision"] for cell in by_seed.values()})}
            paired_seeds = sorted(set(losses) & set(baseline))
            if arm != BASELINE and paired_seeds:
                differences = [losses[seed] - baseline[seed] for seed in paired_seeds]
                d_mean, d_error = mean_and_standard_error(differences)
                row["paired"] = {"seeds": paired_seeds, "differences": differences, "mean": d_mean,
                                 "standard_error": d_error, "verdict": verdict(d_mean, d_error)}
            rows[arm] = row
        summary[name] = {"unigram_validation_loss": setting["unigram"], "arms": rows}
    return summary


def _plus_minus(mean: float, error: float | None, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" + (f" ± {error:.{digits}f}" if error is not None else "")


def markdown(summary: dict) -> str:
    lines = ["# Character-level study: summary", "",
             "Written by `python experiments/charlm/report.py` from `results/cells/*.json`. Final validation loss "
             "(nats per character), mean ± standard error over seeds; the paired difference to `standard` over the "
             f"seeds both have, with the verdict of the declared rule (margin {MARGIN} nats, 2 SE).", ""]
    for name, setting in summary.items():
        lines += [f"## {name}", "", f"Unigram model on the validation text: {setting['unigram_validation_loss']:.3f}.",
                  "", "| arm | seeds | losses | mean ± SE | parameters | training tokens/s | paired d to `standard` "
                  "| verdict |", "|---|---|---|---|---|---|---|---|"]
        for arm, row in setting["arms"].items():
            paired = row.get("paired")
            lines.append(
                f"| `{arm}` | {', '.join(map(str, row['seeds']))} | {' / '.join(f'{x:.3f}' for x in row['losses'])} "
                f"| {_plus_minus(row['mean'], row['standard_error'])} | {' / '.join(f'{p:,}' for p in row['parameters'])} "
                f"| {row['train_tokens_per_second']:,.0f} ({'/'.join(row['precision'])}) "
                f"| {_plus_minus(paired['mean'], paired['standard_error']) + ' (' + str(len(paired['seeds'])) + ')' if paired else ''} "
                f"| {paired['verdict'] if paired else ''} |")
        lines += ["", f"![learning curves](curves-{name}.png)", ""]
    lines += scaling_markdown(scaling(summary))
    return "\n".join(lines)


def scaling_markdown(series_rows: list[dict]) -> list[str]:
    lines = ["## How `shared`'s gap changes with width and heads (causal LM, seeds 1-3)", "",
             "g: `shared`'s paired difference to `standard`; its share of `standard`'s distance below the unigram "
             "model beside it. Verdicts by the declared rule (unpaired across settings, margin "
             f"{MARGIN} nats, 2 SE).", ""]
    for row in series_rows:
        lines += [f"### {row['series']}" + ("" if row["complete"] else " (incomplete)"), "",
                  "| setting | seeds | `standard` | g | share |", "|---|---|---|---|---|"]
        lines += [f"| {g['setting']} | {', '.join(map(str, g['seeds']))} | {g['standard']:.3f} "
                  f"| {_plus_minus(g['mean'], g['standard_error'])} | {100 * g['share_of_learning']:.1f}% |"
                  for g in row["gaps"]]
        lines += ["", "| from | to | change in g | verdict |", "|---|---|---|---|"]
        lines += [f"| {step['from']} | {step['to']} | {_plus_minus(step['change'], step['standard_error'])} "
                  f"| {step['verdict']} |" for step in row["steps"]]
        lines.append("")
    return lines


def curve_png(name: str, cells: list[dict]) -> bytes:
    """Validation loss against tokens seen, the mean over seeds per arm (at the evaluations every seed has)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    arms = sorted({cell["arm"] for cell in cells}, key=lambda arm: (arm != BASELINE, arm))
    for arm in arms:
        curves = [{point["tokens"]: point["loss"] for point in cell["curve"]} for cell in cells if cell["arm"] == arm]
        tokens = sorted(set.intersection(*(set(curve) for curve in curves)))
        axes.plot(tokens, [statistics.fmean(curve[t] for curve in curves) for t in tokens], marker=".",
                  label=f"{arm} ({len(curves)} seed{'s' if len(curves) > 1 else ''})")
    unigram = cells[0]["unigram_validation_loss"]
    axes.axhline(unigram, color="grey", linestyle=":", label="unigram")
    # Iteration 0 (about ln V) sits above the top: the plot keeps the range where the arms differ.
    lowest = min(point["loss"] for cell in cells for point in cell["curve"])
    axes.set_ylim(lowest - 0.05, unigram + 0.1)
    axes.set_xlabel("training tokens seen")
    axes.set_ylabel("validation loss (nats per character)")
    axes.set_title(name)
    axes.legend()
    axes.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=Path, default=CELLS_DIR)
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    from sharedbert.atomic import atomic_write_bytes, atomic_write_text

    cells = load_cells(args.cells)
    if not cells:
        raise SystemExit(f"No cell files in {args.cells}: run study.py first.")
    summary = summarise(cells)
    atomic_write_text(args.output_dir / "summary.json",
                      json.dumps({**summary, "scaling": scaling(summary)}, indent=1) + "\n")
    text = markdown(summary)
    atomic_write_text(args.output_dir / "summary.md", text + "\n")
    if not args.no_plots:
        for name in summary:
            atomic_write_bytes(args.output_dir / f"curves-{name}.png",
                               curve_png(name, [cell for cell in cells if cell["setting"] == name]))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
