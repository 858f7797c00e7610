"""int8 and OpenVINO files made from the fp32 ONNX file, with the settings sentence-transformers' own exports use:

* `quantize_variant`: dynamic int8 quantization by onnxruntime for one CPU family (`QUANTIZATION_VARIANTS`, under
  sentence-transformers' file names `model_qint8_avx512_vnni.onnx`, ...);
* `convert_to_openvino`: fp32 OpenVINO IR;
* `quantize_openvino`: OpenVINO IR statically quantized to int8 by NNCF on calibration sentences
  (`calibration_sentences`, `calibration_feeds`), with the few MatMuls that int8 breaks left in floating point
  (`float_matmuls`);
* `compress_openvino_weights`: OpenVINO IR with int8 weights only, for models whose activations do not quantize well.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..precision import cpu_flags
from .errors import import_nncf, import_openvino
from .runtimes import read_sentences
from .tracing import INPUT_NAMES

OPENVINO_INT8_MODES = ("static", "weights")
# SmoothQuant's alpha for MatMuls in static OpenVINO int8: how much of each input channel's range moves into the
# weight (NNCF's default for transformers is 0.95). Less leaves more in the activations and less in the weights'
# columns. Chosen on held-out data (experiments/held-out-selection/results/selection.md): over the STS-B train
# sentences not in dev, on four conversions, 0.6 gave the highest lowest worst-sentence cosine (0.9658 against
# 0.9657 / 0.9604 / 0.9376 for 0.7 / 0.8 / 0.95, a near tie on the standard conversion); STS-B dev only reports.
SMOOTH_QUANT_ALPHA = 0.6
# Calibration of the OpenVINO int8 model: sentence-transformers' export_static_quantized_openvino_model calibrates on
# 300 sentences of GLUE SST-2 train by default; so do we when no calibration file is given and the shared data has it.
CALIBRATION_SAMPLES = 300
DEFAULT_CALIBRATION = "glue/SST-2/train.tsv"


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
# optimum's ORTQuantizer.quantize passes to onnxruntime (`quantize_variant`).
QUANTIZATION_VARIANTS = {
    "avx512_vnni": QuantizationVariant("avx512_vnni", "QInt8", per_channel=True, reduce_range=False),
    "avx512": QuantizationVariant("avx512", "QInt8", per_channel=True, reduce_range=False),
    "avx2": QuantizationVariant("avx2", "QUInt8", per_channel=True, reduce_range=False),
    "arm64": QuantizationVariant("arm64", "QInt8", per_channel=True, reduce_range=False),
}


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
    openvino = import_openvino()
    openvino.save_model(openvino.convert_model(str(onnx_path)), str(xml_path), compress_to_fp16=False)


def quantize_openvino(onnx_path: Path, xml_path: Path, calibration: list[dict], samples: int,
                      keep_float: bool = True) -> None:
    """OpenVINO IR statically quantized to int8 by NNCF, calibrated on `calibration` (feeds of one sentence each),
    with what optimum-intel 2.2.0's `OVQuantizationConfig()` (sentence-transformers' default in
    export_static_quantized_openvino_model) passes to `nncf.quantize`: preset MIXED (asymmetric activations), model
    type TRANSFORMER (with its SmoothQuant), fast bias correction, no overflow fix. Two changes: the MatMuls of
    `float_matmuls` stay in floating point, and SmoothQuant's alpha is `SMOOTH_QUANT_ALPHA` (`keep_float=False`
    quantizes every MatMul with NNCF's alpha, as sentence-transformers does)."""
    openvino = import_openvino()
    nncf = import_nncf()
    model = openvino.convert_model(str(onnx_path))
    smoothing = ({"smooth_quant_alphas": nncf.AdvancedSmoothQuantParameters(matmul=SMOOTH_QUANT_ALPHA)}
                 if keep_float else {})
    advanced = nncf.AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix.DISABLE, **smoothing)
    kept = float_matmuls(model) if keep_float else []
    scope = {"ignored_scope": nncf.IgnoredScope(names=kept)} if kept else {}
    with _quiet("nncf"):
        quantized = nncf.quantize(model, nncf.Dataset(calibration), preset=nncf.QuantizationPreset.MIXED,
                                  subset_size=min(samples, len(calibration)), fast_bias_correction=True,
                                  model_type=nncf.ModelType.TRANSFORMER, advanced_parameters=advanced, **scope)
    openvino.save_model(quantized, str(xml_path), compress_to_fp16=False)


