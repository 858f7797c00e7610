"""What every command shares: its parser, transformers' `HfArgumentParser` making flags from the job's arguments
dataclasses (`JobArgumentParser`), the library's log shown while it runs (`show_library_log`), and its errors as exit
codes (`call_library`)."""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import logging
import sys
import types
import typing

from transformers import HfArgumentParser


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


class JobArgumentParser(HfArgumentParser):
    """transformers' `HfArgumentParser` for the package's job dataclasses: each field a flag, its name, type, default,
    choices and help from the field (`--max-length` and `--max_length`; `X | None` takes an X, `list[X]` one or more;
    the metadata goes on to `add_argument`: "help", "choices", "aliases", "metavar", "action", ...), the flags of a
    class with `_argument_group_name` under that heading. What it does beyond HfArgumentParser:

    * the fields a class inherits unchanged from transformers' `TrainingArguments` (a hundred, most of which a job sets
      itself) are flags only where the class's `training_flags` names them, with that entry as their metadata;
    * `{"cli": False}`: a field only callers in Python set, no flag;
    * `{"positional": True}`: an argument given without a flag (`sharedbert convert SRC OUT`; optional when the field
      has a default);
    * `{"group": TITLE}`: the flag under that heading in --help (a class's `_argument_group_name` comes first);
    * a bool is a switch that takes no value: `--name` turns on one that is off by default, `--no-name` turns off one
      that is on (HfArgumentParser's `--name [BOOL]` would take the positional argument after it for its value);
    * a field that an earlier dataclass of the parser already made a flag is that flag (finetune's seq2seq options
      share the classifier's).

    A field that is no flag is parsed as its default, so HfArgumentParser's `parse_args_into_dataclasses` builds the
    job's arguments; `arguments_from(namespace, arguments_class)` makes the flags of a namespace an instance of one of
    the classes (finetune has two, and picks one by the flags given)."""

    def __init__(self, dataclass_types=None, **kwargs):
        self._flag_dests, self._groups, self._class_group = set(), {}, None
        self._flags: dict[str, dict] = {}
        super().__init__(dataclass_types, **kwargs)

    def _add_dataclass_arguments(self, dtype):
        self._flags, self._class_group = flag_fields(dtype), getattr(dtype, "_argument_group_name", None)
        super()._add_dataclass_arguments(dtype)

    def _parse_dataclass_field(self, parser, field):
        if field.name in self._flag_dests:
            return
        if field.name not in self._flags:  # parsed as its default, so that parse_args_into_dataclasses finds it
            if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
                default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
                self.set_defaults(**{field.name: default})
            return
        self._flag_dests.add(field.name)
        metadata = dict(self._flags[field.name])
        title = metadata.pop("group", None)
        if self._class_group is None and title is not None:
            if title not in self._groups:
                self._groups[title] = self.add_argument_group(title)
            parser = self._groups[title]
        positional = metadata.pop("positional", False)
        field = copy.copy(field)  # the class's own field keeps its metadata
        field.metadata = types.MappingProxyType(metadata)
        if positional:
            _add_positional(parser, field, metadata)
        elif field.type is bool:
            _add_switch(parser, field, metadata)
        else:
            HfArgumentParser._parse_dataclass_field(_Spellings(parser, field.name), field)

def add_command(subparsers, name: str, dataclass_types, **kwargs) -> JobArgumentParser:
    """Register `sharedbert NAME` on `subparsers` as a `JobArgumentParser` of `dataclass_types` (`kwargs` as
    `add_parser` takes them), whatever parser class `subparsers` makes otherwise."""
    previous, subparsers._parser_class = subparsers._parser_class, JobArgumentParser  # argparse's one way to set it
    try:
        return subparsers.add_parser(name, dataclass_types=dataclass_types, **kwargs)
    finally:
        subparsers._parser_class = previous


class _Spellings:
    """`parser` for HfArgumentParser's `add_argument`, with the option strings in the order --help and errors name
    them: an alias first (`--epochs`), then `--max-length`, then `--max_length` (HfArgumentParser puts that first); the
    value goes to the field either way."""

    def __init__(self, parser, name: str):
        self.parser, self.name = parser, name

    def add_argument(self, *options, **kwargs):
        own = (f"--{self.name.replace('_', '-')}", f"--{self.name}")
        ordered = [option for option in options if option not in own] + [option for option in own if option in options]
        return self.parser.add_argument(*dict.fromkeys(ordered), dest=self.name, **kwargs)


def _add_switch(parser, field, kwargs: dict) -> None:
    """A bool field as a switch: --name stores True, or for one on by default --no-name stores False."""
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


def flag_fields(arguments_class) -> dict[str, dict]:
    """The fields of `arguments_class` that are flags, each with its metadata: the entry of the class's
    `training_flags` for a field that names it, else the field's own; a field the class has unchanged from
    transformers' `TrainingArguments` is no flag without such an entry."""
    from_transformers = {id(field) for base in arguments_class.__mro__
                         if base.__module__.startswith("transformers.") and dataclasses.is_dataclass(base)
                         for field in dataclasses.fields(base)}
    training_flags = getattr(arguments_class, "training_flags", {})
    flags = {}
    for field in dataclasses.fields(arguments_class):
        if field.name in training_flags:
            metadata = dict(training_flags[field.name])
        elif id(field) in from_transformers:
            continue
        else:
            metadata = dict(field.metadata)
        if field.init and metadata.pop("cli", True) is not False:
            flags[field.name] = metadata
    return flags


def arguments_from(args, arguments_class):
    """The parsed flags as an instance of `arguments_class`, one of the parser's dataclasses (fields that are not its
    flags keep their defaults, even where another flag has their name, as convert's --heal switch has
    ConvertArguments' `heal`)."""
    values = vars(args)
    return arguments_class(**{name: values[name] for name in flag_fields(arguments_class) if name in values})


def flag_names(arguments_class) -> set[str]:
    """The names of the fields of `arguments_class` that are flags."""
    return set(flag_fields(arguments_class))


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
