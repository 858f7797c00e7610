"""Static OpenVINO int8 of SharedBert conversions, with sentence-transformers' NNCF settings (every MatMul int8) and
with the export's (`sharedbert.export.float_matmuls` left in float): cosine of each file's sentence embeddings to the
model's own fp32 PyTorch ones over every STS-B dev sentence, what causes the loss, and batch-32 speed against
all-MiniLM-L6-v2 in PyTorch fp32, measured side by side in alternating rounds.

    python benchmarks/openvino_int8_fix.py --model shared=runs/minilm-shared --model standard=runs/minilm-standard
    python benchmarks/openvino_int8_fix.py --model build=runs/build-minilm/healed --out-dir out/fix --stem build
    python benchmarks/openvino_int8_fix.py --model shared=runs/minilm-shared --split train --rounds 0 \
        --other-alphas 0.8 0.6 --variants 5 --out-dir out/alpha --stem alpha_train   # selection data, no speed

`--split dev` (the default) measures every distinct STS-B dev sentence; `--split train` every distinct STS-B train
sentence that is not also a dev sentence, the held-out data a setting such as SmoothQuant's alpha is chosen on
(experiments/held-out-selection). `--split train dev` measures the same int8 files on both and writes one results file
per split, STEM_train and STEM_dev. `--rounds 0` leaves out the speed measurement.

Each model is a SharedBert folder (a conversion of all-MiniLM-L6-v2: the tokenizer is its). Per model the results
hold: the two files' cosines (mean, worst, 1st percentile, the worst sentences); the same with the first feed-forward
output alone or the attention products alone left in float; the per-channel spread of the tensors attention's products
quantize per tensor (S for shared attention, Q, K, V for standard), and the largest GELU input channel of the first
feed-forward block against the median, on the calibration sentences; and sentences/s at batch 32.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


SPLITS = ("dev", "train")


def sts_sentences(glue: Path, split: str = "dev") -> list[str]:
    """The distinct sentences of STS-B `split` (sentence1 then sentence2, first occurrence order); for "train" those
    that are not also dev sentences, so that data chosen on never overlaps the data reported on."""
    def read(name: str) -> list[str]:
        lines = (glue / "STS-B" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        rows = [line.split("\t") for line in lines]
        return list(dict.fromkeys([row[7] for row in rows] + [row[8] for row in rows]))

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "dev":
        return read("dev")
    dev = set(read("dev"))
    return [sentence for sentence in read("train") if sentence not in dev]


SPLIT_TEXT = {"dev": "STS-B dev sentences", "train": "STS-B train sentences that are not STS-B dev sentences"}


def notes_for(split: str, notes: list[str]) -> str:
    """The --note texts for one split's results file: "SPLIT=TEXT" for that split only, any other text for all."""
    kept = []
    for text in notes:
        prefix, separator, rest = text.partition("=")
        if separator and prefix in SPLITS:
            if prefix == split:
                kept.append(rest)
        else:
            kept.append(text)
    return " ".join(kept)


def git_commit() -> str:
    """The commit the script ran at, with "+ uncommitted changes to this script" when it differs from it."""
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--", str(Path(__file__).resolve())], cwd=REPO,
                             capture_output=True, text=True).stdout.strip()
    return (commit or "unknown") + (" + uncommitted changes to this script" if changed else "")


def feeds(tokenizer, sentences, batch_size=32, max_length=256):
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer(sentences[start:start + batch_size], padding=True, truncation=True, max_length=max_length,
                          return_tensors="np")
        yield {name: batch[name].astype(np.int64) for name in INPUTS}


def embed(run, tokenizer, sentences) -> np.ndarray:
    from sharedbert.export import sentence_embeddings

    return np.concatenate([sentence_embeddings(run(feed), feed["attention_mask"], "base")
                           for feed in feeds(tokenizer, sentences)])


def torch_runner(model):
    def run(feed):
        with torch.inference_mode():
            return model(**{k: torch.from_numpy(v) for k, v in feed.items()}).last_hidden_state.numpy()
    return run


def openvino_runner(path_or_model, threads):
    import openvino

    core = openvino.Core()
    model = core.read_model(str(path_or_model)) if isinstance(path_or_model, Path) else path_or_model
    request = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
                                                "NUM_STREAMS": 1}).create_infer_request()
    return lambda feed: np.asarray(request.infer(feed)[0])


def cosine_summary(vectors, reference, sentences) -> dict:
    cosine = (vectors * reference).sum(1)
    worst = np.argsort(cosine)[:3]
    return {"mean": float(cosine.mean()), "worst": float(cosine.min()), "p1": float(np.percentile(cosine, 1)),
            "worst_sentences": [[float(cosine[i]), sentences[i]] for i in worst]}


