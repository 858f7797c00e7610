"""A job's `threads` option holds for its run only: torch's thread count is process-wide, and a notebook or a test that
calls `convert_checkpoint`, `build_minilm_checkpoint` or `heal` keeps the count it had, whether the job returns or
raises."""

import pytest
import torch

from sharedbert.data import DataError
from sharedbert.recipes.build_minilm import build_minilm_checkpoint
from sharedbert.recipes.convert_and_heal import convert_checkpoint
from sharedbert.threads import restores_torch_threads, torch_threads
from sharedbert.training.healing import heal
from sharedbert.training.healing_arguments import HealConfig


@pytest.fixture
def caller_threads():
    """The count a caller set (not the suite's 1, so that a job that leaves 1 behind is caught too)."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)


def test_the_callers_count_is_back_after_a_job_returns_or_raises(caller_threads):
    @restores_torch_threads
    def job(threads, fail):
        torch.set_num_threads(threads)
        assert torch.get_num_threads() == threads  # the job's count holds inside its run
        if fail:
            raise RuntimeError("bad input")
        return "done"

    assert job(2, fail=False) == "done" and torch.get_num_threads() == caller_threads
    with pytest.raises(RuntimeError, match="bad input"):
        job(1, fail=True)
    assert torch.get_num_threads() == caller_threads


def test_a_block_runs_on_the_count_it_asks_for_and_gives_the_callers_back(caller_threads):
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == caller_threads
    with pytest.raises(RuntimeError, match="bad input"), torch_threads(2):
        raise RuntimeError("bad input")
    assert torch.get_num_threads() == caller_threads
    with torch_threads(None):  # None: the count is left as it is
        assert torch.get_num_threads() == caller_threads


def test_convert_sets_its_threads_and_gives_the_callers_back_when_the_source_is_missing(tmp_path, caller_threads):
    # The thread count is set before the source is looked up, so this run sets it and then raises.
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        convert_checkpoint(src=str(tmp_path / "missing" / "bert"), out=str(tmp_path / "out"), threads=1)
    assert torch.get_num_threads() == caller_threads


def test_build_minilm_and_heal_give_the_callers_count_back_when_they_raise(tmp_path, caller_threads):
    with pytest.raises(FileNotFoundError, match="no-sts.tsv"):
        build_minilm_checkpoint(out=str(tmp_path / "staged"), work_dir=str(tmp_path / "work"), threads=1,
                                sts=str(tmp_path / "no-sts.tsv"), corpus=str(tmp_path / "no-corpus"))
    assert torch.get_num_threads() == caller_threads
    config = HealConfig(threads=1, max_steps=1)
    with pytest.raises(DataError, match="no-corpus"):
        heal(None, None, None, tmp_path / "no-corpus", tmp_path / "checkpoints", config)
    assert torch.get_num_threads() == caller_threads
