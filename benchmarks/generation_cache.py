"""Long-context generation: SharedBertLMHeadModel (shared attention, whose cache holds S alone) against transformers'
BertLMHeadModel at all-MiniLM-L6-v2's sizes, side by side in one run.

For prompts of 128, 512 and 2,048 tokens and batches of 1 and 16, both models generate 128 new tokens greedily
(random weights of one seed: speed and memory do not depend on what the weights say). Reported per cell:

* cache bytes after generation (keys and values of every layer);
* decode tokens/s: batch × 127 over the time of generating 128 tokens minus the time of generating 1 (the prefill
  and the first step), medians of alternating rounds;
* peak resident memory of one generation in a fresh process (its VmHWM: ru_maxrss would also count the
  resident size of the benchmark process it was forked from);
* the bound of a decode step: the bytes it must read (every weight it uses once, and the cache once: K and V for
  standard attention, S for shared) and its multiply-adds, and the ratio of the two models' bounds beside the ratio
  measured.

    python benchmarks/generation_cache.py [--threads 2] [--rounds 3]
    python benchmarks/generation_cache.py --quick          # small sizes (the test runs it)

Prints the table and writes benchmarks/results/generation_cache.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "generation_cache.json"
DIMS = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
QUICK_DIMS = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
NEW_TOKENS = 128


def build(kind: str, dims: dict, positions: int):
    """("sharedbert" | "bert") causal LM of `dims` with `positions` positions, random weights of seed 0."""
    import torch
    from transformers import BertConfig, BertLMHeadModel

    from sharedbert import SharedBertConfig, SharedBertLMHeadModel

    torch.manual_seed(0)
    if kind == "bert":
        return BertLMHeadModel(BertConfig(**dims, max_position_embeddings=positions, is_decoder=True)).eval()
    return SharedBertLMHeadModel(SharedBertConfig(**dims, max_position_embeddings=positions, is_decoder=True)).eval()


def generate(model, prompt, new_tokens: int):
    import torch

    with torch.inference_mode():
        return model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              return_dict_in_generate=True, pad_token_id=0)


def cache_bytes(cache) -> int:
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


def decode_bound(model, batch: int, cached: int) -> dict:
    """Bytes and multiply-adds of one decoding step at `cached` positions: every weight the step uses, read once,
    and the cache read once (what each layer's attention must read: K and V, or S alone)."""
    config = model.config
    d, layers = config.hidden_size, config.num_hidden_layers
    used = sum(p.numel() for name, p in model.named_parameters()
               if "embeddings" not in name or name.endswith("word_embeddings.weight"))  # the tied output projection
    per_position = 1 if getattr(config, "attention_type", "standard") == "shared" else 2
    cache_elements = layers * batch * cached * d * per_position
    weight_bytes, cache_read = 4 * used, 4 * cache_elements
    macs = batch * used + layers * batch * cached * d * 2  # projections, LM head; scores and weighted sum
    return {"weight_bytes": weight_bytes, "cache_bytes_read": cache_read, "bytes": weight_bytes + cache_read,
            "multiply_adds": macs}


def peak_rss_of_one_generation(kind: str, dims: dict, positions: int, batch: int, prompt_length: int) -> int:
    """Peak resident bytes of a fresh process that builds the model and generates once: the kernel's high-water mark
    of the child's own memory (VmHWM), which starts anew at exec. ru_maxrss does not: Linux folds the resident size
    of the process forked from (this one, holding every model built so far) into the child's, and every cell read
    the same as the one before."""
    code = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "import generation_cache as g\n"
        f"torch.set_num_threads(1)\nmodel = g.build({kind!r}, {dims!r}, {positions})\n"
        f"prompt = torch.randint(5, {dims['vocab_size']}, ({batch}, {prompt_length}))\n"
        f"g.generate(model, prompt, {NEW_TOKENS})\n"
        "print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) * 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1])


def measure(dims: dict, prompts, batches, rounds: int, threads: int, rss: bool) -> list[dict]:
    import torch

    torch.set_num_threads(threads)
    positions = max(prompts) + NEW_TOKENS
    models = {kind: build(kind, dims, positions) for kind in ("bert", "sharedbert")}
    rows = []
    for prompt_length in prompts:
        for batch in batches:
            prompt = torch.randint(5, dims["vocab_size"], (batch, prompt_length))
            times = {kind: {1: [], NEW_TOKENS: []} for kind in models}
            for kind, model in models.items():  # warm-up
                generate(model, prompt, 2)
            for _ in range(rounds):
                for new_tokens in (1, NEW_TOKENS):
                    for kind, model in models.items():  # alternating: machine load hits both alike
                        start = time.perf_counter()
                        out = generate(model, prompt, new_tokens)
                        times[kind][new_tokens].append(time.perf_counter() - start)
                        if new_tokens == NEW_TOKENS:
                            times[kind]["cache_bytes"] = cache_bytes(out.past_key_values)
            row = {"prompt": prompt_length, "batch": batch, "models": {}}
            for kind, model in models.items():
                decode_seconds = statistics.median(times[kind][NEW_TOKENS]) - statistics.median(times[kind][1])
                row["models"][kind] = {
                    "cache_bytes": times[kind]["cache_bytes"],
                    "decode_tokens_per_second": batch * (NEW_TOKENS - 1) / decode_seconds,
                    "bound_at_mid_decode": decode_bound(model, batch, prompt_length + NEW_TOKENS // 2),
                    "peak_rss_bytes": (peak_rss_of_one_generation(kind, dims, positions, batch, prompt_length)
                                       if rss else None),
                }
            bert, ours = row["models"]["bert"], row["models"]["sharedbert"]
            row["cache_ratio"] = ours["cache_bytes"] / bert["cache_bytes"]
            row["speed_ratio"] = ours["decode_tokens_per_second"] / bert["decode_tokens_per_second"]
            row["bytes_bound_ratio"] = bert["bound_at_mid_decode"]["bytes"] / ours["bound_at_mid_decode"]["bytes"]
            row["flops_bound_ratio"] = (bert["bound_at_mid_decode"]["multiply_adds"]
                                        / ours["bound_at_mid_decode"]["multiply_adds"])
            row["speed_share_of_bytes_bound"] = row["speed_ratio"] / row["bytes_bound_ratio"]
            rows.append(row)
            print(f"prompt {prompt_length:5d} batch {batch:3d}: cache ×{row['cache_ratio']:.3f}, decode "
                  f"{ours['decode_tokens_per_second']:.0f} vs {bert['decode_tokens_per_second']:.0f} tokens/s "
                  f"(×{row['speed_ratio']:.3f}; bytes bound ×{row['bytes_bound_ratio']:.3f}, "
                  f"{100 * row['speed_share_of_bytes_bound']:.0f}% of it)", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (a check that it runs)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    from sharedbert.atomic import atomic_write_text

    if args.quick:
        dims, prompts, batches, rounds = QUICK_DIMS, (32,), (2,), 1  # one cell: two peak-memory children, not four
    else:
        dims, prompts, batches, rounds = DIMS, (128, 512, 2048), (1, 16), args.rounds
    rows = measure(dims, prompts, batches, rounds, args.threads, rss=True)
    atomic_write_text(args.output, json.dumps({"dims": dims, "new_tokens": NEW_TOKENS, "threads": args.threads,
                                               "rounds": rounds, "torch": torch.__version__, "rows": rows},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
