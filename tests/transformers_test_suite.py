"""Fetch transformers' own model test mixins (they ship only in the transformers sdist) for the installed version.

The sdist is downloaded once with pip into `vendor/` (git-ignored, never committed) and its top-level `tests/` package
is made importable. Returns None when it cannot be had (no network and no earlier copy), so callers can skip clearly.
"""

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import transformers

VENDOR = Path(__file__).resolve().parents[1] / "vendor"


def transformers_tests_root() -> Path | None:
    version = transformers.__version__
    root = VENDOR / f"transformers-{version}"
    if (root / "tests" / "test_modeling_common.py").is_file():
        return root
    with tempfile.TemporaryDirectory() as download_dir:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
             f"transformers=={version}", "-d", download_dir],
            capture_output=True, text=True,
        )
        archives = list(Path(download_dir).glob("transformers-*.tar.gz"))
        if result.returncode != 0 or not archives:
            return None
        VENDOR.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=VENDOR))
        with tarfile.open(archives[0]) as archive:
            members = [
                m for m in archive.getmembers()
                if m.name.startswith(f"transformers-{version}/tests/")
                and "/tests/models/" not in m.name and "/tests/fixtures/" not in m.name
            ]
            archive.extractall(staging, members=members, filter="data")
        _write_missing_modules(staging / f"transformers-{version}" / "tests")
        try:
            (staging / f"transformers-{version}").rename(root)  # atomic: a half-extracted copy is never used
        except OSError:
            if not (root / "tests" / "test_modeling_common.py").is_file():  # not just another worker winning the race
                raise
        shutil.rmtree(staging, ignore_errors=True)
    return root


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
    """Import transformers' `tests.test_modeling_common` and `tests.test_configuration_common` (or return None)."""
    root = transformers_tests_root()
    if root is None:
        return None
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import tests.test_configuration_common as configuration_common
    import tests.test_modeling_common as modeling_common

    return modeling_common, configuration_common


if __name__ == "__main__":
    # `python tests/transformers_test_suite.py`: fetch ahead of the test run (the Makefile's set-up does this).
    fetched = transformers_tests_root()
    print(f"transformers test mixins: {fetched}" if fetched else "transformers test mixins: could not be fetched")
