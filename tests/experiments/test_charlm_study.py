"""experiments/charlm: the character-level study's data, windows, masks, arms, resumable cells and report, on a small
synthetic text written for each test (so nothing skips)."""

import json
import math
import random
import subprocess
import sys

import pytest
import torch
from conftest import experiment_script

study = experiment_script("charlm/study.py")
report = experiment_script("charlm/report.py")

# A tiny model on the CPU recipe's context (64) and batch (12): 8 iterations, evaluated and checkpointed every 4.
TINY = ["--width", "16", "--heads", "2", "--layers", "2", "--iters", "8", "--eval-interval", "4", "--threads", "1"]


def synthetic_text(characters: int = 8000, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = ["to", "be", "or", "not", "the", "king", "queen", "my", "lord", "shall", "thou", "art", "what"]
    lines = []
    while sum(len(line) + 1 for line in lines) < characters:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + rng.choice(".,;!?"))
    return "\n".join(lines) + "\n"


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text(synthetic_text())
    return path


def run(tmp_path, text_file, *arguments):
    return study.main(["--data", str(text_file), "--results-dir", str(tmp_path / "cells"), "--work-dir",
                       str(tmp_path / "work"), *TINY, *arguments])


def cell_file(tmp_path, name):
    return json.loads((tmp_path / "cells" / f"{name}.json").read_text())


def test_a_tiny_cell_of_each_objective_writes_a_complete_result_and_is_not_rerun(tmp_path, text_file, capsys):
    assert run(tmp_path, text_file, "--objective", "clm", "--arm", "gpt2", "--seed", "1") == 0
    assert run(tmp_path, text_file, "--objective", "mlm", "--arm", "shared", "--seed", "2") == 0
    for name, arm, objective in (("clm-cpu-w16-h2-l2-i8-gpt2-seed1", "gpt2", "clm"),
                                 ("mlm-cpu-w16-h2-l2-i8-shared-seed2", "shared", "mlm")):
        cell = cell_file(tmp_path, name)
        assert (cell["arm"], cell["objective"], cell["name"]) == (arm, objective, name)
        assert [point["iteration"] for point in cell["curve"]] == [0, 4, 8]
        assert [point["tokens"] for point in cell["curve"]] == [0, 4 * 12 * 64, 8 * 12 * 64]
        assert cell["final_validation_loss"] == cell["curve"][-1]["loss"]
        assert 0 < cell["final_validation_loss"] < cell["curve"][0]["loss"] + 1
        assert cell["hyperparameters"]["width"] == 16 and cell["hyperparameters"]["context"] == 64
        assert cell["vocab_size"] == len(set(text_file.read_text()[: int(0.9 * len(text_file.read_text()))]))
        assert 1.0 < cell["unigram_validation_loss"] < math.log(cell["vocab_size"])
        assert cell["parameters"] > 0 and cell["train_tokens_per_second"] > 0 and cell["train_seconds"] > 0
        assert cell["precision"] in ("bf16", "fp32") and cell["device"] in ("cpu", "cuda")
        assert cell["torch_threads"] == 1 and cell["cpu"] and cell["torch"] and cell["transformers"]
        assert len(cell["git_commit"]) == 40 and len(cell["data_sha256"]) == 64
    assert cell_file(tmp_path, "clm-cpu-w16-h2-l2-i8-gpt2-seed1")["model"]["class"] == "gpt2"
    capsys.readouterr()
    assert run(tmp_path, text_file, "--objective", "clm", "--arm", "gpt2", "--seed", "1") == 0
    assert "finished already" in capsys.readouterr().out


def test_the_vocabulary_is_the_training_texts_and_an_unseen_validation_character_is_refused(tmp_path):
    text = synthetic_text(2000)
    data_path = tmp_path / "ok.txt"
    data_path.write_text(text)
    data = study.load_data(data_path, 0.9)
    split = int(0.9 * len(text))
    assert data.vocabulary == sorted(set(text[:split]))
    assert "".join(data.vocabulary[i] for i in data.validation_ids) == text[split:]
    # A 'Z' only in the validation part, at a known line and column.
    lines = text.splitlines(keepends=True)
    line_index = next(i for i in range(len(lines)) if sum(map(len, lines[:i])) > split + 10)
    lines[line_index] = lines[line_index][:3] + "Z" + lines[line_index][3:]
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    with pytest.raises(SystemExit, match=rf"line {line_index + 1}, column 4: .*'Z'"):
        study.load_data(bad, 0.9)


