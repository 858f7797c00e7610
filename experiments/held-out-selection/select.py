"""Apply the study's declared rules (README.md, "Rules") to its committed results: SmoothQuant's alpha and `auto`'s fit
method per attention type chosen on STS-B train, and the STS-B dev figures of every candidate reported beside them.

    python experiments/held-out-selection/select.py      # reads results/, writes results/selection.{json,md}

The measurements it reads (each run with one torch thread, niced, on this study's conversions):

    python benchmarks/openvino_int8_fix.py --split train --rounds 0 --other-alphas 0.8 0.6 --variants 5 \
        --model standard=runs/hos/standard --model invariant=runs/hos/invariant --model heal300=runs/hos/heal300 \
        --model heal1200=runs/hos/heal1200 --out-dir experiments/held-out-selection/results --stem alpha_train
    (the same with --split dev --stem alpha_dev; heal1200, made later, in a run of its own measuring both splits on
    the same int8 files: --model heal1200=runs/hos/heal1200 --split train dev --stem alpha_heal1200. Every
    results/alpha*_train.json is read as one measurement, as is every alpha*_dev.json.)
    python experiments/healing/calibration.py --types shared symmetric pairwise shared_kv shared_head_query \
        shared_lowrank_query --sentences --split train --output-dir experiments/held-out-selection/results/fits_train
    (the same with --split dev --output-dir .../fits_dev)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# The defaults when the study was declared (commit bee7566): what a choice is compared with, and what a tie keeps.
CURRENT_ALPHA = 0.7
CURRENT_FITS = {"shared": "weights", "symmetric": "weights", "pairwise": "invariant", "shared_kv": "invariant",
                "shared_head_query": "weights", "shared_lowrank_query": "weights"}
CANDIDATE_ALPHAS = (0.6, 0.7, 0.8, 0.95)
FITS = ("weights", "invariant")
DECIMALS = 4  # equal at four decimals is a tie


def variant_alpha(name: str) -> float | None:
    """The SmoothQuant alpha of an openvino_int8_fix.py variant with `float_matmuls` in float (None for the others)."""
    if "float_matmuls in float" not in name:
        return None
    found = re.search(r"alpha \(?(\d+(?:\.\d+)?)\)?", name)
    return float(found.group(1)) if found else None


def merge(reports: list[dict]) -> dict:
    """Several openvino_int8_fix.py results files of one split as one: their models together (each model once), the
    sentences they were measured on (the same in every file) and their commands."""
    if len({r["split"] for r in reports}) != 1 or len({r["sentences_measured"] for r in reports}) != 1:
        raise ValueError("the files were measured on different sentences")
    models = [model for r in reports for model in r["models"]]
    if len(models) != len(set(models)):
        raise ValueError(f"a conversion is in more than one file: {models}")
    return {"split": reports[0]["split"], "sentences_measured": reports[0]["sentences_measured"],
            "models": {model: result for r in reports for model, result in r["models"].items()},
            "command": " ; ".join(r["command"] for r in reports),
            "commit": " ; ".join(sorted({r.get("commit") or "?" for r in reports})),
            "cpu": " ; ".join(sorted({r.get("cpu") or "?" for r in reports})),
            "date": " ; ".join(sorted({r.get("date") or "?" for r in reports}))}


def alpha_cosines(report: dict) -> dict[float, dict[str, dict]]:
    """{alpha: {model: {"worst", "mean"}}} from an openvino_int8_fix.py results file, candidates only."""
    table: dict[float, dict[str, dict]] = {}
    for model, result in report["models"].items():
        for name, row in result["cosine"].items():
            alpha = variant_alpha(name)
            if alpha in CANDIDATE_ALPHAS:
                table.setdefault(alpha, {})[model] = {"worst": row["worst"], "mean": row["mean"]}
    return table


def choose_alpha(table: dict[float, dict[str, dict]], current: float = CURRENT_ALPHA) -> tuple[float, dict]:
    """The declared rule: the highest lowest-worst-sentence cosine over the conversions; equal at four decimals, the
    higher mean of the mean cosines; still equal, `current` if among them, else the higher alpha. Every candidate
    must have been measured on the same conversions."""
    models = {alpha: set(rows) for alpha, rows in table.items()}
    if len({frozenset(m) for m in models.values()}) != 1:
        raise ValueError(f"the candidates were measured on different conversions: {models}")
    scores = {alpha: {"lowest_worst": min(r["worst"] for r in rows.values()),
                      "mean_of_means": sum(r["mean"] for r in rows.values()) / len(rows)}
              for alpha, rows in table.items()}
    best = max(round(s["lowest_worst"], DECIMALS) for s in scores.values())
    tied = [a for a, s in scores.items() if round(s["lowest_worst"], DECIMALS) == best]
    if len(tied) > 1:
        best_mean = max(round(scores[a]["mean_of_means"], DECIMALS) for a in tied)
        tied = [a for a in tied if round(scores[a]["mean_of_means"], DECIMALS) == best_mean]
    chosen = current if current in tied else max(tied)
    return chosen, scores


def fit_scores(report: dict) -> dict[str, dict[str, float]]:
    """{attention type: {fit: Spearman}} of the unhealed weight-only fits in a calibration.py results file."""
    scores: dict[str, dict[str, float]] = {}
    for row in report["rows"]:
        if row["fit"] in FITS:
            scores.setdefault(row["attention_type"], {})[row["fit"]] = row["spearman"]
    return scores


def choose_fit(scores: dict[str, float], current: str) -> str:
    """The declared rule: the fit with the higher Spearman; equal at four decimals, the current one."""
    rounded = {fit: round(value, DECIMALS) for fit, value in scores.items()}
    best = max(rounded.values())
    tied = [fit for fit, value in rounded.items() if value == best]
    return current if current in tied else tied[0]


def select(alpha_train: dict, alpha_dev: dict, fits_train: dict, fits_dev: dict) -> dict:
    train_table, dev_table = alpha_cosines(alpha_train), alpha_cosines(alpha_dev)
    chosen_alpha, train_scores = choose_alpha(train_table)
    dev_alpha, dev_scores = choose_alpha(dev_table)
    train_fits, dev_fits = fit_scores(fits_train), fit_scores(fits_dev)
    fits = {}
    for attention_type, current in CURRENT_FITS.items():
        chosen = choose_fit(train_fits[attention_type], current)
        fits[attention_type] = {"current": current, "chosen": chosen, "changes_default": chosen != current,
                                "train": train_fits[attention_type], "dev": dev_fits[attention_type],
                                "dev_of_chosen": dev_fits[attention_type][chosen],
                                "dev_of_current": dev_fits[attention_type][current],
                                "dev_alone_would_choose": choose_fit(dev_fits[attention_type], current)}
    return {
        "declared_in": "experiments/held-out-selection/README.md (commit bee7566, before any measurement)",
        "chosen_on": "STS-B train: alpha on its distinct sentences that are not dev sentences, fits on its pairs",
        "measured_on": "STS-B dev: all distinct sentences (alpha), all pairs (fits); reports only",
        "alpha": {"candidates": list(CANDIDATE_ALPHAS), "current": CURRENT_ALPHA, "chosen": chosen_alpha,
                  "changes_default": chosen_alpha != CURRENT_ALPHA,
                  "train_sentences": alpha_train["sentences_measured"],
                  "dev_sentences": alpha_dev["sentences_measured"],
                  "train": {str(a): {"scores": train_scores[a], "models": train_table[a]} for a in sorted(train_table)},
                  "dev": {str(a): {"scores": dev_scores[a], "models": dev_table[a]} for a in sorted(dev_table)},
                  "dev_alone_would_choose": dev_alpha},
        "fits": fits,
        "original_spearman": {split: next(r["spearman"] for r in report["rows"] if r["attention_type"] == "original")
                              for split, report in (("train", fits_train), ("dev", fits_dev))},
        "sources": {name: {"command": report["command"], "commit": report.get("commit"), "cpu": report.get("cpu"),
                           "date": report.get("date")}
                    for name, report in (("alpha_train", alpha_train), ("alpha_dev", alpha_dev),
                                         ("fits_train", fits_train), ("fits_dev", fits_dev))},
    }


def markdown(selection: dict) -> str:
    alpha = selection["alpha"]
    models = list(next(iter(alpha["train"].values()))["models"])
    lines = ["# Held-out selection: SmoothQuant's alpha and `auto`'s fit methods", "",
             f"Rules declared in {selection['declared_in']}. Chosen on {selection['chosen_on']}; measured on "
             f"{selection['measured_on']}. Written by `python experiments/held-out-selection/select.py` from:", ""]
    for name, source in selection["sources"].items():
        lines.append(f"- `results/{name}`: `{source['command']}` (commit {source['commit']}, {source['cpu']})")
    lines += ["", "## SmoothQuant's alpha (static OpenVINO int8, `float_matmuls` in float)", "",
              f"Worst sentence / mean cosine of each conversion's int8 sentence embeddings to its fp32 PyTorch ones. "
              f"Train: {alpha['train_sentences']:,} sentences (chooses); dev: {alpha['dev_sentences']:,} (reports). "
              f"The score is the lowest worst sentence over the conversions.", "",
              "| alpha | data | " + " | ".join(models) + " | score (lowest worst) | mean of means |",
              "|---|---|" + "---:|" * (len(models) + 2)]
    for key in alpha["train"]:
        for split in ("train", "dev"):
            entry = alpha[split][key]
            lines.append(f"| {key}{' (current)' if float(key) == alpha['current'] else ''} | {split} | " + " | ".join(
                f"{entry['models'][m]['worst']:.4f} / {entry['models'][m]['mean']:.4f}" for m in models)
                + f" | {entry['scores']['lowest_worst']:.4f} | {entry['scores']['mean_of_means']:.4f} |")
    lines += ["", f"**Chosen on train: alpha {alpha['chosen']}** (current {alpha['current']}; "
                  f"{'a change' if alpha['changes_default'] else 'no change'}). Dev alone would have chosen "
                  f"{alpha['dev_alone_would_choose']}.", "",
              "## `auto`'s fit per attention type (unhealed, uncalibrated)", "",
              f"STS-B Spearman; train pairs choose, dev pairs report. all-MiniLM-L6-v2 itself: "
              f"{selection['original_spearman']['train']:.4f} train, {selection['original_spearman']['dev']:.4f} dev.",
              "",
              "| attention type | weights, train | invariant, train | chosen on train | current | weights, dev | "
              "invariant, dev | dev of the chosen fit | dev alone would choose |",
              "|---|---:|---:|---|---|---:|---:|---:|---|"]
    for attention_type, row in selection["fits"].items():
        lines.append(f"| {attention_type} | {row['train']['weights']:.4f} | {row['train']['invariant']:.4f} | "
                     f"**{row['chosen']}** | {row['current']} | {row['dev']['weights']:.4f} | "
                     f"{row['dev']['invariant']:.4f} | {row['dev_of_chosen']:.4f} | {row['dev_alone_would_choose']} |")
    changed = [t for t, row in selection["fits"].items() if row["changes_default"]]
    lines += ["", "Fit choices that change `auto`: " + (", ".join(changed) if changed else "none") + "."]
    return "\n".join(lines) + "\n"


def read_results(results: Path) -> tuple[dict, dict, dict, dict]:
    """The four measurements select() takes, from the study's results folder."""
    def read(path: Path) -> dict:
        return json.loads(path.read_text(encoding="utf-8"))

    return (merge([read(p) for p in sorted(results.glob("alpha*_train.json"))]),
            merge([read(p) for p in sorted(results.glob("alpha*_dev.json"))]),
            read(results / "fits_train" / "calibration.json"), read(results / "fits_dev" / "calibration.json"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    selection = select(*read_results(args.results))
    (args.results / "selection.json").write_text(json.dumps(selection, indent=1) + "\n", encoding="utf-8")
    (args.results / "selection.md").write_text(markdown(selection), encoding="utf-8")
    print(markdown(selection))
    return 0


if __name__ == "__main__":
    sys.exit(main())
