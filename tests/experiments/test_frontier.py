"""experiments/frontier: the harness's additions it relies on (frontier arms, matching by width, budgets, FLOPs, MLM
views and context-free nulls) and its report's declared rules, on tiny models and made-up cells."""

import dataclasses
import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT, experiment_script
from test_charlm_study import TINY, synthetic_text

study = experiment_script("charlm/study.py")
frontier = experiment_script("frontier/frontier.py")
report = experiment_script("frontier/report.py")


@pytest.mark.slow
def test_every_frontier_arm_is_a_harness_arm_and_builds_at_both_widths():
    assert set(frontier.ARMS) <= set(study.ARMS)
    assert len(set(frontier.ARMS)) == len(frontier.ARMS)
    for width, heads in ((128, 4), (256, 8)):
        recipe = study.make_cell("clm", "standard", 1, "cpu", {"width": width, "heads": heads}, "auto").recipe
        with torch.device("meta"):
            for arm in frontier.ARMS:
                model, details = study.build_model(arm, "clm", recipe, 65)
                assert study.attention_projection_parameters(model) > 0, arm


def test_setting_names_are_the_harnesss_and_the_grid_runs_seed_by_seed(tmp_path):
    for width, overrides in ((128, {}), (256, {"width": 256, "heads": 8})):
        for objective, options in frontier.OBJECTIVES.items():
            iters = {"iters": 6000} if options else {}
            cell = study.make_cell(objective, "standard", 1, "cpu", {**overrides, **iters}, "auto")
            assert frontier.setting_name(objective, width) == cell.setting
    commands = frontier.harness_commands(["a", "b"], [1, 2], ["clm", "mlm"], 128, tmp_path, 1)
    assert [(c[c.index("--seeds") + 1], c[c.index("--objective") + 1]) for c in commands] == [
        ("1", "clm"), ("1", "mlm"), ("2", "clm"), ("2", "mlm")]
    assert all(c[c.index("--arms") + 1:c.index("--arms") + 3] == ["a", "b"] for c in commands)


def test_matching_by_width_picks_the_width_whose_count_is_closest():
    recipe = study.RECIPES["cpu"]
    width, target = study.matched_width("standard-narrow", "clm", recipe, 65)
    assert width % recipe.heads == 0 and width < recipe.width
    assert target == study.parameter_count("shared", "clm", recipe, 65)

    def count(w):
        import dataclasses

        return study.parameter_count("standard-narrow", "clm", dataclasses.replace(recipe, width=w), 65, 4 * w)

    gap = abs(count(width) - target)
    assert gap < abs(count(width - recipe.heads) - target) and gap < abs(count(width + recipe.heads) - target)


def test_matching_by_width_searches_only_widths_a_rank_r_query_can_be_built_at():
    """A rank-r query with r = width / 8 cannot be built at width 4 (r = 0): the search skips such widths instead of
    stopping at SharedBertConfig's refusal, and the matched arm keeps its budget under a tenth of standard's."""
    import dataclasses

    recipe = study.RECIPES["cpu"]
    width, target = study.matched_width("mqa-query-eighth-att1-wide", "clm", recipe, 65)
    assert width > recipe.width and width % recipe.heads == 0 and width // 8 >= 1
    assert target == study.parameter_count("standard", "clm", recipe, 65)
    wide = study.describe("mqa-query-eighth-att1-wide", "clm", recipe, 65)
    assert wide["config"]["hidden_size"] == width and wide["config"]["query_rank"] == width // 8
    standard = study.describe("standard", "clm", recipe, 65)
    assert wide["attention_projection_parameters"] < standard["attention_projection_parameters"] / 10
    assert abs(wide["parameters"] - target) < abs(study.parameter_count(
        "mqa-query-eighth-att1-wide", "clm", dataclasses.replace(recipe, width=width + recipe.heads), 65,
        4 * (width + recipe.heads)) - target)


def test_budgets_and_flops_count_what_is_stored_and_what_is_computed():
    recipe = study.RECIPES["cpu"]
    described = {arm: study.describe(arm, "clm", recipe, 65)
                 for arm in ("standard", "standard-att1", "mqa", "shared-att1", "standard-narrow")}
    d, layers = recipe.width, recipe.layers
    assert described["standard"]["attention_projection_parameters"] == layers * 3 * (d * d + d)
    assert described["standard-att1"]["attention_projection_parameters"] == 3 * (d * d + d)  # stored once
    assert described["mqa"]["attention_projection_parameters"] == layers * (d * d + d + 2 * (d * 32 + 32))
    # Sharing stores less but computes as much; fewer key/value heads compute less.
    assert described["standard-att1"]["training_flops_per_token"] == described["standard"]["training_flops_per_token"]
    assert described["mqa"]["training_flops_per_token"] < described["standard"]["training_flops_per_token"]
    # Forward and backward: about 6 FLOPs per matrix weight per token, plus attention's own products.
    matrices = layers * (4 * d * d + 2 * d * 4 * d) + d * 65
    assert 6 * matrices < described["standard"]["training_flops_per_token"] < 6 * matrices * 1.3
    assert described["shared-att1"]["config"] == {"attention_type": "shared", "layer_sharing": "attention",
                                                  "num_unique_layers": 1}
    assert described["standard-narrow"]["config"]["hidden_size"] == described["standard-narrow"]["model"]["width"]


def test_the_context_free_null_is_the_posterior_of_berts_corruption():
    vocabulary = ["a", "b"]
    data = study.CharData("x", "0", vocabulary, torch.tensor([0, 0, 0, 1]), torch.tensor([0]))  # u = (3/4, 1/4)
    mask_id = 2
    validation = [{"input_ids": torch.tensor([mask_id, 0, 1, 0]), "labels": torch.tensor([1, 0, 0, -100])}]
    nulls = study.mlm_nulls(data, validation)
    u = [0.75, 0.25]
    # Under [MASK]: u. Visible c: p(t | c) ∝ u(t)·(½[t = c] + ½/V), V = 2.
    posterior_0 = [u[0] * (0.5 + 0.25), u[1] * 0.25]
    expected = [-math.log(u[1]), -math.log(posterior_0[0] / sum(posterior_0))]
    posterior_1 = [u[0] * 0.25, u[1] * (0.5 + 0.25)]
    expected.append(-math.log(posterior_1[0] / sum(posterior_1)))  # the target 0 replaced by a visible 1
    assert nulls["positions"] == {"selected": 3, "mask": 1, "random": 1, "unchanged": 1}
    assert nulls["context_free"]["mask"] == pytest.approx(expected[0])
    assert nulls["context_free"]["unchanged"] == pytest.approx(expected[1])
    assert nulls["context_free"]["random"] == pytest.approx(expected[2])
    assert nulls["context_free"]["selected"] == pytest.approx(sum(expected) / 3)
    assert nulls["unigram"]["selected"] == pytest.approx(-(math.log(u[1]) + 2 * math.log(u[0])) / 3)


def test_a_tiny_mlm_cell_of_a_frontier_arm_records_its_views_nulls_and_budget(tmp_path):
    text = tmp_path / "input.txt"
    text.write_text(synthetic_text())
    assert study.main(["--data", str(text), "--results-dir", str(tmp_path / "cells"), "--work-dir",
                       str(tmp_path / "work"), *TINY, "--objective", "mlm", "--arm", "mqa-att1", "--seed", "1"]) == 0
    cell = json.loads(next((tmp_path / "cells").glob("*.json")).read_text())
    views = cell["validation_views"]
    # The model's loss on every selected position is the harness's validation loss (one evaluation, same masks).
    assert views["model"]["selected"] == pytest.approx(cell["final_validation_loss"], abs=2e-3)
    positions = views["positions"]
    assert positions["selected"] == positions["mask"] + positions["random"] + positions["unchanged"] > 0
    assert views["context_free"]["mask"] == pytest.approx(views["unigram"]["mask"])
    assert views["context_free"]["unchanged"] < views["unigram"]["unchanged"]
    assert cell["attention_projection_parameters"] == 16 * 16 + 16 + 2 * (16 * 8 + 8)  # one stored MQA layer


# --- the report's rules, on made-up cells ----------------------------------------------------------------------------

def fake_cell(setting, arm, seed, loss, commit="c" * 40, precision="bf16"):
    cell = {"setting": setting, "arm": arm, "seed": seed, "name": f"{setting}-{arm}-seed{seed}",
            "final_validation_loss": loss, "git_commit": commit, "precision": precision, "cpu": "test CPU",
            "torch": "x"}
    if setting.startswith("mlm"):
        cell["validation_views"] = {"model": {"selected": loss, "mask": loss + 0.1},
                                    "context_free": {"selected": 3.09}, "unigram": {"selected": 3.335},
                                    "positions": {"selected": 10}}
    return cell


def fake_grid(differences: dict, widths=(128, 256), seeds=(1, 2, 3, 4, 5), layers: int = frontier.LAYERS) -> dict:
    """{setting: {arm: {seed: cell}}} with standard at 2.0 (+ a seed wobble) and each arm at its difference."""
    cells = {}
    for width in widths:
        for objective in frontier.OBJECTIVES:
            setting = frontier.setting_name(objective, width, layers)
            for seed in seeds:
                base = 2.0 + 0.01 * seed
                for arm, difference in {"standard": 0.0, **differences}.items():
                    wobble = 0.002 * (seed % 2)
                    cell = fake_cell(setting, arm, seed, base + difference + wobble)
                    cells.setdefault(setting, {}).setdefault(arm, {})[seed] = cell
    return cells


@pytest.fixture
def described():
    """The committed budgets, parameters and FLOPs of every arm (frontier.py describe)."""
    if not frontier.ARMS_FILE.exists():
        pytest.skip("experiments/frontier/results/arms.json is not there: run frontier.py describe")
    return json.loads(frontier.ARMS_FILE.read_text())


def test_the_report_judges_by_the_t_interval_and_applies_the_width_256_rule(described):
    cells = fake_grid({"shared": 0.2, "standard-att1": 0.005, "mqa-att1": 0.04, "shared-att1": 0.3})
    summary = report.summarise(cells, described)
    rows = summary["settings"]["clm-cpu"]
    assert rows["standard-att1"]["against_standard"]["verdict"] == "on par"
    assert rows["shared"]["against_standard"]["verdict"] == "trails"
    assert rows["mqa-att1"]["against_standard"]["verdict"] == "trails"
    assert rows["shared"]["against_standard"]["differences"] == pytest.approx([0.2] * 5)
    assert summary["settings"]["mlm-cpu-i6000"]["shared"]["learns"] is True
    assert summary["width_256_rule"]["arms"] == ["standard", "shared", "standard-att1", "mqa-att1"]
    best = summary["best"]
    assert best["arm"] == "standard-att1" and best["carried_to_width_256"] and best["met"]
    assert best["config"]["w128"] == {"attention_type": "standard", "layer_sharing": "attention",
                                      "num_unique_layers": 1}
    # At <= 10% only shared-att1 has every seed: not carried to width 256 by the rule, and not met.
    assert summary["best_at_10"]["arm"] == "shared-att1"
    assert not summary["best_at_10"]["carried_to_width_256"] and not summary["best_at_10"]["met"]


def test_summary_md_marks_a_verdict_interim_until_the_arm_has_every_declared_seed(described):
    cells = fake_grid({"shared": 0.2}, seeds=(1, 2, 3))
    text = report.table(report.summarise(cells, described))
    assert "| interim: trails (3 of 5 seeds) |" in text
    complete = report.table(report.summarise(fake_grid({"shared": 0.2}), described))
    assert "| trails |" in complete and "interim" not in complete


def test_a_best_that_is_on_par_at_width_128_but_trails_at_256_is_not_met(described):
    cells = fake_grid({"standard-att1": 0.005})
    for seeds in (cells["clm-cpu-w256-h8"]["standard-att1"], ):
        for cell in seeds.values():
            cell["final_validation_loss"] += 0.1
    summary = report.summarise(cells, described)
    assert summary["best"]["verdicts"]["clm-w256"] == "trails" and not summary["best"]["met"]


def test_the_report_refuses_cells_of_two_commits_or_precisions(described):
    cells = fake_grid({"shared": 0.2}, widths=(128,))
    cells["clm-cpu"]["shared"][3]["git_commit"] = "d" * 40
    with pytest.raises(SystemExit, match="one commit and precision"):
        report.summarise(cells, described)


def test_the_drift_check_pairs_each_cell_with_the_charlm_cell_of_the_same_name(tmp_path, monkeypatch):
    old = tmp_path / "charlm"
    old.mkdir()
    (old / "clm-cpu-standard-seed1.json").write_text(json.dumps(
        {"final_validation_loss": 1.85, "git_commit": "e" * 40, "cpu": "old CPU", "precision": "bf16"}))
    monkeypatch.setattr(report, "CHARLM_CELLS", old)
    cells = {"clm-cpu": {"standard": {1: fake_cell("clm-cpu", "standard", 1, 1.865),
                                      2: fake_cell("clm-cpu", "standard", 2, 1.9)}}}
    drift = report.drift(cells)
    assert [row["cell"] for row in drift["cells"]] == ["clm-cpu-standard-seed1"]
    assert drift["cells"][0]["difference"] == pytest.approx(0.015) and drift["moved"] == ["clm-cpu-standard-seed1"]
    # a pair of two precisions is named as such: its difference is not the commit's alone
    assert drift["cells"][0]["new_precision"] == "bf16" and drift["other_precision"] == []
    cells["clm-cpu"]["standard"][1]["precision"] = "fp32"
    assert report.drift(cells)["other_precision"] == ["clm-cpu-standard-seed1"]


def test_the_plotted_envelope_keeps_the_points_no_other_point_beats_on_both_axes():
    points = [(0.25, 1.90), (0.5, 1.87), (0.34, 2.06), (0.67, 1.88), (1.0, 1.85), (0.5, 1.86)]
    assert report.pareto_front(points) == [(0.25, 1.90), (0.5, 1.86), (1.0, 1.85)]


query_rank = experiment_script("frontier/query_rank.py")