def float_matmuls(model) -> list[str]:
    """The names of the MatMuls of the OpenVINO model `model` that static int8 leaves in floating point:

    * attention's own products, the scores Q·Kᵀ and probabilities·V (the MatMuls without a weight). NNCF quantizes
      both of their inputs per tensor. Shared attention feeds one tensor S to the query, key and value; its channel
      ranges spread far more than standard attention's Q, K and V, with some channels under a twentieth of the
      largest, and the value's channels are then multiplied by dv in the output projection, so the error of the small
      ones is magnified;
    * the first feed-forward block's output projection (the first MatMul whose weight narrows its input). Its GELU
      input holds BERT's massive activation (channel 856, many times the median channel's range), which
      SmoothQuant moves into the weight's column; each row's int8 scale is then set by it and the row's other columns
      lose their precision. BERT bears that error; the shared conversions do not.

    Both, and the figures (every STS-B dev sentence, conversions of all-MiniLM-L6-v2 unhealed and healed): the worst
    sentence cosine to fp32 with and without them in float, benchmarks/results/openvino_int8_fix.md. Attention's
    products at sentence lengths and one of 24 projections cost little of int8's speed."""
    kept, first_narrowing = [], None
    for op in model.get_ordered_ops():
        if op.get_type_name() != "MatMul":
            continue
        weight = _weight_shape(op)
        if weight is None:
            kept.append(op.get_friendly_name())
        elif first_narrowing is None and _narrows(op, weight):
            first_narrowing = op.get_friendly_name()
    return kept + ([first_narrowing] if first_narrowing else [])


def _weight_shape(matmul) -> list[int] | None:
    """The shape of the constant second input of `matmul` (through Convert, Reshape, Transpose), None without one."""
    node = matmul.input(1).get_source_output().get_node()
    while node.get_type_name() in ("Convert", "Reshape", "Transpose", "Unsqueeze", "Squeeze"):
        node = node.input(0).get_source_output().get_node()
    return list(node.get_output_shape(0)) if node.get_type_name() == "Constant" else None


def _narrows(matmul, weight: list[int]) -> bool:
    """Whether the weighted `matmul` maps more input channels to fewer output channels (a feed-forward output)."""
    if len(weight) != 2:
        return False
    inputs, outputs = (weight[1], weight[0]) if matmul.get_transpose_b() else (weight[0], weight[1])
    return inputs > outputs


def compress_openvino_weights(onnx_path: Path, xml_path: Path) -> None:
    """OpenVINO IR with int8 weights (NNCF `compress_weights`, INT8_ASYM, per channel, data-free); activations stay in
    floating point. Measured on the SharedBert build over STS-B dev: cosine 0.9967 mean, 0.9907 worst, where static
    int8 with every MatMul in int8 gave 0.9898 and 0.65 (0.54 for the build made again: openvino_int8_alpha.md)."""
    openvino = import_openvino()
    nncf = import_nncf()
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


# --------------------------------------------------------------------------------------------------------------------
# Calibration sentences (static OpenVINO int8)
# --------------------------------------------------------------------------------------------------------------------


def calibration_source(calibration_file: str | os.PathLike | None = None) -> Path:
    """The file the OpenVINO int8 calibration sentences come from: `calibration_file`, else GLUE SST-2 train in the
    shared data folder (sentence-transformers' default); a clear error when there is neither."""
    if calibration_file is not None:
        path = Path(calibration_file)
        if not path.is_file():
            raise FileNotFoundError(f"Calibration file {path} not found: pass a text file with one sentence a line "
                                    "(or a TSV with a 'sentence' column).")
        return path
    from ..data.location import not_found_message, shared_data_dir  # looked up on each call, so tests can stand in

    shared = shared_data_dir(DEFAULT_CALIBRATION)
    if shared is None:
        raise ValueError("OpenVINO int8 needs calibration sentences (one a line, a few hundred of the kind the model "
                         "will see): " + not_found_message(DEFAULT_CALIBRATION, "--calibration-file FILE"))
    return shared / DEFAULT_CALIBRATION


def calibration_sentences(calibration_file=None, samples: int = CALIBRATION_SAMPLES) -> list[str]:
    """The first `samples` OpenVINO int8 calibration sentences of `calibration_source(calibration_file)`."""
    return read_sentences(calibration_source(calibration_file), samples)


def calibration_feeds(tokenizer, sentences: list[str], max_length: int) -> list[dict]:
    """One numpy feed per calibration sentence (batch of one, as NNCF's dataset iterates), with zero token types
    where the tokenizer gives none."""
    feeds = []
    for sentence in sentences:
        encoded = tokenizer(sentence, truncation=True, max_length=max_length)
        feed = {name: np.asarray(values, dtype=np.int64)[None] for name, values in encoded.items()
                if name in INPUT_NAMES}
        feed.setdefault("token_type_ids", np.zeros_like(feed["input_ids"]))
        feeds.append(feed)
    return feeds
