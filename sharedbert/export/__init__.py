"""Export of a SharedBert for deployment: ONNX (fp32, and int8 for the CPU families sentence-transformers names) and
OpenVINO IR (fp32, and int8), each checked in its own runtime before anything is written (`sharedbert export`).

    >>> from sharedbert.export import export
    >>> report = export(model="runs/minilm-shared", output_dir="runs/minilm-shared-onnx")  # task picked from the folder
    >>> report.max_abs_difference                                                           # onnxruntime vs PyTorch
    3.1e-07
    >>> report = export(model="runs/healed", output_dir="runs/healed", layout="sentence-transformers",
    ...                 quantize=["all"], openvino=True, openvino_int8=True, openvino_int8_mode="weights")

`export` takes one `ExportArguments` (or its fields as keywords), which checks its options when it is made, before
anything loads. The model is exported with torch's dynamo exporter, dynamic batch and sequence axes, and shared
attention folded for inference (`fold_for_inference`: query, key and value become one tensor); every file is then run
in its own runtime on real sentences and compared with the unfolded fp32 PyTorch model (thresholds and why: `runtimes`).
A failed check raises `ExportError` and writes nothing: the output folder is written atomically (`sharedbert.atomic`).
In the sentence-transformers layout that folder is the model folder with new `onnx/` and `openvino/`: the new version
is assembled beside it (its other files hard-linked, not copied) and swapped in by one rename, so a kill leaves either
the previous `onnx/` and `openvino/` or both new ones, never one of each.

Files, under the names sentence-transformers' backend loader looks for (its `backend/load.py` and `backend/utils.py`;
`tests/export/test_export.py` checks them against the installed package):

* `model.onnx`: fp32 ONNX;
* `model_qint8_avx512_vnni.onnx`, `model_qint8_avx512.onnx`, `model_quint8_avx2.onnx`, `model_qint8_arm64.onnx`:
  dynamic int8 quantization by onnxruntime with the settings optimum's `AutoQuantizationConfig.<variant>
  (is_static=False)` chooses (`QUANTIZATION_VARIANTS`);
* `openvino_model.xml` / `.bin`: fp32 OpenVINO IR converted from the ONNX file;
* `openvino_model_qint8_quantized.xml` / `.bin`: OpenVINO IR statically quantized to int8 by NNCF on calibration
  sentences, with the settings optimum-intel's `OVQuantizationConfig()` passes to `nncf.quantize`, except that
  attention's products and the first feed-forward output stay in float (`float_matmuls`); or, with
  `openvino_int8_mode="weights"`, `openvino_model_qint8_weights.xml` / `.bin`: int8 weights only (NNCF
  `compress_weights`), for models whose activations do not quantize well.

With `layout="flat"` (the default) they go straight into the output folder with the tokenizer, `config.json` and
`onnx_export.json`; with `layout="sentence-transformers"` the ONNX files go into `OUT/onnx/` and the OpenVINO files into
`OUT/openvino/`, as on the Hub, and OUT may be the model folder itself: staging for the Hub (`sharedbert upload`,
`sharedbert build-minilm`) then publishes them after checking them again.

The modules: `arguments` (`ExportArguments`: the options, checked before anything loads), `exporting` (`export`: the
job, its report and the names of the files it writes), `tracing` (tasks, loading, torch's exporter), `runtimes`
(running and checking a file in onnxruntime or OpenVINO), `quantization` (int8 ONNX, OpenVINO conversion and int8,
calibration sentences), `errors`. Their public names are importable from here.

Needs the `onnx` extra (`pip install "sharedbert[onnx]"`: onnx, onnxscript, onnxruntime), the `openvino` extra for
OpenVINO (openvino, nncf), and sentence-transformers for the sentence-embedding task.
"""

from .arguments import (
    LAYOUTS,
    ExportArguments,
    ExportCheckArguments,
    ExportFormatArguments,
    ExportModelArguments,
)
from .errors import ExportError
from .exporting import (
    ONNX_FILE,
    ONNX_FOLDER,
    OPENVINO_FILE,
    OPENVINO_FOLDER,
    OPENVINO_INT8_FILE,
    OPENVINO_INT8_WEIGHTS_FILE,
    REPORT_FILE,
    ExportReport,
    export,
)
from .quantization import (
    CALIBRATION_SAMPLES,
    DEFAULT_CALIBRATION,
    OPENVINO_INT8_MODES,
    QUANTIZATION_VARIANTS,
    QuantizationVariant,
    calibration_feeds,
    calibration_sentences,
    calibration_source,
    compress_openvino_weights,
    convert_to_openvino,
    float_matmuls,
    quantization_variants,
    quantize_openvino,
    quantize_variant,
    variant_for_cpu,
)
from .runtimes import (
    CHECK_SENTENCES,
    MIN_COSINE,
    MIN_MEAN_COSINE,
    FileCheck,
    check_file,
    cosines,
    onnx_session,
    openvino_model,
    read_sentences,
    run_file,
    sentence_embeddings,
)
from .tracing import EXPORT_TASKS, INPUT_NAMES, OUTPUT_NAMES, EncoderOutput, detect_task, trace_to_onnx

__all__ = [
    "CALIBRATION_SAMPLES", "CHECK_SENTENCES", "DEFAULT_CALIBRATION", "EXPORT_TASKS", "INPUT_NAMES", "LAYOUTS",
    "MIN_COSINE", "MIN_MEAN_COSINE", "ONNX_FILE", "ONNX_FOLDER", "OPENVINO_FILE", "OPENVINO_FOLDER",
    "OPENVINO_INT8_FILE", "OPENVINO_INT8_MODES", "OPENVINO_INT8_WEIGHTS_FILE", "OUTPUT_NAMES", "QUANTIZATION_VARIANTS",
    "REPORT_FILE", "EncoderOutput", "ExportArguments", "ExportCheckArguments", "ExportError", "ExportFormatArguments",
    "ExportModelArguments", "ExportReport", "FileCheck", "QuantizationVariant", "calibration_feeds",
    "calibration_sentences", "calibration_source", "check_file", "compress_openvino_weights", "convert_to_openvino",
    "cosines", "detect_task", "export", "float_matmuls", "onnx_session", "openvino_model", "quantization_variants",
    "quantize_openvino", "quantize_variant", "read_sentences", "run_file", "sentence_embeddings", "trace_to_onnx",
    "variant_for_cpu",
]
