"""`sharedbert evaluate`: score a saved sequence classifier on a task's validation file, or write its predictions for
an unlabelled test file. Prints the results as JSON (the same shape as fine-tuning's eval_results.json).

    sharedbert evaluate --model runs/sst2 --task sst2
    sharedbert evaluate --model runs/sst2 --task sst2 --split test --predictions sst2-test.tsv

The work is `sharedbert.training.evaluate`; the options are its `EvaluateArguments`.
"""

import json

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..training.evaluation import EvaluateArguments

    parser = add_command(subparsers, "evaluate", [EvaluateArguments], help="evaluate a saved classifier "
                         "on a GLUE task or your own file; metrics as JSON", description=__doc__,
                         formatter_class=HelpFormatter)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training.evaluation import EvaluateArguments, evaluate

    with show_library_log():
        result, code = call_library("evaluate", lambda: evaluate(arguments_from(args, EvaluateArguments)))
    if code:
        return code
    print(json.dumps(result, indent=2))
    return 0
