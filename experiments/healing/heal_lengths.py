"""Agreement of healed SharedBerts with the original all-MiniLM-L6-v2 by input length, on held-out text.

For each model: the mean cosine between its sentence embeddings and the original's (all-MiniLM-L6-v2's mean Pooling)
and the distillation loss healing minimises, in token-length buckets ≤128, 129–256 and 257–512, on pieces of the book
healing never reads (`sharedbert.recipes.build_minilm.HELD_OUT`). Minute 0 is the unhealed conversion (the
invariant fit healing starts from); STS-B dev (EmbeddingSimilarityEvaluator) is reported beside it.

Two designs: different passages per bucket (`held_out_texts`, `length_agreement`; a bucket's gap to the shortest
mixes length with what the passages say), and the same passages cut to one length per bucket (`held_out_passages`,
`prefix_agreement`; paired, so the gap is length alone and its standard error is the paired differences').
A third table is a diagnostic: the relative error of the last hidden state (Σ‖s − t‖² / Σ‖t‖²) in bands of 64
positions, on the same passages read whole (512 tokens) and cut to 192 tokens, to tell position from sequence length.

    python experiments/healing/heal_lengths.py --models runs/build-minilm/healed-checkpoints/minute-10 \
        runs/build-minilm/healed-checkpoints/minute-20 runs/build-minilm/healed --threads 1

Results: results/heal_lengths.{json,md} beside this script (--name changes the prefix).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=[], help="healed SharedBert folders")
    parser.add_argument("--per-bucket", type=int, default=48, help="held-out texts per length bucket")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="heal_lengths")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch
    from transformers import AutoTokenizer, BertModel

    from sharedbert import SharedBertModel, sentence_embeddings
    from sharedbert.atomic import atomic_write_text
    from sharedbert.conversion.bert import from_bert
    from sharedbert.recipes.build_minilm import (
        STS_DEV,
        healing_corpus,
        held_out_passages,
        held_out_texts,
        length_agreement,
        length_gaps,
        prefix_agreement,
    )
    from sharedbert.data import shared_data_dir
    from sharedbert.training.models import resolve_source

    torch.set_num_threads(args.threads)
    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(source)
    original = BertModel.from_pretrained(source).eval()
    pooling = sentence_embeddings.pooling_of(source)
    _, held_out = healing_corpus()
    texts = held_out_texts(held_out, tokenizer, per_bucket=args.per_bucket)
    passages = held_out_passages(held_out, tokenizer, count=args.per_bucket)
    sts = shared_data_dir(STS_DEV) / STS_DEV

    def progress_of(folder: Path):
        for name, key in (("heal_progress.json", None), ("conversion_report.json", "heal")):
            if (folder / name).is_file():
                data = json.loads((folder / name).read_text())
                data = data[key] if key else data
                return round(data["elapsed_seconds"] / 60, 1), data.get("step", data.get("steps"))
        return None, None

    rows = []
    candidates = [("unhealed (invariant fit)", 0.0, 0, from_bert(source, attention_type="shared",
                                                                   fit_method="invariant"))]
    for folder in map(Path, args.models):
        minutes, steps = progress_of(folder)
        candidates.append((str(folder), minutes, steps, SharedBertModel.from_pretrained(folder)))
    for name, minutes, steps, model in candidates:
        model.eval()
        buckets = length_agreement(model, original, tokenizer, texts, pooling=pooling)
        spearman = sentence_embeddings.sts_spearman(sentence_embeddings.from_model(model, tokenizer, modules_from=source), sts)
        prefixes, prefix_gaps = prefix_agreement(model, original, tokenizer, passages, pooling=pooling)
        positions = {cut: position_error(model, original, tokenizer, passages, cut) for cut in CUTS}
        rows.append(dict(model=name, minutes=minutes, steps=steps, sts_b=spearman, buckets=buckets,
                         gaps=length_gaps(buckets), prefix_buckets=prefixes, prefix_gaps=prefix_gaps,
                         position_error=positions))
        print(name, f"STS-B {spearman:.4f}",
              " ".join(f"{b['bucket']}: cos {b['mean_cosine']:.4f} loss {b['distillation_loss']:.4f}" for b in buckets),
              "| same passages:", " ".join(f"{b['bucket']}: cos {b['mean_cosine']:.4f}" for b in prefixes), flush=True)

    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_text(RESULTS / f"{args.name}.json", json.dumps({"held_out": held_out.name,
                                                                 "per_bucket": args.per_bucket, "rows": rows}, indent=1))
    lines = [f"Agreement with all-MiniLM-L6-v2 on held-out text ({held_out.name}, {args.per_bucket} pieces per "
             "bucket): mean embedding cosine / distillation loss, by token length; STS-B dev Spearman "
             "(EmbeddingSimilarityEvaluator). Then each longer bucket's cosine minus the shortest's, ± its standard "
             "error; * marks a bucket worse by more than two standard errors.", "",
             "Different passages in each bucket:", ""]
    lines += table(rows, "buckets", "gaps")
    lines += ["", f"The same {args.per_bucket} passages cut to one length drawn in each bucket (the shortest from 32 "
              "tokens; differences paired by passage):", ""]
    lines += table(rows, "prefix_buckets", "prefix_gaps")
    bands = [f"{low}-{low + BAND}" for low in range(0, max(CUTS), BAND)]
    lines += ["", "Relative error of the last hidden state by position, the same passages read at two lengths:", "",
              "| model | tokens | " + " | ".join(bands) + " |", "|---|---|" + "---|" * len(bands)]
    for row in rows:
        for cut, errors in row["position_error"].items():
            lines.append(f"| {row['model']} | {cut} | " + " | ".join(f"{e:.3f}" for e in errors)
                         + " | " * (len(bands) - len(errors)) + " |")
    atomic_write_text(RESULTS / f"{args.name}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


CUTS = (512, 192)  # sequence lengths of the position diagnostic
BAND = 64  # positions per band


def position_error(model, original, tokenizer, passages: list[dict], cut: int, batch_size: int = 8) -> list[float]:
    """Σ‖s − t‖² / Σ‖t‖² of the last hidden state in bands of BAND positions, the passages cut to `cut` tokens."""
    import torch

    squared_error, squared_norm = torch.zeros(cut, dtype=torch.float64), torch.zeros(cut, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, len(passages), batch_size):
            batch = tokenizer([p["text"] for p in passages[start:start + batch_size]], truncation=True,
                              max_length=cut, padding=True, return_tensors="pt")
            batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            mask = batch["attention_mask"].unsqueeze(-1)
            teacher, student = original(**batch).last_hidden_state, model(**batch).last_hidden_state
            length = teacher.shape[1]
            squared_error[:length] += ((student - teacher).pow(2) * mask).sum((0, 2)).double()
            squared_norm[:length] += (teacher.pow(2) * mask).sum((0, 2)).double()
    return [float(squared_error[a:a + BAND].sum() / squared_norm[a:a + BAND].sum()) for a in range(0, cut, BAND)]


def table(rows: list[dict], buckets: str, gaps: str) -> list[str]:
    header = [b["bucket"] for b in rows[0][buckets]]
    lines = ["| model | minutes | steps | STS-B | " + " | ".join(f"{h} tokens" for h in header) + " | "
             + " | ".join(f"{h} − {header[0]}" for h in header[1:]) + " |",
             "|---|---|---|---|" + "---|" * (2 * len(header) - 1)]
    for row in rows:
        cells = " | ".join(f"{b['mean_cosine']:.4f} / {b['distillation_loss']:.3f}" for b in row[buckets])
        differences = " | ".join(f"{g['difference']:+.4f} ± {g['standard_error']:.4f}"
                                 + ("" if g["within_noise"] else " *") for g in row[gaps])
        lines.append(f"| {row['model']} | {row['minutes']} | {row['steps']} | {row['sts_b']:.4f} | {cells} | "
                     f"{differences} |")
    return lines


if __name__ == "__main__":
    main()
