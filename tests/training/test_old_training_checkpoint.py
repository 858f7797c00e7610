"""Training checkpoints written by an older package resume with today's. tests/fixtures holds two, each a tiny run's
checkpoint at step 12 of 20 with the run's inputs and what the same run never stopped logged, scored and saved
(reference.json, which names the commit that wrote it):

* finetune-checkpoint: `sharedbert finetune` (tests/fixtures/make_finetune_checkpoint.py), with the best
  evaluation's record and weights;
* pretrain-checkpoint: `sharedbert pretrain` (tests/fixtures/make_pretrain_checkpoint.py), with the vocabulary.

Both were written before `ResumableTrainer` moved onto Trainer's own checkpoint files (a37d756) and before the jobs'
arguments were rebuilt on TrainingArguments. The same command, run again beside the checkpoint, must go on from
step 12 and end where the run never stopped ended."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from conftest import REPO_ROOT

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _resume(fixture: Path, tmp_path: Path) -> tuple[dict, Path, str]:
    """Copy the fixture's inputs to a run folder, its checkpoint where the command looks for it, run the command;
    returns the reference, the output folder and the command's log."""
    reference = json.loads((fixture / "reference.json").read_text())
    run = tmp_path / "run"
    shutil.copytree(fixture, run, ignore=shutil.ignore_patterns(reference["checkpoint"], "reference.json"))
    shutil.copytree(fixture / reference["checkpoint"], run / "model-checkpoints" / reference["checkpoint"])
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, "-m", "sharedbert", *reference["arguments"]], cwd=run, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming from model-checkpoints/{reference['checkpoint']}" in done.stderr
    assert not (run / "model-checkpoints").exists()  # dropped once the output is saved, as for any run
    return reference, run / "model", done.stderr


def _assert_same_losses_and_weights(reference: dict, output: Path):
    log = json.loads((output / "trainer_log.json").read_text())
    losses = {str(entry["step"]): entry["loss"] for entry in log if "loss" in entry}
    assert losses.keys() == reference["losses"].keys()  # the steps before the checkpoint come from its log
    for step, loss in reference["losses"].items():
        assert losses[step] == pytest.approx(loss, rel=1e-4, abs=1e-5), f"loss differs at step {step}"
    weights = load_file(output / "model.safetensors")
    assert weights.keys() == reference["weight_abs_sums"].keys()
    for name, total in reference["weight_abs_sums"].items():
        assert weights[name].abs().sum().item() == pytest.approx(total, rel=1e-5), f"weight {name} differs"


@pytest.mark.slow
def test_a_finetune_checkpoint_of_an_older_package_resumes_to_the_run_it_interrupted(tmp_path):
    reference, output, _ = _resume(FIXTURES / "finetune-checkpoint", tmp_path)
    _assert_same_losses_and_weights(reference, output)
    results, expected = json.loads((output / "eval_results.json").read_text()), reference["eval_results"]
    assert results["total_steps"] == expected["total_steps"] and results["best_step"] == expected["best_step"]
    assert results["metrics"] == pytest.approx(expected["metrics"], abs=1e-6)
    assert results["eval_loss"] == pytest.approx(expected["eval_loss"], rel=1e-4)


@pytest.mark.slow
def test_a_pretrain_checkpoint_of_an_older_package_resumes_to_the_run_it_interrupted(tmp_path):
    reference, output, _ = _resume(FIXTURES / "pretrain-checkpoint", tmp_path)
    _assert_same_losses_and_weights(reference, output)
    results, expected = json.loads((output / "pretrain_results.json").read_text()), reference["pretrain_results"]
    assert results["steps"] == expected["steps"] == 20
    assert results["eval_loss"] == pytest.approx(expected["eval_loss"], rel=1e-4)
    saved_vocabulary = json.loads((FIXTURES / "pretrain-checkpoint" / "tokenizer" / "tokenizer.json").read_text())
    assert json.loads((output / "tokenizer.json").read_text())["model"]["vocab"] == saved_vocabulary["model"]["vocab"]
