"""experiments/bf16/bf16_check.py, the check that bf16 autocast pretrains the same model as fp32: the verdict
arithmetic on made-up numbers, and a tiny `--quick` run that really trains in both precisions, pairs them by seed and
resumes."""

import json

import pytest
from conftest import experiment_script

check = experiment_script("bf16/bf16_check.py")


def _run(final: float, second_half: float, steps: int = 10) -> dict:
    curve = [[step, 9.0 if step <= steps / 2 else second_half] for step in range(1, steps + 1)]
    return {"final_eval_loss": final, "train_curve": curve, "eval_curve": [[steps, final]], "tokens_per_second": 100.0}


def _data(runs: dict) -> dict:
    for key, run in runs.items():
        run["precision"] = key.split("/")[0]
    return {"recipe": {"pretrain": {"max_steps": 10}}, "runs": runs}


def test_bf16_tracks_when_its_paired_differences_are_below_the_fp32_seed_spread():
    runs = {"fp32/seed0": _run(6.00, 6.10), "fp32/seed1": _run(6.10, 6.20), "fp32/seed2": _run(6.20, 6.30),
            "bf16/seed0": _run(6.01, 6.11), "bf16/seed1": _run(6.09, 6.19)}
    summary = check.summarise(_data(runs))
    final = summary["measures"]["final held-out MLM loss"]
    assert final["paired_differences"] == pytest.approx([0.01, -0.01])
    assert final["mean_abs_paired_difference"] == pytest.approx(0.01)
    assert final["fp32_seed_sd"] == pytest.approx(0.1)
    second_half = summary["measures"]["training loss, mean over the second half"]
    assert second_half["fp32"] == pytest.approx({0: 6.10, 1: 6.20, 2: 6.30})  # the first half's 9.0 is left out
    assert summary["verdict"] is True


def test_bf16_does_not_track_when_a_paired_difference_exceeds_the_seed_spread():
    runs = {"fp32/seed0": _run(6.00, 6.10), "fp32/seed1": _run(6.01, 6.11), "bf16/seed0": _run(6.30, 6.10)}
    summary = check.summarise(_data(runs))
    assert summary["measures"]["final held-out MLM loss"]["tracks"] is False
    assert summary["measures"]["training loss, mean over the second half"]["tracks"] is True
    assert summary["verdict"] is False
    assert "does **not** track" in check.render(dict(_data(runs), recipe=_recipe()), summary)


def test_no_verdict_without_two_fp32_seeds_and_a_pair():
    summary = check.summarise(_data({"fp32/seed0": _run(6.0, 6.1), "bf16/seed1": _run(6.0, 6.1)}))
    assert summary["verdict"] is None
    assert summary["measures"]["final held-out MLM loss"]["paired_differences"] == []


def _recipe() -> dict:
    return {"model": {"num_hidden_layers": 2, "hidden_size": 32}, "vocab_size": 400, "block_size": 32,
            "pretrain": {"max_steps": 10, "batch_size": 8}}


@pytest.mark.slow
def test_quick_run_trains_both_precisions_pairs_them_and_skips_finished_runs(tmp_path, mlm_text_dir, capsys):
    argv = ["--quick", "--threads", "1", "--seeds", "0", "1", "--data-dir", str(mlm_text_dir.parent),
            "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")]
    assert check.main(argv) == 0
    data = json.loads((tmp_path / "out" / "bf16_check.json").read_text())
    assert set(data["runs"]) == {"fp32/seed0", "fp32/seed1", "bf16/seed0", "bf16/seed1"}
    for key, run in data["runs"].items():
        assert run["precision"] == key.split("/")[0]  # forced bf16 runs in bf16 even where it is emulated
        assert run["steps"] == data["recipe"]["pretrain"]["max_steps"]
        assert len({step for step, _ in run["eval_curve"]}) == len(run["eval_curve"])
    fp32, bf16 = data["runs"]["fp32/seed0"], data["runs"]["bf16/seed0"]
    # Same seed: the same start, so close; bf16 arithmetic: not bit for bit the same.
    assert fp32["train_curve"][0][1] == pytest.approx(bf16["train_curve"][0][1], abs=0.05)
    assert [loss for _, loss in fp32["train_curve"]] != [loss for _, loss in bf16["train_curve"]]
    assert data["summary"]["verdict"] in (True, False)
    assert (tmp_path / "out" / "bf16_check.md").read_text().startswith("# bf16 autocast against fp32")
    assert (tmp_path / "out" / "bf16_check.png").stat().st_size > 0

    capsys.readouterr()
    assert check.main(argv) == 0  # everything recorded: nothing trains again
    assert "[bf16_check] finished" not in capsys.readouterr().out


def test_the_recipe_is_the_replication_studys_and_the_one_the_committed_runs_used():
    """The check keeps its own copy of the replication study's recipe (it imports no other study): the copy is
    replicate.py's FULL and QUICK but for the precision and step count the check sets, the replication's committed
    results record the same FULL, and the committed bf16 runs ran this recipe."""
    replicate = experiment_script("replication/replicate.py")
    committed = json.loads((check.HERE.parent / "replication" / "results" / "replication.json").read_text())["recipe"]
    for mode, theirs in (("full", replicate.FULL), ("quick", replicate.QUICK), ("full", committed)):
        ours = check.RECIPES[mode]
        assert {key: theirs[key] for key in ("model", "block_size", "vocab_size", "corpus")} == {
            key: ours[key] for key in ("model", "block_size", "vocab_size", "corpus")}
        pretrain = {k: v for k, v in theirs["pretrain"].items() if k not in ("precision", "max_steps")}
        assert pretrain and pretrain == {k: v for k, v in ours["pretrain"].items() if k in pretrain}
    ran = json.loads((check.HERE / "results" / "bf16_check.json").read_text())["recipe"]
    assert check.recipe_of(check.build_parser().parse_args([])) == ran
