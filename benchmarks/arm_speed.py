"""Training and inference speed of configurations side by side: every attention type (and grouped-query attention),
or every arm of a study, measured in one run with alternating rounds, as wall time and as CPU time.

    python benchmarks/arm_speed.py                          # every attention type + GQA/MQA at bert-base widths, 4 layers,
                                                            # vocabulary 1,000, sequence 128, batch 8
    python benchmarks/arm_speed.py --arms-json experiments/frontier/results/arms.json --setting clm-cpu \\
        --out benchmarks/results/frontier_speed                # the frontier's arms at their own sizes (causal LM)
    python benchmarks/arm_speed.py --quick                  # tiny sizes, a smoke run

Method. Every configuration is built once (seed 0) at the same sizes, then timed in rounds: in each round every
configuration runs `--steps` training steps (forward in train mode, token-mean cross-entropy, backward, AdamW step,
gradients set to None) and `--steps` inference forwards (eval mode, `torch.inference_mode()`), in an order that
rotates every round, so background load drifts over all of them alike. Wall time is `time.perf_counter`, CPU time
`time.process_time` (this process's user + system time: what the work cost, whatever else runs on the machine).
Figures are medians over rounds; ratios are each configuration's per-round time against `standard`'s in the same round
(median and quartiles). Precision `auto` (bf16 autocast where the CPU computes bf16 natively, else fp32), one torch
thread unless `--threads`. The load average before and after is recorded: a busy machine moves absolute figures, the
side-by-side ratios much less. Prints a table; writes JSON (`--out`, default benchmarks/results/arm_speed.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from sharedbert import ATTENTION_TYPES, SharedBertConfig, SharedBertLMHeadModel
from sharedbert.atomic import atomic_write_text
from sharedbert.precision import cpu_name, resolve_precision

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "arm_speed"
# The default set: each attention type, and standard attention with 2 key/value heads (of 12) and with one.
TYPES = {attention_type: {"attention_type": attention_type} for attention_type in ATTENTION_TYPES}
TYPES.update({"gqa-4": {"attention_type": "standard", "num_key_value_heads": 4},
              "mqa": {"attention_type": "standard", "num_key_value_heads": 1}})
SIZES = {  # a vocabulary of 1,000 so that the LM head (768 × 30,522 would be most of a 4-layer model's cost) does not
    # hide the attention's
    "default": dict(num_hidden_layers=4, hidden_size=768, num_attention_heads=12, vocab_size=1000),
    "quick": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=100),
}


def arms_from_json(path: Path, setting: str) -> tuple[dict, dict, tuple[int, int]]:
    """The arms of a study's `describe` file (e.g. experiments/frontier/results/arms.json): each arm's config fields
    on top of the setting's sizes. Returns (arms, sizes, (sequence, batch))."""
    described = json.loads(path.read_text())
    if setting not in described:
        raise SystemExit(f"{path} has no setting {setting!r}; it has {sorted(described)}.")
    arms = described[setting]
    standard = arms.get("standard")
    if standard is None:
        raise SystemExit(f"{path}, setting {setting!r}: no 'standard' arm to compare against.")
    width = standard["model"]["width"]
    heads = 8 if "-w256-h8" in setting else 4  # the char-level recipe: head size 32
    sizes = dict(num_hidden_layers=4, hidden_size=width, num_attention_heads=heads, vocab_size=66,
                 intermediate_size=4 * width)
    return {arm: entry["config"] for arm, entry in arms.items()}, sizes, (64, 12)


def build(fields: dict, sizes: dict, sequence: int):
    torch.manual_seed(0)
    config = SharedBertConfig(is_decoder=True, max_position_embeddings=max(sequence, 64), type_vocab_size=1,
                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                              **{"intermediate_size": 4 * sizes["hidden_size"], **sizes, **fields})
    model = SharedBertLMHeadModel(config)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def timed(function, steps: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        function()
    return time.perf_counter() - wall, time.process_time() - cpu


def step_functions(model, optimizer, ids, precision: str):
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

    def train():
        model.train()
        with autocast:
            logits = model(input_ids=ids).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def infer():
        model.eval()
        with torch.inference_mode(), autocast:
            model(input_ids=ids)

    return train, infer


def measure(arms: dict, sizes: dict, sequence: int, batch: int, rounds: int, steps: int, precision: str) -> dict:
    ids = torch.randint(0, sizes["vocab_size"], (batch, sequence), generator=torch.Generator().manual_seed(0))
    functions = {}
    for arm, fields in arms.items():
        model, optimizer = build(fields, sizes, sequence)
        functions[arm] = step_functions(model, optimizer, ids, precision)
        for function in functions[arm]:  # warm-up: allocator, kernels, optimizer state
            timed(function, 2)
    times = {arm: {kind: [] for kind in ("train_wall", "train_cpu", "infer_wall", "infer_cpu")} for arm in arms}
    names = list(arms)
    for round_index in range(rounds):
        for arm in names[round_index % len(names):] + names[:round_index % len(names)]:
            train, infer = functions[arm]
            for kind, function in (("train", train), ("infer", infer)):
                wall, cpu = timed(function, steps)
                times[arm][f"{kind}_wall"].append(wall)
                times[arm][f"{kind}_cpu"].append(cpu)
    return times


def summarise(times: dict, tokens: int, reference: str = "standard") -> dict:
    rows = {}
    for arm, series in times.items():
        row = {f"{kind}_tokens_per_s": tokens / statistics.median(values) for kind, values in series.items()}
        for kind, values in series.items():
            ratios = sorted(r / a for a, r in zip(values, times[reference][kind]))  # reference time / arm time
            row[f"{kind}_speedup"] = statistics.median(ratios)
            row[f"{kind}_speedup_quartiles"] = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        rows[arm] = row
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms-json", type=Path, help="a study's describe file: its arms instead of the types")
    parser.add_argument("--setting", default="clm-cpu", help="with --arms-json: which setting's arms and sizes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5, help="training steps and forwards per configuration a round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON path without its suffix")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.arms_json:
        arms, sizes, (sequence, batch) = arms_from_json(args.arms_json, args.setting)
    else:
        arms, sizes, (sequence, batch) = TYPES, SIZES["quick" if args.quick else "default"], (128, 8)
    rounds, steps = (3, 1) if args.quick else (args.rounds, args.steps)
    precision = resolve_precision(args.precision, "cpu")
    load_before = os.getloadavg()
    times = measure(arms, sizes, sequence, batch, rounds, steps, precision)
    rows = summarise(times, steps * batch * sequence)
    result = {"meta": {"command": " ".join(sys.argv), "cpu": cpu_name() or platform.processor() or platform.machine(),
                       "torch": torch.__version__, "threads": args.threads, "precision": precision,
                       "sizes": sizes, "sequence": sequence, "batch": batch, "rounds": rounds, "steps": steps,
                       "load_average_before": load_before, "load_average_after": os.getloadavg(), "arms": arms},
              "rows": rows, "times": times}
    path = args.out.with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=1) + "\n")
    print(f"{'arm':32} {'train tok/s':>12} {'× standard (wall, CPU)':>24} {'infer tok/s':>12} {'× standard':>18}")
    for arm, row in rows.items():
        print(f"{arm:32} {row['train_wall_tokens_per_s']:12.0f} {row['train_wall_speedup']:11.2f} "
              f"{row['train_cpu_speedup']:11.2f} {row['infer_wall_tokens_per_s']:12.0f} "
              f"{row['infer_wall_speedup']:8.2f} {row['infer_cpu_speedup']:8.2f}")
    print(f"wrote {path} ({result['meta']['cpu']}, {precision}, load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
