"""What every command shares: flags made from a job's arguments dataclass (`add_arguments_from`, `arguments_from`),
the library's log shown while it runs (`show_library_log`), and its errors as exit codes (`call_library`)."""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import logging
import sys
import types
import typing


def call_library(command: str, function, *args, **options) -> tuple[object, int]:
    """`function(*args, **options)` for `sharedbert COMMAND`. Returns (result, exit code): 0; 130 when Ctrl-C stopped
    training after saving a checkpoint; 2 on bad input (the library's DataError, ValueError or OSError), whose message
    names the problem and the fix. The reason goes to stderr."""
    from huggingface_hub.errors import StrictDataclassError

    from ..training.checkpointing import TrainingInterrupted

    try:
        return function(*args, **options), 0
    except TrainingInterrupted as stop:
        print(f"sharedbert {command}: {stop}; run the same command again to resume.", file=sys.stderr)
        return None, 130
    except (ValueError, OSError, StrictDataclassError) as error:  # DataError is a ValueError; a bad config field
        print(f"sharedbert {command}: error: {error}", file=sys.stderr)
        return None, 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (it holds example commands), and each flag's default after its help unless it is
    unset (None or False: the help says what happens then) or the flag is a switch."""

    def _get_help_string(self, action):
        switch = action.nargs == 0  # store_true / store_false / store_const take no value
        if switch or action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_arguments_from(parser, arguments_class, exclude=(), group: str | None = None) -> None:
    """Flags from a job's arguments dataclass, so that a flag's name, type, default, choices and help have one owner:
    the dataclass field. `parser` may be an argument group. A field's metadata goes on to `add_argument` ("help",
    "choices", "aliases", "metavar", "action", ...), as transformers' `HfArgumentParser` passes it; three keys are this
    function's: `{"cli": False}` for a field only callers in Python set, `{"positional": True}` for an argument given
    without a flag (`sharedbert convert SRC OUT`; optional when the field has a default), and `{"group": TITLE}` to
    list the flag under that heading in --help. A bool field is a switch (`_add_switch`), any other a valued flag
    (`_add_option`). Of the fields a class has from transformers' `TrainingArguments` only those its `training_flags`
    names are flags, with that metadata (`_flag_fields`). Fields named in `exclude` are left out (another class's
    flags already hold them); `group` lists every flag under that one heading."""
    hints = typing.get_type_hints(arguments_class)
    groups = {}
    for original, metadata in _flag_fields(arguments_class):
        if original.name in exclude:
            continue
        own_group = metadata.pop("group", None)
        title = group or own_group
        if title is not None and title not in groups:
            groups[title] = parser.add_argument_group(title)
        target = groups[title] if title is not None else parser
        field = copy.copy(original)  # HfArgumentParser rewrites `type`: not on the class's own field
        field.type, field.metadata = hints[field.name], types.MappingProxyType(metadata)
        if metadata.pop("positional", False):
            _add_positional(target, field, metadata)
        elif field.type is bool:
            _add_switch(target, field, metadata)
        else:
            _add_option(target, field, metadata)


def _add_option(parser, field, kwargs: dict) -> None:
    """A valued flag, `--max-length` (and `--max_length`, HfArgumentParser's spelling), of the field's type: `X | None`
    takes an X, `list[X]` one or more; the field's default, or required when it has none."""
    kind = field.type
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(member for member in typing.get_args(kind) if member is not type(None))  # `int | None` -> int
    if typing.get_origin(kind) is list:
        kwargs.setdefault("nargs", "+")
        kind = typing.get_args(kind)[0]
    kwargs.setdefault("type", kind)
    if field.default is not dataclasses.MISSING:
        kwargs["default"] = field.default
    elif field.default_factory is not dataclasses.MISSING:
        kwargs["default"] = field.default_factory()
    else:
        kwargs["required"] = True
    options = [*kwargs.pop("aliases", []), f"--{field.name.replace('_', '-')}"]  # a short alias first in --help
    parser.add_argument(*options, *([f"--{field.name}"] if "_" in field.name else []), dest=field.name, **kwargs)


def _add_switch(parser, field, kwargs: dict) -> None:
    """A bool field as a switch that takes no value: --name turns on one that is off by default, --no-name turns off
    one that is on (HfArgumentParser's `--name [BOOL]` would take a positional argument after it for its value)."""
    name, action = (field.name, "store_true") if field.default is False else (f"no_{field.name}", "store_false")
    if field.default is not False:
        kwargs["help"] = f"Turns off: {kwargs.get('help', field.name)}"
    options = [f"--{name.replace('_', '-')}"] + ([f"--{name}"] if "_" in name else [])
    parser.add_argument(*options, *kwargs.pop("aliases", []), dest=field.name, action=action, **kwargs)


def _add_positional(parser, field, kwargs: dict) -> None:
    kwargs.setdefault("metavar", field.name.upper())
    members = [member for member in typing.get_args(field.type) if member is not type(None)]  # `str | None` -> str
    kwargs["type"] = members[0] if members else field.type
    if field.default is not dataclasses.MISSING:
        kwargs.update(nargs="?", default=field.default)
    parser.add_argument(field.name, **kwargs)


def _flag_fields(arguments_class) -> list[tuple[dataclasses.Field, dict]]:
    """The fields of `arguments_class` that are flags, each with its metadata: the field's own, or for a field from
    transformers' `TrainingArguments` (a hundred, most of which a job sets itself) the entry of the class's
    `training_flags`, without which it is no flag."""
    from_transformers = {field.name for base in arguments_class.__mro__
                         if base.__module__.startswith("transformers.") and dataclasses.is_dataclass(base)
                         for field in dataclasses.fields(base)}
    training_flags = getattr(arguments_class, "training_flags", {})
    flags = []
    for field in dataclasses.fields(arguments_class):
        if field.name in from_transformers:
            if field.name not in training_flags:
                continue
            metadata = dict(training_flags[field.name])
        else:
            metadata = dict(field.metadata)
        if field.init and metadata.pop("cli", True) is not False:
            flags.append((field, metadata))
    return flags


def flag_names(arguments_class) -> set[str]:
    """The names of the fields of `arguments_class` that are flags."""
    return {field.name for field, _ in _flag_fields(arguments_class)}


def arguments_from(args, arguments_class):
    """The parsed flags as an instance of the job's arguments dataclass (fields that are not flags keep their
    defaults, even where another flag has their name, as convert's --heal switch has HealConfig's)."""
    values = vars(args)
    return arguments_class(**{name: values[name] for name in flag_names(arguments_class) if name in values})


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
