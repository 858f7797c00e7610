"""The `sharedbert` command line. Each subcommand lives in `sharedbert/commands/<name>.py` and exposes
`add_parser(subparsers)` (registering its parser, with `set_defaults(run=...)`) so that heavy imports stay inside the
command that needs them."""

import argparse
import importlib
import sys

COMMANDS = ("params", "convert", "pretrain", "finetune", "evaluate", "demo", "bench", "replicate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharedbert",
        description="SharedBert: BERT with shared-projection attention, cross-layer sharing and tied embeddings.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"sharedbert.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"sharedbert.commands.{name}":
                continue  # command not part of this build
            raise
        module.add_parser(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
