"""Options and error handling shared by several commands (argument parsing only: the work is in the library)."""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import logging
import sys
import types
import typing

from ..configuration_sharedbert import ATTENTION_TYPES, LAYER_SHARING_MODES, SHARING_ORDERS


def call_library(command: str, function, *args, **options) -> tuple[object, int]:
    """`function(*args, **options)` for `sharedbert COMMAND`. Returns (result, exit code): 0; 130 when Ctrl-C stopped
    training after saving a checkpoint; 2 on bad input (the library's DataError, ValueError or OSError), whose message
    names the problem and the fix. The reason goes to stderr."""
    from ..training.checkpointing import TrainingInterrupted

    try:
        return function(*args, **options), 0
    except TrainingInterrupted as stop:
        print(f"sharedbert {command}: {stop}; run the same command again to resume.", file=sys.stderr)
        return None, 130
    except (ValueError, OSError) as error:  # DataError is a ValueError
        print(f"sharedbert {command}: error: {error}", file=sys.stderr)
        return None, 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (it holds example commands), and each flag's default after its help unless it is
    unset (None or False: the help says what happens then)."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_arguments_from(parser, arguments_class) -> None:
    """Flags from a job's arguments dataclass, made by transformers' `HfArgumentParser`, so that a flag's name, type,
    default, choices and help have one owner: the dataclass field. `parser` may be an argument group. HfArgumentParser
    passes a field's metadata on to `add_argument` ("help", "choices", "aliases", "metavar", "action", ...); three
    keys are this function's: `{"cli": False}` for a field only callers in Python set, `{"positional": True}` for an
    argument given without a flag (`sharedbert convert SRC OUT`; optional when the field has a default), and
    `{"group": TITLE}` to list the flag under that heading in --help."""
    from transformers import HfArgumentParser

    hints = typing.get_type_hints(arguments_class)
    groups = {}
    for original in dataclasses.fields(arguments_class):
        metadata = dict(original.metadata)
        if not original.init or metadata.pop("cli", True) is False:
            continue
        title = metadata.pop("group", None)
        if title is not None and title not in groups:
            groups[title] = parser.add_argument_group(title)
        target = groups[title] if title is not None else parser
        field = copy.copy(original)  # HfArgumentParser rewrites `type`: not on the class's own field
        field.type, field.metadata = hints[field.name], types.MappingProxyType(metadata)
        if metadata.pop("positional", False):
            _add_positional(target, field, metadata)
        else:
            HfArgumentParser._parse_dataclass_field(target, field)
    for action in parser._actions:  # --max-length before --max_length, in usage lines and help
        action.option_strings.sort(key=lambda option: "_" in option)


def _add_positional(parser, field, kwargs: dict) -> None:
    kwargs.setdefault("metavar", field.name.upper())
    members = [member for member in typing.get_args(field.type) if member is not type(None)]  # `str | None` -> str
    kwargs["type"] = members[0] if members else field.type
    if field.default is not dataclasses.MISSING:
        kwargs.update(nargs="?", default=field.default)
    parser.add_argument(field.name, **kwargs)


def arguments_from(args, arguments_class):
    """The parsed flags as an instance of the job's arguments dataclass."""
    values = vars(args)
    return arguments_class(**{f.name: values[f.name] for f in dataclasses.fields(arguments_class) if f.name in values})


@contextlib.contextmanager
def show_library_log(enabled: bool = True, stream=None):
    """Print what the library logs at INFO and above (its modules log; the command line shows it), as plain lines on
    `stream` (default stderr, where progress goes; results go to stdout), for the duration of one command."""
    logger = logging.getLogger("sharedbert")
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def options_of(args) -> dict:
    """The parsed options as keyword arguments: the parser's `dest` names are the library function's parameters."""
    return {key: value for key, value in vars(args).items() if key not in ("run", "command")}


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("checkpoints (resumable after a crash, a kill or Ctrl-C)")
    group.add_argument("--checkpoint-dir", help="Where resumable checkpoints go (default: OUTPUT-DIR-checkpoints); "
                       "deleted once the run has saved its output.")
    group.add_argument("--checkpoint-minutes", type=float, default=10.0,
                       help="Save a checkpoint after this many minutes of training (default 10).")
    group.add_argument("--checkpoint-steps", type=int, help="Also save one every N optimizer steps.")
    group.add_argument("--no-resume", action="store_true",
                       help="Discard an existing checkpoint and start afresh (default: running the same command "
                       "again resumes from its last checkpoint).")


def add_precision_argument(group) -> None:
    from ..training.precision import PRECISIONS

    group.add_argument("--precision", choices=PRECISIONS, default="auto",
                       help="bf16 autocast with fp32 master weights, or fp32. auto (default): bf16 where the CPU "
                       "(or GPU) computes bf16 natively, fp32 elsewhere, where bf16 is emulated and many times slower. "
                       "A checkpoint may be resumed in another precision.")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data (a GLUE task, or your own files)")
    group.add_argument("--task", help="GLUE task: sst2, cola, mrpc, rte, stsb, wnli (or a name for your own files).")
    group.add_argument("--data-dir", help="GLUE root holding SST-2/, CoLA/, ... (default: glue/ in the shared data "
                       "folder, ../shared/data beside the repository, when present).")
    group.add_argument("--dataset", help="Load the GLUE task from the Hub instead, e.g. nyu-mll/glue (needs network).")
    group.add_argument("--train-file", help="Your own training data (.csv, .tsv, .json, .jsonl).")
    group.add_argument("--validation-file", help="Your own validation data (same columns).")
    group.add_argument("--text-columns", help="With your own files: the text column, or two comma-separated columns "
                       "for sentence pairs.")
    group.add_argument("--label-column", help="With your own files: the label column.")
    group.add_argument("--regression", action="store_true", help="With your own files: the label is a number.")
    group.add_argument("--max-length", type=int, default=128, help="Truncate inputs to this many tokens (default 128).")
    group.add_argument("--cache-dir", help="datasets cache folder (default: the Hugging Face cache).")


def add_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("conversion of a BERT checkpoint (ignored for SharedBert folders)")
    group.add_argument("--attention-type", choices=ATTENTION_TYPES, help="Default: shared.")
    group.add_argument("--layer-sharing", choices=LAYER_SHARING_MODES, help="Cross-layer sharing (default: none).")
    group.add_argument("--num-unique-layers", type=int, help="Distinct layer sets with --layer-sharing.")
    group.add_argument("--sharing-order", choices=SHARING_ORDERS, help="How layers map onto the sets.")
    group.add_argument("--fit-method", choices=FIT_METHODS,
                       help="How from_bert fits the new attention to BERT's (default: from_bert's auto).")
    group.add_argument("--no-convert", action="store_true",
                       help="Fine-tune a BERT checkpoint as BERT (the unconverted baseline).")
