"""onnxruntime throughput of SharedBert against BERT, both exported the same way, measured side by side in one run.

    python benchmarks/onnx_bench.py [--model all-MiniLM-L6-v2] [--threads 2] [--repeats 15]

BERT is the original checkpoint (transformers' `BertModel`); SharedBert is its shared-attention conversion (the
weights do not matter for speed). Both go through `sharedbert.export.trace_to_onnx` (torch's dynamo exporter, dynamic
axes; SharedBert with folded attention) and run in onnxruntime's CPU provider with the same session options. The
rounds alternate the two sessions; ratios are ratios of medians. Batches of real SST-2 dev sentences when the GLUE
data is there (else a fixed set of sentences), at batch 32 and at batch 1. Results: benchmarks/results/onnx_bench.json.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, BertModel

from sharedbert.atomic import atomic_write_text
from sharedbert.convert import from_bert
from sharedbert.export import CHECK_SENTENCES, EncoderOutput, trace_to_onnx
from sharedbert.params import count_model_parameters
from sharedbert.training import resolve_source, shared_data_dir

RESULTS = Path(__file__).resolve().parent / "results" / "onnx_bench.json"


def sentences(limit: int = 256) -> tuple[list[str], str]:
    data = shared_data_dir("glue/SST-2/dev.tsv")
    if data is not None:
        rows = (data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
        return [row.split("\t")[0].strip() for row in rows][:limit], "SST-2 dev"
    return list(CHECK_SENTENCES) * (limit // len(CHECK_SENTENCES)), "built-in sentences (GLUE data not found)"


def session_for(model, inputs: dict, folder: Path, name: str, threads: int):
    import onnxruntime

    path = folder / f"{name}.onnx"
    trace_to_onnx(EncoderOutput(model.eval(), "last_hidden_state"), inputs, "last_hidden_state").save(
        str(path), external_data=False
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="a BERT folder or all-MiniLM-L6-v2 (default)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    source = resolve_source(args.model)
    tokenizer = AutoTokenizer.from_pretrained(source)
    texts, text_source = sentences()
    bert = BertModel.from_pretrained(source).eval()
    shared = from_bert(source, attention_type="shared").eval()
    shared.fold_for_inference()
    sample = tokenizer(texts[:8], padding=True, truncation=True, max_length=args.max_length, return_tensors="pt")
    inputs = {name: sample[name] for name in ("input_ids", "attention_mask", "token_type_ids")}
    with tempfile.TemporaryDirectory() as folder:
        sessions = {
            "bert": session_for(bert, inputs, Path(folder), "bert", args.threads),
            "shared": session_for(shared, inputs, Path(folder), "shared", args.threads),
        }
        results = {}
        for batch_size in (32, 1):
            batches = []
            for start in range(0, len(texts), batch_size):
                encoded = tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                                    max_length=args.max_length, return_tensors="np")
                batches.append({name: encoded[name].astype(np.int64) for name in inputs})
            batches = batches[: max(1, 256 // batch_size)]
            tokens = sum(int(batch["attention_mask"].size) for batch in batches)
            times = {name: [] for name in sessions}
            for session in sessions.values():  # warm-up
                session.run(None, batches[0])
            for _ in range(args.repeats):
                for name, session in sessions.items():
                    start = time.perf_counter()
                    for batch in batches:
                        session.run(None, batch)
                    times[name].append(time.perf_counter() - start)
            median = {name: statistics.median(values) for name, values in times.items()}
            results[f"batch {batch_size}"] = {
                "tokens_per_second": {name: tokens / seconds for name, seconds in median.items()},
                "shared_over_bert": median["bert"] / median["shared"],
                "per_round_ratio_quartiles": statistics.quantiles(
                    [b / s for b, s in zip(times["bert"], times["shared"])], n=4
                ),
            }
    report = {
        "model": str(args.model), "threads": args.threads, "repeats": args.repeats, "sentences": text_source,
        "parameters": {"bert": count_model_parameters(bert), "shared": count_model_parameters(shared)},
        "results": results,
    }
    atomic_write_text(RESULTS, json.dumps(report, indent=1) + "\n")
    print(f"onnxruntime, {args.threads} threads, {text_source}; parameters: SharedBert "
          f"{report['parameters']['shared']:,} / BERT {report['parameters']['bert']:,}")
    for setting, row in results.items():
        rates = row["tokens_per_second"]
        print(f"{setting:>9}: BERT {rates['bert']:,.0f} tokens/s, SharedBert {rates['shared']:,.0f} tokens/s, "
              f"x{row['shared_over_bert']:.3f} (per-round quartiles "
              + " / ".join(f"{q:.3f}" for q in row["per_round_ratio_quartiles"]) + ")")
    print(f"saved {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
