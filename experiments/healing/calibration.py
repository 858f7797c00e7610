"""How much closed-form calibration (`sharedbert.conversion.calibration`) recovers before any healing.

all-MiniLM-L6-v2 converted to each attention type by the weight-only fits ("weights", "invariant") and then calibrated
on N pieces of the healing corpus; each scored on STS-B dev (Spearman of cosine similarities, sentence-transformers'
EmbeddingSimilarityEvaluator through `sharedbert.sentence_embeddings.sts_spearman`, with the model's own mean pooling and
Normalize). The original model is scored the same way. Also the wall-clock seconds of each calibration.

    python experiments/healing/calibration.py --threads 1    # writes results/calibration.{json,md} beside it

`--split train` scores STS-B train instead of dev (held-out data to choose a fit on, as experiments/held-out-selection
does); `--sentences` with no counts measures the weight-only fits alone, without calibrating.
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
REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", nargs="+", default=["shared", "symmetric", "pairwise"])
    parser.add_argument("--sentences", nargs="*", type=int, default=[128, 512],
                        help="calibration piece counts (none: the weight-only fits alone)")
    parser.add_argument("--split", choices=("dev", "train"), default="dev", help="the STS-B file scored")
    parser.add_argument("--note", default="", help="what this run is for, recorded in the results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoTokenizer, BertModel

    from sharedbert import sentence_embeddings
    from sharedbert.atomic import atomic_write_text
    from sharedbert.conversion.calibration import calibrate, calibration_batches
    from sharedbert.conversion.bert import from_bert
    from sharedbert.precision import cpu_name
    from sharedbert.training import resolve_source, shared_data_dir
    from sharedbert.recipes.convert_and_heal import calibration_texts

    torch.set_num_threads(args.threads)
    data = shared_data_dir("glue")
    if data is None or shared_data_dir("mlm-text") is None:
        raise SystemExit("The shared data (glue/STS-B and mlm-text) was not found beside the repository.")
    sts, corpus = data / "glue" / "STS-B" / f"{args.split}.tsv", shared_data_dir("mlm-text") / "mlm-text"
    base = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(base)
    teacher = BertModel.from_pretrained(base).eval()

    # What `sharedbert convert --corpus` calibrates on; a smaller count takes a prefix of the same pieces.
    texts = calibration_texts([corpus], max(args.sentences)) if args.sentences else []

    def score(model):
        return sentence_embeddings.sts_spearman(sentence_embeddings.from_model(model, tokenizer, modules_from=base), sts)

    rows = [{"attention_type": "original", "fit": "-", "sentences": 0, "spearman": sentence_embeddings.sts_spearman(
        sentence_embeddings.load(base), sts), "seconds": 0.0}]
    print(rows[-1], flush=True)
    for attention_type in args.types:
        for fit in ("weights", "invariant"):
            rows.append({"attention_type": attention_type, "fit": fit, "sentences": 0, "seconds": 0.0,
                         "spearman": score(from_bert(base, attention_type=attention_type, fit_method=fit))})
            print(rows[-1], flush=True)
        for count in args.sentences:
            model = from_bert(base, attention_type=attention_type, fit_method="invariant")
            batches = calibration_batches(tokenizer, texts[:count])
            started = time.perf_counter()
            calibrate(model, teacher, batches)
            seconds = time.perf_counter() - started
            rows.append({"attention_type": attention_type, "fit": "calibrated", "sentences": count,
                         "tokens": int(sum(int(b["attention_mask"].sum()) for b in batches)),
                         "seconds": seconds, "spearman": score(model)})
            print(rows[-1], flush=True)

    args.output_dir.mkdir(parents=True, exist_ok=True)
    command = "python experiments/healing/calibration.py" + "".join(
        f" --{name} {' '.join(map(str, value))}".rstrip() for name, value in (("types", args.types),
                                                                             ("sentences", args.sentences))
        if value != parser.get_default(name)) + (f" --split {args.split}" if args.split != "dev" else "") + (
        f" --threads {args.threads}") + (
        f" --output-dir {os.path.relpath(args.output_dir.resolve(), REPO)}" if args.output_dir != RESULTS else "")
    cpu = cpu_name()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    atomic_write_text(args.output_dir / "calibration.json", json.dumps(
        {"command": command, "threads": args.threads, "cpu": cpu, "torch": torch.__version__, "split": args.split,
         "sts_file": f"glue/STS-B/{args.split}.tsv", "commit": commit, "note": args.note, "rows": rows},
        indent=1) + "\n")
    lines = [f"# Calibration before healing: all-MiniLM-L6-v2, STS-B {args.split} Spearman (no healing, no "
             "fine-tuning)", "", f"`{command}` (fp32, {cpu}, commit {commit})", ""]
    if args.note:
        lines += [args.note, ""]
    lines += ["| attention type | fit | calibration pieces (tokens) | " + f"STS-B {args.split} | calibration seconds |",
              "|---|---|---|---|---|"]
    for row in rows:
        pieces_text = f"{row['sentences']} ({row['tokens']:,})" if row["sentences"] else "–"
        seconds = f"{row['seconds']:.0f}" if row["seconds"] else "–"
        lines.append(f"| {row['attention_type']} | {row['fit']} | {pieces_text} | {row['spearman']:.4f} | {seconds} |")
    text = "\n".join(lines) + "\n"
    atomic_write_text(args.output_dir / "calibration.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
