"""`sharedbert export MODEL OUT`: a saved SharedBert (base, classifier or sentence-transformers folder) as ONNX, and
optionally int8 ONNX and OpenVINO IR, each checked in its own runtime against PyTorch before anything is written
(`sharedbert.export.export`). The options are `sharedbert.export.ExportArguments`, one heading in --help for each of
its parts.

    sharedbert export runs/sst2 runs/sst2-onnx                                  # fp32 ONNX, task from the folder
    sharedbert export runs/healed runs/healed-export --task base --quantize all --openvino --openvino-int8
    sharedbert export runs/healed runs/healed --layout sentence-transformers --quantize avx512_vnni avx2 arm64 \\
        --openvino --openvino-int8 --openvino-int8-mode weights   # adds onnx/ and openvino/ to the model folder

fp32 files must match PyTorch within --atol; every file must give PyTorch's sentence embeddings (mean pooling and
normalisation) at a mean cosine of at least --min-mean-cosine and --min-cosine for each sentence. Nothing is written
when a check fails. Needs the onnx extra (pip install "sharedbert[onnx]") and, for OpenVINO, the openvino extra.
"""

import sys

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..export import ExportCheckArguments, ExportFormatArguments, ExportModelArguments

    parser = add_command(  # MODEL and OUT too: positional fields; each part under its heading
        subparsers, "export", [ExportModelArguments, ExportFormatArguments, ExportCheckArguments],
        help="export a SharedBert to ONNX (fp32 and int8) and OpenVINO, each checked against PyTorch",
        description=__doc__, formatter_class=HelpFormatter)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..export import ExportArguments, ExportError, export

    try:
        with show_library_log():
            report, code = call_library("export", lambda: export(arguments_from(args, ExportArguments)))
    except ExportError as error:
        print(f"sharedbert export: error: {error}", file=sys.stderr)
        return 1
    if code:
        return code
    print(f"wrote {report.onnx_path} ({report.task}, output '{report.output_name}', {report.layout} layout); "
          f"checked on {report.check_sentences} sentences:")
    for check in report.files:
        difference = f", max |difference| {check.max_abs_difference:.2e}" if check.precision == "fp32" else ""
        cosine = (f"sentence-embedding cosine {check.mean_cosine:.4f} mean / {check.min_cosine:.4f} worst"
                  if check.mean_cosine is not None else "")  # None for a classifier
        print(f"  {check.file:<44} {check.runtime:<11} {check.precision:<5} {cosine}{difference} "
              f"({check.bytes / 1e6:.1f} MB)")
    return 0
