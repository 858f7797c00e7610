"""experiments/shared-layer-fit: the declared rule on made-up scores, and the report's table against its committed
results file."""

import json

import pytest
from conftest import EXPERIMENTS_DIR, experiment_script

measure = experiment_script("shared-layer-fit/measure.py")
RESULTS = EXPERIMENTS_DIR / "shared-layer-fit" / "results" / "measure.json"


def scores(train_by_count: dict) -> dict:
    return {sets: {fit: {"train": value, "dev": 0.5} for fit, value in fits.items()}
            for sets, fits in train_by_count.items()}


def test_auto_takes_invariant_only_where_it_wins_on_train_at_every_count():
    everywhere = scores({1: {"weights": 0.60, "invariant": 0.61}, 2: {"weights": 0.70, "invariant": 0.72}})
    assert measure.choose(everywhere) == {"winner_per_count": {1: "invariant", 2: "invariant"},
                                          "auto_takes_invariant": True}
    once = scores({1: {"weights": 0.61, "invariant": 0.60}, 2: {"weights": 0.70, "invariant": 0.72}})
    assert measure.choose(once)["auto_takes_invariant"] is False


def test_the_reports_table_and_choice_are_the_results_files():
    if not RESULTS.exists():
        pytest.skip("experiments/shared-layer-fit/results/measure.json is not there: run measure.py")
    record = json.loads(RESULTS.read_text())
    readme = (EXPERIMENTS_DIR / "shared-layer-fit" / "README.md").read_text()
    assert measure.table(record) in readme
    choice = measure.choose({int(k): v for k, v in record["scores"].items()})
    assert choice["auto_takes_invariant"] == record["choice"]["auto_takes_invariant"]
    verdict = "takes `invariant`" if choice["auto_takes_invariant"] else "stays as it was"
    assert f"**`auto` {verdict}**" in readme