def test_the_query_rank_follow_up_arms_build_with_the_rank_at_a_quarter_and_an_eighth_of_the_width():
    assert set(query_rank.ARMS) <= set(study.ARMS) and query_rank.ARMS[0] == "standard"
    for width, heads in ((128, 4), (256, 8)):
        recipe = study.make_cell("clm", "standard", 1, "cpu", {"width": width, "heads": heads}, "auto").recipe
        with torch.device("meta"):
            for arm, divisor in (("mqa-query-quarter-att1", 4), ("mqa-query-eighth-att1", 8)):
                model, _ = study.build_model(arm, "clm", recipe, 65)
                attention = model.base_model.encoder.attention
                assert len(attention) == 1 and model.config.num_key_value_heads == 1
                assert model.config.query_rank == width // divisor
                # Stored: the rank-r query (A with its bias, B) and one key and one value head with biases.
                head_dim = width // heads
                expected = (width * width // divisor + width // divisor + width // divisor * width
                            + 2 * (width * head_dim + head_dim))
                assert study.attention_projection_parameters(model) == expected
        described = study.describe("mqa-query-quarter", "clm", recipe, 65)
        assert described["config"]["query_rank"] == width // 4 and "query_rank_divisor" not in described["config"]


def test_the_query_rank_follow_up_is_judged_by_the_frontiers_rule_with_its_own_arms(tmp_path):
    if not query_rank.PLAN.arms_file.exists():
        pytest.skip("experiments/frontier/query-rank/results/arms.json is not there: run query_rank.py describe")
    described = json.loads(query_rank.PLAN.arms_file.read_text())
    cells = fake_grid({"mqa-att1": 0.01, "mqa-query-quarter": 0.004, "mqa-query-quarter-att1": 0.005,
                       "mqa-query-eighth-att1": 0.08, "mqa-query-quarter-att1-ffn": 0.012})
    plan = dataclasses.replace(query_rank.PLAN, earlier_cells=tmp_path)
    summary = report.summarise(cells, described, plan)
    assert set(summary["settings"]["clm-cpu"]) == set(query_rank.ARMS)
    # No `shared` arm here: the width-256 rule carries standard and the arms within 0.05 nats.
    assert summary["width_256_rule"]["arms"] == ["standard", "mqa-att1", "mqa-query-quarter",
                                                 "mqa-query-quarter-att1", "mqa-query-quarter-att1-ffn"]
    # mqa-att1 stores 12.5% / 10.4%: over 10% at both widths, so never best_at_10.
    assert summary["best_at_10"]["arm"] == "mqa-query-quarter-att1" and summary["best_at_10"]["met"]
    assert summary["best_at_10"]["config"]["w256"]["query_rank"] == 64
    assert summary["equal_parameters"]["clm-cpu"]["mqa-query-quarter-att1-ffn"]["verdict"] == "on par"
    assert summary["sharing_orders"] == {} and summary["drift"]["cells"] == []


def test_the_query_rank_follow_up_runs_the_frontiers_grid_with_its_arms_into_its_own_folder(capsys):
    assert query_rank.main(["grid", "--seeds", "1", "--objectives", "clm", "--dry-run"]) == 0
    command = capsys.readouterr().out.split()
    assert command[command.index("--arms") + 1:command.index("--arms") + 1 + len(query_rank.ARMS)] == list(
        query_rank.ARMS)
    assert command[command.index("--results-dir") + 1].endswith("query-rank/results/cells")


query_norm = experiment_script("frontier/query_norm.py")


def _readme_rows(readme: str) -> dict:
    lines = (line.strip() for line in readme.splitlines())  # a table may be indented under a list item
    return {row[0].strip("`"): row for row in ([c.strip() for c in line.strip("|").split("|")]
                                               for line in lines if line.startswith("| `"))}


