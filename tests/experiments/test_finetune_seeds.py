"""experiments/finetuning/finetune_seeds.py: model specs, the shared results file, and the paired comparison it
reports."""

import json

import pytest
from conftest import experiment_script


@pytest.fixture(scope="module")
def script():
    return experiment_script("finetuning/finetune_seeds.py")


def test_model_specs(script):
    assert script.parse_model("original=all-MiniLM-L6-v2:--no-convert --fit-method weights") == (
        "original", "all-MiniLM-L6-v2", ["--no-convert", "--fit-method", "weights"])
    assert script.parse_model("healed=runs/minilm-shared") == ("healed", "runs/minilm-shared", [])
    with pytest.raises(SystemExit, match="LABEL=SOURCE"):
        script.parse_model("runs/minilm-shared")


def _run(label, seed, best, recipe="R"):
    return {"label": label, "source": label, "extra": [], "seed": seed, "recipe": recipe,
            "metrics": {"metric": "accuracy", "best": best, "final": best - 0.01}}


def test_runs_of_several_processes_merge_and_differences_are_paired(script, tmp_path):
    path = tmp_path / "results.json"
    # As two processes would, each recording its own model; neither overwrites the other's runs.
    for label, scores in (("healed", {1: 0.80, 2: 0.90}), ("original", {1: 0.82, 2: 0.93, 3: 0.85})):
        for seed, best in scores.items():
            script.record(path, f"{label}/seed{seed}/R", _run(label, seed, best))
    runs = json.loads(path.read_text())["runs"]
    assert len(runs) == 5

    table = script.report(runs, "original").splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table if line.startswith("| ")}
    assert list(rows)[1:] == ["original", "healed"]  # the reference first, after the header
    # healed − original on the seeds both have (1 and 2): −0.02 and −0.03.
    assert rows["healed"][5] == "-0.025 ± 0.007"
    assert rows["original"][2] == "1, 2, 3" and rows["original"][3] == "0.867 ± 0.057"
    assert rows["original"][5] == "–"
