"""Where along the length does a healed all-MiniLM-L6-v2 conversion agree least with the original?

The build's length report (`build_recipes.py`) gives three buckets; this reads the same 48 held-out passages cut to
each of 13 lengths from 16 to 512 tokens (`prefix_curve` below) and gives, per length, the mean embedding
cosine to the original and its paired difference to the same passages at 128 tokens (± standard error). The unhealed
conversion (the invariant fit, uncalibrated) is measured too: a control whose error was never fitted at any length, so
the curve's shape that owes nothing to healing shows in it. So are `noise-0.1` and `noise-0.2`: the original itself
(converted exactly, standard attention) with Gaussian noise of 0.1 and 0.2 times each query, key and value weight's
standard deviation added (seed 0), an attention error with nothing to do with length or with shared attention.

A second table condenses each curve into three buckets like the build report's (32-128, 160-256 and 320-512 tokens)
as the error 1 - cosine, and each longer bucket's error as a multiple of the short one's: for a model whose error
grows with length only as any attention error's does, that ratio matches the noise controls'.

    python experiments/healing/length_curve.py uncal-2x uncal --threads 1   # builds of build_recipes.py
    python experiments/healing/length_curve.py --report-only                 # re-render the saved results

Results: results/length_curve.{json,md} beside this script; a model measured again replaces its row, others are
kept. The builds are read from runs/build-recipes/NAME/healed.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # the repository
RESULTS = HERE / "results"
BUILDS = ROOT / "runs" / "build-recipes"
LENGTHS = [16, 32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512]
AGAINST = 128
CONTROL = "unhealed"
NOISE = {"noise-0.1": 0.1, "noise-0.2": 0.2}
SUMMARY = {"32-128": (32, 64, 96, 128), "160-256": (160, 192, 224, 256), "320-512": (320, 384, 448, 512)}


def measure(names: list[str], passages_count: int) -> dict[str, list[dict]]:
    from transformers import AutoTokenizer, BertModel

    from sharedbert import SharedBertModel, sentence_embeddings
    from sharedbert.conversion.bert import from_bert
    from sharedbert.recipes.build_minilm import healing_corpus, held_out_passages
    from sharedbert.training.models import resolve_source

    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(source)
    teacher = BertModel.from_pretrained(source).eval()
    pooling = sentence_embeddings.pooling_of(source)
    _, held_out = healing_corpus()
    passages = held_out_passages(held_out, tokenizer, count=passages_count)
    curves = {}
    for name in [CONTROL, *NOISE, *names]:
        if name == CONTROL:
            model = from_bert(source, attention_type="shared", fit_method="invariant")
        elif name in NOISE:
            model = perturbed(from_bert(source, attention_type="standard"), NOISE[name])
        else:
            folder = BUILDS / name / "healed"
            if not folder.is_dir():
                raise SystemExit(f"No build {folder}: run "
                                 f"`python experiments/healing/build_recipes.py --recipe {name}` first.")
            model = SharedBertModel.from_pretrained(folder)
        curves[name] = prefix_curve(model.eval(), teacher, tokenizer, passages, LENGTHS, AGAINST, pooling=pooling)
        print(f"{name}: " + ", ".join(f"{row['tokens']} {row['mean_cosine']:.4f}" for row in curves[name]), flush=True)
    return curves


def prefix_curve(student, teacher, tokenizer, passages: list[dict], lengths: list[int], against: int,
                 pooling=None, batch_size: int = 8) -> list[dict]:
    """The agreement as a curve over length: every passage (`held_out_passages`' `text`) read cut to each of
    `lengths` tokens. Per length: the mean embedding cosine to the teacher, its standard error, and the paired
    difference to the passages' own cosine at length `against` (one of `lengths`) with its standard error. The cosine
    is the build's (`build_minilm.prefix_agreement`): the one `distillation.Distiller` computes for healing's loss."""
    import statistics

    import torch

    from sharedbert.training.distillation import Distiller
    from sharedbert.training.healing_arguments import HealLossConfig

    if against not in lengths:
        raise ValueError(f"against={against} must be one of the lengths {lengths}.")

    def sem(values):
        return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")

    student.eval()
    teacher.eval()
    distiller = Distiller(student, teacher, HealLossConfig(), pooling=pooling)
    measured = []
    try:
        with torch.no_grad():
            for length in lengths:
                cosines = []
                for start in range(0, len(passages), batch_size):
                    encoded = [tokenizer(p["text"], truncation=True, max_length=length)
                               for p in passages[start:start + batch_size]]
                    batch = tokenizer.pad(encoded, return_tensors="pt")
                    distiller.loss({k: v for k, v in batch.items()
                                    if k in ("input_ids", "attention_mask", "token_type_ids")})
                    cosines += distiller.last_cosines.tolist()
                measured.append(cosines)
    finally:
        distiller.close()
    reference = measured[lengths.index(against)]
    rows = []
    for length, cosines in zip(lengths, measured):
        differences = [c - r for c, r in zip(cosines, reference)]
        rows.append(dict(tokens=length, passages=len(cosines), mean_cosine=statistics.fmean(cosines),
                         sem_cosine=sem(cosines), difference=statistics.fmean(differences),
                         standard_error=sem(differences)))
    return rows


def perturbed(model, scale: float, seed: int = 0):
    """`model` with Gaussian noise of `scale` times each query, key and value weight's standard deviation added."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.rsplit(".", 2)[-2] in ("query", "key", "value") and weight.dim() == 2:
                weight.add_(torch.randn(weight.shape, generator=generator) * weight.std() * scale)
    return model


def errors(rows: list[dict]) -> dict[str, float]:
    """Mean 1 - cosine over the lengths of each `SUMMARY` bucket."""
    at = {row["tokens"]: 1 - row["mean_cosine"] for row in rows}
    return {bucket: sum(at[n] for n in lengths) / len(lengths) for bucket, lengths in SUMMARY.items()}


def render(curves: dict[str, list[dict]]) -> str:
    lines = [f"Embedding cosine to all-MiniLM-L6-v2 by length (`python experiments/healing/length_curve.py`): "
             "the same "
             f"{next(iter(curves.values()))[0]['passages']} held-out passages cut to each length; each cell is the "
             f"mean cosine and, below it, the paired difference to the same passages at {AGAINST} tokens ± standard "
             "error. `unhealed` is the conversion before any healing (a control).", "",
             "| model | " + " | ".join(str(n) for n in LENGTHS) + " |",
             "|---|" + "---|" * len(LENGTHS)]
    for name, rows in curves.items():
        cells = [f"{row['mean_cosine']:.4f}<br>{row['difference']:+.4f} ± {row['standard_error']:.4f}" for row in rows]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    short, *longer = SUMMARY
    lines += ["", "Error 1 - cosine, mean over each bucket's lengths, and the longer buckets' error as a multiple of "
              f"the {short} bucket's:", "",
              "| model | " + " | ".join(SUMMARY) + " | " + " | ".join(f"{b} / {short}" for b in longer) + " |",
              "|---|" + "---|" * (2 * len(SUMMARY) - 1)]
    for name, rows in curves.items():
        error = errors(rows)
        lines.append(f"| {name} | " + " | ".join(f"{error[b]:.4f}" for b in SUMMARY) + " | "
                     + " | ".join(f"×{error[b] / error[short]:.2f}" for b in longer) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="*", help="recipe names of build_recipes.py whose healed models to measure")
    parser.add_argument("--passages", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--report-only", action="store_true", help="re-render the saved results")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sharedbert.atomic import atomic_write_text

    saved = RESULTS / "length_curve.json"
    curves = json.loads(saved.read_text(encoding="utf-8")) if saved.is_file() else {}
    if not args.report_only:
        import torch

        torch.set_num_threads(args.threads)
        curves |= measure(args.builds, args.passages)
    if not curves:
        raise SystemExit(f"Nothing measured and no {saved}: name a build to measure.")
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_text(saved, json.dumps(curves, indent=1) + "\n")
    text = render(curves)
    atomic_write_text(RESULTS / "length_curve.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
