"""No committed file holds an absolute path of the machine it was made on (/work/..., /root/..., /home/USER/...,
/tmp/..., C:\\Users\\...): results, reports and code name files relative to the repository (or `../shared/data`), so
they mean the same on every checkout and say nothing about where someone keeps their work."""

import re
import subprocess

import pytest
from conftest import REPO_ROOT

# A path under one of these roots, or a user's home folder. The look-behind keeps relative paths that happen to hold
# such a folder name (runs/build-minilm-work/healed) and URLs (https://host/tmp/...) out.
MACHINE_PATH = re.compile(
    r"(?<![\w.])(?:/(?:work|root|tmp|mnt|scratch)/[\w.@+-]+"  # /work/main, /tmp/abc, ...
    r"|/home/[\w.-]+/|/Users/[\w.-]+/"  # a user's home on Linux or macOS
    r"|[A-Za-z]:\\{1,2}Users\\{1,2})"  # C:\Users\ (also as escaped in JSON)
)

# Mentions that are not where this machine keeps something, each with why it may stay.
ALLOWED = {
    # Fixtures of the tests that check a model card or Hub staging strips a user's paths: they must hold one.
    ("tests/hub/test_hub.py", "/home/alice/"),
    # Example commands with a throwaway output folder the reader picks.
    ("benchmarks/README.md", "/tmp/matrix"),
    ("tests/model/transformers_test_suite.py", "/tmp/x"),
}

def committed_text_files() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    files = {}
    for name in filter(None, listed.stdout.split("\0")):
        path = REPO_ROOT / name
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # images, weights: binary
            continue
        files[name] = data.decode("utf-8", errors="replace")
    return files


def machine_paths(name: str, text: str) -> set[tuple[str, str]]:
    return {(name, match.group(0)) for match in MACHINE_PATH.finditer(text)}


def test_no_committed_file_holds_an_absolute_machine_path():
    found = set()
    for name, text in committed_text_files().items():
        if name == "tests/test_no_machine_paths.py":  # this file spells the patterns out
            continue
        found |= machine_paths(name, text)
    unexplained = sorted(hit for hit in found
                         if not any(hit[0] == file and hit[1].startswith(prefix) for file, prefix in ALLOWED))
    assert not unexplained, (
        "committed files hold absolute paths of the machine they were made on; write them relative to the repository "
        "(or ../shared/data for the data):\n" + "\n".join(f"{file}: {path}" for file, path in unexplained))


@pytest.mark.parametrize("text, expected", [
    ('"source": "/work/healed-shared-20min"', ["/work/healed-shared-20min"]),
    ("--work-dir /root/runs/x", ["/root/runs"]),
    ("cache in /home/bob/.cache/huggingface", ["/home/bob/"]),
    ("saved to /tmp/tmpab12cd/model", ["/tmp/tmpab12cd"]),
    ('"C:\\\\Users\\\\ann\\\\model"', ["C:\\\\Users\\\\"]),
    ("runs/build-minilm-work/healed and ../shared/data/mlm-text", []),
    ("https://example.com/tmp/file and a gitignore line /tmp/", []),
])
def test_the_pattern_finds_machine_paths_and_spares_relative_ones(text, expected):
    assert [match.group(0) for match in MACHINE_PATH.finditer(text)] == expected
