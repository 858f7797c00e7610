"""The study's measurement (README.md): all-MiniLM-L6-v2 converted to standard attention with 1, 2 and 3 stored
attention layers by each fit, scored unhealed on STS-B train (chooses) and dev (reports).

    python experiments/shared-layer-fit/measure.py    # writes results/measure.json and prints the table
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = (1, 2, 3)
FITS = ("weights", "invariant")


def choose(scores: dict) -> dict:
    """The declared rule: per stored-layer count, the fit with the higher train Spearman; `auto` changes only if
    `invariant` wins at every count."""
    winners = {sets: max(FITS, key=lambda fit: scores[sets][fit]["train"]) for sets in scores}
    return {"winner_per_count": winners, "auto_takes_invariant": all(w == "invariant" for w in winners.values())}


def table(record: dict) -> str:
    """The README's results table from a results/measure.json record."""
    lines = ["| stored attention layers (of 6) | fit | STS-B train (chooses) | STS-B dev (reports) |", "|---|---|---|---|",
             f"| 6 (the original) | — | {record['original']['train']:.4f} | {record['original']['dev']:.4f} |"]
    for sets, fits in record["scores"].items():
        for fit, score in fits.items():
            lines.append(f"| {sets} | `{fit}` | {score['train']:.4f} | {score['dev']:.4f} |")
    return "\n".join(lines)


def main() -> int:
    import torch

    from sharedbert.conversion.bert import from_bert
    from sharedbert.data import find_glue_dir
    from sharedbert.precision import cpu_name
    from sharedbert.sentence_embeddings import sts_spearman
    from sharedbert.training.models import load_tokenizer, resolve_source
    from transformers import AutoModel

    torch.set_num_threads(1)
    # The commit the run starts at: the code it imported (a commit made while it runs must not be recorded instead).
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = load_tokenizer(source)
    glue = find_glue_dir()
    if glue is None or not (glue / "STS-B").is_dir():
        raise SystemExit("STS-B is not in the shared data folder (glue/STS-B): set SHAREDBERT_DATA.")
    files = {split: glue / "STS-B" / f"{split}.tsv" for split in ("train", "dev")}

    def score(model) -> dict:
        return {split: sts_spearman(model.eval(), path, tokenizer) for split, path in files.items()}

    results = {"original": score(AutoModel.from_pretrained(source))}
    scores = {}
    for sets in SETS:
        for fit in FITS:
            model = from_bert(source, attention_type="standard", layer_sharing="attention", num_unique_layers=sets,
                              fit_method=fit)
            scores.setdefault(sets, {})[fit] = score(model)
            print(f"{sets} stored, {fit}: {scores[sets][fit]}", flush=True)
    record = {"cpu": cpu_name(), "torch": torch.__version__, "threads": 1, "precision": "fp32", "git_commit": commit,
              "model": "all-MiniLM-L6-v2", "original": results["original"],
              "scores": {str(k): v for k, v in scores.items()}, "choice": choose(scores)}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "measure.json").write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))
    print(json.dumps(record["choice"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
