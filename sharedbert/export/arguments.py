"""The options of the export (`sharedbert export`, `export`): `ExportArguments`, checked when it is made, before
anything loads. It is three parts, one per concern, as a training job's arguments are (`training.arguments`):

* `ExportModelArguments`: the model, the task exported and where the files go;
* `ExportFormatArguments`: the files written beside the fp32 `model.onnx` (int8 ONNX, OpenVINO in fp32 and int8) and the
  sentences static int8 is calibrated on;
* `ExportCheckArguments`: the sentences every file is checked on and the thresholds it must meet.
"""

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
class ExportModelArguments:
    """The model, the task exported and where the files go."""

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
    opset: int = field(default=18, metadata={"help": "ONNX opset"})
    trust_remote_code: bool = trust_remote_code_option()
    overwrite: bool = field(default=False, metadata={
        "help": "flat layout: replace OUT when it exists and is not empty (everything in it is deleted); without it "
        "such an OUT is refused before anything is loaded"})

    def resolved_task(self) -> str:
        """The task, read from the model folder for "auto" (`detect_task`)."""
        return detect_task(self.model, self.layout) if self.task == "auto" else self.task

    def validate_model(self) -> str:
        """Refuses a layout or task that cannot work for this model and output folder; returns the resolved task."""
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}.")
        if self.task != "auto" and self.task not in EXPORT_TASKS:
            raise ValueError(f"task must be 'auto' or one of {list(EXPORT_TASKS)}, got {self.task!r}.")
        task = self.resolved_task()
        if self.layout == "sentence-transformers" and task == "sentence-embedding":
            raise ValueError("The sentence-transformers layout holds the encoder's last_hidden_state (its backends "
                             "pool in PyTorch): use task base (or auto), or layout flat for a graph with pooling "
                             "inside.")
        if self.layout == "flat" and Path(self.output_dir).resolve() == Path(self.model).resolve():
            raise ValueError(f"{self.output_dir} is the model folder: pick a new folder, or use layout "
                             "sentence-transformers, which adds onnx/ and openvino/ to it.")
        if self.layout == "sentence-transformers" and not Path(self.output_dir).is_dir():
            raise ValueError(f"{self.output_dir} is not a folder: the sentence-transformers layout adds onnx/ and "
                             "openvino/ to an existing model folder.")
        return task


@dataclass
class ExportFormatArguments:
    """The files written beside the fp32 `model.onnx`: int8 ONNX, OpenVINO IR in fp32 and int8, and the sentences
    static OpenVINO int8 is calibrated on."""

    # The heading of its flags in `sharedbert export --help` (HfArgumentParser's group name).
    _argument_group_name = "files written beside model.onnx"

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
        "quantize well)", "choices": list(OPENVINO_INT8_MODES)})
    calibration_file: str | None = field(default=None, metadata={
        "help": "sentences for the OpenVINO int8 calibration: a text file (one a line) or a TSV with a 'sentence' "
        "column (default: GLUE SST-2 train from the shared data folder, $SHAREDBERT_DATA first, as "
        "sentence-transformers does)"})
    calibration_samples: int = field(default=CALIBRATION_SAMPLES, metadata={
        "help": "calibration sentences used for OpenVINO int8"})
    calibration: list[str] | None = field(default=None, metadata={
        "cli": False, "help": "the OpenVINO int8 calibration sentences themselves, instead of calibration_file"})

    @property
    def calibrates(self) -> bool:
        """Whether the export needs calibration sentences (static OpenVINO int8)."""
        return self.openvino_int8 and self.openvino_int8_mode == "static"

    def validate_formats(self) -> None:
        """Refuses an unknown CPU family or int8 mode, and static int8 without calibration sentences, with the fix."""
        quantization_variants(self.quantize)  # names the variants to pick from
        if self.openvino_int8_mode not in OPENVINO_INT8_MODES:
            raise ValueError(f"openvino_int8_mode must be one of {list(OPENVINO_INT8_MODES)}, got "
                             f"{self.openvino_int8_mode!r}.")
        if self.calibrates and self.calibration is None:
            calibration_source(self.calibration_file)  # a missing file, or no shared data: the fix, before loading


@dataclass
class ExportCheckArguments:
    """The sentences every written file is checked on against PyTorch, and the thresholds it must meet (why these:
    `runtimes`)."""

    # The heading of its flags in `sharedbert export --help` (HfArgumentParser's group name).
    _argument_group_name = "checks against PyTorch"

    check_file: str | None = field(default=None, metadata={
        "help": "sentences for the checks, one a line (default: 16 built-in GLUE dev sentences)"})
    check_sentences: list[str] | None = field(default=None, metadata={
        "cli": False, "help": "the check sentences themselves, instead of check_file (default: CHECK_SENTENCES)"})
    atol: float = field(default=1e-4, metadata={"help": "largest accepted difference of an fp32 file from PyTorch"})
    min_mean_cosine: float = field(default=MIN_MEAN_COSINE, metadata={
        "help": "smallest accepted mean cosine between a file's sentence embeddings and PyTorch's"})
    min_cosine: float = field(default=MIN_COSINE, metadata={
        "help": "smallest accepted cosine for any one check sentence"})
    max_length: int = field(default=128, metadata={"help": "truncate check and calibration sentences to this"})

    def validate_checks(self) -> None:
        """Refuses check sentences given twice (as sentences and as a file), or none."""
        if self.check_sentences is not None and self.check_file is not None:
            raise ValueError("Pass the check sentences or a check file (--check-file), not both.")
        if self.check_sentences is not None and not list(self.check_sentences):
            raise ValueError("No check sentences: pass a few real sentences (--check-file, one a line).")


# The bases stand last part first: a dataclass lists its bases' fields from the last base on, and MODEL and OUT,
# positional and without a default, come first.
@dataclass
class ExportArguments(ExportCheckArguments, ExportFormatArguments, ExportModelArguments):
    """Every option of `export` / `sharedbert export`, with its default and help: the model and where it goes
    (`ExportModelArguments`), the files written (`ExportFormatArguments`) and how each is checked
    (`ExportCheckArguments`). Bad options are refused when it is made (`__post_init__`), before anything loads, with
    the problem and the fix."""

    def __post_init__(self):
        self.validate_formats()
        task = self.validate_model()
        if task == "sequence-classification" and (quantization_variants(self.quantize) or self.openvino_int8):
            raise ValueError("int8 files are checked by sentence-embedding cosine, which a classifier has not: export "
                             "a classifier in fp32 (ONNX or --openvino), or export its encoder (task base).")
        self.validate_checks()