def quantize(onnx_path: Path, xml: Path, calibration: list[dict], kept: list[str] | None, alpha=None) -> None:
    """NNCF static int8 with sentence-transformers' settings, `kept` MatMuls in float and SmoothQuant's MatMul `alpha`
    (None: NNCF's), as quantize_openvino makes it."""
    import nncf
    import openvino

    smoothing = {"smooth_quant_alphas": nncf.AdvancedSmoothQuantParameters(matmul=alpha)} if alpha else {}

    model = openvino.convert_model(str(onnx_path))
    scope = {"ignored_scope": nncf.IgnoredScope(names=kept)} if kept else {}
    quantized = nncf.quantize(model, nncf.Dataset(calibration), preset=nncf.QuantizationPreset.MIXED,
                              subset_size=len(calibration), fast_bias_correction=True,
                              model_type=nncf.ModelType.TRANSFORMER, advanced_parameters=nncf.
                              AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix.DISABLE, **smoothing),
                              **scope)
    openvino.save_model(quantized, str(xml), compress_to_fp16=False)


def channel_spread(model, tokenizer, sentences) -> list[dict]:
    """Per layer: largest/median per-channel |max| of what attention's products quantize per tensor, the channels
    under a twentieth of the largest, and the first feed-forward GELU's largest channel against the median."""
    from sharedbert.export.folding import fold_for_inference

    folded = fold_for_inference(model)
    maxima, hooks = {}, []

    def record(key):
        def hook(module, inputs, output):
            tensor = inputs[0] if key[1] == "gelu" else output
            value = tensor.reshape(-1, tensor.shape[-1]).abs().amax(0)
            maxima[key] = torch.maximum(maxima.get(key, value), value)
        return hook

    for layer, attention in enumerate(folded.encoder.attention):
        for name in ("shared_proj", "query", "key", "value"):
            if hasattr(attention.self, name):
                hooks.append(getattr(attention.self, name).register_forward_hook(record((layer, name))))
    hooks.append(folded.encoder.feed_forward[0].output.register_forward_hook(record((0, "gelu"))))
    with torch.inference_mode():
        for sentence in sentences:
            folded(**tokenizer(sentence, return_tensors="pt", truncation=True, max_length=128))
    rows = []
    for (layer, name), value in sorted(maxima.items()):
        rows.append({"layer": layer, "tensor": "S" if name == "shared_proj" else
                     ("GELU input of the first FFN output" if name == "gelu" else name),
                     "largest_over_median": float(value.max() / value.median()),
                     "channels_under_a_twentieth": int((value < value.max() / 20).sum()),
                     "largest": float(value.max()), "largest_channel": int(value.argmax())})
    return rows


def speed(runners: dict, batches: list[dict], rounds: int) -> dict:
    times = {name: [] for name in runners}
    for run in runners.values():
        run(batches[0])
    for index in range(rounds):
        names = list(runners)
        for name in names[index % len(names):] + names[:index % len(names)]:
            started = time.perf_counter()
            for feed in batches:
                runners[name](feed)
            times[name].append(time.perf_counter() - started)
    base = times["all-MiniLM-L6-v2 pytorch-fp32"]
    return {name: {"sentences_per_second": 32 * len(batches) / statistics.median(values),
                   "ratio_to_minilm_pytorch_fp32": statistics.median(base) / statistics.median(values),
                   "per_round_ratio_range": [min(b / v for b, v in zip(base, values)),
                                             max(b / v for b, v in zip(base, values))]}
            for name, values in times.items()}


