"""`sharedbert bench`: SharedBert against transformers' BertModel, side by side in one process (see sharedbert.bench)."""

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .. import bench

    parser = subparsers.add_parser(
        "bench",
        help="Speed, memory and size against transformers' BERT; JSON + PNG under benchmarks/results/.",
        description=bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    import sys

    from .. import bench

    args.command_line = " ".join(["sharedbert bench"] + sys.argv[2:])
    return bench.run(args)