def test_the_third_follow_ups_arms_table_is_what_the_harness_builds():
    """The declared arms: the rank-r query with its code normalised (the norm's scale counted in the budget), under a
    tenth of standard's projections at both widths; the README's arms table is arms.json, and arms.json is what the
    harness builds now."""
    assert set(query_norm.ARMS) <= set(study.ARMS) and query_norm.ARMS[0] == "standard"
    described = json.loads(query_norm.PLAN.arms_file.read_text())
    readme = (query_norm.HERE / "query-norm" / "README.md").read_text(encoding="utf-8")
    arms_table = readme[readme.index("**Arms**"):readme.index("**Comparisons.**")]
    rows = _readme_rows(arms_table)
    assert set(rows) == set(query_norm.ARMS)
    for width, heads, clm in ((128, 4, "clm-cpu"), (256, 8, "clm-cpu-w256-h8")):
        recipe = study.make_cell("clm", "standard", 1, "cpu", {"width": width, "heads": heads}, "auto").recipe
        standard = described[clm]["standard"]
        for arm in query_norm.ARMS:
            assert study.describe(arm, "clm", recipe, 65) == described[clm][arm]
            share = described[clm][arm]["attention_projection_parameters"] / standard["attention_projection_parameters"]
            assert rows[arm][2 if width == 128 else 3] == f"{share:.1%}"
            assert arm == "standard" or share < 0.10
        plain, normed = described[clm]["mqa-query-quarter-att1"], described[clm]["mqa-query-quarter-norm-att1"]
        assert normed["config"]["query_latent_norm"] is True and "query_latent_norm" not in plain["config"]
        # One stored attention layer: the norm adds its r scales once.
        assert (normed["attention_projection_parameters"] - plain["attention_projection_parameters"]
                == normed["config"]["query_rank"] == width // 4)
    for arm in query_norm.ARMS:
        assert rows[arm][4] == f"{described['clm-cpu'][arm]['parameters']:,}"


def test_the_third_follow_up_runs_and_is_judged_in_its_own_folder(tmp_path, capsys):
    assert query_norm.main(["grid", "--seeds", "1", "--objectives", "clm", "--dry-run"]) == 0
    command = capsys.readouterr().out.split()
    arms = command[command.index("--arms") + 1:command.index("--arms") + 1 + len(query_norm.ARMS)]
    assert arms == list(query_norm.ARMS)
    assert command[command.index("--results-dir") + 1].endswith("query-norm/results/cells")
    described = json.loads(query_norm.PLAN.arms_file.read_text())
    cells = fake_grid({"mqa-query-quarter-att1": 0.3, "mqa-query-quarter-norm-att1": 0.004,
                       "mqa-query-eighth-norm-att1": 0.06})
    summary = report.summarise(cells, described, dataclasses.replace(query_norm.PLAN, earlier_cells=tmp_path))
    assert summary["best_at_10"]["arm"] == "mqa-query-quarter-norm-att1" and summary["best_at_10"]["met"]
    assert summary["best_at_10"]["config"]["w256"]["query_latent_norm"] is True
    assert summary["width_256_rule"]["arms"] == ["standard", "mqa-query-quarter-norm-att1"]


def test_plateau_exits_are_the_first_evaluation_below_the_threshold(tmp_path):
    def cell(arm, seed, losses, setting="mlm-cpu-i6000"):
        curve = [{"iteration": 250 * i, "loss": loss} for i, loss in enumerate(losses)]
        path = tmp_path / f"{setting}-{arm}-seed{seed}.json"
        path.write_text(json.dumps({"arm": arm, "seed": seed, "setting": setting, "curve": curve}))

    cell("a", 1, [4.2, 3.1, 2.95, 2.89, 2.5])
    cell("a", 2, [4.2, 2.0, 3.0])
    cell("b", 1, [4.2, 3.1, 3.05])
    not_mlm = {"arm": "a", "seed": 3, "setting": "clm-cpu", "curve": []}  # a causal-LM cell: never read here
    (tmp_path / "clm-cpu-a-seed3.json").write_text(json.dumps(not_mlm))
    exits = query_norm.plateau_exits(tmp_path)
    assert exits == {"a": {"seeds": {1: 750, 2: 250}, "mean": 500.0}, "b": {"seeds": {1: None}, "mean": None}}
    assert "| `b` | 1: never | — |" in query_norm.plateau_table(exits)
    falls = query_norm.end_falls(tmp_path, span=500)
    assert falls["a"]["seeds"] == {1: pytest.approx(2.95 - 2.5), 2: pytest.approx(4.2 - 3.0)}
    assert falls["b"]["mean"] == pytest.approx(4.2 - 3.05)

    # a wider cell of the same arm and seed: read only when named, never in place of the narrower one
    cell("a", 1, [4.2, 3.1, 3.1, 3.1, 3.1], setting="mlm-cpu-w256-h8-i6000")
    with pytest.raises(ValueError, match="several settings.*mlm-cpu-i6000, mlm-cpu-w256-h8-i6000"):
        query_norm.plateau_exits(tmp_path)
    with pytest.raises(ValueError, match="several settings"):
        query_norm.end_falls(tmp_path)
    assert query_norm.plateau_exits(tmp_path, "mlm-cpu-i6000") == exits
    assert query_norm.plateau_exits(tmp_path, "mlm-cpu-w256-h8-i6000") == {"a": {"seeds": {1: None}, "mean": None}}
    assert query_norm.end_falls(tmp_path, span=500, setting="mlm-cpu-i6000") == falls


def test_the_third_follow_ups_reasons_are_the_first_follow_ups_cells():
    """What chose the design, as the README quotes it: the first follow-up's plateau exits, MLM end points and causal
    LM differences at the seeds it names, recomputed from the committed cells."""
    import statistics

    readme = (query_norm.HERE / "query-norm" / "README.md").read_text(encoding="utf-8")
    why = readme[readme.index("**Why this design"):readme.index("## Method")]
    earlier = query_norm.HERE / "query-rank" / "results" / "cells"
    exits = query_norm.plateau_exits(earlier, "mlm-cpu-i6000")
    rows = _readme_rows(why)
    assert len(rows) == 6
    for arm, row in rows.items():
        quoted = dict(part.split(": ") for part in row[1].split(", "))
        assert {int(seed): int(it.replace(",", "")) for seed, it in quoted.items()} == {
            seed: exits[arm]["seeds"][seed] for seed in map(int, quoted)}
        mean = statistics.fmean(exits[arm]["seeds"][int(seed)] for seed in quoted)
        assert row[2] == f"{mean:,.0f}"
    cells = {}
    for path in earlier.glob("*.json"):
        cell = json.loads(path.read_text())
        if cell["seed"] <= 3 and cell["setting"] in ("clm-cpu", "mlm-cpu-i6000"):  # width 128's, as then
            cells[(cell["objective"], cell["arm"], cell["seed"])] = cell["final_validation_loss"]

    def clm_difference(arm):
        return statistics.fmean(cells[("clm", arm, s)] - cells[("clm", "standard", s)] for s in (1, 2, 3))

    assert f"`mqa-query-quarter-att1` +{clm_difference('mqa-query-quarter-att1'):.3f} nats" in why
    assert f"`mqa-att1` +{clm_difference('mqa-att1'):.3f}" in why
    rank_r = [v for (objective, arm, _), v in cells.items() if objective == "mlm" and "query" in arm]
    standard = [v for (objective, arm, _), v in cells.items() if objective == "mlm" and arm == "standard"]
    assert f"({min(rank_r):.2f} to {max(rank_r):.2f} nats against {min(standard):.2f} to {max(standard):.2f}" in why
    assert all(cells[("mlm", "mqa-att1", s)] < cells[("mlm", "standard", s)] for s in (1, 2, 3))


query_rank_wide = experiment_script("frontier/query_rank_wide.py")


def test_the_second_follow_ups_wide_arm_stores_under_a_tenth_at_standards_parameter_count():
    """The declared arm at both widths: width matched to `standard`'s parameters, rank width / 8, one stored attention
    layer with one key/value head, under 10% of standard's projections; its README's arms table is arms.json."""
    assert set(query_rank_wide.ARMS) <= set(study.ARMS) and query_rank_wide.ARMS[0] == "standard"
    described = json.loads(query_rank_wide.PLAN.arms_file.read_text())
    readme = (query_rank_wide.HERE / "query-rank-wide" / "README.md").read_text(encoding="utf-8")
    rows = _readme_rows(readme[readme.index("**Arms**"):readme.index("**Comparisons.**")])
    assert set(rows) == set(query_rank_wide.ARMS)
    for width, heads, clm in ((128, 4, "clm-cpu"), (256, 8, "clm-cpu-w256-h8")):
        recipe = study.make_cell("clm", "standard", 1, "cpu", {"width": width, "heads": heads}, "auto").recipe
        fresh = study.describe("mqa-query-eighth-att1-wide", "clm", recipe, 65)
        assert fresh == described[clm]["mqa-query-eighth-att1-wide"]  # arms.json is what the harness builds now
        standard = described[clm]["standard"]
        assert abs(fresh["parameters"] - standard["parameters"]) < 0.01 * standard["parameters"]
        assert fresh["model"]["width"] > width and fresh["config"]["query_rank"] == fresh["model"]["width"] // 8
        for arm in query_rank_wide.ARMS:
            share = described[clm][arm]["attention_projection_parameters"] / standard["attention_projection_parameters"]
            assert rows[arm][3 if width == 128 else 4] == f"{share:.1%}"
            assert arm == "standard" or share < 0.10
    assert rows["mqa-query-eighth-att1-wide"][2] == "152 / 304"
    wide_clm = described["clm-cpu"]["mqa-query-eighth-att1-wide"]
    assert rows["mqa-query-eighth-att1-wide"][5] == f"{wide_clm['parameters']:,}"


def test_the_second_follow_up_runs_and_is_judged_in_its_own_folder(tmp_path, capsys):
    assert query_rank_wide.main(["grid", "--seeds", "1", "--objectives", "clm", "--dry-run"]) == 0
    command = capsys.readouterr().out.split()
    assert command[command.index("--arms") + 1:command.index("--arms") + 4] == list(query_rank_wide.ARMS)
    assert command[command.index("--results-dir") + 1].endswith("query-rank-wide/results/cells")
    described = json.loads(query_rank_wide.PLAN.arms_file.read_text())
    cells = fake_grid({"mqa-query-eighth-att1": 0.06, "mqa-query-eighth-att1-wide": 0.004})
    summary = report.summarise(cells, described, dataclasses.replace(query_rank_wide.PLAN, earlier_cells=tmp_path))
    assert summary["best_at_10"]["arm"] == "mqa-query-eighth-att1-wide" and summary["best_at_10"]["met"]
    assert summary["best_at_10"]["config"]["w128"]["hidden_size"] == 152
    assert summary["equal_parameters"]["clm-cpu"]["mqa-query-eighth-att1-wide"]["verdict"] == "on par"


depth = experiment_script("frontier/depth.py")


@pytest.mark.parametrize("objective", ["clm", "mlm"])
@pytest.mark.parametrize("width", [128, 256])
@pytest.mark.parametrize("layers", [4, 8])
def test_the_frontiers_setting_names_are_the_harnesss_at_every_depth(objective, width, layers):
    """The report finds a study's cells by the setting the harness writes into them: the names must agree, with the
    depth tagged only where it is not the CPU recipe's (so the earlier studies' settings are unchanged)."""
    overrides = {"width": width, "heads": width // 32} if width != 128 else {}
    overrides |= {"layers": layers} if layers != frontier.LAYERS else {}
    overrides |= {"iters": 6000} if objective == "mlm" else {}
    cell = study.make_cell(objective, "standard", 1, "cpu", overrides, "auto")
    assert frontier.setting_name(objective, width, layers) == cell.setting
    assert cell.recipe.layers == layers


def test_the_fourth_follow_ups_arms_store_what_its_readme_says_at_eight_layers():
    """The declared arms at both widths, 8 layers: arms.json is what the harness builds now, the README's arms table
    is arms.json, the multi-query arms store under a tenth and the wide one is matched to `standard`'s parameters."""
    assert set(depth.ARMS) <= set(study.ARMS) and depth.ARMS[0] == "standard" and depth.PLAN.layers == 8
    described = json.loads(depth.PLAN.arms_file.read_text())
    assert sorted(described) == sorted(depth.PLAN.setting(o, w) for o in frontier.OBJECTIVES for w in (128, 256))
    readme = (depth.HERE / "depth" / "README.md").read_text(encoding="utf-8")
    rows = _readme_rows(readme[readme.index("**Arms**"):readme.index("**Comparisons.**")])
    assert set(rows) == set(depth.ARMS)
    for width, heads in ((128, 4), (256, 8)):
        clm = depth.PLAN.setting("clm", width)
        recipe = study.make_cell("clm", "standard", 1, "cpu", {"width": width, "heads": heads, "layers": 8},
                                 "auto").recipe
        fresh = study.describe("mqa-att1-wide", "clm", recipe, 65)
        assert fresh == described[clm]["mqa-att1-wide"]  # arms.json is what the harness builds now
        standard = described[clm]["standard"]
        assert standard["config"] == {"attention_type": "standard"} and fresh["model"]["width"] > width
        assert abs(fresh["parameters"] - standard["parameters"]) < 0.03 * standard["parameters"]
        for arm in depth.ARMS:
            share = described[clm][arm]["attention_projection_parameters"] / standard["attention_projection_parameters"]
            assert rows[arm][3 if width == 128 else 4] == f"{share:.1%}", (arm, width)
            assert (share < 0.10) == arm.startswith("mqa"), (arm, width)
    assert rows["mqa-att1-wide"][2] == "152 / 304"
    clm = depth.PLAN.setting("clm", 128)
    assert [rows[arm][5] for arm in depth.ARMS] == [f"{described[clm][arm]['parameters']:,}" for arm in depth.ARMS]


def test_the_fourth_follow_ups_reasons_are_the_earlier_studies_results():
    """"Why this design": the frontier's, the first and third follow-ups' committed figures, the 6-layer count (a
    meta-device build) and the second follow-up's cells that had landed (seeds 1-2 causal LM, seed 1 MLM)."""
    readme = (depth.HERE / "depth" / "README.md").read_text(encoding="utf-8")
    why = " ".join(readme[readme.index("**Why this design"):readme.index("## Method")].split())

    frontier_summary = json.loads((report.HERE / "results" / "summary.json").read_text())
    clm, mlm = (frontier_summary["settings"][s] for s in ("clm-cpu", "mlm-cpu-i6000"))
    for arm in ("standard-att1", "mqa-att1", "standard-att1-wide"):
        c = clm[arm]["against_standard"]
        assert (f"`{arm}` ({clm[arm]['budget']:.1%}".replace(".0%", "%") + f") {signed(c['mean'])} "
                f"[{signed(c['interval'][0])}, {signed(c['interval'][1])}]") in why, arm
    assert all(mlm[a]["against_standard"]["verdict"] == "left open" and mlm[a]["against_standard"]["mean"] < 0
               for a in ("standard-att1", "mqa-att1", "standard-att1-wide"))
    assert "(" + ", ".join(signed(mlm[a]["against_standard"]["mean"]) for a in
                           ("standard-att1", "mqa-att1", "standard-att1-wide")) + "), left open" in why

    first = json.loads((query_rank.RESULTS / "summary.json").read_text())["settings"]
    mqa = first["mlm-cpu-i6000"]["mqa-att1"]["against_standard"]
    assert (f"`mqa-att1` again +{first['clm-cpu']['mqa-att1']['against_standard']['mean']:.3f} in causal LM and "
            f"{signed(mqa['mean'])} [{signed(mqa['interval'][0])}, {signed(mqa['interval'][1])}] in MLM") in why
    rank_r = [row["against_standard"]["mean"] for arm, row in first["mlm-cpu-i6000"].items() if "query" in arm]
    assert f"trails in MLM by {min(rank_r):.3f} to {max(rank_r):.3f}" in why
    exits = query_norm.plateau_exits(query_rank.RESULTS / "cells", "mlm-cpu-i6000")
    lags = [exits[arm]["mean"] - exits["standard"]["mean"] for arm in exits if "query" in arm]
    assert f"plateau {min(lags):,.0f} to {max(lags):,.0f} iterations after `standard`" in why
    third = json.loads((query_norm.RESULTS / "summary.json").read_text())["settings"]["mlm-cpu-i6000"]
    assert (f"(by {third['mqa-query-quarter-norm-att1']['against_standard']['mean']:.3f} and "
            f"{third['mqa-query-eighth-norm-att1']['against_standard']['mean']:.3f})") in why

    recipe = study.make_cell("clm", "standard", 1, "cpu", {"layers": 6}, "auto").recipe
    six = {arm: study.describe(arm, "clm", recipe, 65) for arm in ("standard", "mqa-att1-wide")}
    share = six["mqa-att1-wide"]["attention_projection_parameters"] / six["standard"]["attention_projection_parameters"]
    assert f"at 6 layers, by the same meta-device count, it stores {share:.1%} at width " \
           f"{six['mqa-att1-wide']['model']['width']}" in why and share > 0.10

    cells = report.load_cells(query_rank_wide.RESULTS / "cells")

    def difference(objective, arm, seed):
        setting = query_rank_wide.PLAN.setting(objective, 128)
        arm_loss, standard = (report.losses(cells[setting][a])[seed] for a in (arm, "standard"))
        return signed(arm_loss - standard)

    wide, plain = "mqa-query-eighth-att1-wide", "mqa-query-eighth-att1"
    assert (f"causal LM seeds 1–2, its wide rank-r arm {difference('clm', wide, 1)} and {difference('clm', wide, 2)} "
            f"against `standard`, the unwidened one {difference('clm', plain, 1)} and {difference('clm', plain, 2)}; "
            f"MLM seed 1, {difference('mlm', wide, 1)} and {difference('mlm', plain, 1)}") in why


def test_the_fourth_follow_up_runs_at_eight_layers_and_is_judged_in_its_own_folder(tmp_path, capsys):
    assert depth.main(["grid", "--seeds", "1", "--dry-run"]) == 0
    commands = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [c[c.index("--objective") + 1] for c in commands] == ["clm", "mlm"]
    for command in commands:
        assert command[command.index("--layers") + 1] == "8"
        assert command[command.index("--arms") + 1:command.index("--arms") + 1 + len(depth.ARMS)] == list(depth.ARMS)
        assert command[command.index("--results-dir") + 1].endswith("depth/results/cells")
    described = json.loads(depth.PLAN.arms_file.read_text())
    cells = fake_grid({"standard-att1": 0.03, "mqa-att1": 0.06, "mqa-att1-wide": 0.004}, layers=8)
    summary = report.summarise(cells, described, depth.PLAN)
    assert sorted(summary["settings"]) == sorted(cells) and "clm-cpu-l8" in summary["settings"]
    assert summary["width_256_rule"]["arms"] == ["standard", "standard-att1", "mqa-att1-wide"]
    assert summary["best_at_10"]["arm"] == "mqa-att1-wide" and summary["best_at_10"]["met"]
    assert summary["best_at_10"]["config"]["w256"]["hidden_size"] == 304
    assert summary["equal_parameters"]["clm-cpu-l8"]["mqa-att1-wide"]["verdict"] == "on par"
    assert summary["drift"]["cells"] == []  # no earlier study ran 8 layers
    report.plot(summary, tmp_path / "frontier.png", plan=depth.PLAN)
    assert (tmp_path / "frontier.png").stat().st_size > 0


def readme_section(heading: str, readme: Path = report.HERE / "README.md") -> str:
    text = readme.read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n### ", 1)[0].split("\n**Speed.**", 1)[0]


def signed(value: float) -> str:
    """A difference as the reports print it in prose: three decimals, its sign, a true minus."""
    return f"{value:+.3f}".replace("-", "−")


def first_table(text: str) -> list[list[str]]:
    """The arm rows of the first markdown table in `text`, each cell stripped of spaces and backticks."""
    table = text[text.index("\n|"):].split("\n\n", 1)[0]
    return [[cell.strip().strip("`") for cell in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| `")]


def check_table(section: str, rows: dict) -> None:
    """Each row of the section's table (arm, budget, mean loss, difference to `standard` with its interval, verdict,
    and for MLM the `[MASK]` view's difference and verdict and whether it learns) is the summary's; every arm of the
    setting is there, each with its five seeds. Only the section's first table is read (a per-seed one may follow)."""
    table = first_table(section)
    assert sorted(row[0] for row in table) == sorted(rows)
    for arm, budget, mean, difference, verdict, *mlm in table:
        row = rows[arm]
        assert row["seeds"] == [1, 2, 3, 4, 5], arm
        assert (budget, mean) == (f"{row['budget']:.1%}", f"{row['mean']:.4f}"), arm
        views = [("against_standard", difference, verdict)]
        if mlm:
            views.append(("against_standard_mask", mlm[0], mlm[1]))
        for key, shown, word in views:
            comparison = row.get(key)
            assert shown == report.interval(comparison), (arm, key)
            assert word == (comparison["verdict"] if comparison else "—"), (arm, key)
        if mlm:
            assert mlm[2] == ("yes" if row["learns"] else "no"), arm


def reported_setting(setting: str, heading: str) -> tuple[dict, dict, str, dict]:
    """The summary, the setting's rows, the README section's words (its table checked against the rows) and each
    arm's comparison to `standard`."""
    summary = json.loads((report.HERE / "results" / "summary.json").read_text())
    rows = summary["settings"][setting]
    section = readme_section(heading)
    check_table(section, rows)
    against = {arm: row["against_standard"] for arm, row in rows.items() if arm != "standard"}
    return summary, rows, " ".join(section.split()), against


def test_the_reports_causal_lm_table_and_figures_are_the_summarys():
    """The README's width-128 causal-LM section: each table row (budget, mean loss, interval, verdict) and each figure
    its bullets quote, read from results/summary.json; every arm there, each with its five seeds."""
    summary, rows, words, against = reported_setting("clm-cpu", "### Causal LM at width 128")
    at_10 = [c["mean"] for arm, c in against.items() if rows[arm]["budget"] <= 0.10]
    assert all(c["verdict"] == "trails" for arm, c in against.items() if rows[arm]["budget"] <= 0.10)
    assert f"by {min(at_10):.3f} to {max(at_10):.3f} nats" in words
    assert [arm for arm, c in against.items() if c["verdict"] == "on par"] == ["gqa-2"]
    low, high = against["gqa-2"]["interval"]
    assert f"costs {against['gqa-2']['mean']:.3f} nats, its interval ({low:+.3f} to {high:+.3f})" in words
    cost = [against[a]["mean"] for a in ("mqa", "standard-att2", "standard-att2-cycle", "standard-att2-cycle-rev",
                                         "standard-att1")]
    assert f"cost {min(cost):.3f}–{max(cost):.3f} nats" in words
    assert (f"trails by {against['shared']['mean']:.3f} in every layer (`shared`, 34.1%) and by "
            f"{against['shared-att1']['mean']:.3f} stored once (`shared-att1`, 8.5%); the low-rank-query form by "
            f"{against['shared-lowrank-query']['mean']:.3f} and {against['shared-lowrank-query-att1']['mean']:.3f}"
            in words)
    # "adds at most about the margin; the per-layer forms cost 4 to 10 times it"
    added = [against["shared-att1"]["mean"] - against["shared"]["mean"], against["standard-att1"]["mean"],
             against["shared-lowrank-query-att1"]["mean"] - against["shared-lowrank-query"]["mean"]]
    assert max(added) < 1.25 * summary["margin"]
    forms = [against[a]["mean"] / summary["margin"] for a in ("shared", "shared-lowrank-query")]
    assert 4 <= round(min(forms)) and round(max(forms)) <= 10
    assert (f"costs {against['standard-att1']['mean']:.3f} at 25%" in words
            and f"(`mqa-att1`) {against['mqa-att1']['mean']:.3f} at 12.5%" in words)
    assert (f"({rows['standard-narrow']['parameters']:,} against {rows['shared']['parameters']:,})" in words
            and f"trails `standard` by {against['standard-narrow']['mean']:.3f}, where `shared` trails by "
                f"{against['shared']['mean']:.3f}" in words)
    wide = summary["equal_parameters"]["clm-cpu"]["standard-att1-wide"]
    assert all(d < 0 for d in wide["differences"]) and wide["verdict"] == "left open"
    assert (f"spent on width ({rows['standard-att1-wide']['width']}), ends below `standard` by {-wide['mean']:.3f} "
            f"(interval {wide['interval'][0]:.3f} to {wide['interval'][1]:.3f})").replace("-", "−") in words
    ffn = summary["equal_parameters"]["clm-cpu"]["standard-att1-ffn"]
    assert f"`standard-att1-ffn` (the savings in the FFN) {report.interval(ffn).split()[0]}, {ffn['verdict']}" in words
    orders = summary["sharing_orders"]["clm-cpu"]
    assert all(orders[a]["verdict"] == "on par" for a in ("standard-att2-cycle", "standard-att2-cycle-rev"))
    assert (f"({report.interval(orders['standard-att2-cycle'])} and "
            f"{report.interval(orders['standard-att2-cycle-rev'])})").replace("[-", "[−") in words
    within = [arm for arm, c in against.items() if c["mean"] <= summary["width_256_rule"]["threshold"]]
    assert f"**Width 256**: {len(within)} arms are within 0.05 nats" in words


def test_the_reports_masked_lm_table_figures_and_goals_are_the_summarys():
    summary, rows, words, against = reported_setting("mlm-cpu-i6000", "### Masked LM at width 128")
    null = summary["nulls"]["mlm-cpu-i6000"]["context_free"]["selected"]
    worst = max(max(row["losses"].values()) for row in rows.values())
    assert all(row["learns"] for row in rows.values()) and worst <= null - 0.5
    assert f"({null:.3f} on the selected positions; the worst seed of any arm ends at {worst:.3f})" in words
    standard = rows["standard"]["losses"].values()
    assert f"seeds end between {min(standard):.3f} and {max(standard):.3f}" in words
    half_widths = [(c["interval"][1] - c["interval"][0]) / 2 for c in against.values()]
    assert 0.1 <= min(half_widths) and max(half_widths) <= 0.4
    assert not [arm for arm, c in against.items() if c["verdict"] in ("on par", "ahead")]
    trailing = ["shared", "shared-kv", "shared-lowrank-query", "shared-kv-att2", "shared-lowrank-query-att1-ffn"]
    assert sorted(a for a, c in against.items() if c["verdict"] == "trails") == sorted(trailing)
    assert ("trail**: " + ", ".join(f"`{a}` {against[a]['mean']:+.3f}" for a in trailing[:-1])
            + f" and `{trailing[-1]}` {against[trailing[-1]]['mean']:+.3f}") in words
    others = [c["mean"] for a, c in against.items() if a.startswith("shared") and a not in trailing]
    assert all(against[a]["verdict"] == "left open" for a in against if a.startswith("shared") and a not in trailing)
    assert f"means from {min(others):+.3f} to {max(others):+.3f}" in words
    family = [a for a in against if not a.startswith("shared")]
    assert all(against[a]["mean"] < 0 and against[a]["verdict"] == "left open" for a in family)
    assert (f"by {-max(against[a]['mean'] for a in family):.3f} to {-min(against[a]['mean'] for a in family):.3f}"
            in words)
    assert all(c["verdict"] == rows[a]["against_standard_mask"]["verdict"] for a, c in against.items())
    equal, orders = summary["equal_parameters"]["mlm-cpu-i6000"], summary["sharing_orders"]["mlm-cpu-i6000"]
    assert (f"`standard-att1-wide` {equal['standard-att1-wide']['mean']:+.3f}".replace("-0", "−0") in words
            and f"`standard-att1-ffn` {equal['standard-att1-ffn']['mean']:+.3f}".replace("-0", "−0") in words)
    assert equal["shared-lowrank-query-att1-ffn"]["verdict"] == "trails"
    assert all(c["verdict"] == "left open" for c in orders.values())
    assert (f"(+{orders['standard-att2-cycle']['mean']:.3f} and +{orders['standard-att2-cycle-rev']['mean']:.3f})"
            in words)

    decided = " ".join(readme_section("### What width 128 decides").split())
    rule = summary["width_256_rule"]
    assert rule["pending"] == [] and rule["arms"][:2] == ["standard", "shared"]
    listed = re.findall(r"`([a-z0-9-]+)`", decided.split("and 10 arms:", 1)[1].split(";", 1)[0])
    expanded = [a for a in listed if a != "standard-att2"] + ["standard-att2", "standard-att2-cycle",
                                                                "standard-att2-cycle-rev"]
    assert sorted(set(expanded) - {"cycle", "cycle-rev"}) == sorted(rule["arms"][2:]) and len(rule["arms"]) == 12
    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == "standard-att1-wide" and at_10["arm"] == "shared-lowrank-query-att1"
    assert f"({best['budget']['128']:.1%} of the projections; mean of its two width-128 differences " \
           f"{best['mean_difference_width_128']:.3f})".replace("-0", "−0") in decided
    assert f"(9.8%, {at_10['mean_difference_width_128']:+.3f})" in decided and not at_10["carried_to_width_256"]
    assert best["verdicts"]["clm-w128"] == best["verdicts"]["mlm-w128"] == "left open"
    assert at_10["verdicts"]["clm-w128"] == "trails" and not best["met"] and not at_10["met"]


def test_the_reports_causal_lm_at_width_256_table_and_figures_are_the_summarys():
    """The README's width-256 causal-LM section: the table (every rule arm, five seeds each) and each figure its
    bullets quote, at width 256 and the width-128 figures set beside them, read from results/summary.json."""
    summary, rows, words, against = reported_setting("clm-cpu-w256-h8", "### Causal LM at width 256")
    at_128 = {arm: row["against_standard"] for arm, row in summary["settings"]["clm-cpu"].items() if arm != "standard"}

    def prose(share: float) -> str:  # a budget as the prose prints it: "50%", "10.4%"
        return f"{share:.1%}".replace(".0%", "%")

    budget = {arm: prose(row["budget"]) for arm, row in rows.items()}

    def shown(comparison: dict) -> str:
        return report.interval(comparison).replace("-", "−")

    on_par = sorted(arm for arm, c in against.items() if c["verdict"] == "on par")
    assert on_par == ["standard-att1-ffn", "standard-att2"] and not [c for c in against.values()
                                                                     if c["verdict"] == "ahead"]
    assert (f"(`standard-att2`, {budget['standard-att2']}) {shown(against['standard-att2'])}" in words
            and f"(`standard-att1-ffn`, {budget['standard-att1-ffn']}; {rows['standard-att1-ffn']['parameters']:,} "
                f"parameters against `standard`'s {rows['standard']['parameters']:,}) "
                f"{shown(against['standard-att1-ffn'])}" in words)
    assert all(at_128[a]["verdict"] == "left open" for a in on_par)
    assert (f"(+{at_128['standard-att2']['mean']:.3f} and +{at_128['standard-att1-ffn']['mean']:.3f}, left open "
            "there)") in words

    assert against["gqa-2"]["verdict"] == "left open" and against["mqa"]["verdict"] == "trails"
    assert (f"`gqa-2` (two key/value heads of eight, {budget['gqa-2']}) costs {against['gqa-2']['mean']:.3f}, left "
            f"open, and `mqa` ({budget['mqa']}) trails by {against['mqa']['mean']:.3f}") in words
    gqa_128 = summary["settings"]["clm-cpu"]["gqa-2"]
    assert at_128["gqa-2"]["verdict"] == "on par" and f"of four ({gqa_128['budget']:.1%}), `gqa-2`" in words

    assert against["standard-att1"]["verdict"] == "left open" and against["mqa-att1"]["verdict"] == "trails"
    assert (f"(`standard-att1`, {budget['standard-att1']}) costs {against['standard-att1']['mean']:.3f}, left open "
            f"({at_128['standard-att1']['mean']:.3f} at width 128)") in words
    assert (f"(`mqa-att1`, {budget['mqa-att1']}) it trails by {against['mqa-att1']['mean']:.3f} "
            f"({at_128['mqa-att1']['mean']:.3f} at width 128, at "
            f"{prose(summary['settings']['clm-cpu']['mqa-att1']['budget'])})") in words

    assert against["shared"]["verdict"] == at_128["shared"]["verdict"] == "trails"
    assert f"`shared` {against['shared']['mean']:+.3f} ({at_128['shared']['mean']:+.3f} at width 128)" in words
    narrow, shared = rows["standard-narrow"], rows["shared"]
    assert narrow["parameters"] < shared["parameters"] and against["standard-narrow"]["verdict"] == "trails"
    assert (f"({narrow['parameters']:,} against {shared['parameters']:,}), trails by "
            f"{against['standard-narrow']['mean']:.3f}") in words

    wide = summary["equal_parameters"]["clm-cpu-w256-h8"]["standard-att1-wide"]
    assert all(d < 0 for d in wide["differences"]) and wide["verdict"] == "left open"
    assert (f"ends below `standard` by {-wide['mean']:.3f} (interval {wide['interval'][0]:.3f} to "
            f"{wide['interval'][1]:.3f})").replace("-", "−") in words
    orders = summary["sharing_orders"]["clm-cpu-w256-h8"]
    assert all(orders[a]["verdict"] == "on par" for a in ("standard-att2-cycle", "standard-att2-cycle-rev"))
    assert (f"({shown(orders['standard-att2-cycle'])} and {shown(orders['standard-att2-cycle-rev'])})" in words)

    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == "standard-att1-wide" and best["verdicts"]["clm-w128"] == best["verdicts"]["clm-w256"]
    assert best["verdicts"]["clm-w256"] == against["standard-att1-wide"]["verdict"] == "left open"
    assert not best["met"] and not at_10["carried_to_width_256"]
    # The status line says complete only when width-256 MLM has every arm's five seeds too, and neither goal met.
    mlm = summary["settings"]["mlm-cpu-w256-h8-i6000"]
    assert sorted(mlm) == sorted(rows) and all(row["seeds"] == [1, 2, 3, 4, 5] for row in mlm.values())
    status = " ".join(report.HERE.joinpath("README.md").read_text(encoding="utf-8").split("**", 2)[1].split())
    assert status == ("complete: every declared cell at widths 128 and 256, both objectives, 5 seeds; neither goal is "
                      "met.")
    # "about 0.2 nats behind ... about 0.04 behind"
    assert round(against["shared"]["mean"], 1) == 0.2 and round(against["mqa-att1"]["mean"], 2) == 0.04



def check_standard_stays_on_the_plateau(words: str, rows: dict, null: float, exits: dict, cells: Path) -> tuple:
    """A width-256 MLM section's sentence that `standard` does not learn: how many seeds never leave the context-free
    plateau and where they end, the null less 0.5 that none reaches, and where its seeds left the plateau at width
    128 (every one did). Returns the one seed that leaves at width 256 and its iteration, for the caller's words."""
    standard, losses = exits["standard"]["seeds"], rows["standard"]["losses"]
    stayed = [str(seed) for seed, iteration in standard.items() if iteration is None]
    left = [(str(seed), iteration) for seed, iteration in standard.items() if iteration is not None]
    assert not rows["standard"]["learns"] and len(left) == 1 and all(loss > null - 0.5 for loss in losses.values())
    (seed, iteration), = left
    assert (f"{len(stayed)} of its 5 seeds never leave the context-free plateau (no evaluation below 2.9 nats) and "
            f"end between {min(losses[s] for s in stayed):.3f} and {max(losses[s] for s in stayed):.3f}; seed {seed} "
            "leaves it") in words
    assert f"0.5 nats below the null ({null - 0.5:.3f})" in words
    at_128 = query_norm.plateau_exits(cells, "mlm-cpu-i6000")["standard"]
    assert None not in at_128["seeds"].values() and f"at iteration {at_128['mean']:,.0f} on average" in words
    return seed, iteration


def test_the_reports_masked_lm_at_width_256_table_and_figures_are_the_summarys():
    """The README's width-256 MLM section: the table (every rule arm, five seeds each) and the plateau exits under it
    are the summary's and the cells'; `standard` does not learn there (which seeds never leave the plateau, where they
    end, the one that leaves), so the arms ahead by the rule are read as starting to use the context sooner, and the
    goals stay missed."""
    setting = "mlm-cpu-w256-h8-i6000"
    summary, rows, words, against = reported_setting(setting, "### Masked LM at width 256")
    null = summary["nulls"][setting]["context_free"]["selected"]
    assert f"the context-free null ({null:.3f} on the selected positions)" in words
    exits = query_norm.plateau_exits(report.RESULTS / "cells", setting)
    assert query_norm.plateau_table(exits) in readme_section("### Masked LM at width 256")

    seed, iteration = check_standard_stays_on_the_plateau(words, rows, null, exits, report.RESULTS / "cells")
    curve = report.load_cells(report.RESULTS / "cells")[setting]["standard"][int(seed)]["curve"]
    assert iteration == max(point["iteration"] for point in curve)
    assert (f"seed {seed} leaves it only at its last evaluation (iteration {iteration:,}) and ends at "
            f"{rows['standard']['losses'][seed]:.3f}") in words

    def shown(comparison: dict) -> str:
        return report.interval(comparison).replace("-", "−")

    ahead = sorted(arm for arm, c in against.items() if c["verdict"] == "ahead")
    assert ahead == ["mqa-att1", "shared", "standard-att1"]
    assert [arm for arm, row in rows.items() if row["learns"]] == ["shared"]
    assert all(f"`{arm}` {shown(against[arm])}" in words for arm in ahead)
    assert all(None not in exits[arm]["seeds"].values() for arm in ahead)
    shared_exits = exits["shared"]["seeds"].values()
    late = [exits[arm]["seeds"][s] for arm in ("standard-att1", "mqa-att1") for s in exits[arm]["seeds"]]
    assert (f"`shared` at iterations {min(shared_exits):,} to {max(shared_exits):,}; the two stored-once arms at "
            f"{min(late):,} to {max(late):,}") in words
    above = {arm: max(rows[arm]["losses"].values()) for arm in ("standard-att1", "mqa-att1")}
    assert all(loss > null - 0.5 for loss in above.values())
    assert f"(worst seeds {above['standard-att1']:.3f} and {above['mqa-att1']:.3f})" in words
    at_128_shared = summary["settings"]["mlm-cpu-i6000"]["shared"]["against_standard"]
    clm_shared = summary["settings"]["clm-cpu-w256-h8"]["shared"]["against_standard"]
    assert at_128_shared["verdict"] == clm_shared["verdict"] == "trails"
    assert (f"`shared` trails it by {at_128_shared['mean']:.3f} in MLM, and in causal LM at this width by "
            f"{clm_shared['mean']:.3f}") in words

    open_ = [arm for arm, c in against.items() if c["verdict"] == "left open"]
    assert sorted(open_ + ahead) == sorted(against) and len(open_) == 8
    means = [against[arm]["mean"] for arm in open_]
    assert all(mean < 0 for mean in means) and f"means from {signed(min(means))} to {signed(max(means))}" in words
    assert all(c["verdict"] == rows[a]["against_standard_mask"]["verdict"] for a, c in against.items())

    falls = query_norm.end_falls(report.RESULTS / "cells", setting=setting)
    mean_falls = [entry["mean"] for entry in falls.values()]
    assert all(fall > 0 for fall in mean_falls)
    assert (f"by {min(mean_falls):.2f} to {max(mean_falls):.2f} nats on average (`standard` "
            f"{falls['standard']['mean']:.2f})") in words

    equal, orders = summary["equal_parameters"][setting], summary["sharing_orders"][setting]
    assert all(c["verdict"] == "left open" for c in [*equal.values(), *orders.values()])
    assert (f"`standard-att1-wide` {signed(equal['standard-att1-wide']['mean'])} and `standard-att1-ffn` "
            f"{signed(equal['standard-att1-ffn']['mean'])}, both left open") in words
    assert (f"({signed(orders['standard-att2-cycle']['mean'])} and "
            f"{signed(orders['standard-att2-cycle-rev']['mean'])})") in words
    best = summary["best"]
    assert best["arm"] == "standard-att1-wide" and set(best["verdicts"].values()) == {"left open"}
    assert best["verdicts"]["mlm-w256"] == against["standard-att1-wide"]["verdict"] and not best["met"]
    widths = [against[arm]["interval"][1] - against[arm]["interval"][0] for arm in open_]
    assert f"their intervals are {min(widths):.2f} to {max(widths):.2f} nats wide" in words
    mixed = [arm for arm in open_ if None in exits[arm]["seeds"].values()
             and any(iteration is not None for iteration in exits[arm]["seeds"].values())]
    assert sorted(mixed + ["mqa"]) == sorted(open_) and set(exits["mqa"]["seeds"].values()) == {None}
    guide = " ".join((REPO_ROOT / "docs" / "model.md").read_text(encoding="utf-8").split())
    assert "Against it the paper's form and one stored layer of plain or multi-query attention come out ahead" in guide


def test_the_reports_answers_and_limits_are_the_summarys():
    """The three answers under the results, and the limits, quote the summary: the goals missed (`best` left open in
    all four settings), where parity first holds in causal LM, the equal-parameter arms, the frontier's distances, MLM's
    seed spread at width 128, and the GPU recipe as the harness builds it."""
    summary = json.loads((report.HERE / "results" / "summary.json").read_text())
    settings = summary["settings"]
    answers = " ".join(readme_section("### The answers").split())
    best = summary["best"]
    assert set(best["verdicts"].values()) == {"left open"} and len(best["verdicts"]) == 4
    assert not best["met"] and not summary["best_at_10"]["met"]
    assert f"`best` (`{best['arm']}`, {best['budget']['128']:.1%}) is left open in all four settings" in answers
    on_par_in_both = [arm for arm in settings["clm-cpu"] if arm != "standard" and all(
        settings[s][arm]["against_standard"]["verdict"] == "on par" for s in ("clm-cpu", "mlm-cpu-i6000"))]
    assert not on_par_in_both and "parity holds at no budget" in answers
    for setting, width in (("clm-cpu", 128), ("clm-cpu-w256-h8", 256)):
        on_par = [arm for arm, row in settings[setting].items()
                  if arm != "standard" and row["against_standard"]["verdict"] == "on par"]
        smallest = min(on_par, key=lambda arm: settings[setting][arm]["budget"])
        share = f"{settings[setting][smallest]['budget']:.1%}".replace(".0%", "%")
        assert f"at {share} at width {width} (`{smallest}`" in answers
    assert all(row["against_standard"]["verdict"] in ("trails", "left open")
               for arm, row in settings["mlm-cpu-i6000"].items() if arm != "standard")
    for setting in ("clm-cpu", "clm-cpu-w256-h8"):
        wide = summary["equal_parameters"][setting]["standard-att1-wide"]
        assert all(d < 0 for d in wide["differences"]) and wide["verdict"] == "left open"
    assert summary["equal_parameters"]["clm-cpu-w256-h8"]["standard-att1-ffn"]["verdict"] == "on par"
    mqa = [settings[s]["mqa-att1"]["against_standard"]["mean"] for s in ("clm-cpu", "clm-cpu-w256-h8")]
    shared = [settings["clm-cpu"][a]["against_standard"]["mean"] for a in ("shared", "shared-att1")]
    assert {round(m, 2) for m in mqa} == {0.04} and {round(m, 1) for m in shared} == {0.2}
    assert "once about 0.04 nats behind, and the paper's form about 0.2 nats behind" in answers

    limits = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split("\n## Limits", 1)[1].split())
    spread = settings["mlm-cpu-i6000"]["standard"]["losses"].values()
    assert f"`standard`'s own seeds end {max(spread) - min(spread):.2f} nats apart" in limits
    gpu = study.RECIPES["gpu"]
    assert (f"({gpu.layers} layers, width {gpu.width}, context {gpu.context}, {gpu.iters:,} iterations)" in limits)
    arms = ["standard", "standard-att1-wide", "standard-att1-ffn", "standard-att2", "gqa-2", "mqa-att1"]
    assert f"--arms {' '.join(arms[:2])} \\ {' '.join(arms[2:])} --seeds 1 2 3 4 5" in limits
    assert f"{len(arms) * 2 * 5} cells" in limits and best["arm"] in arms

QUERY_RANK_README = query_rank.HERE / "query-rank" / "README.md"


def test_the_query_rank_reports_drift_check_is_the_summarys():
    """The follow-up's drift sentence at width 128: the largest causal-LM move, and how many MLM cells moved by how
    much; width-256 cells join the summary's check as they land."""
    drift = json.loads((query_rank.RESULTS / "summary.json").read_text())["drift"]
    text = QUERY_RANK_README.read_text(encoding="utf-8")
    words = " ".join(text.split("**Drift check**", 1)[1].split("###")[0].split())
    at_128 = [row for row in drift["cells"] if "-w256-" not in row["cell"]]
    clm = [row for row in at_128 if row["cell"].startswith("clm-")]
    mlm = [row for row in at_128 if row["cell"].startswith("mlm-")]
    assert (len(clm) == 10 and f"In causal LM all {len(clm)} width-128 cells end within "
            f"{max(abs(r['difference']) for r in clm):.4f}" in words)
    moved = [row for row in mlm if abs(row["difference"]) > drift["threshold"]]
    assert set(drift["moved"]) & {row["cell"] for row in at_128} == {row["cell"] for row in moved}
    at_256 = [row for row in drift["cells"] if "-w256-" in row["cell"]]
    clm_256 = [abs(row["difference"]) for row in at_256 if row["cell"].startswith("clm-")]
    assert (f"At width 256 the frontier's grid, complete in bf16, has {len(at_256)} cells of these arms "
            f"({len(clm_256)} in causal LM, {len(at_256) - len(clm_256)} in MLM)") in words
    assert (f"this study's cells end within {max(abs(row['difference']) for row in at_256):.4f} nats of them, "
            f"the causal-LM cells within {max(clm_256):.4f}.") in words
    counted = f"In MLM {len(moved)} of the {len(mlm)}" + (" so far" if len(mlm) < 10 else "")
    assert f"{counted} move by more than 0.01 nats, by up to {max(abs(r['difference']) for r in mlm):.3f}" in words
    # The examples of width-256 MLM cells that move with the precision, one each way: where each copy leaves the
    # plateau and how far apart they end.
    setting = "mlm-cpu-w256-h8-i6000"
    assert f"(its first evaluation below {query_norm.PLATEAU_EXIT_LOSS} nats)" in words
    exits = [query_norm.plateau_exits(folder / "cells", setting)["mqa-att1"]["seeds"]
             for folder in (query_rank.RESULTS, report.RESULTS)]
    for seed, lower in ((2, "fp32"), (4, "bf16")):
        cell = f"{setting}-mqa-att1-seed{seed}.json"
        here, there = (json.loads((folder / "cells" / cell).read_text())
                       for folder in (query_rank.RESULTS, report.RESULTS))
        assert (here["precision"], there["precision"]) == ("fp32", "bf16")
        gap = there["final_validation_loss"] - here["final_validation_loss"]
        assert (gap > 0) == (lower == "fp32")
        fp32, bf16 = ("this study's fp32", "the frontier's bf16") if seed == 2 else ("fp32", "bf16")
        assert (f"seed {seed} leaves it at iteration {exits[0][seed]:,} in {fp32} and at {exits[1][seed]:,} in {bf16}, "
                f"and ends {abs(gap):.3f} nats lower in {lower}") in words


def test_the_query_rank_reports_causal_lm_table_and_figures_are_the_summarys():
    """The follow-up's causal-LM section: its table is the summary's, every arm with five seeds, and each figure its
    bullets quote is read from its summary (and, for the frontier's arm it is set beside, the frontier's)."""
    summary = json.loads((query_rank.RESULTS / "summary.json").read_text())
    rows = summary["settings"]["clm-cpu"]
    section = readme_section("### Causal LM at width 128", QUERY_RANK_README)
    check_table(section, rows)
    words = " ".join(section.split())
    against = {arm: row["against_standard"]["mean"] for arm, row in rows.items() if arm != "standard"}
    assert all(row["against_standard"]["verdict"] == "trails" for arm, row in rows.items() if arm != "standard")
    assert "**Every arm trails `standard`**" in words and "neither goal can be met by this follow-up" in words
    once = [arm for arm in against if "query" in arm and "att1" in arm]
    assert len(once) == 3 and f"by {min(against[a] for a in once):.3f} to {max(against[a] for a in once):.3f} nats" \
        in words
    frontier_summary = json.loads((report.HERE / "results" / "summary.json").read_text())
    at_10 = frontier_summary["best_at_10"]["arm"]
    frontier_row = frontier_summary["settings"]["clm-cpu"][at_10]
    assert (f"8.3%) trails by {against['mqa-query-quarter-att1']:.3f} where the frontier's choice at or under 10% "
            f"(`best_at_10`: `{at_10}`, {frontier_row['budget']:.1%}) trails by "
            f"{frontier_row['against_standard']['mean']:.3f}") in words
    # The sentence sets two width-128 arms side by side: the drift that bears on it is the width-128 cells'.
    clm_drift = max(abs(row["difference"]) for row in summary["drift"]["cells"]
                    if row["cell"].startswith("clm-") and "-w256-" not in row["cell"])
    assert f"puts what that changes at about {clm_drift:.3f} nats a cell" in words
    assert (f"(`mqa-att1`, 12.5%, +{against['mqa-att1']:.3f}), a query of rank width/4 adds "
            f"{against['mqa-query-quarter-att1'] - against['mqa-att1']:.3f} nats") in words
    assert f"adds {against['mqa-query-eighth-att1'] - against['mqa-query-quarter-att1']:.3f} more" in words
    assert f"(`mqa-query-quarter`, 33.3%) the rank-r query trails by {against['mqa-query-quarter']:.3f}" in words
    equal = summary["equal_parameters"]["clm-cpu"]["mqa-query-quarter-att1-ffn"]
    assert equal["verdict"] == "trails" and (
        f"(`mqa-query-quarter-att1-ffn`, {rows['mqa-query-quarter-att1-ffn']['parameters']:,} parameters against "
        f"`standard`'s {rows['standard']['parameters']:,}) the arm still trails, by {equal['mean']:.3f}; the wider "
        f"FFN buys {against['mqa-query-quarter-att1'] - equal['mean']:.3f}") in words


def test_the_query_rank_reports_causal_lm_at_width_256_is_the_summarys():
    """The follow-up's width-256 causal-LM section: its table is the summary's (both arms, five seeds each) and its
    figures (the cost at both widths, the per-seed range, the budget) are read from the summary."""
    summary = json.loads((query_rank.RESULTS / "summary.json").read_text())
    rows, words = check_causal_lm_section(QUERY_RANK_README, summary, "clm-cpu-w256-h8", "### Causal LM at width 256")
    mqa, at_128 = rows["mqa-att1"]["against_standard"], summary["settings"]["clm-cpu"]["mqa-att1"]
    assert mqa["verdict"] == "trails" and min(mqa["differences"]) > 0
    assert (f"`mqa-att1` trails by {mqa['mean']:.3f} nats ({at_128['against_standard']['mean']:.3f} at width 128), on "
            f"every seed ({min(mqa['differences']):+.3f} to {max(mqa['differences']):+.3f})") in words
    assert f"from {at_128['budget']:.1%} to {rows['mqa-att1']['budget']:.1%}" in words
    best = summary["best"]
    assert best["arm"] == "mqa-att1" and best["verdicts"]["clm-w128"] == best["verdicts"]["clm-w256"] == "trails"
    assert "`best` (`mqa-att1`) trails in causal LM at both widths" in words and not best["met"]


def test_the_query_rank_reports_masked_lm_at_width_256_is_the_summarys():
    """The follow-up's width-256 MLM section: its table is the summary's; `standard` does not learn there (which seeds
    never leave the plateau, where they end, the one that leaves), so `mqa-att1`'s verdict is read as the report reads
    it; plateau exits and end falls come from the cells."""
    summary = json.loads((query_rank.RESULTS / "summary.json").read_text())
    setting = "mlm-cpu-w256-h8-i6000"
    rows, words = check_masked_lm_section(QUERY_RANK_README, summary, setting, "### Masked LM at width 256")
    null = summary["nulls"][setting]["context_free"]["selected"]
    assert f"{null:.3f}" == f"{summary['nulls']['mlm-cpu-i6000']['context_free']['selected']:.3f}"  # "as at width 128"
    assert not rows["standard"]["learns"] and rows["mqa-att1"]["learns"]

    exits = query_norm.plateau_exits(query_rank.RESULTS / "cells", setting)
    seed, iteration = check_standard_stays_on_the_plateau(words, rows, null, exits, query_rank.RESULTS / "cells")
    assert (f"seed {seed} leaves it at iteration {iteration:,} and ends at {rows['standard']['losses'][seed]:.3f}"
            in words)

    mqa = rows["mqa-att1"]["against_standard"]
    assert mqa["verdict"] == rows["mqa-att1"]["against_standard_mask"]["verdict"] == "ahead"
    assert f"**`mqa-att1` is ahead by the rule** ({signed(mqa['mean'])} nats" in words
    mqa_exits = exits["mqa-att1"]["seeds"].values()
    assert None not in mqa_exits and (f"leaving the plateau on every seed (at iterations {min(mqa_exits):,} to "
                                      f"{max(mqa_exits):,})") in words
    falls = query_norm.end_falls(query_rank.RESULTS / "cells", setting=setting)
    assert (f"`mqa-att1` still falls {falls['mqa-att1']['mean']:.2f} nats, `standard` "
            f"{falls['standard']['mean']:.2f}") in words
    assert summary["best"]["verdicts"]["mlm-w256"] == "ahead" and not summary["best"]["met"]


def test_the_query_rank_reports_masked_lm_table_figures_and_goals_are_the_summarys():
    """The follow-up's MLM section (table, verdicts, the arm that does not learn, the descriptive plateau exits and
    end slopes, read from its cells) and what its width-128 cells decide (width 256, the goals)."""
    summary = json.loads((query_rank.RESULTS / "summary.json").read_text())
    rows, words = check_masked_lm_section(QUERY_RANK_README, summary)
    against = {arm: row["against_standard"] for arm, row in rows.items() if arm != "standard"}
    null = summary["nulls"]["mlm-cpu-i6000"]["context_free"]["selected"]

    rank_r = [arm for arm in against if "query" in arm]
    assert all(against[a]["verdict"] == rows[a]["against_standard_mask"]["verdict"] == "trails" for a in rank_r)
    worst = max(rank_r, key=lambda a: against[a]["mean"])
    assert worst == "mqa-query-eighth-att1" and min(rank_r, key=lambda a: against[a]["mean"]) == "mqa-query-quarter"
    assert (f"by {against['mqa-query-quarter']['mean']:.3f} (every layer stored, 33.3%) to "
            f"{against[worst]['mean']:.3f} (`mqa-query-eighth-att1`, 6.2%)") in words
    assert [arm for arm, row in rows.items() if not row["learns"]] == ["mqa-query-eighth-att1"]
    seed, loss = max(rows[worst]["losses"].items(), key=lambda item: item[1])
    assert f"its seed {seed} ends at {loss:.3f}, above the null less 0.5 ({null - 0.5:.3f})" in words

    mqa = against["mqa-att1"]
    below = sum(rows["mqa-att1"]["losses"][s] < rows["standard"]["losses"][s] for s in rows["standard"]["losses"])
    assert mqa["verdict"] == "left open" and (
        f"on {below} of the 5 seeds, by {-mqa['mean']:.3f} on average, but its interval "
        f"(−{-mqa['interval'][0]:.3f} to +{mqa['interval'][1]:.3f})") in words
    standard = rows["standard"]["losses"].values()
    assert f"seeds end between {min(standard):.3f} and {max(standard):.3f}" in words

    exits = query_norm.plateau_exits(query_rank.RESULTS / "cells", "mlm-cpu-i6000")
    assert all(None not in entry["seeds"].values() and len(entry["seeds"]) == 5 for entry in exits.values())
    late = [exits[arm]["mean"] for arm in rank_r]
    assert (f"at iteration {exits['standard']['mean']:,.0f} on average over its seeds, `mqa-att1` at "
            f"{exits['mqa-att1']['mean']:,.0f}, and the arms with a rank-r query at {min(late):,.0f} to "
            f"{max(late):,.0f}") in words
    falls = query_norm.end_falls(query_rank.RESULTS / "cells", setting="mlm-cpu-i6000")
    assert sorted(falls) == sorted(rows) and all(len(entry["seeds"]) == 5 for entry in falls.values())
    mean_drop = {arm: entry["mean"] for arm, entry in falls.items()}
    assert (f"({min(mean_drop[a] for a in rank_r):.2f} to {max(mean_drop[a] for a in rank_r):.2f} nats over the last "
            f"1,000 iterations, against {mean_drop['standard']:.2f})") in words
    assert 1.5 <= min(mean_drop[a] for a in rank_r) / mean_drop["standard"] <= 2.5  # "about twice as fast"
    equal = summary["equal_parameters"]["mlm-cpu-i6000"]["mqa-query-quarter-att1-ffn"]
    assert equal["verdict"] == "trails" and f"the FFN-matched arm trails by {equal['mean']:.3f}" in words

    decided = " ".join(readme_section("### What width 128 decides", QUERY_RANK_README).split())
    rule = summary["width_256_rule"]
    assert rule["arms"] == ["standard", "mqa-att1"] and rule["pending"] == []
    assert "`mqa-att1` alone goes on, with `standard`" in decided
    quarter = summary["settings"]["clm-cpu"]["mqa-query-quarter"]["against_standard"]["mean"]
    assert quarter <= rule["threshold"] < against["mqa-query-quarter"]["mean"]
    assert f"within it in causal LM (+{quarter:.3f}) but not in MLM" in decided
    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == "mqa-att1" and best["verdicts"]["clm-w128"] == "trails" and not best["met"]
    assert at_10["arm"] == "mqa-query-quarter-att1" and not at_10["met"]
    assert at_10["verdicts"]["clm-w128"] == at_10["verdicts"]["mlm-w128"] == "trails"
    assert f"`best` (at most 35%) is `mqa-att1` ({best['budget']['128']:.1%})" in decided
    assert f"`best_at_10` is `mqa-query-quarter-att1` ({at_10['budget']['128']:.1%})" in decided
    assert "this follow-up misses both goals" in decided and "at no budget under 100%" in decided
    assert all(row["against_standard"]["verdict"] == "trails"
               for arm, row in summary["settings"]["clm-cpu"].items() if arm != "standard")


def frontier_clm_mean(arm: str) -> float:
    summary = json.loads((report.HERE / "results" / "summary.json").read_text())
    return summary["settings"]["clm-cpu"][arm]["against_standard"]["mean"]


def test_the_query_rank_reports_depth_arithmetic_is_the_packages_counts():
    """"Depth sets what a tenth asks": one stored attention layer's share at bert-base dims, counted on meta-device
    builds of the package's model as the harness counts a budget, and the frontier's two causal-LM costs it quotes."""
    from sharedbert import SharedBertConfig, SharedBertModel

    def stored(**fields) -> int:
        with torch.device("meta"):
            model = SharedBertModel(SharedBertConfig(attention_type="standard", **fields))
        return study.attention_projection_parameters(model)

    config = SharedBertConfig()
    assert (config.num_hidden_layers, config.num_attention_heads) == (12, 12)  # bert-base dims
    standard, once = stored(), dict(layer_sharing="attention", num_unique_layers=1)
    words = " ".join(readme_section("### What width 128 decides", QUERY_RANK_README).split())
    assert (f"one stored standard attention layer is {stored(**once) / standard:.1%} of standard's projections and one "
            f"stored multi-query layer {stored(**once, num_key_value_heads=1) / standard:.1%}") in words
    summary = json.loads((query_rank.RESULTS / "summary.json").read_text())
    assert f"10% is less than one stored multi-query attention layer (`mqa-att1`, " \
           f"{summary['settings']['clm-cpu']['mqa-att1']['budget']:.1%})" in words
    assert (f"`standard-att1` +{frontier_clm_mean('standard-att1'):.3f} and `mqa-att1` "
            f"+{frontier_clm_mean('mqa-att1'):.3f} nats") in words


def study_settings(*folders: str) -> dict:
    """{folder: its summary's settings} for the frontier study ("") and its follow-ups' folders."""
    return {folder: json.loads((report.HERE / folder / "results" / "summary.json").read_text())["settings"]
            for folder in folders}


def check_drift_and_causal_lm_table(readme: Path, summary: dict, re_run: int = 20) -> str:
    """A follow-up's drift sentence (its `re_run` cells of earlier studies' names, "so far" until all have landed) and
    its causal-LM table are the summary's; returns the causal-LM section's words for the figures under the table."""
    drift = summary["drift"]
    words = " ".join(readme.read_text(encoding="utf-8").split("**Drift check**", 1)[1].split("###")[0].split())
    assert f"all {len(drift['cells'])} re-run cells" + (" so far" if len(drift["cells"]) < re_run else "") in words
    assert drift["moved"] == [] and f"(largest |difference| {drift['max_abs_difference']:.1f} nats)" in words
    return check_causal_lm_section(readme, summary)[1]


def check_causal_lm_section(readme: Path, summary: dict, setting: str = "clm-cpu",
                            heading: str = "### Causal LM at width 128") -> tuple[dict, str]:
    """A follow-up's causal-LM table is the summary's; returns the setting's rows and the section's words for the
    figures under the table."""
    rows = summary["settings"][setting]
    section = readme_section(heading, readme)
    check_table(section, rows)
    return rows, " ".join(section.split())


def check_masked_lm_section(readme: Path, summary: dict, setting: str = "mlm-cpu-i6000",
                            heading: str = "### Masked LM at width 128") -> tuple[dict, str]:
    """A follow-up's MLM table is the summary's and its sentence on the "learns" test quotes the context-free null;
    returns the setting's rows and the section's words for the figures under the table."""
    rows = summary["settings"][setting]
    section = readme_section(heading, readme)
    check_table(section, rows)
    words = " ".join(section.split())
    null = summary["nulls"][setting]["context_free"]["selected"]
    assert f"the context-free null ({null:.3f} on the selected positions)" in words
    return rows, words


def test_the_query_norm_reports_drift_and_causal_lm_results_are_the_summarys():
    """The third follow-up's results so far: the drift sentence, the causal-LM table (every arm with five seeds), its
    figures, and the count of MLM cells landed while that section is under way."""
    readme = query_norm.HERE / "query-norm" / "README.md"
    summary = json.loads((query_norm.RESULTS / "summary.json").read_text())
    words = check_drift_and_causal_lm_table(readme, summary)
    rows = summary["settings"]["clm-cpu"]
    against = [row["against_standard"] for arm, row in rows.items() if arm != "standard"]
    assert all(c["verdict"] == "trails" for c in against) and "neither goal can be met by this follow-up" in words
    low, high = min(c["mean"] for c in against), max(c["mean"] for c in against)
    assert f"by {low:.3f} to {high:.3f} nats" in words
    moved = abs(rows["mqa-query-quarter-norm-att1"]["mean"] - rows["mqa-query-quarter-att1"]["mean"])
    assert f"normalising the rank-r code moves the causal-LM loss by {moved:.4f} nats" in words


def test_the_query_norm_reports_masked_lm_table_figures_and_goals_are_the_summarys():
    """The third follow-up's MLM section (table, verdicts, the arm that does not learn, the descriptive comparison of
    the two 8.3% arms, the plateau exits and end falls read from its cells) and what its width-128 cells decide."""
    readme = query_norm.HERE / "query-norm" / "README.md"
    summary = json.loads((query_norm.RESULTS / "summary.json").read_text())
    rows, words = check_masked_lm_section(readme, summary)
    null = summary["nulls"]["mlm-cpu-i6000"]["context_free"]["selected"]
    against = {arm: row["against_standard"] for arm, row in rows.items() if arm != "standard"}
    assert all(c["verdict"] == rows[a]["against_standard_mask"]["verdict"] == "trails" for a, c in against.items())
    normed = ("mqa-query-quarter-norm-att1", "mqa-query-eighth-norm-att1")
    assert (f"the quarter-rank one by {against[normed[0]]['mean']:.3f} and the eighth-rank one by "
            f"{against[normed[1]]['mean']:.3f}") in words

    plain, norm = rows["mqa-query-quarter-att1"]["losses"], rows["mqa-query-quarter-norm-att1"]["losses"]
    above = sum(norm[seed] > plain[seed] for seed in plain)
    gap = against[normed[0]]["mean"] - against["mqa-query-quarter-att1"]["mean"]
    assert f"ends above the unnormalised one on {above} of the 5 seeds, by {gap:.3f} on average" in words

    assert [arm for arm, row in rows.items() if not row["learns"]] == ["mqa-query-eighth-norm-att1"]
    failing = sorted((seed, loss) for seed, loss in rows[normed[1]]["losses"].items() if loss > null - 0.5)
    assert (f"its seeds {' and '.join(seed for seed, _ in failing)} end at "
            f"{' and '.join(f'{loss:.3f}' for _, loss in failing)}, above the null less 0.5 ({null - 0.5:.3f})") in words

    exits = query_norm.plateau_exits(query_norm.RESULTS / "cells", "mlm-cpu-i6000")
    assert all(None not in entry["seeds"].values() and len(entry["seeds"]) == 5 for entry in exits.values())
    mean = {arm: f"{entry['mean']:,.0f}" for arm, entry in exits.items()}
    assert (f"at iteration {mean['standard']} on average, the unnormalised quarter-rank arm at "
            f"{mean['mqa-query-quarter-att1']}, and the normalised arms at {mean[normed[0]]} (quarter) and "
            f"{mean[normed[1]]} (eighth)") in words
    assert min(exits[a]["mean"] for a in normed) >= exits["mqa-query-quarter-att1"]["mean"]  # "as late"
    falls = query_norm.end_falls(query_norm.RESULTS / "cells", setting="mlm-cpu-i6000")
    falls = {arm: entry["mean"] for arm, entry in falls.items()}
    rank_r = [arm for arm in rows if arm != "standard"]
    assert (f"({min(falls[a] for a in rank_r):.2f} to {max(falls[a] for a in rank_r):.2f} nats over the last 1,000 "
            f"iterations, against {falls['standard']:.2f})") in words
    assert 1.5 <= min(falls[a] for a in rank_r) / falls["standard"] <= 2.5  # "about twice as fast"

    decided = " ".join(readme_section("### What width 128 decides", readme).split())
    rule = summary["width_256_rule"]
    assert rule["arms"] == ["standard"] and rule["pending"] == [] and "no arm goes on" in decided
    assert all(summary["settings"][s][arm]["against_standard"]["mean"] > rule["threshold"]
               for s in ("clm-cpu", "mlm-cpu-i6000") for arm in rank_r)  # "over 0.05 in both"
    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == at_10["arm"] == "mqa-query-quarter-att1" and not (best["met"] or at_10["met"])
    assert at_10["verdicts"]["clm-w128"] == at_10["verdicts"]["mlm-w128"] == "trails"
    assert f"both `mqa-query-quarter-att1` ({at_10['budget']['128']:.1%})" in decided
    assert "this follow-up misses both goals" in decided


def test_the_query_rank_wide_reports_drift_and_causal_lm_results_are_the_summarys():
    """The second follow-up's drift sentence, causal-LM table (every arm with five seeds), its figures, and the claim
    that no earlier arm at or under 10% was on par in causal LM."""
    readme = query_rank_wide.HERE / "query-rank-wide" / "README.md"
    summary = json.loads((query_rank_wide.RESULTS / "summary.json").read_text())
    words = check_drift_and_causal_lm_table(readme, summary)
    rows = summary["settings"]["clm-cpu"]
    wide, plain = (rows[arm]["against_standard"] for arm in ("mqa-query-eighth-att1-wide", "mqa-query-eighth-att1"))
    assert wide["verdict"] == "on par" and plain["verdict"] == "trails"
    equal = summary["equal_parameters"]["clm-cpu"]["mqa-query-eighth-att1-wide"]
    assert equal["verdict"] == "on par" and equal["differences"] == wide["differences"]  # "the same pairing"
    parameters = [rows[arm]["parameters"] for arm in ("mqa-query-eighth-att1-wide", "standard")]
    assert f"({parameters[0]:,} against {parameters[1]:,};" in words
    assert f"at width 128 trails by {plain['mean']:.3f}" in words
    assert f"by {plain['mean'] - wide['mean']:.3f} nats" in words

    earlier = [settings["clm-cpu"] for settings in study_settings("", "query-rank", "query-norm").values()]
    at_10 = [row["against_standard"]["verdict"] for settings in earlier for arm, row in settings.items()
             if arm != "standard" and row["budget"] <= 0.10 and len(row["seeds"]) == 5]
    assert len(at_10) >= 8 and set(at_10) == {"trails"}  # "every such arm ... trails"


def test_the_query_rank_wide_reports_masked_lm_table_figures_and_goals_are_the_summarys():
    """The second follow-up's MLM section (table, verdicts, what the width buys, the arm that does not learn, the
    plateau exits and end falls read from its cells) and what its width-128 cells decide."""
    readme = query_rank_wide.HERE / "query-rank-wide" / "README.md"
    summary = json.loads((query_rank_wide.RESULTS / "summary.json").read_text())
    rows, words = check_masked_lm_section(readme, summary)
    wide_arm, plain_arm = "mqa-query-eighth-att1-wide", "mqa-query-eighth-att1"
    wide, plain = rows[wide_arm]["against_standard"], rows[plain_arm]["against_standard"]
    assert wide["verdict"] == rows[wide_arm]["against_standard_mask"]["verdict"] == "trails"
    assert f"In MLM the wide arm trails `standard`** by {wide['mean']:.3f} nats" in words
    equal = summary["equal_parameters"]["mlm-cpu-i6000"][wide_arm]
    assert equal["verdict"] == "trails" and equal["differences"] == wide["differences"]  # "trails too", "same pairing"
    assert f"unwidened trails by {plain['mean']:.3f} and does not learn" in words and plain["verdict"] == "trails"
    assert [arm for arm, row in rows.items() if not row["learns"]] == [plain_arm]
    assert f"by {plain['mean'] - wide['mean']:.3f} nats" in words

    cells = query_rank_wide.RESULTS / "cells"
    exits = query_norm.plateau_exits(cells, "mlm-cpu-i6000")
    assert all(None not in entry["seeds"].values() and len(entry["seeds"]) == 5 for entry in exits.values())
    mean = {arm: f"{entry['mean']:,.0f}" for arm, entry in exits.items()}
    assert (f"at iteration {mean['standard']} on average, the wide arm at {mean[wide_arm]} and the unwidened one at "
            f"{mean[plain_arm]}") in words
    assert exits[wide_arm]["mean"] - exits["standard"]["mean"] > 0.8 * (exits[plain_arm]["mean"]
                                                                         - exits["standard"]["mean"])  # "almost as late"
    falls = query_norm.end_falls(cells, setting="mlm-cpu-i6000")
    falls = {arm: f"{entry['mean']:.2f}" for arm, entry in falls.items()}
    assert falls[wide_arm] == falls[plain_arm]  # "both ... fall" one figure
    assert f"both rank-r arms still fall {falls[wide_arm]} nats against `standard`'s {falls['standard']}" in words

    decided = " ".join(readme_section("### What width 128 decides", readme).split())
    rule = summary["width_256_rule"]
    assert rule["arms"] == ["standard"] and rule["pending"] == [] and "no arm goes on" in decided
    clm = summary["settings"]["clm-cpu"][wide_arm]["against_standard"]["mean"]
    assert abs(clm) <= rule["threshold"] < wide["mean"]  # "within it in causal LM but ... over in MLM"
    assert f"but {wide['mean']:.3f} over `standard` in MLM" in decided
    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == at_10["arm"] == wide_arm and not (best["met"] or at_10["met"])
    assert (at_10["verdicts"]["clm-w128"], at_10["verdicts"]["mlm-w128"]) == ("on par", "trails")
    assert f"both `{wide_arm}` ({at_10['budget']['128']:.1%})" in decided
    assert "this follow-up misses both goals" in decided


def test_the_depth_reports_causal_lm_table_and_figures_are_the_summarys():
    """The fourth follow-up's causal-LM section: its table (every arm, five seeds), the wide arm on par at fewer
    parameters, what width buys, the four-layer figures set beside these, and the width-256 rule in causal LM."""
    readme = depth.HERE / "depth" / "README.md"
    summary = json.loads((depth.RESULTS / "summary.json").read_text())
    rows, words = check_causal_lm_section(readme, summary, "clm-cpu-l8")
    against = {arm: row["against_standard"] for arm, row in rows.items() if arm != "standard"}
    assert [against[a]["verdict"] for a in ("mqa-att1-wide", "standard-att1", "mqa-att1")] == ["on par", "trails",
                                                                                                 "trails"]
    equal = summary["equal_parameters"]["clm-cpu-l8"]["mqa-att1-wide"]
    assert equal["verdict"] == "on par" and equal["differences"] == against["mqa-att1-wide"]["differences"]
    parameters = [rows[arm]["parameters"] for arm in ("mqa-att1-wide", "standard")]
    assert parameters[0] < parameters[1] and f"({parameters[0]:,} against {parameters[1]:,};" in words
    gap, wide = against["mqa-att1"]["mean"], against["mqa-att1-wide"]["mean"]
    assert f"trails by {gap:.3f}; spent on width, its savings move the difference to `standard` by " \
           f"{gap - wide:.3f} nats" in words and gap - wide >= gap  # "all of the gap"

    earlier = study_settings("", "query-rank", "query-rank-wide", "query-norm")
    on_par_at_10 = [arm for settings in earlier.values() for arm, row in settings["clm-cpu"].items()
                    if arm != "standard" and row["budget"] <= 0.10 and row["against_standard"]["verdict"] == "on par"]
    assert on_par_at_10 == ["mqa-query-eighth-att1-wide"] and rows["mqa-att1-wide"]["budget"] <= 0.10  # "the second"
    four = {"standard-att1": earlier[""]["clm-cpu"], "mqa-att1": earlier["query-rank"]["clm-cpu"]}
    assert (f"plain attention stored once trails by {against['standard-att1']['mean']:.3f} here and by "
            f"{four['standard-att1']['standard-att1']['against_standard']['mean']:.3f} in the frontier's four-layer "
            f"grid, one stored multi-query layer by {gap:.3f} here and by "
            f"{four['mqa-att1']['mqa-att1']['against_standard']['mean']:.3f} in the first follow-up's") in words
    standard_at_4 = earlier["query-rank"]["clm-cpu"]["standard"]["mean"]
    assert (f"lower `standard`'s own loss by {standard_at_4 - rows['standard']['mean']:.3f} nats against the first "
            f"follow-up's four ({rows['standard']['mean']:.4f} against {standard_at_4:.4f})") in words
    assert max(abs(c["mean"]) for c in against.values()) <= summary["width_256_rule"]["threshold"]  # "every arm"


def test_the_depth_reports_masked_lm_tables_figures_and_goals_are_the_summarys():
    """The fourth follow-up's MLM section (table, every verdict left open in both views, the per-seed table of losses
    and plateau exits read from its cells, the late-exit figures) and what its width-128 cells decide."""
    readme = depth.HERE / "depth" / "README.md"
    summary = json.loads((depth.RESULTS / "summary.json").read_text())
    rows, words = check_masked_lm_section(readme, summary, "mlm-cpu-l8-i6000")
    margin = summary["margin"]
    for arm, row in rows.items():
        if arm != "standard":
            for key in ("against_standard", "against_standard_mask"):  # "reaches past the margin on both sides"
                low, high = row[key]["interval"]
                assert row[key]["verdict"] == "left open" and low < -margin and high > margin, (arm, key)
    assert all(row["learns"] for row in rows.values())

    cells = depth.RESULTS / "cells"
    exits = query_norm.plateau_exits(cells, "mlm-cpu-l8-i6000")
    seeds = first_table(readme_section("### Masked LM at width 128", readme).split("Each seed's loss", 1)[1])
    assert sorted(row[0] for row in seeds) == sorted(rows)
    for arm, *shown in seeds:
        assert shown == [f"{rows[arm]['losses'][str(seed)]:.4f} ({exits[arm]['seeds'][seed]:,})" for seed in
                         range(1, 6)], arm
        latest = max(range(1, 6), key=lambda seed: exits[arm]["seeds"][seed])  # "the seed that leaves latest"
        assert max(rows[arm]["losses"].values()) == rows[arm]["losses"][str(latest)], arm
    standard = rows["standard"]["losses"]
    others = statistics.fmean(loss for seed, loss in standard.items() if seed != "5")
    assert (f"`standard`'s seed 5 leaves at {exits['standard']['seeds'][5]:,} and ends {standard['5'] - others:.3f} "
            "nats above its other seeds' mean") in words
    falls = query_norm.end_falls(cells, setting="mlm-cpu-l8-i6000")
    wide = "mqa-att1-wide"
    assert (f"the wide arm's seed 5 leaves at {exits[wide]['seeds'][5]:,} and ends at "
            f"{rows[wide]['losses']['5']:.3f}, still falling {falls[wide]['seeds'][5]:.3f} nats") in words
    mean = {arm: f"{entry['mean']:,.0f}" for arm, entry in exits.items()}
    assert mean["standard"] == mean["standard-att1"] and max(exits, key=lambda a: exits[a]["mean"]) == wide
    assert (f"`standard` and `standard-att1` leave at {mean['standard']}, `mqa-att1` at {mean['mqa-att1']} and the "
            f"wide arm at {mean[wide]}") in words
    assert (f"the wide arm still falls {falls[wide]['mean']:.3f} nats against `standard`'s "
            f"{falls['standard']['mean']:.3f}") in words
    equal = summary["equal_parameters"]["mlm-cpu-l8-i6000"][wide]
    assert equal["verdict"] == "left open" and equal["differences"] == rows[wide]["against_standard"]["differences"]
    assert f"+{rows[wide]['against_standard']['mean']:.3f} nats on average, left open" in words
    mqa = rows["mqa-att1"]["against_standard"]["mean"]
    assert f"ends below `standard` on average ({signed(mqa)})" in words and mqa < 0
    four = study_settings("", "query-rank")
    assert all(s["mlm-cpu-i6000"]["mqa-att1"]["against_standard"]["mean"] < 0 and
               s["mlm-cpu-i6000"]["mqa-att1"]["against_standard"]["verdict"] == "left open" for s in four.values())

    decided = " ".join(readme_section("### What width 128 decides", readme).split())
    rule, clm = summary["width_256_rule"], summary["settings"]["clm-cpu-l8"]
    assert rule["arms"] == ["standard", "standard-att1", "mqa-att1"] and rule["pending"] == []
    att1, mqa_att1 = ([clm[arm]["against_standard"]["mean"], rows[arm]["against_standard"]["mean"]]
                      for arm in ("standard-att1", "mqa-att1"))
    assert max(att1 + mqa_att1) <= rule["threshold"]
    assert f"`standard-att1` ({signed(att1[0])} in causal LM, {signed(att1[1])} in MLM)" in decided
    assert f"`mqa-att1` ({signed(mqa_att1[0])}, {signed(mqa_att1[1])})" in decided
    assert (f"wide arm is within it in causal LM ({signed(clm[wide]['against_standard']['mean'])}) but "
            f"{rows[wide]['against_standard']['mean']:.3f} over `standard` in MLM") in decided
    best, at_10 = summary["best"], summary["best_at_10"]
    assert best["arm"] == at_10["arm"] == "mqa-att1" and not (best["met"] or at_10["met"])
    assert best["carried_to_width_256"] and at_10["verdicts"]["clm-w128"] == "trails"
    assert f"both `mqa-att1` ({at_10['budget']['128']:.1%})" in decided
    assert "this follow-up misses both goals" in decided
    studies = [*study_settings("", "query-rank", "query-rank-wide", "query-norm").values()]
    at_10_mlm = [row["against_standard"]["verdict"] for settings in studies
                 for arm, row in settings["mlm-cpu-i6000"].items() if arm != "standard" and row["budget"] <= 0.10]
    at_10_mlm += [row["against_standard"]["verdict"] for arm, row in rows.items()
                  if arm != "standard" and row["budget"] <= 0.10]
    assert "on par" not in at_10_mlm and "No configuration at or under a tenth has yet been placed on par" in decided
    assert f"`standard-att1` and `mqa-att1`, 8 heads, 5 seeds, both objectives: {3 * 5 * 2} cells" in decided


def test_the_frontiers_summary_of_its_follow_ups_is_their_results():
    """The frontier report's closing paragraph on its follow-ups, and the README's line on the wide arm: one arm at or
    under a tenth is on par in causal LM (the wide arm), none at or under a tenth is on par in MLM, and every rank-r
    arm trails there by at least the figure the report quotes."""
    follow_ups = study_settings("query-rank", "query-rank-wide", "query-norm")
    studies = [*study_settings("").values(), *follow_ups.values()]
    at_10 = [row for settings in studies for arm, row in settings["mlm-cpu-i6000"].items()
             if arm != "standard" and row["budget"] <= 0.10 and len(row["seeds"]) == 5]
    assert len(at_10) >= 8 and "on par" not in {row["against_standard"]["verdict"] for row in at_10}
    wide = follow_ups["query-rank-wide"]["clm-cpu"]["mqa-query-eighth-att1-wide"]
    assert wide["budget"] <= 0.10 and wide["against_standard"]["verdict"] == "on par"
    on_par_at_10 = [arm for settings in studies for arm, row in settings["clm-cpu"].items()
                    if arm != "standard" and row["budget"] <= 0.10 and row["against_standard"]["verdict"] == "on par"]
    assert on_par_at_10 == ["mqa-query-eighth-att1-wide"]
    front_door = " ".join((report.HERE.parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert ("the first configuration at or under a tenth that learns like standard attention in either objective;"
            in front_door)
    rank_r = [row["against_standard"] for settings in follow_ups.values()
              for arm, row in settings["mlm-cpu-i6000"].items() if "-query-" in arm]
    assert len(rank_r) == 9 and {c["verdict"] for c in rank_r} == {"trails"}
    words = " ".join(readme_section("## Follow-ups:").split())
    assert f"trails by {min(c['mean'] for c in rank_r):.2f} nats or more" in words
    assert "can learn like `standard` in causal LM (the second follow-up's wide arm), and none has in MLM" in words
    eight = json.loads((depth.RESULTS / "summary.json").read_text())
    clm, mlm = (eight["settings"][s] for s in ("clm-cpu-l8", "mlm-cpu-l8-i6000"))
    assert (clm["mqa-att1-wide"]["against_standard"]["verdict"], mlm["mqa-att1-wide"]["against_standard"]["verdict"],
            clm["mqa-att1"]["against_standard"]["verdict"]) == ("on par", "left open", "trails")
    assert not (eight["best"]["met"] or eight["best_at_10"]["met"])
    assert ("its wide arm is on par with `standard` in causal LM and left open in MLM, its unwidened arm trails in "
            "causal LM, so it misses both goals too") in words
    assert "(four complete at width 128)" in report.HERE.joinpath("README.md").read_text(encoding="utf-8")


def test_the_guides_budget_table_tells_each_arm_by_the_keywords_that_build_it():
    """docs/model.md's "Which sharing for which budget": each row's `SharedBertConfig` keywords are exactly the arm's
    (on top of the recipe's sizes, `standard` attention the default), and a preset named beside them sets the same
    sharing fields; its numbers and verdicts are checked by tests/test_published_figures.py."""
    import ast

    from sharedbert import sharing_preset

    guide = (report.HERE.parents[1] / "docs" / "model.md").read_text(encoding="utf-8")
    section = guide.split("## Which sharing for which budget", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    arms = json.loads((report.HERE / "results" / "arms.json").read_text())["clm-cpu"]
    assert len(rows) == 11
    for arm, _, how, *_ in rows:
        config = arms[arm.strip("`")]["config"]
        keywords, _, preset = how.partition(" (preset ")
        call = ast.parse(f"f({keywords.strip('`')})", mode="eval").body
        given = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        assert {"attention_type": "standard", **given} == {"attention_type": "standard", **config}, arm
        if preset:
            assert sharing_preset(preset.strip("`)")) == {**sharing_preset("standard"), **config}, arm


shipping = experiment_script("frontier/conversion.py")


def fake_build(preset, seed, sts_b, commit="c" * 40):
    from sharedbert import sharing_preset

    return {"preset": preset, "seed": seed, "commit": commit, "heal_precision": "bf16", "cpu": "AMD EPYC",
            "heal_steps": shipping.HEAL_STEPS, "parameters": 1000, "sts_b": sts_b, "sharing_preset": preset,
            **{k: sharing_preset(preset)[k] for k in ("attention_type", "layer_sharing")}}


def test_the_shipping_builds_run_seed_major_resume_and_record_the_folder_as_a_user_types_it(tmp_path):
    runs, results, calls = tmp_path / "runs" / "frontier-convert", tmp_path / "results", []

    def convert(arguments):
        calls.append(arguments)
        out = Path(arguments[2])
        out.mkdir(parents=True)
        heal = {"steps": shipping.HEAL_STEPS, "interrupted": False}
        (out / "conversion_report.json").write_text(json.dumps({"heal": heal, "sharing_preset": arguments[4]}))
        return 0

    def measure(folder):
        preset, seed = folder.name, int(folder.parent.name.removeprefix("seed"))
        return {k: v for k, v in fake_build(preset, seed, 0.86).items() if k not in ("preset", "seed", "commit")}

    written = shipping.run_builds([1, 2], runs_dir=runs, results_dir=results, sts=tmp_path, convert=convert,
                                  measure_build=measure)
    assert [p.name for p in written] == ["shared-projection-seed1.json", "albert-attention-seed1.json",
                                         "shared-projection-seed2.json", "albert-attention-seed2.json"]
    record = json.loads(written[1].read_text())
    assert record["command"] == ("sharedbert convert all-MiniLM-L6-v2 runs/frontier-convert/seed1/albert-attention "
                                 "--sharing-preset albert-attention --heal --steps 2860 --threads 1 --seed 1")
    # A rerun builds nothing; a finished build whose file was lost is measured again, not healed again.
    written[3].unlink()
    assert shipping.run_builds([1, 2], runs_dir=runs, results_dir=results, sts=tmp_path, convert=convert,
                               measure_build=measure) == [written[3]] and len(calls) == 4
    # A folder holding another preset is refused, not recorded.
    written[3].unlink()
    with pytest.raises(SystemExit, match="does not hold the preset albert-attention"):
        shipping.run_builds([2], runs_dir=runs, results_dir=results, sts=tmp_path, convert=convert,
                            measure_build=lambda folder: {**measure(folder), "layer_sharing": "none"})


def test_the_shipping_builds_verdicts_wait_for_every_seed_and_pair_by_seed():
    builds = {"shared-projection": {s: fake_build("shared-projection", s, v) for s, v in ((1, 0.859), (2, 0.860))},
              "albert-attention": {s: fake_build("albert-attention", s, v) for s, v in ((1, 0.849), (2, 0.851))}}
    partial = shipping.summarise(builds, original=0.867)
    assert not partial["complete"] and partial["shipped_against_baseline"]["verdict"] == "pending"
    builds["shared-projection"][3] = fake_build("shared-projection", 3, 0.861)
    builds["albert-attention"][3] = fake_build("albert-attention", 3, 0.852)
    summary = shipping.summarise(builds, original=0.867)
    shipped = summary["shipped_against_baseline"]
    assert summary["complete"] and shipped["differences"] == pytest.approx([-0.010, -0.009, -0.009])
    assert shipped["verdict"] == "trails"
    assert summary["against_original"]["shared-projection"]["verdict"] == "trails"
    albert = summary["builds"]["albert-attention"]
    assert albert["mean"] == pytest.approx(0.8507, abs=1e-4)
    assert albert["interval"][0] < albert["mean"] < albert["interval"][1]
    assert "| `albert-attention` | 1,000 | 0.8490 / 0.8510 / 0.8520 | 0.8507 |" in shipping.markdown(summary)
    builds["albert-attention"][3] = fake_build("albert-attention", 3, 0.852, commit="d" * 40)
    with pytest.raises(SystemExit, match="differ in commit"):
        shipping.summarise(builds, original=0.867)


def test_the_shipping_builds_declaration_quotes_each_presets_budget_at_minilms_sizes():
    from sharedbert.model_sizes import config_values
    from sharedbert.parameter_counts import sharing_preset_table

    rows = {row.sharing_preset: row.qkv_total for row in sharing_preset_table(config_values("minilm-l6"))}
    words = " ".join((shipping.HERE / "conversion" / "README.md").read_text(encoding="utf-8").split())
    share = {p: rows[p] / rows["standard"] for p in shipping.PRESETS}
    assert (f"the `albert-attention` preset ({share['albert-attention']:.1%} of standard's projections at "
            f"all-MiniLM-L6-v2's sizes, six layers onto one)") in words
    assert f"as well as `shared` ({share['shared-projection']:.1%})" in words
    assert f"--steps {shipping.HEAL_STEPS} --threads 1 --seed S" in words and "Seeds** 1, 2 and 3" in words


hardware_check = experiment_script("frontier/hardware_check.py")


def test_the_hardware_check_compares_each_cell_and_each_difference_to_standard_and_refuses_another_commit():
    def cells(losses, precision, commit="e" * 40):
        return {arm: {"final_validation_loss": loss, "precision": precision, "cpu": "AMD EPYC", "git_commit": commit}
                for arm, loss in losses.items()}

    study = cells({"standard": 1.85, "shared": 2.06, "gqa-2": 1.86}, "bf16")
    check = cells({"standard": 1.84, "shared": 2.06}, "fp32")
    summary = hardware_check.summarise(study, check)
    assert list(summary["arms"]) == ["standard", "shared"] and summary["arms_compared"] == 2
    shared = summary["arms"]["shared"]
    assert shared["loss_change"] == pytest.approx(0.0)
    assert shared["difference_change"] == pytest.approx(0.01) == summary["max_abs_difference_change"]
    assert summary["max_abs_loss_change"] == pytest.approx(0.01)
    assert "| `shared` | 2.0600 (bf16) | 2.0600 (fp32) | +0.0000 | +0.2100 | +0.2200 | +0.0100 |" \
        in hardware_check.markdown(summary)
    with pytest.raises(SystemExit, match="at the study's commit"):
        hardware_check.summarise(study, cells({"standard": 1.84}, "fp32", commit="f" * 40))
    with pytest.raises(SystemExit, match="`standard` must be in both"):
        hardware_check.summarise(study, cells({"shared": 2.0}, "fp32"))


def test_a_landed_shipping_build_is_committed_alone_in_the_checkout_that_holds_it(tmp_path):
    from conftest import scratch_repository

    git = scratch_repository(tmp_path, staged="other.txt")
    landed = tmp_path / "results" / "builds" / "albert-attention-seed1.json"
    landed.parent.mkdir(parents=True)
    landed.write_text("{}\n")
    shipping.commit([landed], "a build landed")
    assert git("show", "--name-only", "--format=", "HEAD").split() == ["results/builds/albert-attention-seed1.json"]
    assert "other.txt" in git("diff", "--cached", "--name-only")


def test_the_hardware_checks_reading_is_its_summary():
    import statistics

    check = json.loads((report.HERE / "results" / "hardware-check" / "summary.json").read_text())["clm-cpu"]
    study = json.loads((report.HERE / "results" / "summary.json").read_text())["settings"]["clm-cpu"]
    words = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split("## Hardware check", 1)[1].split())
    arms = check["arms"]
    assert check["arms_compared"] == len(study) == 20
    spread = min(statistics.stdev(r["against_standard"]["differences"]) for a, r in study.items() if a != "standard")
    up = sum(r["difference_change"] > 0 for a, r in arms.items() if a != "standard")
    assert (f"every cell ends within {check['max_abs_loss_change']:.4f} nats of the study's (mean change "
            f"{check['mean_loss_change']:+.4f})").replace("-", "−") in words
    assert (f"moves by at most {check['max_abs_difference_change']:.4f} nats, under a twelfth of the margin and less than "
            f"half the smallest seed-to-seed standard deviation of any arm's differences in the study ({spread:.4f}); "
            f"{up} of the 19 move up, because `standard`'s own cell moved by "
            f"{arms['standard']['loss_change']:+.4f}").replace("-0", "−0") in words
    assert check["max_abs_difference_change"] < 0.02 / 12 and check["max_abs_difference_change"] < spread / 2


def test_the_hardware_checks_mlm_reading_is_its_summary():
    import statistics

    check = json.loads((report.HERE / "results" / "hardware-check" / "summary.json").read_text())["mlm-cpu-i6000"]
    study = json.loads((report.HERE / "results" / "summary.json").read_text())["settings"]["mlm-cpu-i6000"]
    words = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split("**Results, MLM", 1)[1].split())
    arms = check["arms"]
    assert list(arms) == ["standard", "shared", "gqa-2", "standard-att1-wide"]
    changes = [abs(r["difference_change"]) for a, r in arms.items() if a != "standard"]
    spreads = [statistics.stdev(study[a]["against_standard"]["differences"]) for a in arms if a != "standard"]
    assert (f"The cells move by up to {check['max_abs_loss_change']:.4f} nats (`standard`'s "
            f"{arms['standard']['loss_change']:+.4f}, `shared`'s {arms['shared']['loss_change']:+.4f}) and the "
            f"differences to `standard` by {min(changes):.4f} to {max(changes):.4f}").replace("-0", "−0") in words
    assert f"seeds are {min(spreads):.3f} to {max(spreads):.3f})" in words and max(changes) < max(spreads)


def test_the_frontiers_drift_sentence_is_the_summarys():
    """The frontier's drift check: how many cells it shares with the charlm study and the largest difference, as the
    committed summary counts them (the count grows as width-256 cells land)."""
    drift = json.loads((report.HERE / "results" / "summary.json").read_text())["drift"]
    words = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split())
    assert f"**Drift check:** the {len(drift['cells'])} cells this study shares with the charlm study" in words
    assert f"(largest |difference| {drift['max_abs_difference']:.1f} nats" in words


def width_256_cells() -> list[dict]:
    """The committed width-256 cells of the frontier's grid, loaded as its report loads them."""
    return [cell for setting, arms in report.load_cells(report.RESULTS / "cells").items() if "-w256-" in setting
            for seeds in arms.values() for cell in seeds.values()]


def test_the_width_256_landed_count_is_the_committed_cells():
    """The Results section's count of width-256 cells (overall, and per objective and seed) is what the committed cell
    files hold, so the sentence cannot fall behind the grid as cells land."""
    rule_arms = json.loads((report.HERE / "results" / "summary.json").read_text())["width_256_rule"]["arms"]
    cells = [cell for cell in width_256_cells() if cell["arm"] in rule_arms]

    def landed(objective):
        seeds = sorted({cell["seed"] for cell in cells if cell["objective"] == objective})
        counts = [sum(c["objective"] == objective and c["seed"] == seed for c in cells) for seed in seeds]
        return ", ".join(f"seed {s}: {n} of {len(rule_arms)} arms" for s, n in zip(seeds, counts)) or "none"

    words = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split())
    assert f"{len(cells)} landed (causal LM: {landed('clm')}; MLM: {landed('mlm')}), at the same commit" in words


def test_the_reason_the_width_256_causal_lm_seeds_run_first_is_what_the_cells_timed():
    """The README says an MLM cell at width 256 takes about three times as long as a causal-LM cell; the landed cells'
    own training times say so (read as 2.5 to 3.5 times, mean against mean)."""
    words = " ".join((report.HERE / "README.md").read_text(encoding="utf-8").split())
    assert "takes about three times as long as a causal-LM cell" in words
    cells = width_256_cells()
    seconds = {objective: [cell["train_seconds"] for cell in cells if cell["objective"] == objective]
               for objective in ("clm", "mlm")}
    assert seconds["clm"] and seconds["mlm"]
    assert 2.5 <= statistics.mean(seconds["mlm"]) / statistics.mean(seconds["clm"]) <= 3.5
