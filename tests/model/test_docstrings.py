"""The model classes' documentation, written by transformers' `auto_docstring` as for its own BERT: each class says what
it is and takes, each forward documents every argument and what it returns, and the config every field. The package
lives outside transformers' tree, where `auto_docstring` finds no model name: nothing may read "None" for it, and
importing the Hub files prints no complaint of an undocumented argument."""

import inspect
import pydoc
import re
import subprocess
import sys

import pytest

from sharedbert import modeling_sharedbert
from sharedbert.configuration_sharedbert import SharedBertConfig

MODEL_CLASSES = [getattr(modeling_sharedbert, name) for name in modeling_sharedbert.__all__
                 if name.startswith("SharedBert") and name != "SharedBertPreTrainedModel"]
NOT_DOCUMENTED = {"self", "kwargs"}


@pytest.mark.slow
def test_importing_the_hub_files_prints_nothing():
    """auto_docstring prints an "[ERROR] ... not documented" line at import for each undocumented argument."""
    result = subprocess.run(
        [sys.executable, "-c", "import sharedbert.configuration_sharedbert, sharedbert.modeling_sharedbert, "
                               "sharedbert.tokenization_sharedbert"],
        capture_output=True, text=True, check=True)
    assert result.stdout == ""


@pytest.mark.parametrize("model_class", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_each_model_class_says_what_it_is_and_takes(model_class):
    doc = model_class.__doc__
    intro = doc.strip().split("\n")[0]
    assert intro and "None" not in intro and not intro.startswith("This model inherits")
    assert "Parameters:" in doc and "config ([`SharedBertConfig`])" in doc
    assert intro in pydoc.render_doc(model_class)  # what help() shows


@pytest.mark.parametrize("model_class", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_each_forward_documents_every_argument_and_its_return(model_class):
    doc = model_class.forward.__doc__
    arguments = set(inspect.signature(model_class.forward).parameters) - NOT_DOCUMENTED
    assert [name for name in sorted(arguments) if f"    {name} (" not in doc] == []
    assert re.search(r"Returns:\s+\[`~(modeling_outputs|models\.bert\.modeling_bert)\.\w+`\]", doc)
    assert "[`None`]" not in doc and "None Model" not in doc


def test_the_config_documents_every_field():
    doc = SharedBertConfig.__doc__
    assert doc.strip().startswith("Configuration of a [`SharedBertModel`]")
    fields = [name for name in SharedBertConfig.__annotations__ if not name.startswith("_")]
    assert len(fields) > 30
    assert [name for name in fields if f"    {name} (" not in doc] == []
    assert "None model" not in doc and "huggingface.co/None" not in doc
