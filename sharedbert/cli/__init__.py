"""The `sharedbert` command line: argument parsing only. Each subcommand lives in `sharedbert/cli/<name>.py` and
exposes `add_parser(subparsers)` (registering its parser, transformers' HfArgumentParser of the job's arguments
dataclasses through `common.add_command`, with `set_defaults(run=...)`); its `run` calls one library function,
imported inside `run` so that heavy imports happen only for the command that runs. Nothing in the library imports
from here."""

import argparse
import importlib
import sys

COMMANDS = (
    "params", "convert", "build-minilm", "pretrain", "finetune", "evaluate", "generate", "demo", "upload", "export",
)


def build_parser(commands: tuple[str, ...] = COMMANDS) -> argparse.ArgumentParser:
    """The `sharedbert` parser with the subcommands `commands` (default: all)."""
    parser = argparse.ArgumentParser(
        prog="sharedbert",
        description="SharedBert: BERT with shared-projection attention, cross-layer sharing and tied embeddings.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in commands:
        try:
            module = importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
        except ModuleNotFoundError as error:
            if error.name == f"{__name__}.{name.replace('-', '_')}":
                continue  # command not part of this build
            raise
        module.add_parser(subparsers)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # A command's parser imports its job's arguments (convert's pulls in Trainer and datasets): only the command asked
    # for is built. Without one (--help, a typo), all are, to list them.
    parser = build_parser((argv[0],) if argv and argv[0] in COMMANDS else COMMANDS)
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
