"""What the input-id range check costs on CPU: forward time with the check against the same model with the check
disabled, alternated in one process (ratios of medians; this machine is shared and noisy), and the check alone
over 1,000 calls (the forward checks input ids, and token type / position ids when given).

    python benchmarks/id_check_cost.py [--threads 2] [--repeats 30]

On an accelerator the check is skipped (the embedding lookup asserts on the device, as in BERT), so this CPU figure is
the only cost to measure. Results go to benchmarks/results/id_check_cost.json.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import sharedbert.modeling_sharedbert as modeling
from sharedbert import SharedBertConfig, SharedBertModel
from sharedbert.atomic import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "id_check_cost.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # all-MiniLM-L6-v2's dimensions
    config = SharedBertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    model = SharedBertModel(config).eval()
    checked = modeling._check_ids

    def unchecked(*_args, **_kwargs):
        return None

    rows = {}
    for batch, seq in ((1, 16), (32, 128)):
        ids = torch.randint(0, config.vocab_size, (batch, seq))
        times = {"checked": [], "unchecked": []}
        with torch.inference_mode():
            for _ in range(3):
                model(input_ids=ids)
            for _ in range(args.repeats):
                for name, check in (("checked", checked), ("unchecked", unchecked)):
                    modeling._check_ids = check
                    start = time.perf_counter()
                    model(input_ids=ids)
                    times[name].append(time.perf_counter() - start)
        modeling._check_ids = checked
        # The check on its own, timed over many calls: far below the forward's noise, so measured directly too.
        calls = 1000
        start = time.perf_counter()
        for _ in range(calls):
            checked("input_ids", ids, config.vocab_size, "vocab_size")
        check_ms = 1e3 * (time.perf_counter() - start) / calls
        with_check, without = statistics.median(times["checked"]), statistics.median(times["unchecked"])
        rows[f"{batch}x{seq}"] = {
            "forward_ms_checked": 1e3 * with_check,
            "forward_ms_unchecked": 1e3 * without,
            "overhead_percent": 100 * (with_check / without - 1),
            "check_alone_ms": check_ms,
            "check_alone_percent_of_forward": 100 * check_ms / (1e3 * without),
        }
        print(f"batch {batch} x seq {seq}: {1e3 * with_check:.2f} ms with the check, {1e3 * without:.2f} ms without "
              f"({rows[f'{batch}x{seq}']['overhead_percent']:+.2f}%); the check alone {1e3 * check_ms:.1f} µs per call "
              f"({rows[f'{batch}x{seq}']['check_alone_percent_of_forward']:.3f}% of a forward)")
    atomic_write_text(RESULTS, json.dumps({"threads": args.threads, "repeats": args.repeats, "rows": rows}, indent=1))
    print(f"saved {RESULTS}")


if __name__ == "__main__":
    main()
