"""Export of a SharedBert for deployment: ONNX (fp32, and int8 for the CPU families sentence-transformers names) and
OpenVINO IR (fp32, and int8), each checked in its own runtime before anything is written.

    >>> from sharedbert.export import export_onnx
    >>> report = export_onnx("runs/minilm-shared", "runs/minilm-shared-onnx")   # task picked from the folder
    >>> report.max_abs_difference                                                # onnxruntime vs PyTorch
    3.1e-07
    >>> report = export_onnx("runs/healed", "runs/healed", task="base", layout="sentence-transformers",
    ...                      quantize=["all"], openvino=True, openvino_int8=True)  # the Hub's onnx/ and openvino/

The model is exported with torch's dynamo exporter, dynamic batch and sequence axes, and shared attention folded for
inference (`fold_for_inference`: query, key and value become one tensor). Every file is then run in its own runtime
(onnxruntime for `.onnx`, OpenVINO for `.xml`) on real sentences and compared with the unfolded fp32 PyTorch model:

* fp32 files (`model.onnx`, `openvino_model.xml`) must match the raw outputs within `atol` (1e-4);
* every file must give the sentence embeddings PyTorch gives: cosine of the embeddings (mean pooling over the attention
  mask and L2 normalisation for `base`, as the model is used; the graph's own `sentence_embedding` for
  `sentence-embedding`), mean at least `min_mean_cosine` (0.98) and each sentence at least `min_cosine` (0.95).

Why those thresholds (benchmarks/deploy_matrix.py, benchmarks/results/deploy_matrix.md, and its first run on an unhealed
conversion in commit e623f4b: cosines to the model's own fp32 PyTorch embeddings over all 3,000 STS-B dev sentences).
Sound int8 files averaged 0.986 (the SharedBert build, onnxruntime int8) to 0.998, their worst sentence 0.962-0.991;
fp32 files 0.99999. Broken graphs (in PyTorch, on 200 of those sentences) average less: the attention mask ignored
0.82-0.94, one feed-forward block zeroed 0.88-0.97, every weight matrix perturbed by 10% of its spread 0.94-0.97. A mean
of 0.98 sits between the two; a perturbation of 5% (0.984-0.994) is as small as int8's own error, and no cosine
threshold can tell them apart. The per-sentence floor catches a file that fails on some inputs only: the SharedBert
build's OpenVINO int8 (static activation quantization) gives 0.91 on one check sentence and 0.65 on one STS-B sentence,
and is refused. A failed check raises `ExportError` and writes nothing: the output folder (or, in the
sentence-transformers layout, its `onnx/` and `openvino/` subfolders) is written atomically (`sharedbert.atomic`).

Files, under the names sentence-transformers' backend loader looks for (its `backend/load.py` and `backend/utils.py`;
`tests/test_export.py` checks them against the installed package):

* `model.onnx`: fp32 ONNX;
* `model_qint8_avx512_vnni.onnx`, `model_qint8_avx512.onnx`, `model_quint8_avx2.onnx`, `model_qint8_arm64.onnx`:
  dynamic int8 quantization by onnxruntime with the settings optimum's `AutoQuantizationConfig.<variant>
  (is_static=False)` chooses (`QUANTIZATION_VARIANTS`);
* `openvino_model.xml` / `.bin`: fp32 OpenVINO IR converted from the ONNX file;
* `openvino_model_qint8_quantized.xml` / `.bin`: OpenVINO IR statically quantized to int8 by NNCF on calibration
  sentences, with the settings optimum-intel's `OVQuantizationConfig()` passes to `nncf.quantize`; or, with
  `openvino_int8_mode="weights"`, `openvino_model_qint8_weights.xml` / `.bin`: int8 weights only (NNCF
  `compress_weights`), for models whose activations do not quantize well.

With `layout="flat"` (the default) they go straight into the output folder with the tokenizer, `config.json` and
`onnx_export.json`; with `layout="sentence-transformers"` the ONNX files go into `OUT/onnx/` and the OpenVINO files into
`OUT/openvino/`, as on the Hub, and OUT may be the model folder itself: staging for the Hub (`sharedbert upload`,
`sharedbert build-minilm`) then publishes them after checking them again.

Tasks:
* ``"base"``: `last_hidden_state` of `SharedBertModel` (what sentence-transformers' ONNX/OpenVINO backends read);
* ``"sequence-classification"``: `logits` of `SharedBertForSequenceClassification`;
* ``"sentence-embedding"``: `sentence_embedding` of the folder's sentence-transformers pipeline (its own pooling and,
  where it has one, `Normalize`), loaded with sentence-transformers itself.

Needs the `onnx` extra (`pip install "sharedbert[onnx]"`: onnx, onnxscript, onnxruntime), the `openvino` extra for
OpenVINO (openvino, nncf), and sentence-transformers for the sentence-embedding task.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_directory

logger = logging.getLogger(__name__)

EXPORT_TASKS = ("base", "sequence-classification", "sentence-embedding")
LAYOUTS = ("flat", "sentence-transformers")
ONNX_FILE = "model.onnx"
REPORT_FILE = "onnx_export.json"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAMES = {"base": "last_hidden_state", "sequence-classification": "logits",
                "sentence-embedding": "sentence_embedding"}  # fmt: skip

# Where sentence-transformers 6.2's backends look (sentence_transformers/backend/load.py, load_onnx_model and
# load_openvino_model, through backend/utils.py backend_should_export): `<backend>/<file_name>` with the backend's
# lower-cased name as the subfolder ("onnx", "openvino"), the default file names being optimum's ONNX_WEIGHTS_NAME
# ("model.onnx") and OV_XML_FILE_NAME ("openvino_model.xml"); other files by model_kwargs={"file_name": ...}.
ONNX_FOLDER = "onnx"
OPENVINO_FOLDER = "openvino"
OPENVINO_FILE = "openvino_model.xml"
# backend/utils.py save_or_push_to_hub_model names an OpenVINO export f"openvino_model_{file_suffix}.xml", and
# backend/quantize.py export_static_quantized_openvino_model's default file_suffix is "qint8_quantized".
OPENVINO_INT8_FILE = "openvino_model_qint8_quantized.xml"
# Weight-only int8 (NNCF compress_weights) has no name in sentence-transformers; this one matches its "openvino*.xml"
# glob, so model_kwargs={"file_name": "openvino/openvino_model_qint8_weights.xml"} would load it.
OPENVINO_INT8_WEIGHTS_FILE = "openvino_model_qint8_weights.xml"
OPENVINO_INT8_MODES = ("static", "weights")


@dataclass(frozen=True)
class QuantizationVariant:
    """onnxruntime dynamic quantization settings for one CPU family."""

    name: str
    weight_type: str  # onnxruntime.quantization.QuantType member name
    per_channel: bool
    reduce_range: bool

    @property
    def file_name(self) -> str:
        # sentence_transformers/backend/quantize.py, export_dynamic_quantized_onnx_model: file_suffix =
        # f"{quantization_config.weights_dtype.name.lower()}_{quantization_config_name}", and backend/utils.py
        # save_or_push_to_hub_model names the file f"model_{file_suffix}.onnx".
        return f"model_{self.weight_type.lower()}_{self.name}.onnx"


# sentence-transformers 6.2 (backend/quantize.py, export_dynamic_quantized_onnx_model) builds each variant as
# `getattr(AutoQuantizationConfig, variant)(is_static=False)`; optimum-onnx 0.1.0's optimum/onnxruntime/configuration.py
# AutoQuantizationConfig sets, with its defaults: activations QUInt8 (asymmetric), weights symmetric, per_channel=True,
# and weights QInt8 for arm64 ("u8/s8 is faster on lower-end ARM64"), avx512 and avx512_vnni, QUInt8 for avx2;
# reduce_range=False for all four. So three of the four files are quantized alike: they differ only in the CPU they are
# named for. The other settings (every operator onnxruntime quantizes dynamically, MatMulConstBOnly off) are those
# optimum's ORTQuantizer.quantize passes to onnxruntime (`_quantize_variant`).
QUANTIZATION_VARIANTS = {
    "avx512_vnni": QuantizationVariant("avx512_vnni", "QInt8", per_channel=True, reduce_range=False),
    "avx512": QuantizationVariant("avx512", "QInt8", per_channel=True, reduce_range=False),
    "avx2": QuantizationVariant("avx2", "QUInt8", per_channel=True, reduce_range=False),
    "arm64": QuantizationVariant("arm64", "QInt8", per_channel=True, reduce_range=False),
}

# The sentence-embedding check (see the module doc for how they were chosen).
MIN_MEAN_COSINE = 0.98
MIN_COSINE = 0.95
# Calibration of the OpenVINO int8 model: sentence-transformers' export_static_quantized_openvino_model calibrates on
# 300 sentences of GLUE SST-2 train by default; so do we when no calibration file is given and the shared data has it.
CALIBRATION_SAMPLES = 300
DEFAULT_CALIBRATION = "glue/SST-2/train.tsv"

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


class ExportError(RuntimeError):
    """The export failed or does not reproduce the PyTorch model."""


@dataclass
class ExportArguments:
    """Every option of `export` / `sharedbert export`, with its default and help."""

    model: str | None = field(default=None, metadata={
        "cli": False, "help": "the model folder (a save_pretrained folder, or a sentence-transformers folder)"})
    output_dir: str | None = field(default=None, metadata={"cli": False, "help": "the folder to write; with "
                            "--layout sentence-transformers it may be the model folder itself"})
    task: str = field(default="auto", metadata={
        "help": "what to export: base (last_hidden_state), sequence-classification (logits), sentence-embedding "
        "(the folder's pooling and Normalize in the graph); auto: from the folder (sentence-embedding for a "
        "sentence-transformers folder, base in the sentence-transformers layout)",
        "choices": ["auto", *EXPORT_TASKS]})
    layout: str = field(default="flat", metadata={
        "help": "flat: every file in OUT with the tokenizer and config.json; sentence-transformers: OUT/onnx/ and "
        "OUT/openvino/ under the names sentence-transformers' backends load, as on the Hub", "choices": list(LAYOUTS)})
    quantize: list[str] = field(default_factory=list, metadata={
        "help": "also write dynamic int8 ONNX for these CPU families (onnxruntime, optimum's settings): avx512_vnni, "
        "avx512, avx2, arm64, or all", "choices": [*QUANTIZATION_VARIANTS, "all"]})
    openvino: bool = field(default=False, metadata={"help": "also write fp32 OpenVINO IR (openvino_model.xml/.bin)"})
    openvino_int8: bool = field(default=False, metadata={
        "help": "also write OpenVINO IR quantized to int8 by NNCF (openvino_model_qint8_quantized.xml/.bin), "
        "calibrated on --calibration-file"})
    openvino_int8_mode: str = field(default="static", metadata={
        "help": "static: weights and activations in int8, calibrated (sentence-transformers' kind, fastest); weights: "
        "int8 weights only, no calibration (openvino_model_qint8_weights.xml: for models whose activations do not "
        "quantize well, such as the SharedBert build)", "choices": list(OPENVINO_INT8_MODES)})
    calibration_file: str | None = field(default=None, metadata={
        "help": "sentences for the OpenVINO int8 calibration: a text file (one a line) or a TSV with a 'sentence' "
        "column (default: GLUE SST-2 train from the shared data folder, as sentence-transformers does)"})
    calibration_samples: int = field(default=CALIBRATION_SAMPLES, metadata={
        "help": "calibration sentences used for OpenVINO int8"})
    check_file: str | None = field(default=None, metadata={
        "help": "sentences for the checks, one a line (default: 16 built-in GLUE dev sentences)"})
    opset: int = field(default=18, metadata={"help": "ONNX opset"})
    atol: float = field(default=1e-4, metadata={"help": "largest accepted difference of an fp32 file from PyTorch"})
    min_mean_cosine: float = field(default=MIN_MEAN_COSINE, metadata={
        "help": "smallest accepted mean cosine between a file's sentence embeddings and PyTorch's"})
    min_cosine: float = field(default=MIN_COSINE, metadata={
        "help": "smallest accepted cosine for any one check sentence"})
    max_length: int = field(default=128, metadata={"help": "truncate check and calibration sentences to this"})


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


@dataclass
class ExportReport:
    onnx_path: str
    task: str
    output_name: str
    max_abs_difference: float
    check_sentences: int
    folded: bool
    opset: int
    layout: str = "flat"
    files: list[FileCheck] = field(default_factory=list)

    def check(self, name: str) -> FileCheck:
        """The check of the file `name` (its path relative to the output folder)."""
        return next(check for check in self.files if check.file == name)


def detect_task(model_dir: str | os.PathLike, layout: str = "flat") -> str:
    """`sentence-embedding` for a sentence-transformers folder (`modules.json`; `base` in the sentence-transformers
    layout, whose loaders pool themselves), `sequence-classification` for a saved classifier, else `base`."""
    folder = Path(model_dir)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{folder} has no config.json: pass a folder written by save_pretrained.")
    architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or []
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        return "sequence-classification"
    if (folder / "modules.json").is_file() and layout == "flat":
        return "sentence-embedding"
    return "base"


class EncoderOutput(torch.nn.Module):
    """One named output of a transformers model as a plain tensor, from three named inputs: the signature ONNX
    consumers expect."""

    def __init__(self, model, output_name: str):
        super().__init__()
        self.model, self.output_name = model, output_name

    def forward(self, input_ids, attention_mask, token_type_ids):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return outputs[self.output_name]


class _SentenceEncoder(torch.nn.Module):
    def __init__(self, sentence_transformer):
        super().__init__()
        self.sentence_transformer = sentence_transformer

    def forward(self, input_ids, attention_mask, token_type_ids):
        features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        return self.sentence_transformer(features)["sentence_embedding"]


def _load(model_dir: Path, task: str):
    """(wrapper module, tokenizer, the SharedBert model inside it)."""
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    from . import modeling_sharedbert

    if task == "sentence-embedding":
        from . import embeddings

        try:
            sentence_transformer = embeddings.load(model_dir).eval()
        except ImportError as error:
            raise ExportError("The sentence-embedding export needs sentence-transformers: "
                              "pip install sentence-transformers") from error
        model = sentence_transformer[0].auto_model
        wrapper, tokenizer = _SentenceEncoder(sentence_transformer), sentence_transformer.tokenizer
    else:
        auto = AutoModelForSequenceClassification if task == "sequence-classification" else AutoModel
        model = auto.from_pretrained(model_dir).eval()
        wrapper, tokenizer = EncoderOutput(model, OUTPUT_NAMES[task]), AutoTokenizer.from_pretrained(model_dir)
    if not isinstance(model, modeling_sharedbert.SharedBertPreTrainedModel):
        raise ExportError(f"{model_dir} holds a {type(model).__name__}, not a SharedBert: convert it first "
                          "(sharedbert convert).")
    return wrapper.eval(), tokenizer, model


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as error:
        raise ExportError('ONNX export needs the onnx extra: pip install "sharedbert[onnx]" '
                          "(onnx, onnxscript, onnxruntime)") from error
    return onnxruntime


def _openvino():
    try:
        import openvino
    except ImportError as error:
        raise ExportError('OpenVINO export needs the openvino extra: pip install "sharedbert[openvino]" '
                          "(openvino, nncf)") from error
    return openvino


def trace_to_onnx(module: torch.nn.Module, inputs: dict, output_name: str, opset: int = 18):
    """torch's dynamo exporter with dynamic batch and sequence axes on every input; returns the `ONNXProgram`.
    `module(**inputs)` must return one tensor (the benchmarks export transformers' BERT through this too)."""
    batch_dim, sequence_dim = torch.export.Dim("batch", min=1), torch.export.Dim("sequence", min=1)
    with torch.no_grad():
        return torch.onnx.export(
            module, (), kwargs=inputs, dynamo=True, opset_version=opset, input_names=list(inputs),
            output_names=[output_name], dynamic_shapes={name: {0: batch_dim, 1: sequence_dim} for name in inputs},
        )


# --------------------------------------------------------------------------------------------------------------------
# Sentence embeddings and the check
# --------------------------------------------------------------------------------------------------------------------


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
    onnxruntime = _onnxruntime()
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def openvino_model(path_or_model, threads: int | None = None, precision: str = "f32"):
    """An OpenVINO CPU compiled model from an IR file (or an `ov.Model`). `precision` is the CPU plugin's
    INFERENCE_PRECISION_HINT: "f32" computes in fp32; on CPUs with AMX or AVX512-BF16 the plugin's own default is
    bf16, which changes the outputs slightly (measured: cosine 0.99997 on all-MiniLM-L6-v2)."""
    openvino = _openvino()
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


# --------------------------------------------------------------------------------------------------------------------
# int8 and OpenVINO
# --------------------------------------------------------------------------------------------------------------------


def quantization_variants(names) -> list[QuantizationVariant]:
    """The variants for `names` ("all" for every one), in QUANTIZATION_VARIANTS' order; a clear error otherwise."""
    names = [names] if isinstance(names, str) else list(names or [])
    unknown = [name for name in names if name != "all" and name not in QUANTIZATION_VARIANTS]
    if unknown:
        raise ValueError(f"Unknown quantization variant(s) {unknown}: pick from {list(QUANTIZATION_VARIANTS)} or "
                         "'all'.")
    wanted = set(QUANTIZATION_VARIANTS) if "all" in names else set(names)
    return [variant for name, variant in QUANTIZATION_VARIANTS.items() if name in wanted]


def variant_for_cpu(flags=None, machine: str | None = None) -> QuantizationVariant:
    """The int8 variant named for this CPU (or for `flags` / `machine`, Linux /proc/cpuinfo flags and
    `platform.machine()`): arm64 on ARM, else avx512_vnni, avx512 or avx2 by the instruction sets present."""
    import platform

    from .precision import cpu_flags

    flags = cpu_flags() if flags is None else frozenset(flags)
    machine = (machine or platform.machine()).lower()
    if machine in ("arm64", "aarch64"):
        return QUANTIZATION_VARIANTS["arm64"]
    if "avx512_vnni" in flags:
        return QUANTIZATION_VARIANTS["avx512_vnni"]
    return QUANTIZATION_VARIANTS["avx512" if "avx512f" in flags else "avx2"]


def quantize_variant(source: Path, target: Path, variant: QuantizationVariant) -> None:
    """Dynamic int8 quantization of the ONNX file `source` into `target` with onnxruntime alone, as optimum-onnx
    0.1.0's ORTQuantizer.quantize does for `AutoQuantizationConfig.<variant>(is_static=False)`: operator-oriented
    (IntegerOps) quantization of every operator onnxruntime quantizes dynamically (MatMul, Attention, ...), uint8
    activations, symmetric weights of the variant's type, ForceSymmetric off, and no MatMulConstBOnly (optimum leaves it
    unset, so the products of two activations are quantized too)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet("root"):  # onnxruntime logs a warning about pre-processing on the root logger
        quantize_dynamic(
            str(source), str(target), per_channel=variant.per_channel, reduce_range=variant.reduce_range,
            weight_type=QuantType[variant.weight_type],
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False, "EnableSubgraph": False,
                           "ForceSymmetric": False, "MatMulConstBOnly": False},
        )


def convert_to_openvino(onnx_path: Path, xml_path: Path) -> None:
    """fp32 OpenVINO IR (`.xml` + `.bin`) from the ONNX file, weights kept in fp32 (save_model would halve them)."""
    openvino = _openvino()
    openvino.save_model(openvino.convert_model(str(onnx_path)), str(xml_path), compress_to_fp16=False)


def quantize_openvino(onnx_path: Path, xml_path: Path, calibration: list[dict], samples: int) -> None:
    """OpenVINO IR statically quantized to int8 by NNCF, calibrated on `calibration` (feeds of one sentence each),
    with what optimum-intel 2.2.0's `OVQuantizationConfig()` (sentence-transformers' default in
    export_static_quantized_openvino_model) passes to `nncf.quantize`: preset MIXED (asymmetric activations), model
    type TRANSFORMER, fast bias correction, no overflow fix."""
    openvino = _openvino()
    try:
        import nncf
    except ImportError as error:
        raise ExportError('OpenVINO int8 needs NNCF: pip install "sharedbert[openvino]" (openvino, nncf)') from error
    model = openvino.convert_model(str(onnx_path))
    advanced = nncf.AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix.DISABLE)
    with _quiet("nncf"):
        quantized = nncf.quantize(model, nncf.Dataset(calibration), preset=nncf.QuantizationPreset.MIXED,
                                  subset_size=min(samples, len(calibration)), fast_bias_correction=True,
                                  model_type=nncf.ModelType.TRANSFORMER, advanced_parameters=advanced)
    openvino.save_model(quantized, str(xml_path), compress_to_fp16=False)


def compress_openvino_weights(onnx_path: Path, xml_path: Path) -> None:
    """OpenVINO IR with int8 weights (NNCF `compress_weights`, INT8_ASYM, per channel, data-free); activations stay in
    floating point. Measured on the SharedBert build over STS-B dev: cosine 0.9967 mean, 0.9907 worst, where static
    int8 gave 0.9898 and 0.65."""
    openvino = _openvino()
    try:
        import nncf
    except ImportError as error:
        raise ExportError('OpenVINO int8 needs NNCF: pip install "sharedbert[openvino]" (openvino, nncf)') from error
    with _quiet("nncf"):
        compressed = nncf.compress_weights(openvino.convert_model(str(onnx_path)),
                                           mode=nncf.CompressWeightsMode.INT8_ASYM)
    openvino.save_model(compressed, str(xml_path), compress_to_fp16=False)


@contextlib.contextmanager
def _quiet(name: str):
    """Only errors from the logger `name` for the block. Its handlers are put back afterwards too: onnxruntime's
    quantization calls `logging.warning`, which configures the root logger (basicConfig) when it has no handler, and
    a library must not leave that behind (every later log line would be printed twice)."""
    target = logging.getLogger(name if name != "root" else None)
    level, handlers = target.level, list(target.handlers)
    target.setLevel(logging.ERROR)
    try:
        yield
    finally:
        target.setLevel(level)
        target.handlers[:] = handlers


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


def calibration_sentences(calibration_file=None, samples: int = CALIBRATION_SAMPLES) -> list[str]:
    """The OpenVINO int8 calibration sentences: `calibration_file`, else GLUE SST-2 train from the shared data
    folder (sentence-transformers' default); a clear error when there is neither."""
    if calibration_file is None:
        from .shared_data import shared_data_dir

        shared = shared_data_dir(DEFAULT_CALIBRATION)
        if shared is None:
            raise ValueError("OpenVINO int8 needs calibration sentences: pass --calibration-file FILE (one sentence a "
                             f"line, a few hundred of the kind the model will see); {DEFAULT_CALIBRATION} was not "
                             "found in a shared data folder.")
        calibration_file = shared / DEFAULT_CALIBRATION
    return read_sentences(calibration_file, samples)


# --------------------------------------------------------------------------------------------------------------------
# The export
# --------------------------------------------------------------------------------------------------------------------


def export_onnx(
    model_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    task: str = "auto",
    *,
    opset: int = 18,
    check_sentences: list[str] | tuple[str, ...] = CHECK_SENTENCES,
    max_length: int = 128,
    atol: float = 1e-4,
    layout: str = "flat",
    quantize=(),
    openvino: bool = False,
    openvino_int8: bool = False,
    openvino_int8_mode: str = "static",
    calibration: list[str] | None = None,
    calibration_samples: int = CALIBRATION_SAMPLES,
    min_mean_cosine: float = MIN_MEAN_COSINE,
    min_cosine: float = MIN_COSINE,
) -> ExportReport:
    """Export the model in `model_dir` to `output_dir` and check every file in its runtime (see the module doc).
    `calibration`: the OpenVINO int8 calibration sentences (default `calibration_sentences()`)."""
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}.")
    variants = quantization_variants(quantize)
    if task == "auto":
        task = detect_task(model_dir, layout)
    if task not in EXPORT_TASKS:
        raise ValueError(f"task must be 'auto' or one of {list(EXPORT_TASKS)}, got {task!r}.")
    if layout == "sentence-transformers" and task == "sentence-embedding":
        raise ValueError("The sentence-transformers layout holds the encoder's last_hidden_state (its backends pool "
                         "in PyTorch): use task base (or auto), or layout flat for a graph with pooling inside.")
    if task == "sequence-classification" and (variants or openvino_int8):
        raise ValueError("int8 files are checked by sentence-embedding cosine, which a classifier has not: export a "
                         "classifier in fp32 (ONNX or --openvino), or export its encoder (task base).")
    if output_dir.resolve() == model_dir.resolve() and layout == "flat":
        raise ValueError(f"{output_dir} is the model folder: pick a new folder, or use layout sentence-transformers, "
                         "which adds onnx/ and openvino/ to it.")
    check_sentences = list(check_sentences)
    if not check_sentences:
        raise ValueError("No check sentences: pass a few real sentences (--check-file, one a line).")
    onnxruntime = _onnxruntime()
    if openvino or openvino_int8:
        _openvino()
    if openvino_int8_mode not in OPENVINO_INT8_MODES:
        raise ValueError(f"openvino_int8_mode must be one of {list(OPENVINO_INT8_MODES)}, got {openvino_int8_mode!r}.")
    if openvino_int8 and openvino_int8_mode == "static" and calibration is None:
        calibration = calibration_sentences(samples=calibration_samples)

    wrapper, tokenizer, model = _load(model_dir, task)
    batch = tokenizer(check_sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    inputs = {name: batch[name] if name in batch else torch.zeros_like(batch["input_ids"]) for name in INPUT_NAMES}
    with torch.inference_mode():
        expected = wrapper(**inputs).float().numpy()  # the unfolded fp32 model is the reference
    feed = {name: tensor.numpy().astype(np.int64) for name, tensor in inputs.items()}
    reference = {"output": expected.astype(np.float64)}
    if task != "sequence-classification":
        reference["embeddings"] = sentence_embeddings(expected, feed["attention_mask"], task)

    model.fold_for_inference()
    try:
        program = trace_to_onnx(wrapper, inputs, OUTPUT_NAMES[task], opset=opset)
    except Exception as error:  # the exporter raises many types; say which model and task failed
        raise ExportError(f"torch.onnx.export failed for {model_dir} (task {task}): {error}") from error
    finally:
        model.unfold()

    thresholds = dict(min_mean_cosine=min_mean_cosine, min_cosine=min_cosine)
    with _output_folders(output_dir, layout, openvino or openvino_int8) as (work, onnx_dir, openvino_dir):
        def relative(path: Path) -> str:  # the file's final name in the output folder
            if layout == "flat":
                return path.name
            return f"{ONNX_FOLDER if path.parent == onnx_dir else OPENVINO_FOLDER}/{path.name}"

        checks = []
        onnx_path = onnx_dir / ONNX_FILE
        program.save(str(onnx_path), external_data=False)
        checks.append(check_file(onnx_path, relative(onnx_path), feed, reference, task, precision="fp32", atol=atol,
                                 **thresholds))
        logger.info("%s: onnxruntime vs PyTorch max |difference| %.2e", checks[-1].file,
                    checks[-1].max_abs_difference)
        for variant in variants:
            path = onnx_dir / variant.file_name
            quantize_variant(onnx_path, path, variant)
            checks.append(check_file(path, relative(path), feed, reference, task, precision="int8", atol=None,
                                     **thresholds))
            logger.info("%s: sentence-embedding cosine %.4f mean, %.4f worst", checks[-1].file,
                        checks[-1].mean_cosine, checks[-1].min_cosine)
        if openvino:
            path = openvino_dir / OPENVINO_FILE
            convert_to_openvino(onnx_path, path)
            checks.append(check_file(path, relative(path), feed, reference, task, precision="fp32", atol=atol,
                                     **thresholds))
            logger.info("%s: OpenVINO (f32) vs PyTorch max |difference| %.2e", checks[-1].file,
                        checks[-1].max_abs_difference)
        if openvino_int8 and openvino_int8_mode == "weights":
            path = openvino_dir / OPENVINO_INT8_WEIGHTS_FILE
            compress_openvino_weights(onnx_path, path)
            checks.append(check_file(path, relative(path), feed, reference, task, precision="int8", atol=None,
                                     **thresholds))
            logger.info("%s: sentence-embedding cosine %.4f mean, %.4f worst", checks[-1].file,
                        checks[-1].mean_cosine, checks[-1].min_cosine)
        elif openvino_int8:
            path = openvino_dir / OPENVINO_INT8_FILE
            calibration_feeds = [
                {name: np.asarray(values, dtype=np.int64)[None] for name, values in tokenizer(
                    sentence, truncation=True, max_length=max_length).items() if name in INPUT_NAMES}
                for sentence in calibration[:calibration_samples]]
            for item in calibration_feeds:
                item.setdefault("token_type_ids", np.zeros_like(item["input_ids"]))
            logger.info("Quantizing the OpenVINO model with NNCF on %d calibration sentences ...",
                        len(calibration_feeds))
            quantize_openvino(onnx_path, path, calibration_feeds, calibration_samples)
            try:
                checks.append(check_file(path, relative(path), feed, reference, task, precision="int8", atol=None,
                                         **thresholds))
            except ExportError as error:
                raise ExportError(f"{error} Static int8 quantizes the activations too, which some models do not bear: "
                                  "try --openvino-int8-mode weights (int8 weights only).") from None
            logger.info("%s: sentence-embedding cosine %.4f mean, %.4f worst", checks[-1].file,
                        checks[-1].mean_cosine, checks[-1].min_cosine)
        if layout == "flat":
            tokenizer.save_pretrained(str(work))
            shutil.copy2(model_dir / "config.json", work / "config.json")
        report = ExportReport(
            onnx_path=str(output_dir / relative(onnx_path)), task=task, output_name=OUTPUT_NAMES[task],
            max_abs_difference=checks[0].max_abs_difference, check_sentences=len(check_sentences),
            folded=model.config.attention_type == "shared", opset=opset, layout=layout, files=checks,
        )
        report_path = (work if layout == "flat" else onnx_dir) / REPORT_FILE
        report_path.write_text(json.dumps(dict(asdict(report), inputs=list(INPUT_NAMES), thresholds=dict(
            thresholds, atol=atol), onnxruntime=onnxruntime.__version__), indent=2) + "\n")
    return report


@contextlib.contextmanager
def _output_folders(output_dir: Path, layout: str, with_openvino: bool):
    """(base folder, ONNX folder, OpenVINO folder) to write into, put in place atomically only if the block succeeds:
    the whole output folder for the flat layout; its onnx/ and openvino/ subfolders for the sentence-transformers
    layout (the rest of the folder, e.g. the model itself, is left alone)."""
    if layout == "flat":
        with atomic_directory(output_dir) as work:
            yield work, work, work
        return
    if not output_dir.is_dir():
        raise ValueError(f"{output_dir} is not a folder: the sentence-transformers layout adds onnx/ and openvino/ "
                         "to an existing model folder.")
    with contextlib.ExitStack() as stack:
        onnx_dir = stack.enter_context(atomic_directory(output_dir / ONNX_FOLDER))
        openvino_dir = stack.enter_context(atomic_directory(output_dir / OPENVINO_FOLDER)) if with_openvino else None
        yield output_dir, onnx_dir, openvino_dir


def export(arguments: ExportArguments) -> ExportReport:
    """`sharedbert export`: `export_onnx` with the options of `arguments`."""
    if not arguments.model or not arguments.output_dir:
        raise ValueError("ExportArguments needs model (the model folder) and output_dir (the folder to write).")
    check = read_sentences(arguments.check_file) if arguments.check_file else CHECK_SENTENCES
    calibration = None
    if arguments.openvino_int8 and arguments.openvino_int8_mode == "static":
        calibration = calibration_sentences(arguments.calibration_file, arguments.calibration_samples)
    return export_onnx(
        arguments.model, arguments.output_dir, arguments.task, opset=arguments.opset, check_sentences=check,
        max_length=arguments.max_length, atol=arguments.atol, layout=arguments.layout, quantize=arguments.quantize,
        openvino=arguments.openvino, openvino_int8=arguments.openvino_int8,
        openvino_int8_mode=arguments.openvino_int8_mode, calibration=calibration,
        calibration_samples=arguments.calibration_samples, min_mean_cosine=arguments.min_mean_cosine,
        min_cosine=arguments.min_cosine,
    )
