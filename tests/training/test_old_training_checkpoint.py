"""Training checkpoints written by an older package resume with today's. tests/fixtures holds two, each a tiny run's
checkpoint at step 12 of 20 with the run's inputs and what the same run never stopped logged, scored and saved
(reference.json, which names the commit that wrote it):

* finetune-checkpoint: `sharedbert finetune` (tests/fixtures/make_finetune_checkpoint.py), with the best
  evaluation's record and weights;
* pretrain-checkpoint: `sharedbert pretrain` (tests/fixtures/make_pretrain_checkpoint.py), with the vocabulary.

Both were written before `ResumableTrainer` moved onto Trainer's own checkpoint files (a37d756) and before the jobs'
arguments were rebuilt on TrainingArguments. The same command, run again beside the checkpoint, must go on from
step 12 and end where the run never stopped ended. So must the format written between a37d756 and Trainer's own save
(Trainer's torch files, with run_state.json beside them), made here from the fixtures as that version made it on
resume (`add_trainer_files`).

The command runs in the test's process (conftest's `run_command_here`: the command line's own entry point): what is
tested is what it reads from the old checkpoint, not how a process starts, which tests/training/test_resume.py's real
processes cover (and a new Python would spend most of its time here importing torch and transformers)."""

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from conftest import run_command_here

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _as_trainer_files_with_run_state(checkpoint: Path) -> None:
    """The fixture checkpoint as sharedbert wrote checkpoints between a37d756 and Trainer's own save: Trainer's
    optimizer.pt, scheduler.pt and rng_state.pth, and run_state.json holding the signature, precision and best
    evaluation only."""
    from sharedbert.training.checkpointing import add_trainer_files

    add_trainer_files(checkpoint)
    for name in ("optimizer.safetensors", "rng.safetensors"):
        (checkpoint / name).unlink()
    state = json.loads((checkpoint / "run_state.json").read_text())
    (checkpoint / "run_state.json").write_text(json.dumps(
        {key: state[key] for key in ("run_signature", "precision", "keep_best") if key in state}))


def _resume(fixture: Path, tmp_path: Path, monkeypatch, previous_format: bool = False) -> tuple[dict, Path, str]:
    """Copy the fixture's inputs to a run folder, its checkpoint where the command looks for it (`previous_format`:
    rewritten as the version before this one wrote it), run the command; returns the reference, the output folder and
    the command's log."""
    reference = json.loads((fixture / "reference.json").read_text())
    run = tmp_path / "run"
    shutil.copytree(fixture, run, ignore=shutil.ignore_patterns(reference["checkpoint"], "reference.json"))
    shutil.copytree(fixture / reference["checkpoint"], run / "model-checkpoints" / reference["checkpoint"])
    if previous_format:
        _as_trainer_files_with_run_state(run / "model-checkpoints" / reference["checkpoint"])
    monkeypatch.chdir(run)  # the arguments name the inputs beside the checkpoint by relative paths
    printed = run_command_here(reference["arguments"])
    assert f"resuming from model-checkpoints/{reference['checkpoint']}" in printed
    assert not (run / "model-checkpoints").exists()  # dropped once the output is saved, as for any run
    return reference, run / "model", printed


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
@pytest.mark.parametrize("previous_format", [False, True], ids=["safetensors-state", "trainer-files-run-state"])
def test_a_finetune_checkpoint_of_an_older_package_resumes_to_the_run_it_interrupted(tmp_path, monkeypatch,
                                                                                       previous_format):
    reference, output, _ = _resume(FIXTURES / "finetune-checkpoint", tmp_path, monkeypatch, previous_format)
    _assert_same_losses_and_weights(reference, output)
    results, expected = json.loads((output / "eval_results.json").read_text()), reference["eval_results"]
    assert results["total_steps"] == expected["total_steps"] and results["best_step"] == expected["best_step"]
    assert results["metrics"] == pytest.approx(expected["metrics"], abs=1e-6)
    assert results["eval_loss"] == pytest.approx(expected["eval_loss"], rel=1e-4)


@pytest.mark.slow
def test_a_pretrain_checkpoint_of_an_older_package_resumes_to_the_run_it_interrupted(tmp_path, monkeypatch):
    reference, output, _ = _resume(FIXTURES / "pretrain-checkpoint", tmp_path, monkeypatch)
    _assert_same_losses_and_weights(reference, output)
    results, expected = json.loads((output / "pretrain_results.json").read_text()), reference["pretrain_results"]
    assert results["steps"] == expected["steps"] == 20
    assert results["eval_loss"] == pytest.approx(expected["eval_loss"], rel=1e-4)
    saved_vocabulary = json.loads((FIXTURES / "pretrain-checkpoint" / "tokenizer" / "tokenizer.json").read_text())
    assert json.loads((output / "tokenizer.json").read_text())["model"]["vocab"] == saved_vocabulary["model"]["vocab"]


def test_an_older_checkpoint_is_upgraded_to_trainers_own_state_once(tmp_path):
    """The upgrade moves run_state.json's record into Trainer's state (the run's signature and precision, the best
    evaluation, whose weights stay beside it) and adds Trainer's torch files; a second pass changes nothing."""
    from sharedbert.training.checkpointing import (is_complete, read_run_record, saved_callback_state,
                                                   upgrade_checkpoint)

    checkpoint = tmp_path / "checkpoint-12"
    shutil.copytree(FIXTURES / "finetune-checkpoint" / "checkpoint-12", checkpoint)
    old = json.loads((checkpoint / "run_state.json").read_text())
    upgrade_checkpoint(checkpoint)
    assert not (checkpoint / "run_state.json").exists() and is_complete(checkpoint)
    assert all((checkpoint / name).is_file() for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"))
    record = read_run_record(checkpoint)
    assert record["signature"] == old["run_signature"] and record["precision"] == "fp32" and record["record"] == {}
    best = saved_callback_state(checkpoint, "KeepBestCallback")["attributes"]
    assert (best["best_step"], best["best_value"]) == (old["keep_best"]["step"], old["keep_best"]["value"])
    assert best["checkpoint_files"] == ["best_model.safetensors"]
    (checkpoint / "best_model.safetensors").rename(tmp_path / "best_model.safetensors")
    assert not is_complete(checkpoint)  # the best weights are part of the checkpoint
    (tmp_path / "best_model.safetensors").rename(checkpoint / "best_model.safetensors")
    state = (checkpoint / "trainer_state.json").read_text()
    upgrade_checkpoint(checkpoint)
    assert (checkpoint / "trainer_state.json").read_text() == state
