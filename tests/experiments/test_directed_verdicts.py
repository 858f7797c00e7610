"""experiments/directed-attention/verdicts.py: the study's declared rule (the excess e over half of shared's gap),
on made-up cells."""

import math

import pytest
from conftest import experiment_script

verdicts = experiment_script("directed-attention/verdicts.py")


def _cell(arm, seed, loss, setting="clm-cpu", precision="bf16", cpu="AMD EPYC"):
    return {"setting": setting, "arm": arm, "seed": seed, "final_validation_loss": loss, "parameters": 1000,
            "precision": precision, "cpu": cpu}


def _cells(types: dict, setting="clm-cpu", shared_gap=(0.2, 0.2, 0.2), **hardware):
    cells = []
    for seed, gap in enumerate(shared_gap, start=1):
        cells += [_cell("standard", seed, 2.0, setting), _cell("shared", seed, 2.0 + gap, setting)]
    for arm, to_standard in types.items():
        cells += [_cell(arm, seed, 2.0 + d, setting, **hardware) for seed, d in enumerate(to_standard, start=1)]
    return cells


def test_the_rule_judges_the_excess_over_half_of_shareds_gap():
    judged = verdicts.judge(_cells({"shared-lowrank-query": [0.05, 0.06, 0.04],   # closes 75%: e = -0.05
                                    "shared-head-query": [0.15, 0.16, 0.14],      # closes 25%: e = +0.05
                                    "shared-kv": [0.08, 0.12, 0.10]}))            # e = 0 ± 0.012: left open
    rows = judged["clm-cpu"]["types"]
    assert rows["shared-lowrank-query"]["verdict"] == "closes at least half"
    assert rows["shared-lowrank-query"]["excess"]["mean"] == pytest.approx(-0.05)
    assert rows["shared-lowrank-query"]["share_closed"] == pytest.approx(0.75)
    assert rows["shared-head-query"]["verdict"] == "closes less than half"
    assert rows["shared-kv"]["verdict"] == "left open"
    assert rows["shared-kv"]["excess"]["standard_error"] == pytest.approx(0.02 / math.sqrt(3))
    assert rows["shared-lowrank-query"]["to_shared"]["mean"] == pytest.approx(-0.15)


def test_no_gap_to_close_too_few_seeds_or_mixed_hardware_leave_it_open():
    no_gap = verdicts.judge(_cells({"shared-kv": [-0.3, -0.3, -0.3]}, shared_gap=(0.004, -0.004, 0.0)))
    assert no_gap["clm-cpu"]["shared_gap"]["verdict"] == "on par"
    assert no_gap["clm-cpu"]["types"]["shared-kv"]["verdict"] == "left open"
    assert no_gap["clm-cpu"]["types"]["shared-kv"]["share_closed"] is None  # no gap, so no share of it
    shared_ahead = verdicts.judge(_cells({"shared-kv": [-0.1, -0.1, -0.1]}, shared_gap=(-0.3, -0.3, -0.3)))
    assert shared_ahead["clm-cpu"]["shared_gap"]["verdict"] == "ahead"
    assert shared_ahead["clm-cpu"]["types"]["shared-kv"]["share_closed"] is None
    two_seeds = verdicts.judge(_cells({"shared-kv": [0.0, 0.0]}))
    assert two_seeds["clm-cpu"]["types"]["shared-kv"]["verdict"] == "left open"
    mixed = verdicts.judge(_cells({"shared-kv": [0.0, 0.0, 0.0]}, precision="fp32"))
    assert mixed["clm-cpu"]["types"]["shared-kv"]["verdict"].startswith("not judged")
    undeclared = verdicts.judge(_cells({"shared-kv": [0.0, 0.0, 0.0]}, setting="clm-cpu-w384-h12"))
    assert undeclared == {}


def test_main_writes_both_files(tmp_path):
    import json

    folder = tmp_path / "cells"
    folder.mkdir()
    for index, cell in enumerate(_cells({"shared-kv": [0.05, 0.06, 0.04]}, setting="mlm-cpu")):
        (folder / f"{index}.json").write_text(json.dumps(cell))
    assert verdicts.main(["--cells", str(folder), "--output-dir", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "verdicts.json").read_text())["mlm-cpu"]["types"]["shared-kv"]["verdict"] == (
        "closes at least half")
    assert "| `shared-kv` | 1, 2, 3 |" in (tmp_path / "verdicts.md").read_text()


def test_the_rule_reads_the_t_interval_and_records_what_2_se_said():
    # e = -0.05, -0.02, -0.08 (gap 0.2): mean -0.05, SE 0.0173; -0.05 + 2 SE < 0 but -0.05 + 4.30 SE > 0
    judged = verdicts.judge(_cells({"shared-kv": [0.05, 0.08, 0.02]}))
    row = judged["clm-cpu"]["types"]["shared-kv"]
    assert row["verdict"] == "left open" and row["verdict_2se"] == "closes at least half"
    assert row["excess"]["differences"] == pytest.approx([-0.05, -0.02, -0.08])
    assert row["excess"]["margin"] == 0.0 and row["excess"]["higher_is_better"] is False
    assert row["excess"]["t_quantile"] == pytest.approx(4.3027, abs=1e-4)
    assert row["to_standard"]["margin"] == 0.02 and row["to_standard"]["differences"] == pytest.approx([0.05, 0.08, 0.02])
    assert verdicts.flips(judged) == [{"setting": "clm-cpu", "arm": "shared-kv", "was": "closes at least half",
                                       "now": "left open"}]
    assert "left open (was: closes at least half with 2 SE)" in verdicts.markdown(judged)


def test_the_committed_verdicts_are_what_the_committed_charlm_cells_give_by_the_charlm_rule():
    """The study reads the charlm study's committed cells and declares the charlm rule itself (it imports no other
    study's code): the verdicts it publishes are recomputed from those files, and each comparison to `standard` is the
    one charlm's own report makes of the same losses."""
    import json

    report = experiment_script("charlm/report.py")
    assert verdicts.MARGIN == report.MARGIN
    committed = json.loads((verdicts.HERE / "results" / "verdicts.json").read_text())
    judged = verdicts.judge(verdicts.load_cells(verdicts.CHARLM_CELLS))
    assert judged and json.loads(json.dumps(judged)) == {k: v for k, v in committed.items() if k != "flips"}
    loss = {}
    for cell in verdicts.load_cells(verdicts.CHARLM_CELLS):
        loss.setdefault((cell["setting"], cell["arm"]), {})[cell["seed"]] = cell["final_validation_loss"]
    for setting, row in judged.items():
        for arm, type_row in row["types"].items():
            seeds = type_row["seeds"]
            on = {name: {s: loss[setting, name][s] for s in seeds} for name in (arm, "standard")}
            assert type_row["to_standard"] == report.recorded(report.compare(on[arm], on["standard"])), (setting, arm)
