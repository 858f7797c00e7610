"""Exported files run in their own runtimes (onnxruntime for `.onnx`, OpenVINO for `.xml`) and checked against the
unfolded fp32 PyTorch model on real sentences (`check_file`):

* fp32 files (`model.onnx`, `openvino_model.xml`) must match the raw outputs within `atol` (1e-4);
* every file must give the sentence embeddings PyTorch gives: cosine of the embeddings (mean pooling over the attention
  mask and L2 normalisation for `base`, as the model is used; the graph's own `sentence_embedding` for
  `sentence-embedding`), mean at least `MIN_MEAN_COSINE` (0.98) and each sentence at least `MIN_COSINE` (0.95).

Why those thresholds (benchmarks/deploy_matrix.py, benchmarks/results/deploy_matrix.md, and its first run on an unhealed
conversion in commit e623f4b: cosines to the model's own fp32 PyTorch embeddings over all 3,000 STS-B dev sentences).
Sound int8 files averaged 0.986 (the SharedBert build, onnxruntime int8) to 0.998, their worst sentence 0.962-0.991;
fp32 files 0.99999. Broken graphs (in PyTorch, on 200 of those sentences) average less: the attention mask ignored
0.82-0.94, one feed-forward block zeroed 0.88-0.97, every weight matrix perturbed by 10% of its spread 0.94-0.97. A mean
of 0.98 sits between the two; a perturbation of 5% (0.984-0.994) is as small as int8's own error, and no cosine
threshold can tell them apart. The per-sentence floor catches a file that fails on some inputs only: the SharedBert
build's OpenVINO int8 with every MatMul quantized (sentence-transformers' settings) gives 0.54 on one STS-B sentence
(benchmarks/results/openvino_int8_alpha.md), and is refused; the export's static int8 leaves the MatMuls that cause it
in float (`quantization.float_matmuls`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ExportError, import_onnxruntime, import_openvino

MIN_MEAN_COSINE = 0.98
MIN_COSINE = 0.95

# Real sentences of different lengths for the checks (from GLUE SST-2 and STS-B dev).
CHECK_SENTENCES = (
    "it 's a charming and often affecting journey .",
    "A man is playing a guitar.",
    "unflinchingly bleak and desperate",
    "the acting , costumes , music , cinematography and sound are all astounding given the production 's "
    "austere locales .",
    "A woman is slicing an onion.",
    "It's not a masterpiece, but I enjoyed every minute of it.",
    "A man with a hard hat is dancing.",
    "The cougar is chasing the bear.",
    "Three men are on stage playing guitars.",
    "The man cut down a tree with an axe.",
    "it 's slow -- very , very slow .",
    "a sometimes tedious film .",
    "although laced with humor and a few fanciful touches , the film is a refreshingly serious look at young women .",
    "you do n't have to know about music to appreciate the film 's easygoing blend of comedy and romance .",
    "in exactly 89 minutes , most of which passed as slowly as if i 'd been sitting naked on an igloo , formula 51 "
    "sank from quirky to jerky to utter turkey .",
    "Kittens are eating food.",
)


@dataclass
class FileCheck:
    """What one written file gave in its runtime against fp32 PyTorch on the check sentences."""

    file: str
    runtime: str
    precision: str
    min_cosine: float | None  # None for a classifier (no sentence embedding)
    mean_cosine: float | None
    max_abs_difference: float | None
    seconds: float
    bytes: int = 0


def read_sentences(path: str | os.PathLike, limit: int | None = None) -> list[str]:
    """Sentences from a text file (one a line) or a TSV whose header has a `sentence` (or `sentence1`) column."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Sentence file {path} not found: pass a text file with one sentence a line.")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    header = lines[0].split("\t") if lines else []
    if path.suffix.lower() == ".tsv" and ("sentence" in header or "sentence1" in header):
        column = header.index("sentence" if "sentence" in header else "sentence1")
        sentences = [row.split("\t")[column].strip() for row in lines[1:] if len(row.split("\t")) > column]
    else:
        sentences = [line.strip() for line in lines]
    sentences = [sentence for sentence in sentences if sentence]
    if not sentences:
        raise ValueError(f"{path} holds no sentences: write one sentence a line.")
    return sentences[:limit] if limit else sentences


