"""A training checkpoint written by an older package resumes with today's: tests/fixtures/finetune-checkpoint holds a
tiny `sharedbert finetune` run's checkpoint at step 12 of 20 (written at the commit its reference.json names, before
`ResumableTrainer` moved onto more of Trainer's own checkpoint code), its model and data, and what the same run never
stopped logged, scored and saved (tests/fixtures/make_finetune_checkpoint.py made it). The same command, run again
beside the checkpoint, must go on from step 12 and end where that run ended."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from conftest import REPO_ROOT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "finetune-checkpoint"


def test_a_finetune_checkpoint_of_an_older_package_resumes_to_the_run_it_interrupted(tmp_path):
    reference = json.loads((FIXTURE / "reference.json").read_text())
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run, ignore=shutil.ignore_patterns(reference["checkpoint"], "reference.json"))
    shutil.copytree(FIXTURE / reference["checkpoint"], run / "model-checkpoints" / reference["checkpoint"])
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, "-m", "sharedbert", *reference["arguments"]], cwd=run, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming from model-checkpoints/{reference['checkpoint']}" in done.stderr

    output = run / "model"
    log = json.loads((output / "trainer_log.json").read_text())
    losses = {str(entry["step"]): entry["loss"] for entry in log if "loss" in entry}
    assert losses.keys() == reference["losses"].keys()  # the steps before the checkpoint come from its log
    for step, loss in reference["losses"].items():
        assert losses[step] == pytest.approx(loss, rel=1e-4, abs=1e-5), f"loss differs at step {step}"

    results, expected = json.loads((output / "eval_results.json").read_text()), reference["eval_results"]
    assert results["total_steps"] == expected["total_steps"] and results["best_step"] == expected["best_step"]
    assert results["metrics"] == pytest.approx(expected["metrics"], abs=1e-6)
    assert results["eval_loss"] == pytest.approx(expected["eval_loss"], rel=1e-4)
    weights = load_file(output / "model.safetensors")
    assert weights.keys() == reference["weight_abs_sums"].keys()
    for name, total in reference["weight_abs_sums"].items():
        assert weights[name].abs().sum().item() == pytest.approx(total, rel=1e-5), f"weight {name} differs"
    assert not (run / "model-checkpoints").exists()  # dropped once the output is saved, as for any run
