"""Aggregate the character-level study's cell files (results/cells/*.json) into results/summary.json, summary.md and
one learning-curve plot per setting (results/curves-SETTING.png).

    python experiments/charlm/report.py [--cells DIR] [--output-dir DIR] [--data FILE]

Per setting (objective, recipe and overrides) and arm: the final validation loss, mean ± standard error over seeds,
parameters and training tokens/s; per arm, the paired difference to `standard` (d = loss(arm) - loss(standard) on each
seed both have) judged by `sharedbert.verdicts.paired_comparison`: the 95% Student-t interval of mean(d) (df = n - 1)
against the margin m = 0.02 nats, "on par" inside [-m, m], "trails" / "ahead" entirely beyond it, "left open"
otherwise and with fewer than two paired seeds. Each paired entry records its per-seed differences, the interval, the
margin, higher_is_better (False: a loss) and the verdict, and beside it the verdict of the study's first rule
(mean ± 2 SE, "verdict_2se"); summary.md lists every verdict the interval changed.

And how `shared`'s gap to `standard` changes along the declared causal-LM series (width at head size 32, heads at
width 256), on seeds 1-3 of every setting: between settings A and B, D = g(B) - g(A), SE(D) = sqrt(SE(A)^2 + SE(B)^2)
with Welch's degrees of freedom (`unpaired_difference`), "grows" / "shrinks" where its 95% interval lies entirely
beyond the margin, "stays" inside it, else "left open".

For each MLM setting, the harness's two context-free nulls (study.py's `mlm_nulls`) on the same validation masks (its
`validation_windows`, checked against the cells' fingerprint), from the data file when it is present (else carried
over from the previous summary.json): the unigram model on the scored positions, and the predictor that sees the
character at the position and nothing else (the Bayes posterior of BERT's corruption: the unigram under `[MASK]`,
and under a visible c, equally likely left or drawn uniformly, p(t | c) ∝ u(t)·(½·[t = c] + ½/V)); with the scored
positions counted by what the model sees and by the corruption drawn.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import statistics
import sys
from pathlib import Path

from sharedbert.verdicts import Comparison, paired_comparison, unpaired_difference

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
TREND_WORDS = {"trails": "grows", "ahead": "shrinks", "on par": "stays", "left open": "left open"}
# An MLM seed "left the plateau" where it ends this far below the context-free null (the plateau sits about 0.04
# below it); a description of the per-seed outcomes, not a declared rule.
PLATEAU_EXIT = 0.1


def mean_and_standard_error(values: list[float]) -> tuple[float, float | None]:
    """The mean and its standard error (sample standard deviation / sqrt(n)); None with one value."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)


def compare(losses: dict, baseline: dict) -> Comparison:
    """loss(arm) - loss(baseline) paired by seed, judged by the study's margin (lower loss is better)."""
    return paired_comparison(losses, baseline, margin=MARGIN, higher_is_better=False)


def recorded(comparison: Comparison) -> dict:
    """A comparison as the results files keep it: every field, and the first rule's verdict (mean ± 2 SE) beside."""
    return {**comparison.as_dict(), "verdict_2se": comparison.verdict_at(2)}


def trend(first: Comparison, second: Comparison) -> dict:
    """The change of a gap between two settings, judged by its unpaired t interval; the words of the trend rule."""
    change = unpaired_difference(first, second, margin=MARGIN, higher_is_better=False)
    record = recorded(change)
    record["verdict"], record["verdict_2se"] = TREND_WORDS[change.verdict], TREND_WORDS[change.verdict_at(2)]
    return record


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
    comparison = compare({s: losses[TREND_ARM][s] for s in seeds}, {s: losses[BASELINE][s] for s in seeds})
    standard_mean = statistics.fmean(losses[BASELINE][seed] for seed in seeds)
    below_unigram = summary[setting]["unigram_validation_loss"] - standard_mean
    return {"setting": setting, "seeds": seeds, "standard": standard_mean, "mean": comparison.mean,
            "standard_error": comparison.standard_error, "share_of_learning": comparison.mean / below_unigram,
            "comparison": comparison}


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
            change = trend(first["comparison"], second["comparison"])
            steps.append({"from": first["setting"], "to": second["setting"], "change": change["mean"], **change})
        gaps = [{**{k: v for k, v in g.items() if k != "comparison"}, "paired": recorded(g["comparison"])}
                for g in present]
        series_rows.append({"series": name, "settings": list(settings), "gaps": gaps, "steps": steps,
                            "complete": len(present) == len(settings)
                            and all(g["seeds"] == list(TREND_SEEDS) for g in present)})
    return series_rows