def sentence_embeddings(output: np.ndarray, attention_mask: np.ndarray, task: str) -> np.ndarray:
    """Unit-length sentence embeddings from a model output: mean pooling over the attention mask for `base` (how
    all-MiniLM-L6-v2 and its conversion are used), the output itself for `sentence-embedding`; then L2-normalised."""
    output = np.asarray(output, dtype=np.float64)
    if task == "base":
        weights = np.asarray(attention_mask, dtype=np.float64)[..., None]
        output = (output * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    elif task != "sentence-embedding":
        raise ValueError(f"sentence embeddings come from the base or sentence-embedding task, not {task!r}.")
    return output / np.clip(np.linalg.norm(output, axis=-1, keepdims=True), 1e-12, None)


def cosines(embeddings: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per-sentence cosine of two sets of unit-length embeddings (NaN where either is not finite)."""
    return (np.asarray(embeddings, np.float64) * np.asarray(reference, np.float64)).sum(axis=-1)


def onnx_session(path, threads: int | None = None):
    """An onnxruntime CPU session for the ONNX file `path` (`threads`: intra-op threads, default onnxruntime's)."""
    onnxruntime = import_onnxruntime()
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def openvino_model(path_or_model, threads: int | None = None, precision: str = "f32"):
    """An OpenVINO CPU compiled model from an IR file (or an `ov.Model`). `precision` is the CPU plugin's
    INFERENCE_PRECISION_HINT: "f32" computes in fp32; on CPUs with AMX or AVX512-BF16 the plugin's own default is
    bf16, which changes the outputs slightly (measured: cosine 0.99997 on all-MiniLM-L6-v2)."""
    openvino = import_openvino()
    core = openvino.Core()
    config = {"INFERENCE_PRECISION_HINT": precision} if precision else {}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    model = core.read_model(str(path_or_model)) if isinstance(path_or_model, (str, Path)) else path_or_model
    return core.compile_model(model, "CPU", config)


def run_file(path: Path, feed: dict, threads: int | None = None) -> np.ndarray:
    """The first output of the ONNX (.onnx) or OpenVINO (.xml) file `path` on the numpy inputs `feed`."""
    if path.suffix == ".xml":
        return np.asarray(openvino_model(path, threads)(feed)[0])
    return onnx_session(path, threads).run(None, feed)[0]


def check_file(path: Path, name: str, feed: dict, reference: dict, task: str, *, precision: str, atol: float | None,
               min_mean_cosine: float, min_cosine: float) -> FileCheck:
    """Run `path` in its runtime on `feed` and compare with `reference` ({"output", "embeddings"}): raises
    ExportError naming the file, what it gave and the threshold when a check fails."""
    started = time.perf_counter()
    output = run_file(path, feed)
    seconds = time.perf_counter() - started
    if output.shape != reference["output"].shape:
        raise ExportError(f"{name} gives an output of shape {output.shape}, PyTorch {reference['output'].shape}.")
    difference = float(np.abs(output.astype(np.float64) - reference["output"]).max())
    if task in ("base", "sentence-embedding"):
        similarity = cosines(sentence_embeddings(output, feed["attention_mask"], task), reference["embeddings"])
        lowest, mean = float(np.min(similarity)), float(np.mean(similarity))
    else:  # a classifier has no sentence embedding: the fp32 difference is its check
        lowest = mean = None
    count = len(feed["input_ids"])
    if atol is not None and not difference <= atol:  # NaN fails too
        raise ExportError(f"{name} differs from PyTorch by {difference:.2e} (> {atol:.0e}) on {count} sentences; "
                          "nothing was written.")
    if task in ("base", "sentence-embedding") and not (mean >= min_mean_cosine and lowest >= min_cosine):
        raise ExportError(
            f"{name} ({precision}) gives sentence embeddings at cosine {mean:.4f} on average and {lowest:.4f} at "
            f"worst from PyTorch's on {count} sentences (needed: {min_mean_cosine} and {min_cosine}); nothing was "
            "written. A graph this far off is broken; if it is a quantization you accept, lower --min-mean-cosine "
            "and --min-cosine.")
    return FileCheck(file=name, runtime="openvino" if path.suffix == ".xml" else "onnxruntime", precision=precision,
                     min_cosine=lowest, mean_cosine=mean, max_abs_difference=difference, seconds=seconds,
                     bytes=_file_bytes(path))


def _file_bytes(path: Path) -> int:
    size = path.stat().st_size
    if path.suffix == ".xml" and path.with_suffix(".bin").is_file():
        size += path.with_suffix(".bin").stat().st_size
    return size
