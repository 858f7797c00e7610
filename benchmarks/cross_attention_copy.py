"""How fast does each attention type's cross-attention learn to copy? A tiny seq2seq model trained from scratch.

Why: in the seq2seq study (benchmarks/seq2seq_study.py) a decoder must learn, through cross-attention that starts
untrained, to copy from its source. With shared attention the cross-attention scores are (S_X⊙dq)(S_H⊙dk)ᵀ with the
ONE projection Ws on both sides, so they are a symmetric bilinear form of the two sides' states
(X·Ws·diag(dq⊙dk)·Wsᵀ·Hᵀ); standard attention's Wq·Wkᵀ need not be symmetric. This script measures what that costs on
a task with nothing else to learn.

The task: the target is 10 random tokens; the source is the same with 1-3 junk tokens (from a separate range)
inserted at a random place, so the alignment between target and source positions shifts inside a row and differs
between rows: the decoder has to find its place by content, as in text infilling. Every model is the same
`SharedBertForConditionalGeneration` (2 layers, hidden 64, 4 heads, nothing shared between encoder and decoder) but
for `attention_type`, trained with AdamW (lr 1e-3, batches of 32, no dropout) from the same initial seed per run.
Reported per attention type over seeds: the first step at which the 50-step mean training loss falls below 0.1
("steps to copy"; the task's loss can reach 0) and the final 50-step mean loss.

    python benchmarks/cross_attention_copy.py                 # 4 types x 3 seeds, about 14 minutes on one core
    python benchmarks/cross_attention_copy.py --quick         # seconds (the test runs it)

Writes benchmarks/results/cross_attention_copy.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ATTENTION_TYPES = ("standard", "shared", "symmetric", "pairwise")
CONTENT_TOKENS = range(10, 40)  # target tokens; 5-9 are junk, 0-4 special (pad, -, [CLS]=2, [SEP]=3)
JUNK_TOKENS = range(5, 10)
LENGTH, MAX_JUNK, BATCH = 10, 3, 32
COPIED_BELOW = 0.1


def make_batch(generator):
    import torch

    targets = torch.randint(CONTENT_TOKENS.start, CONTENT_TOKENS.stop, (BATCH, LENGTH), generator=generator)
    sources = torch.zeros((BATCH, LENGTH + MAX_JUNK), dtype=torch.long)
    for row in range(BATCH):
        at = int(torch.randint(0, LENGTH + 1, (1,), generator=generator))
        junk_length = int(torch.randint(1, MAX_JUNK + 1, (1,), generator=generator))
        junk = torch.randint(JUNK_TOKENS.start, JUNK_TOKENS.stop, (junk_length,), generator=generator)
        noisy = torch.cat([targets[row, :at], junk, targets[row, at:]])
        sources[row, : len(noisy)] = noisy

    def framed(ids):  # [CLS] ids [SEP], padding (0) left where it is
        return torch.cat([torch.full((BATCH, 1), 2), ids, torch.full((BATCH, 1), 0)], 1).scatter_(
            1, (ids != 0).sum(1, keepdim=True) + 1, 3)

    sources, targets = framed(sources), framed(targets)
    return sources, (sources != 0).long(), targets


def run(attention_type: str, seed: int, steps: int) -> dict:
    import torch

    from sharedbert import SharedBertConfig
    from sharedbert.modeling_sharedbert import SharedBertForConditionalGeneration

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    config = SharedBertConfig(
        vocab_size=CONTENT_TOKENS.stop, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=32, attention_type=attention_type, is_encoder_decoder=True,
        decoder_start_token_id=2, pad_token_id=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = SharedBertForConditionalGeneration(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, started = [], time.perf_counter()
    for _ in range(steps):
        sources, mask, targets = make_batch(generator)
        loss = model(input_ids=sources, attention_mask=mask, labels=targets.masked_fill(targets == 0, -100)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    window = 50
    means = [statistics.fmean(losses[max(0, i - window + 1): i + 1]) for i in range(len(losses))]
    copied = next((i + 1 for i, value in enumerate(means) if i + 1 >= window and value < COPIED_BELOW), None)
    return {"attention_type": attention_type, "seed": seed, "steps": steps, "steps_to_copy": copied,
            "final_loss": means[-1], "loss_every_50": [round(means[i], 4) for i in range(window - 1, steps, window)],
            "seconds": time.perf_counter() - started}


def report(results: dict) -> str:
    runs = results["runs"]
    lines = [
        "# Cross-attention learning to copy, by attention type",
        "",
        f"`{results['command']}`; tiny seq2seq from scratch, {results['steps']} steps, seeds "
        f"{', '.join(map(str, results['seeds']))} (see the script's docstring). \"Steps to copy\": first step at which "
        f"the 50-step mean training loss is below {COPIED_BELOW}; never = not within the run.",
        "",
        "| attention type | steps to copy, per seed | mean | final loss, mean |",
        "|---|---|---|---|",
    ]
    for kind in results["attention_types"]:
        rows = [r for r in runs if r["attention_type"] == kind]
        reached = [r["steps_to_copy"] for r in rows if r["steps_to_copy"] is not None]
        per_seed = ", ".join("never" if r["steps_to_copy"] is None else str(r["steps_to_copy"]) for r in rows)
        mean = f"{statistics.fmean(reached):.0f}" if len(reached) == len(rows) else "-"
        lines.append(f"| {kind} | {per_seed} | {mean} | {statistics.fmean(r['final_loss'] for r in rows):.4f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 types, 1 seed, 60 steps (a check that it runs)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    import torch

    from sharedbert.atomic import atomic_write_text

    torch.set_num_threads(args.threads)
    kinds, seeds, steps = ATTENTION_TYPES, args.seeds, args.steps
    if args.quick:
        kinds, seeds, steps = ("standard", "shared"), [0], 60
    runs = []
    for seed in seeds:  # seed-major: an interrupted run still has every type for the seeds it finished
        for kind in kinds:
            runs.append(run(kind, seed, steps))
            print(f"{kind} seed {seed}: steps to copy {runs[-1]['steps_to_copy']}, "
                  f"final loss {runs[-1]['final_loss']:.4f} ({runs[-1]['seconds']:.0f} s)", flush=True)
    results = {"command": ("python benchmarks/cross_attention_copy.py " + " ".join(sys.argv[1:] if argv is None
                                                                                   else argv)).strip(),
               "steps": steps, "seeds": seeds, "attention_types": list(kinds), "threads": args.threads,
               "torch": torch.__version__, "runs": runs}
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = "cross_attention_copy" + ("_quick" if args.quick else "")
    atomic_write_text(args.output_dir / (stem + ".json"), json.dumps(results, indent=1) + "\n")
    atomic_write_text(args.output_dir / (stem + ".md"), report(results))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