def flips(summary: dict, series_rows: list[dict]) -> list[dict]:
    """Every verdict the t interval changed from the first rule's mean ± 2 SE: paired rows, then the series' steps."""
    changed = [{"setting": name, "arm": arm, "mean": row["paired"]["mean"],
                "standard_error": row["paired"]["standard_error"], "n": row["paired"]["n"],
                "interval": row["paired"]["interval"], "was": row["paired"]["verdict_2se"],
                "now": row["paired"]["verdict"]}
               for name, setting in summary.items() for arm, row in setting["arms"].items()
               if "paired" in row and row["paired"]["verdict"] != row["paired"]["verdict_2se"]]
    changed += [{"setting": f"{step['from']} -> {step['to']}", "arm": f"{TREND_ARM}'s gap", "mean": step["mean"],
                 "standard_error": step["standard_error"], "n": None, "interval": step["interval"],
                 "was": step["verdict_2se"], "now": step["verdict"]}
                for row in series_rows for step in row["steps"] if step["verdict"] != step["verdict_2se"]]
    return changed


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
            if arm != BASELINE and set(losses) & set(baseline):
                row["paired"] = recorded(compare(losses, baseline))
            rows[arm] = row
        summary[name] = {"unigram_validation_loss": setting["unigram"], "arms": rows}
    return summary


