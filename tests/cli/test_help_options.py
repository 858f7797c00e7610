"""Every command keeps every option: `sharedbert COMMAND --help` lists the options recorded in
tests/fixtures/cli-help-options.json, each with the same shape (a switch, a value, choices, one or more values,
positional), whatever builds the parser.

The fixture was recorded from the `--help` of every command before the command line was moved onto transformers'
HfArgumentParser (issue 54, item 3). A flag may be added: record it with `python tests/cli/test_help_options.py --add`,
which adds new options and refuses to drop or change a recorded one. Dropping or changing one is a decision to take
by editing the fixture by hand, in a commit that says why.
"""

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest

from sharedbert.cli import COMMANDS, main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cli-help-options.json"
INVOCATION = re.compile(r"^  (-\S.*?)(?:\s{2,}\S.*)?$")  # "  --name METAVAR, --other METAVAR   help"
POSITIONAL = re.compile(r"^  ([^\s-]\S*)")  # "  SRC    help" in the "positional arguments:" section


def help_text(argv: list[str]) -> str:
    """What `sharedbert ARGV` prints (ARGV ends in --help), in one process, 200 columns wide."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "200")
        with pytest.raises(SystemExit) as exit_:
            main(argv)
    assert exit_.value.code == 0, f"sharedbert {' '.join(argv)} exited {exit_.value.code}"
    return out.getvalue()


def shape(part: str) -> str:
    """An option's shape from its help invocation: "switch", "value", "value [value ...]", "[value]" or the choices
    ("{a,b}"); the metavar's own name is not part of it."""
    _, *value = part.split(" ", 1)
    if not value:
        return "switch"
    return re.sub(r"\{[^}]*\}|[A-Z_][A-Z0-9_]*", lambda m: m.group(0) if m.group(0)[0] == "{" else "value", value[0])


def options_in_help(text: str) -> dict[str, str]:
    """Each option string of a --help text with its shape, and each positional argument as "positional"."""
    options, section = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace():
            section = line.rstrip(":") if line.endswith(":") else None
            continue
        invocation = INVOCATION.match(line)
        if invocation and section is not None:
            for part in invocation.group(1).split(", "):
                options[part.split(" ", 1)[0]] = shape(part)
        elif section == "positional arguments" and (positional := POSITIONAL.match(line)):
            options[positional.group(1)] = "positional"
    usage = text.split("\n\n", 1)[0]
    return {name: f"optional {kind}" if kind == "positional" and f"[{name}]" in usage else kind
            for name, kind in options.items()}


def commands_in_help(text: str) -> list[str]:
    """The commands `sharedbert --help` lists (each on a line of its own under COMMAND)."""
    return sorted(match.group(1) for match in re.finditer(r"^    (\S+)", text, flags=re.MULTILINE))


def current_options() -> dict:
    return {"commands": commands_in_help(help_text(["--help"])),
            **{command: options_in_help(help_text([command, "--help"])) for command in COMMANDS}}


RECORDED = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.is_file() else {}


def test_sharedbert_lists_every_recorded_command():
    assert commands_in_help(help_text(["--help"])) == RECORDED["commands"]


@pytest.mark.parametrize("command", [command for command in RECORDED if command != "commands"])
def test_every_recorded_option_is_in_the_help_with_the_same_shape(command):
    recorded, now = RECORDED[command], options_in_help(help_text([command, "--help"]))
    missing = sorted(set(recorded) - set(now))
    changed = {name: (recorded[name], now[name]) for name in recorded if name in now and now[name] != recorded[name]}
    added = sorted(set(now) - set(recorded))
    assert not missing, f"sharedbert {command} --help lost {missing}"
    assert not changed, f"sharedbert {command} --help changed the shape of (recorded, now): {changed}"
    assert not added, (f"sharedbert {command} --help has options not recorded: {added}; if they are meant, record "
                       "them with `python tests/cli/test_help_options.py --add`")


def test_the_help_reader_sees_every_option_of_the_parser():
    """The reader of --help texts finds exactly the parser's option strings and positionals (no flag hides from it in
    a description, none is invented from one)."""
    from sharedbert.cli import build_parser

    subparsers = next(action for action in build_parser()._actions if action.choices)
    for command, parser in subparsers.choices.items():
        expected = {option for action in parser._actions for option in action.option_strings}
        expected |= {action.metavar or action.dest for action in parser._actions if not action.option_strings}
        assert set(options_in_help(help_text([command, "--help"]))) == expected, command


def test_the_command_list_reads_in_one_voice():
    """`sharedbert --help` lists each command with a one-line summary in argparse's own voice (lower case, no full
    stop), so that the list reads as one; a command added in another style fails here."""
    from sharedbert.cli import build_parser

    subparsers = next(action for action in build_parser()._actions if action.choices)
    summaries = {action.dest: action.help for action in subparsers._choices_actions}
    assert sorted(summaries) == sorted(COMMANDS)
    off = {command: summary for command, summary in summaries.items()
           if not summary or not summary[0].islower() or summary.rstrip().endswith(".")}
    assert not off, f"summaries not lower case without a full stop: {off}"


def _record(path: Path = FIXTURE) -> None:
    """Write the fixture: today's options where there is none, else the recorded ones plus any new option (a recorded
    option that is gone or changed is refused)."""
    now = current_options()
    if path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        for command, options in recorded.items():
            if command == "commands":
                lost = sorted(set(options) - set(now[command]))
            else:
                lost = sorted(name for name in options if now.get(command, {}).get(name) != options[name])
            if lost:
                raise SystemExit(f"{command}: recorded options gone or changed, not recorded: {lost}")
        now = {command: ({**now[command], **recorded.get(command, {})} if command != "commands" else now[command])
               for command in now}
    path.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    if sys.argv[1:] not in (["--add"], ["--first"]):
        raise SystemExit("usage: python tests/cli/test_help_options.py --add")
    if sys.argv[1] == "--first" and FIXTURE.is_file():
        raise SystemExit(f"{FIXTURE} exists: use --add")
    _record()
