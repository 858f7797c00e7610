"""tests/collection_guard.py on planted test files, in a pytest of their own: a file or class that collects nothing
and a parametrisation over an empty list fail the run naming the file; deselected tests and module-level skips do
not; and the suite runs under both rules."""

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _pytest(folder: Path, *arguments: str, mark: str) -> subprocess.CompletedProcess:
    (folder / "pytest.ini").write_text(f"[pytest]\nempty_parameter_set_mark = {mark}\nmarkers =\n    slow: heavy\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "collection_guard", "-p", "no:cacheprovider",
                           "-q", "--rootdir", str(folder), "-c", str(folder / "pytest.ini"), *arguments],
                          cwd=folder, capture_output=True, text=True, env={"PYTHONPATH": str(TESTS), "PATH": ""},
                          timeout=120)


def _plant(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_the_suite_runs_under_both_rules(pytestconfig):
    import collection_guard
    import conftest

    assert pytestconfig.getini("empty_parameter_set_mark") == "fail_at_collect"
    # conftest's hooks are the suite's plugin: the guard's hook is among those pytest calls.
    assert conftest.pytest_make_collect_report is collection_guard.pytest_make_collect_report
    assert any(impl.function is collection_guard.pytest_make_collect_report
               for impl in pytestconfig.pluginmanager.hook.pytest_make_collect_report.get_hookimpls())


def test_a_file_a_class_or_a_parametrisation_that_collects_nothing_fails_the_run(tmp_path, pytestconfig):
    mark = pytestconfig.getini("empty_parameter_set_mark")
    folder = _plant(tmp_path / "planted", {
        "test_real.py": "def test_one():\n    assert True\n",
        "test_renamed_away.py": "def check_one():\n    assert False\n",
        "test_empty_class.py": "def test_one():\n    pass\n\n\nclass TestNothing:\n    def helper(self):\n        pass\n",
        "test_empty_list.py": "import pytest\n\n\n@pytest.mark.parametrize('x', [])\ndef test_each(x):\n"
                              "    assert False\n",
    })
    run = _pytest(folder, mark=mark)
    assert run.returncode != 0, run.stdout
    for culprit in ("test_renamed_away.py collects no tests", "TestNothing collects no tests", "test_empty_list.py"):
        assert culprit in run.stdout, run.stdout
    assert "ERROR test_real.py" not in run.stdout


def test_deselected_tests_and_module_level_skips_are_not_an_error(tmp_path, pytestconfig):
    folder = _plant(tmp_path / "planted", {
        "test_heavy.py": "import pytest\n\n\n@pytest.mark.slow\ndef test_heavy():\n    pass\n",
        "test_skipped.py": "import pytest\n\npytest.skip('needs data', allow_module_level=True)\n",
        "test_light.py": "def test_light():\n    pass\n",
    })
    run = _pytest(folder, "-m", "not slow", mark=pytestconfig.getini("empty_parameter_set_mark"))
    assert run.returncode == 0, run.stdout
    assert "1 passed, 1 skipped, 1 deselected" in run.stdout, run.stdout
