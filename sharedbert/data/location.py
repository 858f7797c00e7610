"""Where the project's data sits (GLUE TSVs in glue/, raw text in mlm-text/; see the data folder's README). Below the
jobs: training, export and the benchmarks look for their default files here, in this order:

1. the folder the environment variable `SHAREDBERT_DATA` names (the one way that works for an installed wheel run from
   anywhere);
2. in a checkout of the repository, `shared/data` beside it (../shared/data from its root);
3. `shared/data` beside or inside the current folder.

`raw_text_dir()` is the one owner of the raw-text default: `sharedbert build-minilm --corpus` and
`sharedbert convert --heal --corpus` both default to it."""

from __future__ import annotations

import os
from pathlib import Path

DATA_VARIABLE = "SHAREDBERT_DATA"
# The raw-text folder inside the data folder: healing's default corpus.
RAW_TEXT = "mlm-text"
# Said in messages when nothing is found.
SHARED_DATA_PLACES = (f"the folder ${DATA_VARIABLE} names, shared/data beside the repository, or shared/data beside "
                      "or inside the current folder")


def _candidates() -> list[Path]:
    places = []
    named = os.environ.get(DATA_VARIABLE)
    if named:
        places.append(Path(named).expanduser())
    package_parent = Path(__file__).resolve().parents[2]  # sharedbert/data/location.py -> the folder above sharedbert/
    if (package_parent / "pyproject.toml").is_file():  # a checkout (installed, the parent is site-packages)
        places.append(package_parent.parent / "shared" / "data")
    cwd = Path.cwd()
    places += [cwd.parent / "shared" / "data", cwd / "shared" / "data"]
    return places


def shared_data_dir(holding: str | None = None) -> Path | None:
    """The shared data folder: the first of the places in the module doc that exists and, with `holding` (a relative
    path such as "glue/SST-2"), holds it. None when there is none. The one place that knows this layout."""
    for candidate in _candidates():
        if candidate.is_dir() and (holding is None or (candidate / holding).exists()):
            return candidate
    return None


def not_found_message(holding: str, flag: str) -> str:
    """What to say when `holding` is in no shared data folder: where it looked (with the variable's value) and the
    two fixes, the variable and the command's flag `flag`."""
    named = os.environ.get(DATA_VARIABLE)
    setting = (f"{DATA_VARIABLE}={named} does not hold it" if named
               else f"{DATA_VARIABLE} is not set")
    return (f"{holding} not found in a shared data folder ({setting}; also looked in shared/data beside the "
            f"repository and beside or inside the current folder): set {DATA_VARIABLE} to the data folder holding "
            f"{holding}, or pass {flag}.")


def raw_text_dir(flag: str = "--corpus FOLDER") -> Path:
    """The default healing corpus: mlm-text/ in the shared data folder. FileNotFoundError naming `SHAREDBERT_DATA` and
    `flag` when there is none."""
    found = shared_data_dir(RAW_TEXT)
    if found is None:
        raise FileNotFoundError(not_found_message(f"{RAW_TEXT}/", flag))
    return found / RAW_TEXT


__all__ = ["DATA_VARIABLE", "RAW_TEXT", "SHARED_DATA_PLACES", "not_found_message", "raw_text_dir", "shared_data_dir"]
