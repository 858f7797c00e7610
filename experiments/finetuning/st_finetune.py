"""Fine-tune a SharedBert sentence-transformers model with sentence-transformers' own SentenceTransformerTrainer:
STS-B train pairs with CosineSimilarityLoss, STS-B dev scored by EmbeddingSimilarityEvaluator before and after
(`sharedbert.sentence_embeddings.finetune_sts`).

    python experiments/finetuning/st_finetune.py runs/build-minilm/healed --steps 200 --threads 1

Results: results/st_finetune.json beside this script (--name changes the file name). The fine-tuned model goes to
--output-dir. Both appear complete or not at all: the model is saved into a temporary folder renamed into place, the
JSON written atomically, after it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a sentence-transformers model folder (e.g. the healed SharedBert)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", default="runs/st-finetune")
    parser.add_argument("--name", default="st_finetune")
    parser.add_argument("--glue-dir", help="the GLUE root, holding STS-B/train.tsv and dev.tsv (default: glue/ in the "
                        "shared data folder: $SHAREDBERT_DATA, else shared/data beside the repository)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from sharedbert import sentence_embeddings
    from sharedbert.atomic import atomic_directory, atomic_write_text
    from sharedbert.data.location import not_found_message, shared_data_dir

    torch.set_num_threads(args.threads)
    if args.glue_dir:
        glue = Path(args.glue_dir) / "STS-B"
    elif shared_data_dir("glue/STS-B/train.tsv") is None:
        parser.error(not_found_message("glue/STS-B/train.tsv", "--glue-dir GLUE_ROOT"))
    else:
        glue = shared_data_dir("glue/STS-B/train.tsv") / "glue" / "STS-B"
    with atomic_directory(args.output_dir) as staging:  # a kill mid-training leaves no half-saved model
        result = sentence_embeddings.finetune_sts(args.model, glue / "train.tsv", glue / "dev.tsv", staging,
                                         max_steps=args.steps, batch_size=args.batch_size, learning_rate=args.lr)
    model = Path(args.model)
    result = dict(model=os.path.relpath(model, RESULTS.parents[2]) if model.is_absolute() else str(model),
                  threads=args.threads, **result)
    atomic_write_text(RESULTS / f"{args.name}.json", json.dumps(result, indent=1))
    print(f"STS-B dev Spearman (EmbeddingSimilarityEvaluator): {result['dev_before']:.4f} before, "
          f"{result['dev_after']:.4f} after {args.steps} steps of batch {args.batch_size} "
          f"({result['seconds']:.0f} s; {result['train_pairs']} training pairs)")


if __name__ == "__main__":
    main()