def _plus_minus(mean: float, error: float | None, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" + (f" ± {error:.{digits}f}" if error is not None else "")


def _interval(record: dict) -> str:
    low_high = record.get("interval")
    return f"[{low_high[0]:+.3f}, {low_high[1]:+.3f}]" if low_high else "–"


def _arm_line(arm: str, row: dict, null: float | None) -> str:
    paired = row.get("paired")
    compared = (f"{_plus_minus(paired['mean'], paired['standard_error'])} ({paired['n']}) | {_interval(paired)} "
                f"| {paired['verdict']}" + ("" if paired["verdict"] == paired["verdict_2se"]
                                            else f" (was: {paired['verdict_2se']} with 2 SE)")) if paired else " | |"
    left = "" if null is None else (f" | {sum(null - x > PLATEAU_EXIT for x in row['losses'])} of "
                                    f"{len(row['losses'])}")
    return (f"| `{arm}` | {', '.join(map(str, row['seeds']))} | {' / '.join(f'{x:.3f}' for x in row['losses'])} "
            f"| {_plus_minus(row['mean'], row['standard_error'])} | {' / '.join(f'{p:,}' for p in row['parameters'])} "
            f"| {row['train_tokens_per_second']:,.0f} ({'/'.join(row['precision'])}) | {compared}{left} |")


def nulls_markdown(nulls: dict) -> list[str]:
    seen, drawn = nulls["positions"], nulls["corruption_drawn"]
    return [f"Scored positions: {seen['selected']:,} selected, of which the model sees `[MASK]` at {seen['mask']:,}, "
            f"another character at {seen['random']:,} and the target itself at {seen['unchanged']:,} (drawn: "
            f"{drawn['mask']:,} `[MASK]`, {drawn['random']:,} random, {drawn['unchanged']:,} left unchanged). "
            f"Context-free nulls on these masks: the unigram model {nulls['unigram']['selected']:.3f} "
            f"(`[MASK]` positions {nulls['unigram']['mask']:.3f}), the predictor that sees only the character at the "
            f"position {nulls['context_free']['selected']:.3f} (`[MASK]` positions "
            f"{nulls['context_free']['mask']:.3f}). \"left the plateau\": seeds ending more than {PLATEAU_EXIT} nats "
            f"below the context-free null.", ""]


def markdown(summary: dict, changed: list[dict] | None = None) -> str:
    lines = ["# Character-level study: summary", "",
             "Written by `python experiments/charlm/report.py` from `results/cells/*.json`. Final validation loss "
             "(nats per character; MLM: over every selected position), mean ± standard error over seeds; the paired "
             "difference to `standard` over the seeds both have (n), its 95% Student-t interval and the verdict "
             f"(`sharedbert.verdicts`, margin {MARGIN} nats), with the first rule's (mean ± 2 SE) where it differs.",
             ""]
    for name, setting in summary.items():
        nulls = setting.get("nulls")
        null = nulls["context_free"]["selected"] if nulls else None
        lines += [f"## {name}", "", f"Unigram model on the validation text: {setting['unigram_validation_loss']:.3f}.",
                  ""] + (nulls_markdown(nulls) if nulls else [])
        lines += ["| arm | seeds | losses | mean ± SE | parameters | training tokens/s | paired d to `standard` (n) "
                  "| 95% interval | verdict |" + (" left the plateau |" if nulls else ""),
                  "|---|---|---|---|---|---|---|---|---|" + ("---|" if nulls else "")]
        lines += [_arm_line(arm, row, null) for arm, row in setting["arms"].items()]
        lines += ["", f"![learning curves](curves-{name}.png)", ""]
    series_rows = scaling(summary)
    lines += scaling_markdown(series_rows)
    lines += flips_markdown(flips(summary, series_rows) if changed is None else changed)
    return "\n".join(lines)


def flips_markdown(changed: list[dict]) -> list[str]:
    lines = ["## Verdicts the 95% t interval changed (was: mean ± 2 SE)", ""]
    if not changed:
        return lines + ["None.", ""]
    lines += ["| setting | arm | d ± SE (n) | 95% interval | was, with 2 SE | now |", "|---|---|---|---|---|---|"]
    for c in changed:
        n = "" if c["n"] is None else f" ({c['n']})"
        lines.append(f"| {c['setting']} | `{c['arm']}` | {_plus_minus(c['mean'], c['standard_error'])}{n} "
                     f"| {_interval(c)} | {c['was']} | {c['now']} |")
    return lines + [""]


def scaling_markdown(series_rows: list[dict]) -> list[str]:
    lines = ["## How `shared`'s gap changes with width and heads (causal LM, seeds 1-3)", "",
             "g: `shared`'s paired difference to `standard`; its share of `standard`'s distance below the unigram "
             "model beside it. Verdicts by the declared rule (unpaired across settings: Welch's t interval, margin "
             f"{MARGIN} nats).", ""]
    for row in series_rows:
        lines += [f"### {row['series']}" + ("" if row["complete"] else " (incomplete)"), "",
                  "| setting | seeds | `standard` | g | 95% interval | share |", "|---|---|---|---|---|---|"]
        lines += [f"| {g['setting']} | {', '.join(map(str, g['seeds']))} | {g['standard']:.3f} "
                  f"| {_plus_minus(g['mean'], g['standard_error'])} | {_interval(g['paired'])} "
                  f"| {100 * g['share_of_learning']:.1f}% |" for g in row["gaps"]]
        lines += ["", "| from | to | change in g | 95% interval | verdict |", "|---|---|---|---|---|"]
        lines += [f"| {step['from']} | {step['to']} | {_plus_minus(step['change'], step['standard_error'])} "
                  f"| {_interval(step)} | {step['verdict']}" + ("" if step["verdict"] == step["verdict_2se"] else
                                                                f" (was: {step['verdict_2se']} with 2 SE)") + " |"
                  for step in row["steps"]]
        lines.append("")
    return lines


def _study():
    """The harness (study.py beside this file), for its data loading and validation masks."""
    spec = importlib.util.spec_from_file_location("_charlm_report_study", HERE / "study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


def corruption_drawn(study, ids, context: int, mask_probability: float, vocab_size: int) -> dict:
    """Counts of what BERT's corruption drew at the validation masks' selected positions (`[MASK]`, a random
    character, left unchanged), replaying `validation_windows`'s generator: a random draw can hit the target, which
    the model then sees unchanged."""
    import torch

    generator = torch.Generator().manual_seed(study.VALIDATION_MASK_SEED)
    targets, counts = round(mask_probability * context), {"mask": 0, "random": 0, "unchanged": 0}
    for start in range(0, len(ids) - context + 1, context):
        selected = torch.zeros(context, dtype=torch.bool)
        selected[torch.randperm(context, generator=generator)[:targets]] = True
        draw = torch.rand(context, generator=generator)
        torch.randint(vocab_size, (context,), generator=generator)  # the random characters, drawn as corrupt() does
        counts["mask"] += int((selected & (draw < 0.8)).sum())
        counts["random"] += int((selected & (draw >= 0.8) & (draw < 0.9)).sum())
        counts["unchanged"] += int((selected & (draw >= 0.9)).sum())
    return counts


def mlm_nulls(data_path: Path, cell: dict) -> dict:
    """The context-free nulls of an MLM setting on its validation masks (see the module's docstring); refuses data
    or masks other than the cell's (its data_sha256 and validation fingerprint)."""
    import hashlib

    study = _study()
    if hashlib.sha256(Path(data_path).read_bytes()).hexdigest() != cell["data_sha256"]:
        raise SystemExit(f"{data_path} is not the data the cells were trained on (sha256 differs)")
    hyper = cell["hyperparameters"]
    data = study.load_data(Path(data_path), hyper["train_fraction"])
    vocab = data.vocab_size
    windows = study.validation_windows(data.validation_ids, hyper["context"], "mlm", hyper["mask_probability"], vocab)
    if study.examples_sha256(windows) != cell["validation_sha256"]:
        raise SystemExit("the validation masks differ from the cells' (fingerprint): the nulls would not be theirs")
    return {**study.mlm_nulls(data, windows),
            "corruption_drawn": corruption_drawn(study, data.validation_ids, hyper["context"],
                                                 hyper["mask_probability"], vocab),
            "validation_sha256": cell["validation_sha256"]}


def add_nulls(summary: dict, cells: list[dict], data_path: Path | None, previous: dict) -> None:
    """Each MLM setting's nulls: computed from the data where it is present, else the previous summary's for the same
    validation masks, else none."""
    for name, setting in summary.items():
        cell = next(c for c in cells if c["setting"] == name)
        if not name.startswith("mlm") or "validation_sha256" not in cell:
            continue
        earlier = previous.get(name, {}).get("nulls")
        if data_path is not None and Path(data_path).is_file():
            setting["nulls"] = mlm_nulls(data_path, cell)
        elif earlier and earlier.get("validation_sha256") == cell.get("validation_sha256"):
            setting["nulls"] = earlier


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
    parser.add_argument("--data", type=Path, default=None,
                        help="the text the cells trained on, for the MLM nulls (default: the harness's data path)")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    from sharedbert.atomic import atomic_write_bytes, atomic_write_text

    cells = load_cells(args.cells)
    if not cells:
        raise SystemExit(f"No cell files in {args.cells}: run study.py first.")
    summary = summarise(cells)
    previous_path = args.output_dir / "summary.json"
    previous = json.loads(previous_path.read_text()) if previous_path.is_file() else {}
    if any(cell["setting"].startswith("mlm") for cell in cells):
        add_nulls(summary, cells, args.data if args.data is not None else _study().default_data_path(), previous)
    series_rows = scaling(summary)
    changed = flips(summary, series_rows)
    atomic_write_text(args.output_dir / "summary.json",
                      json.dumps({**summary, "scaling": series_rows, "flips": changed}, indent=1) + "\n")
    text = markdown(summary, changed)
    atomic_write_text(args.output_dir / "summary.md", text + "\n")
    if not args.no_plots:
        for name in summary:
            atomic_write_bytes(args.output_dir / f"curves-{name}.png",
                               curve_png(name, [cell for cell in cells if cell["setting"] == name]))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
