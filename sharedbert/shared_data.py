"""Where the project's data sits: `shared/data` beside the repository (GLUE TSVs in glue/, raw text in mlm-text/; see
its README). Below the jobs: training, export and the benchmarks look for their default files here."""

from __future__ import annotations

from pathlib import Path

# Said in messages when nothing is found.
SHARED_DATA_PLACES = "shared/data beside the repository, or beside or inside the current folder"


def shared_data_dir(holding: str | None = None) -> Path | None:
    """The shared data folder: `shared/data` beside the repository (../shared/data from its root), else beside or
    inside the current folder; with `holding` (a relative path such as "glue/SST-2"), the first that holds it. None
    when there is none. The one place that knows this layout."""
    repo_root = Path(__file__).resolve().parents[1]
    for base in (repo_root, Path.cwd()):
        for candidate in (base.parent / "shared" / "data", base / "shared" / "data"):
            if candidate.is_dir() and (holding is None or (candidate / holding).exists()):
                return candidate
    return None


__all__ = ["SHARED_DATA_PLACES", "shared_data_dir"]
