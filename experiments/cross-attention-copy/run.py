"""How fast does each kind of cross-attention learn to copy? A tiny seq2seq model trained from scratch.

The task: the target is 10 random tokens; the source is the same with 1-3 junk tokens (from a separate range)
inserted at a random place, so the alignment between target and source positions shifts inside a row and differs
between rows: the decoder has to find its place by content, as in text infilling. Every model is the same
`SharedBertForConditionalGeneration` (2 layers, hidden 64, 4 heads, nothing shared between encoder and decoder) but
for its self- and cross-attention types, trained with AdamW (lr 1e-3, batches of 32, no dropout) from the same
initial seed per run. Reported per arm over seeds: the first step at which the 50-step mean training loss falls
below 0.1 ("steps to copy"; the task's loss can reach 0) and the final 50-step mean loss.

    python experiments/cross-attention-copy/run.py                      # the declared arms and seeds (README.md)
    python experiments/cross-attention-copy/run.py --arms shared/shared_kv --seeds 3 4
    python experiments/cross-attention-copy/run.py --quick              # seconds (the test runs it)

Runs already in the results file are kept and skipped, so the command resumes and adds seeds. Writes results.json
and prints the table; README.md is the report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# "self/cross": the self-attention type of both stacks, then the cross-attention type.
ARMS = (
    "standard/standard",
    "shared/shared",
    "shared/shared_kv",
    "shared/standard",
    "symmetric/symmetric",
    "pairwise/pairwise",
)
CONTENT_TOKENS = range(10, 40)  # target tokens; 5-9 are junk, 0-4 special (pad, -, [CLS]=2, [SEP]=3)
JUNK_TOKENS = range(5, 10)
LENGTH, MAX_JUNK, BATCH = 10, 3, 32
COPIED_BELOW = 0.1
WINDOW = 50


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


def build_model(arm: str):
    from sharedbert import SharedBertConfig
    from sharedbert.modeling_sharedbert import SharedBertForConditionalGeneration

    self_type, cross_type = arm.split("/")
    config = SharedBertConfig(
        vocab_size=CONTENT_TOKENS.stop, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=32, attention_type=self_type, cross_attention_type=cross_type,
        is_encoder_decoder=True, decoder_start_token_id=2, pad_token_id=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return SharedBertForConditionalGeneration(config)


def run(arm: str, seed: int, steps: int) -> dict:
    import torch

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = build_model(arm)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, started = [], time.perf_counter()
    for _ in range(steps):
        sources, mask, targets = make_batch(generator)
        loss = model(input_ids=sources, attention_mask=mask, labels=targets.masked_fill(targets == 0, -100)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    means = [statistics.fmean(losses[max(0, i - WINDOW + 1): i + 1]) for i in range(len(losses))]
    copied = next((i + 1 for i, value in enumerate(means) if i + 1 >= WINDOW and value < COPIED_BELOW), None)
    cross_parameters = sum(p.numel() for name, p in model.named_parameters() if ".crossattention." in name)
    return {"arm": arm, "seed": seed, "steps": steps, "steps_to_copy": copied, "final_loss": means[-1],
            "cross_attention_parameters": cross_parameters,
            "loss_every_50": [round(means[i], 4) for i in range(WINDOW - 1, steps, WINDOW)],
            "seconds": time.perf_counter() - started}


def summary(runs: list[dict], arms, seeds) -> list[dict]:
    """Per arm over `seeds`: steps to copy per seed, their mean (None unless every seed copied), final loss."""
    rows = []
    for arm in arms:
        chosen = sorted((r for r in runs if r["arm"] == arm and r["seed"] in seeds), key=lambda r: r["seed"])
        if not chosen:
            continue
        reached = [r["steps_to_copy"] for r in chosen if r["steps_to_copy"] is not None]
        rows.append({"arm": arm, "seeds": [r["seed"] for r in chosen],
                     "steps_to_copy": [r["steps_to_copy"] for r in chosen],
                     "mean": statistics.fmean(reached) if len(reached) == len(chosen) else None,
                     "final_loss": statistics.fmean(r["final_loss"] for r in chosen),
                     "cross_attention_parameters": chosen[0]["cross_attention_parameters"]})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| arm (self/cross) | cross-attention parameters | steps to copy, per seed | mean | final loss, mean |",
             "|---|---|---|---|---|"]
    for row in rows:
        per_seed = ", ".join("never" if s is None else str(s) for s in row["steps_to_copy"])
        mean = "-" if row["mean"] is None else f"{row['mean']:.0f}"
        lines.append(f"| {row['arm']} | {row['cross_attention_parameters']:,} | {per_seed} | {mean} | "
                     f"{row['final_loss']:.4f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), help="self/cross pairs (default: %(default)s)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2 arms, 1 seed, 60 steps (a check that it runs)")
    parser.add_argument("--output", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)
    import torch

    from sharedbert.atomic import atomic_write_text

    torch.set_num_threads(args.threads)
    arms, seeds, steps = args.arms, args.seeds, args.steps
    if args.quick:
        arms, seeds, steps = ["standard/standard", "shared/shared_kv"], [0], 60
    results = json.loads(args.output.read_text()) if args.output.is_file() else {}
    if results and results.get("steps") != steps:
        raise SystemExit(f"{args.output} holds runs of {results['steps']} steps; use another --output.")
    results.update(steps=steps, torch=torch.__version__, threads=args.threads)
    runs = results.setdefault("runs", [])
    for seed in seeds:  # seed-major: an interrupted run still has every arm for the seeds it finished
        for arm in arms:
            if any(r["arm"] == arm and r["seed"] == seed for r in runs):
                continue
            runs.append(run(arm, seed, steps))
            print(f"{arm} seed {seed}: steps to copy {runs[-1]['steps_to_copy']}, "
                  f"final loss {runs[-1]['final_loss']:.4f} ({runs[-1]['seconds']:.0f} s)", flush=True)
            atomic_write_text(args.output, json.dumps(results, indent=1) + "\n")
    atomic_write_text(args.output, json.dumps(results, indent=1) + "\n")
    print(table(summary(runs, arms, seeds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
