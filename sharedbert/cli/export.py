"""`sharedbert export`: a saved SharedBert (base, classifier or sentence-transformers folder) as ONNX, checked in
onnxruntime against PyTorch (`sharedbert.export.export_onnx`)."""

import sys

from .common import call_library


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a SharedBert to ONNX (dynamic axes, folded attention) and check it in onnxruntime",
        description="Export MODEL (a save_pretrained folder, or a sentence-transformers folder) to OUT/model.onnx with "
        "dynamic batch and sequence axes and shared attention folded for inference, then run it in onnxruntime on "
        "real sentences and compare with PyTorch; nothing is written when they differ by more than --atol. Needs "
        'the onnx extra: pip install "sharedbert[onnx]".',
    )
    parser.add_argument("model", help="the model folder")
    parser.add_argument("output_dir", metavar="OUT", help="the folder to write (model.onnx, tokenizer, config)")
    parser.add_argument("--task", default="auto", choices=["auto", "base", "sequence-classification",
                        "sentence-embedding"], help="what to export (default: auto, from the folder)")
    parser.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    parser.add_argument("--atol", type=float, default=1e-4, help="largest accepted difference from PyTorch (1e-4)")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..export import ExportError, export_onnx

    try:
        report, code = call_library("export", export_onnx, model_dir=args.model, output_dir=args.output_dir,
                                    task=args.task, opset=args.opset, atol=args.atol)
    except ExportError as error:
        print(f"sharedbert export: error: {error}", file=sys.stderr)
        return 1
    if code:
        return code
    print(f"wrote {report.onnx_path} ({report.task}, output '{report.output_name}'); onnxruntime vs PyTorch on "
          f"{report.check_sentences} sentences: max abs difference {report.max_abs_difference:.2e}")
    return 0
