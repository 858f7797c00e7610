"""`sharedbert replicate`: the paper's comparison at small scale, resumable (see sharedbert.replicate)."""

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .. import replicate

    parser = subparsers.add_parser(
        "replicate",
        help="Pretrain + GLUE + typo robustness for every attention type and sharing mode; resumable.",
        description=replicate.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replicate.add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    import sys

    from .. import replicate

    args.command_line = " ".join(["sharedbert replicate"] + sys.argv[2:])
    return replicate.run(args)
