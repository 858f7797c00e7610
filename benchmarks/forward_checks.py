"""What each input check in the forward pass costs on CPU, against the forward it guards.

The forward checks only what would otherwise fail silently (a 1-D mask broadcast over the batch, ids that read
another row of an embedding table on an accelerator) or obscurely (an index error deep in `nn.Embedding`, a
mixed-dtype error in LayerNorm, a cache of another batch). Each check function is timed alone over many calls with
the inputs of a real call, and the forward of that call is timed too (median of rounds), at all-MiniLM-L6-v2's
sizes: an encoder batch of 1 × 16 and of 32 × 128 tokens, and one cached decoding step of a decoder with
cross-attention (batch 1, 128 cached positions, a source of 64).

    python benchmarks/forward_checks.py [--threads 2] [--rounds 20]

Prints the table and writes benchmarks/results/forward_checks.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "forward_checks.json"
DIMS = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)


def per_call_ms(function, calls: int = 2000) -> float:
    function()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return 1e3 * (time.perf_counter() - start) / calls


def forward_ms(function, rounds: int) -> float:
    import torch

    with torch.inference_mode():
        function()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def encoder_case(batch: int, seq: int, rounds: int) -> dict:
    import torch

    import sharedbert.modeling_sharedbert as modeling
    from sharedbert import SharedBertConfig, SharedBertModel

    config = SharedBertConfig(**DIMS)
    model = SharedBertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    embeds = model.embeddings.word_embeddings(ids).detach()
    checks = {
        "_check_ids (input ids)": lambda: modeling._check_ids("input_ids", ids, config.vocab_size, "vocab_size"),
        "_check_ids (token type ids)": lambda: modeling._check_ids("token_type_ids", types, 2, "type_vocab_size"),
        "_check_input_shapes": lambda: modeling._check_input_shapes(ids.shape, mask, types, None, 12),
        "_check_embeds (inputs_embeds calls)": lambda: modeling._check_embeds(embeds, model.embeddings.word_embeddings.weight),
        "_check_decoder_inputs (an encoder's)": lambda: modeling._check_decoder_inputs(
            config, False, False, tuple(ids.shape), mask, None, None, None),
    }
    forward = forward_ms(lambda: model(input_ids=ids, attention_mask=mask, token_type_ids=types), rounds)
    return {"forward_ms": forward, "checks": {name: per_call_ms(check) for name, check in checks.items()}}


def decoding_case(rounds: int) -> dict:
    import torch
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    import sharedbert.modeling_sharedbert as modeling
    from sharedbert import SharedBertConfig, SharedBertLMHeadModel

    config = SharedBertConfig(**DIMS, is_decoder=True, add_cross_attention=True, cross_attention_type="shared_kv")
    model = SharedBertLMHeadModel(config).eval()
    prompt, states = torch.randint(0, config.vocab_size, (1, 128)), torch.randn(1, 64, 384)
    with torch.inference_mode():
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        model(prompt, encoder_hidden_states=states, past_key_values=cache, use_cache=True)
    step = torch.randint(0, config.vocab_size, (1, 1))
    mask = torch.ones(1, 129, dtype=torch.long)

    def decode():
        model(step, attention_mask=mask, encoder_hidden_states=states, past_key_values=cache, use_cache=True)
        cache.crop(-1)  # the self-attention cache back to the prompt, so every round decodes the same step

    checks = {
        "_check_ids (input ids)": lambda: modeling._check_ids("input_ids", step, config.vocab_size, "vocab_size"),
        "_check_decoder_inputs (cached step)": lambda: modeling._check_decoder_inputs(
            config, True, True, (1, 1), mask, states, None, cache),
    }
    return {"forward_ms": forward_ms(decode, rounds), "checks": {n: per_call_ms(c) for n, c in checks.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    from sharedbert.atomic import atomic_write_text

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = {"encoder 1x16": encoder_case(1, 16, args.rounds), "encoder 32x128": encoder_case(32, 128, args.rounds),
             "decoding step, 128 cached": decoding_case(args.rounds)}
    print(f"{'case':28s} {'check':40s} {'µs per call':>12s} {'% of forward':>13s}")
    for case, row in cases.items():
        for name, ms in row["checks"].items():
            row.setdefault("percent_of_forward", {})[name] = 100 * ms / row["forward_ms"]
            print(f"{case:28s} {name:40s} {1e3 * ms:12.1f} {100 * ms / row['forward_ms']:12.3f}%")
        print(f"{case:28s} {'(the forward)':40s} {1e3 * row['forward_ms']:12.0f}")
    atomic_write_text(args.output, json.dumps({"threads": args.threads, "rounds": args.rounds,
                                               "torch": torch.__version__, "cases": cases}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
