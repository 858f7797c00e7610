"""The compatibility tests (transformers' own mixins, from its sdist) cannot vanish quietly: the sdist is pinned by
sha256, and under CI=true a missing sdist fails the run instead of skipping it. A missing sdist is faked by pointing
the vendor folder at an empty one and taking pip's indexes away, without touching the real copy."""

import hashlib
import os
import subprocess
import sys

import pytest
import transformers

import transformers_test_suite as suite
from conftest import REPO_ROOT


@pytest.fixture
def sdist_unreachable(tmp_path, monkeypatch):
    """No earlier copy and no index pip can reach: the state of an offline machine on its first run."""
    vendor = tmp_path / "vendor"
    no_links = tmp_path / "no-links"
    no_links.mkdir()
    monkeypatch.setattr(suite, "VENDOR", vendor)
    monkeypatch.setenv("SHAREDBERT_VENDOR_DIR", str(vendor))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(no_links))
    return vendor


def test_the_installed_transformers_has_a_pinned_sdist_hash():
    assert len(suite.SDIST_SHA256[transformers.__version__]) == 64


def test_an_sdist_with_another_hash_is_refused_naming_both_hashes(tmp_path):
    archive = tmp_path / f"transformers-{transformers.__version__}.tar.gz"
    archive.write_bytes(b"not the sdist that was pinned")
    with pytest.raises(suite.SdistHashMismatch) as refused:
        suite.verify_sdist(archive, transformers.__version__)
    message = str(refused.value)
    assert hashlib.sha256(archive.read_bytes()).hexdigest() in message
    assert suite.SDIST_SHA256[transformers.__version__] in message


def test_a_missing_sdist_skips_outside_ci(sdist_unreachable, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="could not be fetched"):
        suite.import_test_modules_or_skip()


def test_a_missing_sdist_fails_under_ci(sdist_unreachable, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        suite.import_test_modules_or_skip()


def test_a_copy_extracted_without_the_hash_check_is_not_trusted(sdist_unreachable, monkeypatch):
    unchecked = sdist_unreachable / f"transformers-{transformers.__version__}" / "tests"
    unchecked.mkdir(parents=True)
    (unchecked / "test_modeling_common.py").write_text("")
    with pytest.raises(suite.SuiteUnavailable, match="pip download"):
        suite.transformers_tests_root()


@pytest.mark.parametrize("ci", [False, True])
@pytest.mark.slow
def test_the_compatibility_module_skips_or_fails_the_run(sdist_unreachable, ci):
    """End to end: pytest on tests/model/test_modeling_transformers_mixin.py, with the sdist unreachable."""
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    if ci:
        env["CI"] = "true"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "tests/model/test_modeling_transformers_mixin.py"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    output = run.stdout + run.stderr
    if ci:  # a collection error: the run fails
        assert run.returncode == pytest.ExitCode.INTERRUPTED, output
        assert "CI=true and transformers' test mixins are missing" in output
    else:  # alone in the run, the skipped module leaves nothing collected (exit 5); in the suite, the run passes
        assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, output
        assert "1 skipped" in output
