"""The transformers releases the Hub files support (docs/hub.md, "Which transformers"): pyproject's floor, the model
card's sentence and the files' imports agree. The range itself was checked by installing each release (5.0-5.24); what
CI can check without them is that the files import none of the names transformers added after the floor."""

import ast
import re

from conftest import REPO_ROOT

FLOOR = "5.6"
HUB_FILES = ("configuration_sharedbert.py", "modeling_sharedbert.py", "tokenization_sharedbert.py")
# transformers names the Hub files used to import, with the release that added each (both above the floor): the files
# define their own instead.
LATER_NAMES = {"slice_logits_to_keep": "5.21", "positive_int_field": "5.17"}


def transformers_imports(source: str) -> set[str]:
    return {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "transformers" for alias in node.names}


def test_pyproject_and_the_model_card_state_the_same_floor():
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(rf'"transformers>={re.escape(FLOOR)},<6"', pyproject)
    card = (REPO_ROOT / "sharedbert" / "hub" / "template.md").read_text(encoding="utf-8")
    assert f"`transformers` ({FLOOR} or newer, below 6)" in card


def test_the_hub_files_import_no_transformers_name_added_after_the_floor():
    for name in HUB_FILES:
        imported = transformers_imports((REPO_ROOT / "sharedbert" / name).read_text(encoding="utf-8"))
        late = {n: LATER_NAMES[n] for n in imported & LATER_NAMES.keys()}
        assert not late, f"{name} imports {late} (name: release that added it), newer than the floor {FLOOR}"


def test_the_check_sees_a_late_import():
    assert "slice_logits_to_keep" in transformers_imports(
        "from transformers.modeling_utils import PreTrainedModel, slice_logits_to_keep\n")
