"""Fetch transformers' own model test mixins (they ship only in the transformers sdist) for the installed version.

The sdist is downloaded once with pip into `vendor/` (git-ignored, never committed; `SHAREDBERT_VENDOR_DIR` names
another folder), checked against the sha256 pinned below, and its top-level `tests/` package is made importable.

When the sdist cannot be had (no network and no earlier copy), the compatibility tests skip with the reason, except
under `CI=true`, where that fails the run: CI must not go green with ~1,600 tests quietly gone. A downloaded sdist
whose hash is not the pinned one is always an error.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import transformers

VENDOR = Path(os.environ.get("SHAREDBERT_VENDOR_DIR") or Path(__file__).resolve().parents[2] / "vendor")

# sha256 of each transformers sdist the suite may run, as pip downloads it from PyPI. To move to a new version, run
# `pip download --no-deps --no-binary :all: transformers==X -d /tmp/x && sha256sum /tmp/x/*.tar.gz` and add it.
SDIST_SHA256 = {
    "5.23.0": "19d647a4d5d903a7c644ca5cde2d86efc3dde7d8c687ae7988806ff2205efa71",
}
# Written into the extracted copy: a copy without it (or with another hash) came from an unchecked sdist.
VERIFIED_MARKER = "SDIST_SHA256"


class SuiteUnavailable(RuntimeError):
    """transformers' test mixins cannot be had here (no pinned hash for the version, or the download failed)."""


class SdistHashMismatch(RuntimeError):
    """The downloaded sdist is not the pinned one."""


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def verify_sdist(archive: Path, version: str) -> str:
    """The sdist's sha256, after checking it against the pinned one (SdistHashMismatch names both)."""
    digest = hashlib.sha256()
    with open(archive, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    actual, expected = digest.hexdigest(), SDIST_SHA256[version]
    if actual != expected:
        raise SdistHashMismatch(
            f"{archive.name}: sha256 {actual} is not the pinned {expected} (tests/model/transformers_test_suite.py "
            "SDIST_SHA256). Refusing to run tests from an unverified sdist; if transformers re-published it, check "
            "the new file and update the pin."
        )
    return actual


def transformers_tests_root() -> Path:
    """The extracted, verified sdist folder holding `tests/`; raises SuiteUnavailable or SdistHashMismatch."""
    version = transformers.__version__
    if version not in SDIST_SHA256:
        raise SuiteUnavailable(
            f"no pinned sha256 for the transformers {version} sdist: add it to SDIST_SHA256 in "
            "tests/model/transformers_test_suite.py"
        )
    root = VENDOR / f"transformers-{version}"
    if _verified_copy(root, version):
        return root
    with tempfile.TemporaryDirectory() as download_dir:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
             f"transformers=={version}", "-d", download_dir],
            capture_output=True, text=True,
        )
        archives = list(Path(download_dir).glob("transformers-*.tar.gz"))
        if result.returncode != 0 or not archives:
            last_line = (result.stderr.strip().splitlines() or ["no sdist in pip's output"])[-1]
            raise SuiteUnavailable(f"pip download of the transformers {version} sdist failed: {last_line}")
        sha256 = verify_sdist(archives[0], version)
        VENDOR.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=VENDOR))
        with tarfile.open(archives[0]) as archive:
            members = [
                m for m in archive.getmembers()
                if m.name.startswith(f"transformers-{version}/tests/")
                and "/tests/models/" not in m.name and "/tests/fixtures/" not in m.name
            ]
            archive.extractall(staging, members=members, filter="data")
        extracted = staging / f"transformers-{version}"
        _write_missing_modules(extracted / "tests")
        (extracted / VERIFIED_MARKER).write_text(sha256 + "\n")
        if root.exists() and not _verified_copy(root, version):
            shutil.rmtree(root, ignore_errors=True)  # a copy from before the pin (or a tampered one): replace it with the checked one
        try:
            extracted.rename(root)  # atomic: a half-extracted copy is never used
        except OSError:
            if not _verified_copy(root, version):  # not just another worker winning the race
                raise
        shutil.rmtree(staging, ignore_errors=True)
    return root


def _verified_copy(root: Path, version: str) -> bool:
    marker = root / VERIFIED_MARKER
    return (
        (root / "tests" / "test_modeling_common.py").is_file()
        and marker.is_file()
        and marker.read_text().strip() == SDIST_SHA256[version]
    )


# The sdist ships only the top-level test files. These are the three sibling modules `test_modeling_common` and
# `test_configuration_common` import, written here from what the mixins need of them (not copies of the originals).
MISSING_MODULES = {
    "__init__.py": "",
    "utils/__init__.py": "",
    # Non-default values for the config fields every PreTrainedConfig accepts; ConfigTester checks each is kept.
    "utils/test_configuration_utils.py": """config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "is_encoder_decoder": True,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
""",
    "exporters/__init__.py": "",
    # torch.export checks live in the repository's tests/exporters, which the sdist lacks: they are not run.
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "generation/__init__.py": "",
    # SharedBert does not generate, so its testers must not inherit this mixin; it only has to exist.
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
}


def _write_missing_modules(tests_dir: Path) -> None:
    for relative, text in MISSING_MODULES.items():
        path = tests_dir / relative
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def import_test_modules():
    """Import transformers' `tests.test_modeling_common` and `tests.test_configuration_common`.

    Raises SuiteUnavailable when the sdist cannot be had and SdistHashMismatch when it is not the pinned one."""
    root = transformers_tests_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import tests.test_configuration_common as configuration_common
    import tests.test_modeling_common as modeling_common

    return modeling_common, configuration_common


def import_test_modules_or_skip():
    """`import_test_modules()` for a test module: a missing sdist skips the module, or fails it under `CI=true`."""
    import pytest

    try:
        return import_test_modules()
    except SuiteUnavailable as missing:
        if running_in_ci():
            pytest.fail(f"CI=true and transformers' test mixins are missing ({missing}); "
                        "the compatibility tests must run in CI, not skip.", pytrace=False)
        pytest.skip(f"transformers' test mixins could not be fetched ({missing})", allow_module_level=True)


if __name__ == "__main__":
    # `python tests/model/transformers_test_suite.py`: fetch ahead of the test run (the Makefile's set-up does this).
    # A hash mismatch always fails; a failed download fails only under CI=true (offline set-up may go on).
    try:
        print(f"transformers test mixins: {transformers_tests_root()}")
    except SuiteUnavailable as missing:
        print(f"transformers test mixins: could not be fetched: {missing}", file=sys.stderr)
        sys.exit(1 if running_in_ci() else 0)
    except SdistHashMismatch as mismatch:
        print(f"transformers test mixins: {mismatch}", file=sys.stderr)
        sys.exit(1)
