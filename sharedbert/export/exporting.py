"""The export job: `export` loads the model, traces a folded copy of it, writes each file asked for and checks it in
its own runtime against the unfolded fp32 PyTorch model, and puts the files in place only when every check has passed
(the package's doc tells the whole story: `sharedbert.export`). The names of the files it writes are here, as
sentence-transformers' backends look for them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_directory, check_output_folder
from .folding import fold_for_inference, has_foldable_attention
from .arguments import ExportArguments
from .errors import ExportError, import_onnxruntime, import_openvino
from .quantization import (
    calibration_feeds,
    calibration_sentences,
    compress_openvino_weights,
    convert_to_openvino,
    quantization_variants,
    quantize_openvino,
    quantize_variant,
)
from .runtimes import CHECK_SENTENCES, FileCheck, check_file, read_sentences, sentence_embeddings
from .tracing import INPUT_NAMES, OUTPUT_NAMES, load_for_export, trace_to_onnx

logger = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
REPORT_FILE = "onnx_export.json"
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


@dataclass
class ExportReport:
    """What `export` wrote and what each file's check gave (`files`, in the order written); also written as
    onnx_export.json beside the ONNX files, with the inputs, thresholds and onnxruntime version."""

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


def export(arguments: ExportArguments | None = None, /, **fields) -> ExportReport:
    """Export the model `arguments.model` to `arguments.output_dir` and check every file in its runtime (see the
    module doc); returns what was written and what each check gave (also written as onnx_export.json).

    Takes an `ExportArguments`, or its fields as keywords (`export(model=..., output_dir=..., quantize=["all"])`), or
    both (keywords replace fields). Raises ValueError or FileNotFoundError on bad options, before anything loads, and
    ExportError when a runtime is missing, the model is not a SharedBert, or a file fails its check (then nothing is
    written)."""
    args = replace(arguments, **fields) if arguments is not None else ExportArguments(**fields)
    if args.layout == "flat":  # the sentence-transformers layout adds onnx/ and openvino/ to the model folder
        check_output_folder(args.output_dir, args.overwrite, inputs=[args.model], label="OUT")
    onnxruntime = import_onnxruntime()
    if args.openvino or args.openvino_int8:
        import_openvino()
    task = args.resolved_task()
    sentences, calibration = _sentences(args)
    reference = _run_pytorch(Path(args.model), task, sentences, args.max_length, args.trust_remote_code)
    program = _trace_folded(reference, Path(args.model), task, args.opset)
    with _output_folders(Path(args.output_dir), args.layout, args.openvino or args.openvino_int8) as folders:
        checks = _write_checked_files(args, task, reference, program, folders, calibration)
        report = _write_report(args, task, reference, checks, folders, onnxruntime.__version__)
    return report


# --------------------------------------------------------------------------------------------------------------------
# The steps of `export`
# --------------------------------------------------------------------------------------------------------------------


def _sentences(args: ExportArguments) -> tuple[list[str], list[str] | None]:
    """(check sentences, calibration sentences or None when nothing is calibrated), read before the model loads."""
    if args.check_sentences is not None:
        check = list(args.check_sentences)
    else:
        check = read_sentences(args.check_file) if args.check_file else list(CHECK_SENTENCES)
    calibration = None
    if args.calibrates:
        calibration = (list(args.calibration) if args.calibration is not None
                       else calibration_sentences(args.calibration_file, args.calibration_samples))
    return check, calibration


@dataclass
class _Reference:
    """The model loaded for the export, and what it gives unfolded in fp32 PyTorch on the check sentences: what every
    written file is checked against."""

    wrapper: torch.nn.Module  # the model behind the graph's signature (tracing.EncoderOutput, ...)
    tokenizer: object
    model: object  # the SharedBert inside `wrapper` (a folded copy of `wrapper` is traced)
    inputs: dict  # the check sentences as torch tensors, which the exporter traces with
    feed: dict  # the same as int64 numpy arrays, for the runtimes
    outputs: dict  # {"output": the raw output, "embeddings": sentence embeddings (not for a classifier)}


def _run_pytorch(model_dir: Path, task: str, sentences: list[str], max_length: int,
                 trust_remote_code: bool = False) -> _Reference:
    wrapper, tokenizer, model = load_for_export(model_dir, task, trust_remote_code)
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    inputs = {name: batch[name] if name in batch else torch.zeros_like(batch["input_ids"]) for name in INPUT_NAMES}
    with torch.inference_mode():
        expected = wrapper(**inputs).float().numpy()  # the unfolded fp32 model is the reference
    feed = {name: tensor.numpy().astype(np.int64) for name, tensor in inputs.items()}
    outputs = {"output": expected.astype(np.float64)}
    if task != "sequence-classification":
        outputs["embeddings"] = sentence_embeddings(expected, feed["attention_mask"], task)
    return _Reference(wrapper, tokenizer, model, inputs, feed, outputs)


def _trace_folded(reference: _Reference, model_dir: Path, task: str, opset: int):
    """The ONNX program of a copy of the model with its attention folded for inference (the caller's model is left as
    it was)."""
    folded = fold_for_inference(reference.wrapper)
    try:
        return trace_to_onnx(folded, reference.inputs, OUTPUT_NAMES[task], opset=opset)
    except Exception as error:  # the exporter raises many types; say which model and task failed
        raise ExportError(f"torch.onnx.export failed for {model_dir} (task {task}): {error}") from error


@dataclass(frozen=True)
class _Folders:
    """Where the files are written: temporary folders until every check has passed (`_output_folders`)."""

    base: Path  # the whole output folder in the flat layout; the model folder in the sentence-transformers layout
    onnx: Path
    openvino: Path | None
    layout: str

    def relative(self, path: Path) -> str:
        """The final name of the file `path`, relative to the output folder."""
        if self.layout == "flat":
            return path.name
        return f"{ONNX_FOLDER if path.parent == self.onnx else OPENVINO_FOLDER}/{path.name}"


@contextlib.contextmanager
def _output_folders(output_dir: Path, layout: str, with_openvino: bool):
    """The `_Folders` to write into, put in place by one rename only if the block succeeds: the whole output folder
    for the flat layout. For the sentence-transformers layout, a new version of the model folder: its files
    hard-linked from the current one, except the backend folders being written (onnx/, and openvino/ when asked
    for), which start empty; renaming onnx/ and openvino/ in one after the other could leave one new and one old."""
    if layout == "flat":
        with atomic_directory(output_dir) as work:
            yield _Folders(work, work, work, layout)
        return
    output_dir = output_dir.resolve()  # a link to the model folder: replace the folder, not the link
    written = {ONNX_FOLDER, OPENVINO_FOLDER} if with_openvino else {ONNX_FOLDER}
    with atomic_directory(output_dir) as work:
        _link_tree(output_dir, work, leave_out=written)
        for name in written:
            (work / name).mkdir()
        yield _Folders(output_dir, work / ONNX_FOLDER, work / OPENVINO_FOLDER if with_openvino else None, layout)


def _link_tree(source: Path, target: Path, leave_out: set[str]) -> None:
    """Recreate `source` in the existing folder `target` with hard links (a copy where linking is not possible), minus
    the top-level names `leave_out` and any temporary siblings of them an older export left."""
    def ignore(folder, names):
        if Path(folder) != source:
            return []
        return [name for name in names if name in leave_out or name.startswith(tuple(f".{n}." for n in leave_out))]

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:  # a filesystem without hard links
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, ignore=ignore, copy_function=link, dirs_exist_ok=True)


@dataclass
class _Checks:
    """Checks each written file against the reference under its final name, logs what it gave, and keeps it."""

    args: ExportArguments
    task: str
    reference: _Reference
    folders: _Folders
    done: list[FileCheck] = field(default_factory=list)

    def check(self, path: Path, precision: str) -> FileCheck:
        result = check_file(path, self.folders.relative(path), self.reference.feed, self.reference.outputs, self.task,
                            precision=precision, atol=self.args.atol if precision == "fp32" else None,
                            min_mean_cosine=self.args.min_mean_cosine, min_cosine=self.args.min_cosine)
        if precision == "fp32":
            runtime = "OpenVINO (f32)" if result.runtime == "openvino" else "onnxruntime"
            logger.info("%s: %s vs PyTorch max |difference| %.2e", result.file, runtime, result.max_abs_difference)
        else:
            logger.info("%s: sentence-embedding cosine %.4f mean, %.4f worst", result.file, result.mean_cosine,
                        result.min_cosine)
        self.done.append(result)
        return result


def _write_checked_files(args: ExportArguments, task: str, reference: _Reference, program, folders: _Folders,
                         calibration: list[str] | None) -> list[FileCheck]:
    """Every file asked for, each checked as soon as it is written: the fp32 ONNX file first, as the others are made
    from it."""
    checks = _Checks(args, task, reference, folders)
    onnx_path = folders.onnx / ONNX_FILE
    program.save(str(onnx_path), external_data=False)
    checks.check(onnx_path, "fp32")
    for variant in quantization_variants(args.quantize):
        path = folders.onnx / variant.file_name
        quantize_variant(onnx_path, path, variant)
        checks.check(path, "int8")
    if args.openvino:
        path = folders.openvino / OPENVINO_FILE
        convert_to_openvino(onnx_path, path)
        checks.check(path, "fp32")
    if args.openvino_int8 and args.openvino_int8_mode == "weights":
        path = folders.openvino / OPENVINO_INT8_WEIGHTS_FILE
        compress_openvino_weights(onnx_path, path)
        checks.check(path, "int8")
    elif args.openvino_int8:
        path = folders.openvino / OPENVINO_INT8_FILE
        feeds = calibration_feeds(reference.tokenizer, calibration[: args.calibration_samples], args.max_length)
        logger.info("Quantizing the OpenVINO model with NNCF on %d calibration sentences ...", len(feeds))
        quantize_openvino(onnx_path, path, feeds, args.calibration_samples)
        try:
            checks.check(path, "int8")
        except ExportError as error:
            raise ExportError(f"{error} Static int8 quantizes the activations too, which some models do not bear: "
                              "try --openvino-int8-mode weights (int8 weights only).") from None
    return checks.done


def _write_report(args: ExportArguments, task: str, reference: _Reference, checks: list[FileCheck],
                  folders: _Folders, onnxruntime_version: str) -> ExportReport:
    """The flat layout's tokenizer and config.json beside the files, and the report: returned, and written as
    onnx_export.json beside the ONNX files."""
    if args.layout == "flat":
        reference.tokenizer.save_pretrained(str(folders.base))
        shutil.copy2(Path(args.model) / "config.json", folders.base / "config.json")
    report = ExportReport(
        onnx_path=str(Path(args.output_dir) / folders.relative(folders.onnx / ONNX_FILE)), task=task,
        output_name=OUTPUT_NAMES[task], max_abs_difference=checks[0].max_abs_difference,
        check_sentences=len(reference.feed["input_ids"]), folded=has_foldable_attention(reference.model),
        opset=args.opset, layout=args.layout, files=checks,
    )
    thresholds = dict(min_mean_cosine=args.min_mean_cosine, min_cosine=args.min_cosine, atol=args.atol)
    (folders.onnx / REPORT_FILE).write_text(json.dumps(dict(asdict(report), inputs=list(INPUT_NAMES),
                                                            thresholds=thresholds, onnxruntime=onnxruntime_version),
                                                       indent=2) + "\n")
    return report
