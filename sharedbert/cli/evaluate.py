"""`sharedbert evaluate`: score a saved sequence classifier on a task's validation file, or write its predictions for
an unlabelled test file. Prints the metrics as JSON (the same shape as fine-tuning's eval_results.json)."""

import argparse
import json
import sys

from .common import add_data_arguments, call_library


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "evaluate",
        help="Evaluate a saved classifier on a GLUE task or your own file; metrics as JSON.",
        description=__doc__,
    )
    parser.add_argument("--model", required=True, help="A fine-tuned model folder (SharedBert or BERT) or Hub id.")
    add_data_arguments(parser)
    parser.add_argument("--split", choices=("validation", "dev", "test", "train"), default="validation",
                        help="Which GLUE file to use (default validation = dev.tsv; test writes predictions).")
    parser.add_argument("--file", help="Your own labelled file to evaluate on (instead of a GLUE task).")
    parser.add_argument("--max-eval-samples", type=int, help="Only the first N examples.")
    parser.add_argument("--batch-size", type=int, default=64, help="Default 64.")
    parser.add_argument("--output", help="Also write the results JSON here.")
    parser.add_argument("--predictions", help="Write one prediction per example to this TSV (index, prediction).")
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import evaluate

    if args.train_file or args.validation_file:
        print("sharedbert evaluate: error: use --file for your own data.", file=sys.stderr)
        return 2
    result, code = call_library(
        "evaluate", evaluate,
        model=args.model, task=args.task, data_dir=args.data_dir, dataset=args.dataset, file=args.file,
        text_columns=args.text_columns, label_column=args.label_column, regression=args.regression,
        split=args.split, max_length=args.max_length, max_eval_samples=args.max_eval_samples,
        batch_size=args.batch_size, predictions_path=args.predictions, cache_dir=args.cache_dir,
        results_path=args.output,
    )
    if code:
        return code
    print(json.dumps(result, indent=2))
    return 0
