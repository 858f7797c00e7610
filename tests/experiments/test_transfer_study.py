"""experiments/transfer/study.py: the held-out split keeps SST-2's sub-phrases apart, documents fall in their
buckets with one label each, and the report's paired gaps."""

import random

import pytest
from conftest import experiment_script

study = experiment_script("transfer/study.py")


def test_the_fine_tuning_pool_holds_no_span_of_a_held_out_item_and_none_that_contains_one(monkeypatch):
    monkeypatch.setattr(study, "TEST_SENTENCES", 2)
    monkeypatch.setattr(study, "DOC_POOL_SENTENCES", 1)
    rows = [("a truly wonderful and moving film about loss", 1), ("truly wonderful", 1),
            ("the plot is thin and the acting is wooden", 0), ("the acting is wooden", 0),
            ("a dull and lifeless script with no surprises", 0), ("no surprises", 0), ("short one", 1),
            ("an unrelated sentence about a great cast here", 1), ("an unrelated sentence about a great cast here "
                                                                  "and more", 1)]
    split = study.split_sst2(rows, random.Random(0))
    held = [text for text, _ in split["test"] + split["doc_pool"]]
    assert len(split["test"]) == 2 and len(split["doc_pool"]) == 1
    for text, _ in split["finetune"]:
        assert all(text not in h and h not in text for h in held), text
    assert ("short one", 1) in split["finetune"]  # too short to be held out, and no part of one


def test_documents_fall_in_their_bucket_with_one_label(monkeypatch):
    monkeypatch.setattr(study, "DOCS_PER_BUCKET", 4)

    class WordTokenizer:
        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": text.split()}

    rng = random.Random(1)
    pool = [(" ".join(f"w{label}" for _ in range(rng.randint(8, 30))), label) for label in (0, 1) for _ in range(200)]
    documents = study.make_documents(pool, WordTokenizer(), random.Random(2))
    assert len(documents) == 4 * len(study.BUCKETS)
    for document in documents:
        low, high = map(int, document["bucket"].split("-"))
        assert low <= document["tokens"] <= high
        assert document["tokens"] == len(document["text"].split()) + 2
        assert set(document["text"].split()) == {f"w{document['label']}"}


def test_gaps_are_paired_by_seed_in_points():
    cells = {f"{arm}/seed{seed}": {"arm": arm, "seed": seed, "accuracy": {"test": value}}
             for arm, values in (("bert", (0.80, 0.90, 0.85)), ("healed", (0.78, 0.87, 0.84)))
             for seed, value in zip((1, 2, 3), values)}
    mean, error, n = study.paired(cells, "healed", "bert", lambda c: c["accuracy"]["test"])
    assert n == 3 and round(mean, 6) == -2.0 and round(error, 6) == round((1 / 3) ** 0.5 * 1.0, 6)
    assert study.paired(cells, "ft-pull", "bert", lambda c: c["accuracy"]["test"]) is None


def test_mixed_documents_hold_both_labels_with_the_named_one_in_the_majority(monkeypatch):
    monkeypatch.setattr(study, "DOCS_PER_BUCKET", 6)

    class WordTokenizer:
        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": text.split()}

    rng = random.Random(1)
    pool = [(" ".join(f"w{label}" for _ in range(rng.randint(8, 20))), label) for label in (0, 1) for _ in range(200)]
    documents = study.make_mixed_documents(pool, WordTokenizer(), random.Random(3))
    assert len(documents) == 6 * len(study.BUCKETS)
    for document in documents:
        words = document["text"].split()
        assert f"w{document['label']}" in words and f"w{1 - document['label']}" in words  # both labels
        assert 0.5 < document["majority_share"] < 1  # the document's label holds most of its sentences
        low, high = map(int, document["bucket"].split("-"))
        assert low <= document["tokens"] <= high


def test_the_directed_arms_run_only_when_named_and_start_from_the_build_named_after_their_type(tmp_path):
    assert not any(arm.startswith("directed-") for arm in study.STUDY_ARMS)
    assert set(study.DIRECTED_ARMS) <= set(study.PROBED)
    build = tmp_path / "shared_lowrank_query"
    build.mkdir()
    (build / "config.json").write_text("{}")
    model, options = study.start_of("directed-shared-lowrank-query", 1, tmp_path, None, 1, tmp_path)
    assert model == str(build) and options == {}
    try:
        study.start_of("directed-shared-kv", 1, tmp_path, None, 1, tmp_path)
    except SystemExit as error:
        assert "--attention-type shared_kv --heal --steps 2860" in str(error)
    else:
        raise AssertionError("a missing build must stop the cell with the command that makes it")


def test_the_report_pairs_the_directed_builds_with_the_shared_build(monkeypatch):
    sets = ["test", *(f"{low}-{high}" for low, high in study.BUCKETS)]
    cells = {f"{arm}/seed{seed}": {"arm": arm, "seed": seed, "accuracy": {s: base + 0.01 * seed for s in sets}}
             for arm, base in (("directed-shared", 0.80), ("directed-shared-lowrank-query", 0.82))
             for seed in (1, 2, 3)}
    monkeypatch.setattr(study, "load_results", lambda: {"cells": cells})
    text = study.report()
    section = text.split("against the `shared` build")[1]
    assert "| directed-shared-lowrank-query | " + " | ".join(["+2.0 ± 0.0"] * 5) + " |" in section
    assert "| directed-shared-kv |" not in section


def test_the_rules_read_95_percent_t_intervals_and_keep_the_2_se_reading(monkeypatch):
    sets = ["test", *(f"{low}-{high}" for low, high in study.BUCKETS)]

    def cell(arm, seed, test, documents):
        return {"arm": arm, "seed": seed, "accuracy": {"test": test, **{s: documents for s in sets[1:]}}}

    # healed behind noise-healed in domain by 0.5, 0.35, 0.2 points: mean - 2 SE < 0 < mean + 4.30 SE
    cells = {f"{a}/seed{s}": cell(a, s, t, d) for a, values in (
        ("noise-healed", [(0.820, 0.95), (0.820, 0.95), (0.820, 0.95)]),
        ("healed", [(0.815, 0.95), (0.8165, 0.95), (0.818, 0.95)]),
        ("ft-pull", [(0.815, 0.96), (0.8165, 0.961), (0.818, 0.962)]),  # documents +1.0, +1.05, +1.1: helps
        ("ft-llrd", [(0.80, 0.96), (0.80, 0.961), (0.80, 0.962)])) for s, (t, d) in enumerate(values, start=1)}
    judged = study.verdicts(cells)
    specific = judged["specific_to_shared_form"]
    in_domain = specific["comparisons"]["in domain"]
    assert in_domain["differences"] == pytest.approx([-0.5, -0.35, -0.2])
    assert in_domain["verdict"] == "left open" and in_domain["verdict_2se"] == "trails"
    assert in_domain["higher_is_better"] is True and in_domain["margin"] == 0.0
    assert specific["specific"] is False and specific["specific_2se"] is True
    assert judged["candidates"]["ft-pull"]["helps"] is True
    assert judged["candidates"]["ft-llrd"]["comparisons"]["mean of buckets"]["verdict"] == "ahead"
    assert judged["candidates"]["ft-llrd"]["helps"] is False  # loses 1.65 points in domain, more than 0.5
    monkeypatch.setattr(study, "load_results", lambda: {"cells": cells})
    assert "not shown (was: yes with 2 SE)" in study.report()