def measure(label, folder, args, work, splits: dict[str, list[str]], calibration_text):
    """{split: this model's results on that split's sentences}, every split measuring the same int8 files."""
    from transformers import AutoTokenizer

    from sharedbert import SharedBertModel
    from sharedbert.export import EncoderOutput, calibration_feeds, float_matmuls, trace_to_onnx
    from sharedbert.export.quantization import SMOOTH_QUANT_ALPHA
    from sharedbert.export.folding import fold_for_inference
    import openvino

    model, tokenizer = SharedBertModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    references = {split: embed(torch_runner(model), tokenizer, sentences) for split, sentences in splits.items()}
    onnx_path = work / f"{label}.onnx"
    sample = tokenizer(calibration_text[:8], padding=True, truncation=True, max_length=64, return_tensors="pt")
    trace_to_onnx(EncoderOutput(fold_for_inference(model), "last_hidden_state").eval(),
                  {name: sample[name] for name in INPUTS}, "last_hidden_state").save(str(onnx_path),
                                                                                     external_data=False)
    calibration = calibration_feeds(tokenizer, calibration_text, 128)
    kept = float_matmuls(openvino.convert_model(str(onnx_path)))
    attention, first_output = kept[:-1], kept[-1:]
    alpha = SMOOTH_QUANT_ALPHA
    variants = {"every MatMul int8 (sentence-transformers)": (None, None),
                f"export (float_matmuls in float, SmoothQuant alpha {alpha})": (kept, alpha),
                **{f"float_matmuls in float, SmoothQuant alpha {other}": (kept, other)
                   for other in args.other_alphas if other != alpha},
                "float_matmuls in float, NNCF's SmoothQuant alpha (0.95)": (kept, None),
                "first FFN output in float only": (first_output, None),
                "attention products in float only": (attention, None)}
    files = {}
    results = {split: {"folder": os.path.relpath(folder, REPO) if Path(folder).is_absolute() else str(folder),
                       "attention_type": model.config.attention_type, "float_matmuls": kept, "cosine": {},
                       "files": files} for split in splits}
    for name, (scope, smoothing) in list(variants.items())[:args.variants]:
        xml = work / f"{label}-{len(files)}.xml"
        quantize(onnx_path, xml, calibration, scope, smoothing)
        files[name] = xml
        run = openvino_runner(xml, args.threads)
        for split, sentences in splits.items():
            row = cosine_summary(embed(run, tokenizer, sentences), references[split], sentences)
            results[split]["cosine"][name] = row
            print(f"  {label} {name} ({split}): {row['mean']:.4f} mean, {row['worst']:.4f} worst", flush=True)
    spread = channel_spread(model, tokenizer, calibration_text)
    for result in results.values():
        result["channel_spread"] = spread
    return results, tokenizer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, metavar="LABEL=FOLDER")
    parser.add_argument("--glue-dir", default=str(REPO.parent / "shared" / "data" / "glue"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--split", choices=SPLITS, nargs="+", default=["dev"],
                        help="the STS-B sentences the cosines are measured on: dev (all distinct), or train minus "
                             "dev's sentences (held-out selection data); both: one results file each")
    parser.add_argument("--note", action="append", default=[], metavar="[SPLIT=]TEXT",
                        help="what this run is for (which data chooses, which reports), recorded in the results; "
                             "with SPLIT= for one split's file only")
    parser.add_argument("--rounds", type=int, default=7, help="speed rounds (0: no speed measurement)")
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="only the first N sentences of each split (a smoke run; default: all)")
    parser.add_argument("--made-with", action="append", default=[], metavar="LABEL=COMMAND",
                        help="how a --model folder was made, recorded in the results")
    parser.add_argument("--other-alphas", type=float, nargs="*", default=[],
                        help="also measure float_matmuls in float at these SmoothQuant alphas (after the export's)")
    parser.add_argument("--variants", type=int, default=None,
                        help="measure the first N quantizations (default: all: 5, and one per --other-alphas)")
    parser.add_argument("--batches", type=int, default=16, help="batches of 32 STS-B sentences per round")
    parser.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument("--stem", default="openvino_int8_fix", help="the results files' name, without .json/.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import tempfile

    from transformers import BertModel

    from sharedbert.atomic import atomic_write_text
    from sharedbert.export import read_sentences
    from sharedbert.precision import cpu_name
    from sharedbert.training import resolve_source

    glue = Path(args.glue_dir)
    splits = {split: sts_sentences(glue, split)[:args.max_sentences] for split in dict.fromkeys(args.split)}
    sentences = next(iter(splits.values()))  # the speed measurement's
    calibration_text = read_sentences(glue / "SST-2" / "train.tsv", 300)  # sentence-transformers' calibration
    work = Path(tempfile.mkdtemp(prefix="openvino-int8-fix-"))
    by_split, tokenizer = {split: {} for split in splits}, None
    for item in args.model:
        label, _, folder = item.partition("=")
        measured, tokenizer = measure(label, Path(folder), args, work, splits, calibration_text)
        for split, result in measured.items():
            by_split[split][label] = result
    models = next(iter(by_split.values()))
    speeds = {}
    if args.rounds > 0:
        bert = BertModel.from_pretrained(resolve_source("all-MiniLM-L6-v2"), add_pooling_layer=False).eval()
        runners = {"all-MiniLM-L6-v2 pytorch-fp32": torch_runner(bert)}
        for label, result in models.items():
            for name in list(result["files"])[:2]:
                runners[f"{label}: {name}"] = openvino_runner(result["files"][name], args.threads)
        speeds = speed(runners, list(feeds(tokenizer, sentences[:32 * args.batches])), args.rounds)
    for split_models in by_split.values():
        for result in split_models.values():
            result["files"] = {name: Path(path).name for name, path in result["files"].items()}
    cpu = cpu_name() or platform.processor() or "unknown"
    import nncf
    import openvino

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split, split_models in by_split.items():
        report = {"command": "python benchmarks/openvino_int8_fix.py " + " ".join(
            shlex.quote(os.path.relpath(a, REPO) if os.path.isabs(a) else a) for a in (argv or sys.argv[1:])),
                  "date": time.strftime("%Y-%m-%d"), "commit": git_commit(), "cpu": cpu, "threads": args.threads,
                  "rounds": args.rounds, "batch_size": 32, "speed_sentences": 32 * args.batches if speeds else 0,
                  "split": split, "sentences_measured": len(splits[split]), "note": notes_for(split, args.note),
                  "load_average_at_end": os.getloadavg()[0], "openvino": openvino.__version__,
                  "nncf": nncf.__version__, "models": split_models, "speed": speeds,
                  "models_made_with": dict(item.partition("=")[::2] for item in args.made_with)}
        stem = args.stem if len(by_split) == 1 else f"{args.stem}_{split}"
        atomic_write_text(out / f"{stem}.json", json.dumps(report, indent=1) + "\n")
        atomic_write_text(out / f"{stem}.md", markdown(report))
        print(markdown(report))
    return 0


def markdown(report: dict) -> str:
    split = report.get("split", "dev")
    count = report.get("sentences_measured", report.get("sts_dev_sentences"))
    commit = f", commit {report['commit']}" if report.get("commit") else ""
    lines = ["# Static OpenVINO int8 of SharedBert: what breaks it and the export's fix", "",
             f"Command: `{report['command']}` ({report['date']}{commit}, {report['cpu']}, {report['threads']} "
             f"thread(s), OpenVINO {report['openvino']}, NNCF {report['nncf']}; 1-minute load average "
             f"{report['load_average_at_end']:.1f} at the end).", ""]
    if report.get("note"):
        lines += [report["note"], ""]
    lines += [f"Cosine of each file's sentence embeddings (mean pooling, unit length) to the same model's fp32 PyTorch "
             f"ones over all {count} {SPLIT_TEXT[split]}. NNCF static int8 with "
             "sentence-transformers' settings (preset MIXED, model type TRANSFORMER with its SmoothQuant, fast bias "
             "correction, no overflow fix), calibrated on the first 300 sentences of GLUE SST-2 train; the variants "
             "differ only in the MatMuls left in float.", "",
             "| model | MatMuls in float | mean | worst | 1st percentile | worst sentence |",
             "|---|---|---:|---:|---:|---|"]
    for label, result in report["models"].items():
        for name, row in result["cosine"].items():
            lines.append(f"| {label} | {name} | {row['mean']:.4f} | {row['worst']:.4f} | {row['p1']:.4f} | "
                         f"{row['worst_sentences'][0][1]} |")
    if report["speed"]:
        lines += ["", "## Speed at batch 32", "",
                  f"Sentences/s over {report['speed_sentences']} {SPLIT_TEXT[split]} in batches of 32, "
                  f"{report['threads']} thread(s), median of {report['rounds']} alternating rounds; ratio to "
                  "all-MiniLM-L6-v2 in PyTorch fp32 in the same run (and its range over the rounds).", "",
                  "| file | sent/s | ×MiniLM PyTorch fp32 | per-round range |", "|---|---:|---:|---:|"]
        for name, row in report["speed"].items():
            low, high = row["per_round_ratio_range"]
            lines.append(f"| {name} | {row['sentences_per_second']:.0f} | {row['ratio_to_minilm_pytorch_fp32']:.2f} "
                         f"| {low:.2f}-{high:.2f} |")
    else:
        lines += ["", "No speed measurement in this run (`--rounds 0`)."]
    lines += ["", "## Channel spread (calibration sentences, fp32 PyTorch, folded model)", "",
              "What attention's products quantize per tensor: S for shared attention (query, key and value all come "
              "from it), Q, K and V for standard; and the GELU input of the first feed-forward output.", "",
              "| model | layer | tensor | largest/median channel | channels under 1/20 of the largest | largest |",
              "|---|---:|---|---:|---:|---:|"]
    for label, result in report["models"].items():
        for row in result["channel_spread"]:
            lines.append(f"| {label} | {row['layer']} | {row['tensor']} | {row['largest_over_median']:.1f} | "
                         f"{row['channels_under_a_twentieth']} | {row['largest']:.1f} (channel "
                         f"{row['largest_channel']}) |")
    lines += ["", "Models: " + "; ".join(f"{label}: `{r['folder']}` ({r['attention_type']})"
                                         for label, r in report["models"].items()), ""]
    lines += [f"- {label}: `{command}`" for label, command in report.get("models_made_with", {}).items()]
    return "\n".join(lines) + ("\n" if report.get("models_made_with") else "")


if __name__ == "__main__":
    raise SystemExit(main())
