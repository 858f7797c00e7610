"""`sharedbert COMMAND` builds the parser of that command alone: a light command does not import what other commands'
arguments need (convert's pull in Trainer and datasets). Without a command, or with a misspelt one, every command is
built and listed."""

import contextlib
import io
import subprocess
import sys

import pytest

from sharedbert.cli import COMMANDS, main

HEAVY = ("datasets", "transformers.trainer", "sharedbert.training.healing", "sharedbert.cli.convert")


def test_a_command_imports_neither_trainer_nor_the_other_commands():
    code = ("import sys\nfrom sharedbert.cli import main\n"
            "try:\n    main(['params', '--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip().splitlines()[-1] == "[]", output


@pytest.mark.parametrize("argv, stream", [(["--help"], "stdout"), (["convrt"], "stderr")])
def test_without_a_known_command_every_command_is_listed(argv, stream):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        main(argv)
    text = (out if stream == "stdout" else err).getvalue()
    assert all(command in text for command in COMMANDS), text
    if argv == ["convrt"]:
        assert "invalid choice: 'convrt'" in text
