"""The options of the export (`sharedbert export`, `export`): `ExportArguments`, checked when it is made, before
anything loads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..remote_code import trust_remote_code_option
from .quantization import (
    CALIBRATION_SAMPLES,
    OPENVINO_INT8_MODES,
    QUANTIZATION_VARIANTS,
    calibration_source,
    quantization_variants,
)
from .runtimes import MIN_COSINE, MIN_MEAN_COSINE
from .tracing import EXPORT_TASKS, detect_task

LAYOUTS = ("flat", "sentence-transformers")


@dataclass
class ExportArguments:
    """Every option of `export` / `sharedbert export`, with its default and help. Bad options are refused when it is
    made (`__post_init__`), before anything loads, with the problem and the fix."""

    model: str = field(metadata={"positional": True, "help": "the model folder (a save_pretrained folder, or a "
                                 "sentence-transformers folder)"})
    output_dir: str = field(metadata={"positional": True, "metavar": "OUT", "help": "the folder to write; with "
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
    trust_remote_code: bool = trust_remote_code_option()
    openvino_int8: bool = field(default=False, metadata={
        "help": "also write OpenVINO IR quantized to int8 by NNCF (openvino_model_qint8_quantized.xml/.bin), "
        "calibrated on --calibration-file"})
    openvino_int8_mode: str = field(default="static", metadata={
        "help": "static: weights and activations in int8, calibrated (sentence-transformers' kind, fastest); weights: "
        "int8 weights only, no calibration (openvino_model_qint8_weights.xml: for models whose activations do not "
        "quantize well)", "choices": list(OPENVINO_INT8_MODES)})
    calibration_file: str | None = field(default=None, metadata={
        "help": "sentences for the OpenVINO int8 calibration: a text file (one a line) or a TSV with a 'sentence' "
        "column (default: GLUE SST-2 train from the shared data folder, $SHAREDBERT_DATA first, as "
        "sentence-transformers does)"})
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
    # --- for callers in Python, not flags
    check_sentences: list[str] | None = field(default=None, metadata={
        "cli": False, "help": "the check sentences themselves, instead of check_file (default: CHECK_SENTENCES)"})
    calibration: list[str] | None = field(default=None, metadata={
        "cli": False, "help": "the OpenVINO int8 calibration sentences themselves, instead of calibration_file"})

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}.")
        variants = quantization_variants(self.quantize)  # names the variants to pick from
        if self.task != "auto" and self.task not in EXPORT_TASKS:
            raise ValueError(f"task must be 'auto' or one of {list(EXPORT_TASKS)}, got {self.task!r}.")
        task = self.resolved_task()
        if self.layout == "sentence-transformers" and task == "sentence-embedding":
            raise ValueError("The sentence-transformers layout holds the encoder's last_hidden_state (its backends "
                             "pool in PyTorch): use task base (or auto), or layout flat for a graph with pooling "
                             "inside.")
        if task == "sequence-classification" and (variants or self.openvino_int8):
            raise ValueError("int8 files are checked by sentence-embedding cosine, which a classifier has not: export "
                             "a classifier in fp32 (ONNX or --openvino), or export its encoder (task base).")
        if self.layout == "flat" and Path(self.output_dir).resolve() == Path(self.model).resolve():
            raise ValueError(f"{self.output_dir} is the model folder: pick a new folder, or use layout "
                             "sentence-transformers, which adds onnx/ and openvino/ to it.")
        if self.layout == "sentence-transformers" and not Path(self.output_dir).is_dir():
            raise ValueError(f"{self.output_dir} is not a folder: the sentence-transformers layout adds onnx/ and "
                             "openvino/ to an existing model folder.")
        if self.check_sentences is not None and self.check_file is not None:
            raise ValueError("Pass the check sentences or a check file (--check-file), not both.")
        if self.check_sentences is not None and not list(self.check_sentences):
            raise ValueError("No check sentences: pass a few real sentences (--check-file, one a line).")
        if self.openvino_int8_mode not in OPENVINO_INT8_MODES:
            raise ValueError(f"openvino_int8_mode must be one of {list(OPENVINO_INT8_MODES)}, got "
                             f"{self.openvino_int8_mode!r}.")
        if self.calibrates and self.calibration is None:
            calibration_source(self.calibration_file)  # a missing file, or no shared data: the fix, before loading

    @property
    def calibrates(self) -> bool:
        """Whether the export needs calibration sentences (static OpenVINO int8)."""
        return self.openvino_int8 and self.openvino_int8_mode == "static"

    def resolved_task(self) -> str:
        """The task, read from the model folder for "auto" (`detect_task`)."""
        return detect_task(self.model, self.layout) if self.task == "auto" else self.task
