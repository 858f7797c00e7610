"""How much closed-form calibration (`sharedbert.calibrate`) recovers before any healing.

all-MiniLM-L6-v2 converted to each attention type by the weight-only fits ("weights", "invariant") and then calibrated
on N pieces of the healing corpus; each scored on STS-B dev (Spearman of cosine similarities, sentence-transformers'
EmbeddingSimilarityEvaluator through `sharedbert.sentence_embeddings.sts_spearman`, with the model's own mean pooling and
Normalize). The original model is scored the same way. Also the wall-clock seconds of each calibration.

    python experiments/healing/calibration.py --threads 1    # writes results/calibration.{json,md} beside it
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", nargs="+", default=["shared", "symmetric", "pairwise"])
    parser.add_argument("--sentences", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoTokenizer, BertModel

    from sharedbert import sentence_embeddings
    from sharedbert.atomic import atomic_write_text
    from sharedbert.calibrate import calibrate, calibration_batches
    from sharedbert.convert import from_bert
    from sharedbert.precision import cpu_name
    from sharedbert.training import resolve_source, shared_data_dir
    from sharedbert.training.conversion import calibration_texts

    torch.set_num_threads(args.threads)
    data = shared_data_dir("glue")
    if data is None or shared_data_dir("mlm-text") is None:
        raise SystemExit("The shared data (glue/STS-B and mlm-text) was not found beside the repository.")
    sts, corpus = data / "glue" / "STS-B" / "dev.tsv", shared_data_dir("mlm-text") / "mlm-text"
    base = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(base)
    teacher = BertModel.from_pretrained(base).eval()

    # What `sharedbert convert --corpus` calibrates on; a smaller count takes a prefix of the same pieces.
    texts = calibration_texts([corpus], max(args.sentences))

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
        f" --{name} {' '.join(map(str, value))}" for name, value in (("types", args.types), ("sentences", args.sentences))
        if value != parser.get_default(name)) + f" --threads {args.threads}" + (
        f" --output-dir {os.path.relpath(args.output_dir.resolve(), REPO)}" if args.output_dir != RESULTS else "")
    cpu = cpu_name()
    atomic_write_text(args.output_dir / "calibration.json", json.dumps(
        {"command": command, "threads": args.threads, "cpu": cpu, "torch": torch.__version__, "rows": rows},
        indent=1) + "\n")
    lines = ["# Calibration before healing: all-MiniLM-L6-v2, STS-B dev Spearman (no healing, no fine-tuning)", "",
             f"`{command}` (fp32, {cpu})", "",
             "| attention type | fit | calibration pieces (tokens) | STS-B dev | calibration seconds |",
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