def test_clm_targets_are_the_next_characters_64_per_window():
    ids = torch.arange(1000) % 50
    windows = study.TrainWindows(ids, length=30, context=64, seed=3, objective="clm", mask_probability=0.15,
                                 vocab_size=50)
    for k in range(30):
        item = windows[k]
        assert item["input_ids"].shape == item["labels"].shape == (64,)
        start = int(item["input_ids"][0])  # ids are positions mod 50: find the window's start in the text
        matches = [s for s in range(len(ids) - 64) if torch.equal(ids[s:s + 64], item["input_ids"])]
        assert matches and all(torch.equal(item["labels"], ids[s + 1:s + 65]) for s in matches), start
        assert torch.equal(windows[k]["input_ids"], item["input_ids"])  # the same whenever it is read
    assert not torch.equal(windows[0]["input_ids"], study.TrainWindows(ids, 30, 64, 4, "clm", 0.15, 50)[0]["input_ids"])
    validation = study.validation_windows(ids, 64, "clm", 0.15, 50)
    assert len(validation) == len(range(0, 1000 - 64, 64))
    for index, example in enumerate(validation):  # every non-overlapping window, targets shifted by one
        assert torch.equal(example["input_ids"], ids[64 * index:64 * index + 64])
        assert torch.equal(example["labels"], ids[64 * index + 1:64 * index + 65])


def test_mlm_masks_follow_bert_and_validation_masks_are_the_same_for_every_run_and_arm(tmp_path, text_file):
    ids = torch.randint(40, (5000,), generator=torch.Generator().manual_seed(0))
    first = study.validation_windows(ids, 64, "mlm", 0.15, 40)
    again = study.validation_windows(ids.clone(), 64, "mlm", 0.15, 40)
    assert study.examples_sha256(first) == study.examples_sha256(again)
    selected = masked = 0
    for index, example in enumerate(first):
        labelled = example["labels"] != -100
        assert int(labelled.sum()) == round(0.15 * 64)  # the same number of targets in every window
        original = ids[64 * index:64 * index + 64]
        assert torch.equal(example["labels"][labelled], original[labelled])
        assert torch.equal(example["input_ids"][~labelled], original[~labelled])  # only selected positions change
        selected += int(labelled.sum())
        masked += int((example["input_ids"][labelled] == 40).sum())
    assert 0.7 < masked / selected < 0.9  # 80% [MASK] (id V = 40)
    training = study.TrainWindows(ids, 400, 64, 1, "mlm", 0.15, 40)
    share = sum(int((training[k]["labels"] != -100).sum()) for k in range(400)) / (400 * 64)
    assert 0.13 < share < 0.17 and torch.equal(training[7]["input_ids"], training[7]["input_ids"])
    # Two arms and two seeds are scored on the very same validation windows and masks.
    assert run(tmp_path, text_file, "--objective", "mlm", "--arm", "bert", "--seed", "1", "--iters", "4") == 0
    assert run(tmp_path, text_file, "--objective", "mlm", "--arm", "standard", "--seed", "2", "--iters", "4") == 0
    bert, standard = (cell_file(tmp_path, f"mlm-cpu-w16-h2-l2-i4-{arm}") for arm in ("bert-seed1", "standard-seed2"))
    assert bert["validation_sha256"] == standard["validation_sha256"] and bert["validation_windows"] > 0


