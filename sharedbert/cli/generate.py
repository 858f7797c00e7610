"""`sharedbert generate`: generate with a saved seq2seq model for every source of a file, greedy or with beam search,
and write JSON lines ({"source": ..., "output": ...}) in the input's order.

    sharedbert generate runs/my-seq2seq --input sources.txt --output outputs.jsonl
    sharedbert generate runs/my-seq2seq --input dev.jsonl --source-column source --output out.jsonl --num-beams 4

The work is `sharedbert.generation.generate`; the options are its `GenerateArguments`.
"""

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..generation import GenerateArguments

    parser = add_command(subparsers, "generate", [GenerateArguments], description=__doc__,
                         help="generate with a seq2seq model for a file of inputs (JSON lines)",
                         formatter_class=HelpFormatter)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..generation import GenerateArguments, generate

    with show_library_log():
        result, code = call_library("generate", lambda: generate(arguments_from(args, GenerateArguments)))
    if code:
        return code
    print(f"wrote {result['sources']} outputs to {result['output']} in {result['seconds']:.0f} s")
    return 0
