"""A test file or test class that collects nothing is a collection error, not a silent pass.

pytest reports a module without tests as nothing at all, so a file whose tests were renamed away, indented into a
helper or generated from a list that came back empty would pass every run while checking nothing. Here such a module
or class fails to collect, naming the file; tests/conftest.py loads these hooks for the suite, and
tests/test_collection_guard.py runs them on planted files. A parametrisation over an empty list fails at collection
too (`empty_parameter_set_mark = "fail_at_collect"` in pyproject.toml). Tests deselected with `-m`/`-k` and modules
skipped on purpose (`pytest.skip(..., allow_module_level=True)`, `pytest.importorskip`) are not affected."""

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if isinstance(collector, (pytest.Module, pytest.Class)) and report.passed and not report.result:
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} collects no tests: a test file (or class) here must define at least "
                           "one test (tests/collection_guard.py)")
    return report