@pytest.mark.slow
def test_a_cell_killed_after_a_checkpoint_resumes_to_the_uninterrupted_final_loss(tmp_path, text_file):
    arguments = ["--objective", "clm", "--arm", "standard", "--seed", "1"]
    assert run(tmp_path / "whole", text_file, *arguments) == 0
    whole = cell_file(tmp_path / "whole", "clm-cpu-w16-h2-l2-i8-standard-seed1")

    killed = tmp_path / "killed"
    command = [sys.executable, str(study.HERE / "study.py"), "--data", str(text_file), "--results-dir",
               str(killed / "cells"), "--work-dir", str(killed / "work"), *TINY, *arguments,
               "--stop-after-checkpoint", "4"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == -9, finished.stderr[-2000:]  # SIGKILLed right after checkpoint-4 was written
    run_dir = killed / "work" / "clm-cpu-w16-h2-l2-i8-standard-seed1"
    assert not (killed / "cells").exists() or not any((killed / "cells").iterdir())
    checkpoint = run_dir / "checkpoint-4"
    from transformers.trainer_pt_utils import safe_globals

    pieces = sorted(path.name for path in checkpoint.glob("*.pt*"))
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(pieces)
    with safe_globals():  # Trainer's allowlist: numpy arrays and dtypes only (the RNG state holds numpy's)
        for piece in pieces:  # optimizer, scheduler and RNG state load as Trainer loads them, without pickle code
            torch.load(checkpoint / piece, weights_only=True)
    # What a kill during the next save leaves: a checkpoint folder without trainer_state.json. It must be ignored.
    (run_dir / "checkpoint-8").mkdir()
    (run_dir / "checkpoint-8" / "model.safetensors").write_bytes(b"cut short")
    assert study.latest_complete_checkpoint(run_dir) == checkpoint

    assert run(killed, text_file, *arguments) == 0
    resumed = cell_file(killed, "clm-cpu-w16-h2-l2-i8-standard-seed1")
    assert resumed["resumed_from"] == "checkpoint-4"
    assert resumed["final_validation_loss"] == pytest.approx(whole["final_validation_loss"], abs=1e-6)
    assert [p["iteration"] for p in resumed["curve"]] == [0, 4, 8]
    for a, b in zip(resumed["curve"], whole["curve"]):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)


def test_the_parameter_matched_arm_is_within_one_ffn_unit_of_standard():
    for objective in study.OBJECTIVES:
        for recipe in (study.RECIPES["cpu"], study.make_cell(objective, "shared", 1, "cpu", {"width": 256,
                                                                                           "heads": 8}, "auto").recipe):
            vocab = study.model_vocab_size(objective, 65)
            standard = study.parameter_count("standard", objective, recipe, vocab)
            size, target = study.matched_intermediate_size("shared-matched", objective, recipe, vocab)
            matched = study.parameter_count("shared-matched", objective, recipe, vocab)
            unit = (study.parameter_count("shared", objective, recipe, vocab, size + 1)
                    - study.parameter_count("shared", objective, recipe, vocab, size))
            assert target == standard and size > recipe.ffn
            assert abs(matched - standard) <= unit / 2, (objective, recipe.width, matched, standard)
            assert study.parameter_count("shared", objective, recipe, vocab) < standard - unit


def test_an_attention_type_the_package_lacks_is_refused_by_name(monkeypatch):
    monkeypatch.setitem(study.ARMS, "new-type", {"attention_type": "not_a_type"})
    with pytest.raises(SystemExit, match="SharedBertConfig refuses .*not_a_type"):
        study.build_model("new-type", "clm", study.RECIPES["cpu"], 65)
    with pytest.raises(SystemExit, match="for clm only"):
        study.build_model("gpt2", "mlm", study.RECIPES["cpu"], 66)


def test_the_schedule_is_nanogpts():
    recipe = study.RECIPES["cpu"]
    assert study.learning_rate_factor(0, recipe) == pytest.approx(1 / 101)
    assert study.learning_rate_factor(99, recipe) == pytest.approx(100 / 101)
    assert study.learning_rate_factor(100, recipe) == pytest.approx(1.0)
    assert study.learning_rate_factor(1050, recipe) == pytest.approx((1e-4 + 0.5 * 9e-4) / 1e-3)
    assert study.learning_rate_factor(2000, recipe) == pytest.approx(0.1)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=10, n_positions=8))
    optimizer, _ = study.optimizer_and_schedule(model, recipe)
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decayed["params"])
    assert plain["weight_decay"] == 0.0 and all(p.dim() < 2 for p in plain["params"])


