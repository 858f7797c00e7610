"""Each study in experiments/ stands alone (experiments/README.md, "Conventions"): it imports the package and the files
of its own folder, never another study's code. Where one study builds on another it reads that study's committed
results files. Checked on the source with `ast`: every path-based import (importlib's spec_from_file_location,
runpy, a sys.path edit) must name a path inside the study's own folder, and no module another study holds is
imported by name."""

import ast
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
# Calls that load code from a path, or make a folder's files importable.
PATH_LOADERS = {"spec_from_file_location", "run_path", "insert", "append", "extend", "import_module"}


def _studies() -> dict[str, list[Path]]:
    studies = {folder.name: sorted(folder.rglob("*.py")) for folder in sorted(EXPERIMENTS.iterdir())
               if folder.is_dir() and not folder.name.startswith((".", "_"))}
    return {name: scripts for name, scripts in studies.items() if scripts}


def _call_name(node: ast.Call) -> str:
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _is_sys_path(node: ast.Call) -> bool:
    """sys.path.insert(...) and the like, as against list.insert on anything else."""
    target = node.func.value if isinstance(node.func, ast.Attribute) else None
    return isinstance(target, ast.Attribute) and target.attr == "path" and getattr(target.value, "id", "") == "sys"


# How a path climbs out of the script's folder (HERE = Path(__file__).resolve().parent is the folder itself).
CLIMBS = ("HERE.parent", "parents[", ".parent.parent", "..")


def _outside_names(tree: ast.Module, source: str) -> set[str]:
    """Module-level names bound to a path out of the folder (CHARLM = HERE.parent / "charlm", REPO = ...)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            text = ast.get_source_segment(source, node.value)
            if any(word in text for word in CLIMBS) or {n.id for n in ast.walk(node.value)
                                                         if isinstance(n, ast.Name)} & names:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def reaches_outside(source: str, own_modules: set[str], other_modules: set[str]) -> list[str]:
    """What in `source` (one study's file) loads code from outside its own folder."""
    tree = ast.parse(source)
    outside = _outside_names(tree, source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in PATH_LOADERS:
            if _call_name(node) in ("insert", "append", "extend") and not _is_sys_path(node):
                continue
            text = ast.get_source_segment(source, node)
            inner = list(ast.walk(node))
            if (any(word in text for word in CLIMBS)
                    or {n.id for n in inner if isinstance(n, ast.Name)} & outside
                    or any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "/" in n.value
                           for n in inner)):
                found.append(f"line {node.lineno}: {text}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top == "experiments" or (top in other_modules and top not in own_modules):
                    found.append(f"line {node.lineno}: imports {name}")
    return found


def test_there_are_studies_to_check():
    studies = _studies()
    assert len(studies) >= 10 and all(studies.values())  # a move of experiments/ must not leave this vacuous


def test_no_study_imports_another_studys_code():
    studies = _studies()
    modules = {name: {path.stem for path in scripts} for name, scripts in studies.items()}
    problems = []
    for name, scripts in studies.items():
        others = set().union(*(m for other, m in modules.items() if other != name))
        for script in scripts:
            for problem in reaches_outside(script.read_text(encoding="utf-8"), modules[name], others):
                problems.append(f"{script.relative_to(EXPERIMENTS)}: {problem}")
    assert problems == []


@pytest.mark.parametrize("planted", [
    # bf16_check.py before it kept its own copy of the replication recipe
    'spec = importlib.util.spec_from_file_location(name, HERE.parent / "replication" / "replicate.py")',
    # directed-attention's verdicts.py before it read the charlm cells itself
    'CHARLM = HERE.parent / "charlm"\nspec = importlib.util.spec_from_file_location("_r", CHARLM / "report.py")',
    "REPO = Path(__file__).resolve().parents[1]\nsys.path.insert(0, str(REPO / 'experiments' / 'replication'))",
    "sys.path.insert(0, str(HERE.parent / 'replication'))",
    "sys.path.append('../charlm')",
    "import replicate",
    "from experiments.charlm import report",
])
def test_the_check_catches_a_study_reaching_into_another(planted):
    source = "import importlib.util\nimport sys\n" + planted + "\n"
    assert reaches_outside(source, own_modules={"bf16_check"}, other_modules={"replicate", "report", "study"})


def test_a_studys_own_files_may_import_each_other():
    source = ("import sys\nHERE = Path(__file__).resolve().parent\nsys.path.insert(0, str(HERE))\nimport study\n"
              'spec = importlib.util.spec_from_file_location("_s", HERE / "study.py")\n')
    assert reaches_outside(source, own_modules={"study", "report"}, other_modules={"study", "replicate"}) == []
