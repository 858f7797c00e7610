"""Fine-tune several starting models on one GLUE task with one recipe over several seeds, side by side.

Answers "is model A within x points of model B after fine-tuning?" with a mean and a spread instead of one run: each
seed changes the training subset, the head's initialisation and the batch order, and the same seeds are used for every
model, so the comparison is paired.

Usage (from the repository root):

    python experiments/finetuning/finetune_seeds.py --seeds 1 2 3 \\
        --model original=all-MiniLM-L6-v2:--no-convert \\
        --model healed=runs/minilm-shared \\
        --model on-the-fly=all-MiniLM-L6-v2

A model is LABEL=SOURCE[:EXTRA FLAGS], SOURCE being what `sharedbert finetune --model` takes; the first model (or
--reference) is the reference of the paired differences. The recipe defaults to the demo's SST-2 budget (8,000
examples, 1 epoch, length 64, batch 32, lr 1e-4, 4 evaluations). Every run is a real `python -m sharedbert finetune`
process; its scores are kept in the results JSON (keyed by label, seed and recipe), so re-running only runs what is
missing. Several processes (say one per core, each with its own --model and --threads 1) can share one results file.
Results: results/NAME.{json,md} beside this script.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sharedbert.atomic import atomic_write_text, file_lock

RESULTS = Path(__file__).resolve().parent / "results"
SST2_RECIPE = ("--task sst2 --max-train-samples 8000 --epochs 1 --max-length 64 --batch-size 32 "
               "--learning-rate 1e-4 --evaluations 4")


def parse_model(text: str):
    label, sep, rest = text.partition("=")
    if not sep or not label or not rest:
        raise SystemExit(f"--model {text!r}: expected LABEL=SOURCE[:EXTRA FLAGS], "
                         "e.g. original=all-MiniLM-L6-v2:--no-convert")
    source, _, extra = rest.partition(":")
    return label, source, shlex.split(extra)


def run_one(source, extra, recipe, seed, out_dir: Path, threads: int):
    command = [sys.executable, "-m", "sharedbert", "finetune", "--model", source, *shlex.split(recipe), *extra,
               "--seed", str(seed), "--output-dir", str(out_dir), "--overwrite"]
    print("$", " ".join(command), flush=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=str(threads))
    started = time.time()
    subprocess.run(command, check=True, env=env)
    result = json.loads((out_dir / "eval_results.json").read_text())
    # The task's main metric (the first one): the selected weights' score, and the last step's from the log.
    name, best = next(iter(result["metrics"].items()))
    evaluations = [e for e in json.loads((out_dir / "trainer_log.json").read_text()) if f"eval_{name}" in e]
    return {"metric": name, "best": best, "best_step": result["best_step"],
            "final": evaluations[-1][f"eval_{name}"], "final_step": evaluations[-1]["step"],
            "evaluations": [(e["step"], e[f"eval_{name}"]) for e in evaluations],
            "train_seconds": round(result["train_seconds"], 1), "wall_seconds": round(time.time() - started, 1)}


def mean_std(values):
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="LABEL=SOURCE[:EXTRA FLAGS]; repeat")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--recipe", default=SST2_RECIPE, help="finetune flags shared by every run")
    parser.add_argument("--runs-dir", default="runs/finetune-seeds", help="where the fine-tuned models go")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default="finetune_seeds", help="results file prefix under results/ beside this script")
    parser.add_argument("--reference", help="label the paired differences are taken against (default: the first "
                        "--model)")
    args = parser.parse_args()
    models = [parse_model(m) for m in args.model]

    path = RESULTS / f"{args.name}.json"
    for label, source, extra in models:
        for seed in args.seeds:
            key = f"{label}/seed{seed}/{args.recipe}"
            if key in load(path)["runs"]:
                continue
            metrics = run_one(source, extra, args.recipe, seed, Path(args.runs_dir) / f"{label}-seed{seed}",
                              args.threads)
            record(path, key, {"label": label, "source": source, "extra": extra, "seed": seed,
                               "recipe": args.recipe, "metrics": metrics})
    table = report(load(path)["runs"], args.reference or models[0][0])
    atomic_write_text(RESULTS / f"{args.name}.md", table)
    print(table)


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {"runs": {}}


def record(path: Path, key: str, entry: dict):
    """Add one run to the results file: re-read and merged under a lock, so several processes (say one per core,
    each with its own --model) can share one file; written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".json.lock")):
        results = load(path)
        results["runs"][key] = entry
        atomic_write_text(path, json.dumps(results, indent=1))


def report(runs: dict, reference: str) -> str:
    """One table per recipe, the reference model first; paired differences are taken against it."""
    lines = []
    for recipe in dict.fromkeys(run["recipe"] for run in runs.values()):
        of_recipe = [run for run in runs.values() if run["recipe"] == recipe]
        labels = sorted(dict.fromkeys(run["label"] for run in of_recipe), key=lambda label: label != reference)
        ref = labels[0]  # the given reference, or the first model when it has no run with this recipe
        best = {(run["label"], run["seed"]): run["metrics"]["best"] for run in of_recipe}
        final = {(run["label"], run["seed"]): run["metrics"]["final"] for run in of_recipe}
        metric = of_recipe[0]["metrics"]["metric"]
        lines += [f"Recipe: `sharedbert finetune {recipe} --seed S`; dev {metric}, the best of the evaluations "
                  "(selected on dev) and the final step's; mean ± std over seeds. Paired difference: the same seeds "
                  f"against `{ref}`.", "",
                  f"| model | source | seeds | best | final step | best − {ref} (paired) | per seed (best) |",
                  "|---|---|---|---|---|---|---|"]
        for label in labels:
            run = next(r for r in of_recipe if r["label"] == label)
            seeds = sorted(seed for (name, seed) in best if name == label)
            paired = [best[label, seed] - best[ref, seed] for seed in seeds if (ref, seed) in best]
            source = run["source"] + (" " + " ".join(run["extra"]) if run["extra"] else "")
            lines.append(f"| {label} | `{source}` | {', '.join(map(str, seeds))} | "
                         f"{mean_std([best[label, s] for s in seeds])} | "
                         f"{mean_std([final[label, s] for s in seeds])} | "
                         f"{'–' if label == ref else mean_std(paired)} | "
                         f"{' / '.join(f'{best[label, s]:.3f}' for s in seeds)} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