def _cell(arm, seed, loss, setting="clm-cpu"):
    return {"setting": setting, "arm": arm, "seed": seed, "final_validation_loss": loss, "parameters": 1000,
            "train_tokens_per_second": 100.0 + seed, "precision": "fp32", "unigram_validation_loss": 3.35,
            "curve": [{"iteration": 0, "tokens": 0, "loss": 4.2}, {"iteration": 10, "tokens": 7680, "loss": loss}]}


def test_the_report_pairs_seeds_and_applies_the_declared_rule(tmp_path):
    standard = {1: 2.0, 2: 2.1, 3: 2.2}
    differences = {"behind": [0.10, 0.12, 0.11], "level": [0.001, -0.002, 0.003], "better": [-0.1, -0.12, -0.11],
                   "unclear": [0.05, -0.05, 0.0], "edge": [0.03, 0.01, 0.02], "flip": [0.03, 0.05, 0.07]}
    cells = [_cell("standard", seed, loss) for seed, loss in standard.items()]
    for arm, ds in differences.items():
        cells += [_cell(arm, seed, standard[seed] + d) for seed, d in zip((1, 2, 3), ds)]
    cells += [_cell("extra", seed, standard.get(seed, 9.0) + 0.5) for seed in (1, 4)]  # seed 4 has no pair
    folder = tmp_path / "cells"
    folder.mkdir()
    for index, cell in enumerate(cells):
        (folder / f"{index}.json").write_text(json.dumps(cell))
    assert report.main(["--cells", str(folder), "--output-dir", str(tmp_path)]) == 0
    arms = json.loads((tmp_path / "summary.json").read_text())["clm-cpu"]["arms"]
    for arm, ds in differences.items():
        mean = sum(ds) / 3
        se = math.sqrt(sum((d - mean) ** 2 for d in ds) / 2) / math.sqrt(3)
        assert arms[arm]["paired"]["mean"] == pytest.approx(mean)
        assert arms[arm]["paired"]["standard_error"] == pytest.approx(se)
    verdicts = {arm: arms[arm]["paired"]["verdict"] for arm in differences}
    assert verdicts == {"behind": "trails", "level": "on par", "better": "ahead", "unclear": "left open",
                        "edge": "left open", "flip": "left open"}  # edge: mean 0.02 ± 4.30×0.0058 spans the margin
    # flip: 0.05 ± 0.0115; mean - 2 SE = 0.027 clears the margin, mean - 4.30 SE = 0.0003 does not
    flip = arms["flip"]["paired"]
    assert flip["verdict_2se"] == "trails" and flip["t_quantile"] == pytest.approx(4.3027, abs=1e-4)
    assert flip["differences"] == pytest.approx([0.03, 0.05, 0.07]) and flip["margin"] == 0.02
    assert flip["higher_is_better"] is False
    assert flip["interval"][0] == pytest.approx(0.05 - 4.302653 * 0.02 / math.sqrt(3), abs=1e-6)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(f["setting"], f["arm"], f["was"], f["now"]) for f in summary["flips"]] == [
        ("clm-cpu", "flip", "trails", "left open")]
    assert arms["extra"]["paired"]["seeds"] == [1] and arms["extra"]["paired"]["verdict"] == "left open"
    assert arms["standard"]["mean"] == pytest.approx(2.1) and "paired" not in arms["standard"]
    assert arms["standard"]["standard_error"] == pytest.approx(0.1 / math.sqrt(3))
    text = (tmp_path / "summary.md").read_text()
    assert "| `behind` | 1, 2, 3 |" in text and "trails" in text
    assert "| left open (was: trails with 2 SE) |" in text and "| clm-cpu | `flip` |" in text
    assert (tmp_path / "curves-clm-cpu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_judges_how_the_gap_changes_along_a_series_by_the_declared_rule(tmp_path):
    # Width series: gaps of 0.10, 0.20 and 0.20 (tight) -> grows, stays, and grows first to last; seeds 4 and 5 of the
    # CPU recipe are left out of the gap, and a setting without `shared` cells is skipped (the series is incomplete).
    gaps = {"clm-cpu": [0.10, 0.11, 0.09, 5.0, 5.0], "clm-cpu-w256-h8": [0.20, 0.205, 0.195],
            "clm-cpu-w384-h12": [0.20, 0.203, 0.197]}
    cells = []
    for setting, ds in gaps.items():
        for seed, d in enumerate(ds, start=1):
            cells += [_cell("standard", seed, 2.0, setting), _cell("shared", seed, 2.0 + d, setting)]
    cells += [_cell("standard", seed, 2.0, "clm-cpu-w256-h2") for seed in (1, 2, 3)]
    cells += [_cell(arm, seed, 2.0, "clm-cpu-w256-h4") for arm in ("standard", "shared") for seed in (1, 2)]
    summary = report.summarise(cells)
    width, heads = report.scaling(summary)
    assert width["complete"] and not heads["complete"]
    assert [g["mean"] for g in width["gaps"]] == pytest.approx([0.10, 0.20, 0.20])
    assert width["gaps"][0]["seeds"] == [1, 2, 3]
    assert width["gaps"][0]["share_of_learning"] == pytest.approx(0.10 / (3.35 - 2.0))
    assert [(s["from"], s["to"], s["verdict"]) for s in width["steps"]] == [
        ("clm-cpu", "clm-cpu-w256-h8", "grows"), ("clm-cpu-w256-h8", "clm-cpu-w384-h12", "stays"),
        ("clm-cpu", "clm-cpu-w384-h12", "grows")]
    first = width["steps"][0]
    assert first["change"] == pytest.approx(0.10)
    assert first["standard_error"] == pytest.approx(math.sqrt(0.01 ** 2 + 0.005 ** 2) / math.sqrt(3))
    # Welch's degrees of freedom (not 4), and the 95% t factor they give
    assert 2 < first["degrees_of_freedom"] < 4 and first["t_quantile"] > 2.776
    stays = width["steps"][1]
    assert stays["interval"][1] < 0.02 and stays["verdict_2se"] == "stays"
    # h2 has no shared cells, h4 only seeds 1 and 2: incomplete, judged on what there is
    assert [g["setting"] for g in heads["gaps"]] == ["clm-cpu-w256-h4", "clm-cpu-w256-h8"]
    assert heads["gaps"][0]["seeds"] == [1, 2] and len(heads["steps"]) == 1
    shrink = report.trend(report.compare([0.2, 0.21, 0.19], [0.0] * 3), report.compare([0.1, 0.11, 0.09], [0.0] * 3))
    assert shrink["verdict"] == "shrinks" and shrink["mean"] == pytest.approx(-0.1)
    text = "\n".join(report.scaling_markdown([width, heads]))
    assert "### heads at width 256 (incomplete)" in text
    assert "| clm-cpu | clm-cpu-w256-h8 | 0.100 ± 0.006 | [" in text and "| grows |" in text


def test_the_mlm_nulls_are_scored_on_the_cells_own_validation_masks(tmp_path, text_file):
    import hashlib

    data = study.load_data(text_file, 0.9)
    windows = study.validation_windows(data.validation_ids, 64, "mlm", 0.15, data.vocab_size)
    cell = {"data_sha256": hashlib.sha256(text_file.read_bytes()).hexdigest(),
            "validation_sha256": study.examples_sha256(windows),
            "hyperparameters": {"train_fraction": 0.9, "context": 64, "mask_probability": 0.15}}
    nulls = report.mlm_nulls(text_file, cell)
    seen, drawn = nulls["positions"], nulls["corruption_drawn"]
    assert seen["selected"] == 10 * len(windows) == sum(drawn.values())
    assert seen["mask"] == drawn["mask"] and seen["mask"] + seen["random"] + seen["unchanged"] == seen["selected"]
    assert seen["unchanged"] >= drawn["unchanged"]  # a random draw can hit the target itself
    # under [MASK] the context-free predictor is the unigram model; a visible character helps it where it is the target
    assert nulls["context_free"]["mask"] == pytest.approx(nulls["unigram"]["mask"])
    assert nulls["context_free"]["unchanged"] < nulls["unigram"]["unchanged"]
    assert nulls["context_free"]["selected"] < nulls["unigram"]["selected"]
    with pytest.raises(SystemExit, match="fingerprint"):
        report.mlm_nulls(text_file, {**cell, "validation_sha256": "0" * 64})
