"""Fine-tune several starting models on one GLUE task with one recipe over several seeds, side by side.

Answers "is model A within x points of model B after fine-tuning?" with a mean and a spread instead of one run: each
seed changes the training subset, the head's initialisation and the batch order, and the same seeds are used for every
model, so the comparison is paired.

Usage (from the repository root):

    python benchmarks/finetune_seeds.py --seeds 1 2 3 \
        --model original=all-MiniLM-L6-v2:--no-convert \
        --model healed=runs/minilm-shared \
        --model on-the-fly=all-MiniLM-L6-v2

A model is LABEL=SOURCE[:EXTRA FLAGS], SOURCE being what `sharedbert finetune --model` takes. The recipe defaults to
the README's SST-2 recipe (8,000 examples, 1 epoch, length 64, batch 32, lr 1e-4, 4 evaluations). Every run is a real
`python -m sharedbert finetune` process; its `eval_results.json` is cached in the results JSON (keyed by label, seed
and recipe), so re-running only runs what is missing. Results: benchmarks/results/NAME.{json,md}.
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

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
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
    values = [v for v in values if v is not None]
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
    parser.add_argument("--name", default="finetune_seeds", help="results file prefix under benchmarks/results")
    args = parser.parse_args()
    models = [parse_model(m) for m in args.model]

    path = RESULTS / f"{args.name}.json"
    results = json.loads(path.read_text()) if path.is_file() else {"runs": {}}
    results["recipe"] = args.recipe
    for label, source, extra in models:
        for seed in args.seeds:
            key = f"{label}/seed{seed}/{args.recipe}"
            if key in results["runs"]:
                continue
            out_dir = Path(args.runs_dir) / f"{label}-seed{seed}"
            metrics = run_one(source, extra, args.recipe, seed, out_dir, args.threads)
            results["runs"][key] = {"label": label, "source": source, "extra": extra, "seed": seed,
                                    "recipe": args.recipe, "metrics": metrics}
            RESULTS.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(results, indent=1))
            os.replace(tmp, path)

    lines = [f"Recipe: `sharedbert finetune {args.recipe} --seed S` (seeds {', '.join(map(str, args.seeds))})", "",
             "| model | source | best of the evaluations | final step | per seed (best) |", "|---|---|---|---|---|"]
    for label, source, extra in models:
        runs = [results["runs"].get(f"{label}/seed{seed}/{args.recipe}") for seed in args.seeds]
        scores = [(r["metrics"]["best"], r["metrics"]["final"]) if r else (None, None) for r in runs]
        per_seed = " / ".join("–" if b is None else f"{b:.3f}" for b, _ in scores)
        lines.append(f"| {label} | `{source}{' ' + ' '.join(extra) if extra else ''}` | "
                     f"{mean_std([b for b, _ in scores])} | {mean_std([f for _, f in scores])} | {per_seed} |")
    table = "\n".join(lines) + "\n"
    (RESULTS / f"{args.name}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
