"""The measuring half of `sharedbert build-minilm` (sharedbert.recipes.build_minilm): held-out pieces land in
their length buckets, the agreement per bucket is 1 for an exact conversion and below 1 for a lossy one, a longer
bucket is judged against the shortest by its standard error, and the paired design reads the same passages at every
length."""

import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from conftest import experiment_script
from test_heal import WORDS, make_teacher, make_tokenizer

from sharedbert.conversion.bert import from_bert
from sharedbert.recipes.build_minilm import (
    HELD_OUT,
    held_out_passages,
    held_out_texts,
    length_agreement,
    length_gaps,
    prefix_agreement,
)


@pytest.fixture
def book(tmp_path):
    g = torch.Generator().manual_seed(1)
    words = [WORDS[i] for i in torch.randint(len(WORDS), (6000,), generator=g)]
    path = tmp_path / "book.txt"
    path.write_text(" ".join(words), encoding="utf-8")
    return path


def test_held_out_pieces_fall_in_their_token_length_buckets(book, monkeypatch):
    import sharedbert.recipes.build_minilm as build

    monkeypatch.setattr(build, "BUCKETS", ((1, 24), (25, 48), (49, 64)))
    tokenizer = make_tokenizer()
    texts = held_out_texts(book, tokenizer, per_bucket=6, seed=0)
    assert list(texts) == [(1, 24), (25, 48), (49, 64)]
    for (low, high), pieces in texts.items():
        assert len(pieces) == 6 and len(set(pieces)) == 6
        assert all(low <= len(tokenizer(piece)["input_ids"]) <= high for piece in pieces)
    assert held_out_texts(book, tokenizer, per_bucket=6, seed=0) == texts  # seeded: the same pieces every build


def _texts(book, tokenizer):
    words = book.read_text().split()
    return {(1, 24): [" ".join(words[i * 20:i * 20 + 15]) for i in range(5)],
            (25, 64): [" ".join(words[200 + i * 60:200 + i * 60 + 50]) for i in range(5)]}


def test_an_exact_conversion_agrees_in_every_bucket_and_a_lossy_one_does_not(book):
    teacher, tokenizer = make_teacher(), make_tokenizer()
    texts = _texts(book, tokenizer)
    exact = length_agreement(from_bert(teacher, attention_type="standard").eval(), teacher, tokenizer, texts)
    assert [row["bucket"] for row in exact] == ["1-24", "25-64"]
    for row in exact:
        assert row["texts"] == 5
        assert row["mean_cosine"] == pytest.approx(1.0, abs=1e-5) and row["min_cosine"] == pytest.approx(1.0, abs=1e-5)
        assert row["sem_cosine"] < 1e-5 and row["distillation_loss"] < 1e-6
    assert all(gap["within_noise"] for gap in length_gaps(exact))

    lossy = length_agreement(from_bert(teacher, attention_type="shared").eval(), teacher, tokenizer, texts)
    for row in lossy:
        assert row["mean_cosine"] < 1 - 1e-6 and row["distillation_loss"] > 1e-5
        assert row["min_cosine"] <= row["mean_cosine"] and row["sem_cosine"] > 0


def test_a_longer_bucket_is_worse_only_when_below_the_short_one_by_two_standard_errors():
    rows = [dict(bucket="1-128", mean_cosine=0.95, sem_cosine=0.003),
            dict(bucket="129-256", mean_cosine=0.942, sem_cosine=0.004),
            dict(bucket="257-512", mean_cosine=0.92, sem_cosine=0.004)]
    near, far = length_gaps(rows)
    assert near["against"] == "1-128" and near["difference"] == pytest.approx(-0.008)
    assert near["standard_error"] == pytest.approx(0.005)  # independent pieces: errors add in quadrature
    assert near["within_noise"]  # -0.008 is 1.6 standard errors
    assert far["difference"] == pytest.approx(-0.03) and not far["within_noise"]
    better = length_gaps([rows[0], dict(bucket="129-256", mean_cosine=0.99, sem_cosine=math.nan)])
    assert better[0]["difference"] == pytest.approx(0.04)


SMALL_BUCKETS = ((1, 24), (25, 48), (49, 64))


def test_held_out_passages_are_long_enough_for_every_bucket_and_drawn_from_the_seed(book, monkeypatch):
    import sharedbert.recipes.build_minilm as build

    monkeypatch.setattr(build, "BUCKETS", SMALL_BUCKETS)
    tokenizer = make_tokenizer()
    passages = held_out_passages(book, tokenizer, count=8, seed=0, shortest=8)
    assert len(passages) == 8 and len({p["text"] for p in passages}) == 8
    for passage in passages:
        assert len(tokenizer(passage["text"])["input_ids"]) >= 64
        low_first = [8, 25, 49]
        assert all(low <= n <= high for n, low, (_, high) in zip(passage["lengths"], low_first, SMALL_BUCKETS))
    assert held_out_passages(book, tokenizer, count=8, seed=0, shortest=8) == passages
    assert held_out_passages(book, tokenizer, count=8, seed=1, shortest=8) != passages  # lengths come from the seed
    with pytest.raises(ValueError, match="passages of 64\\+ tokens"):
        held_out_passages(book, tokenizer, count=10_000)


def test_prefix_agreement_reads_each_passage_at_every_length_and_pairs_the_differences(book, monkeypatch):
    import sharedbert.recipes.build_minilm as build

    monkeypatch.setattr(build, "BUCKETS", SMALL_BUCKETS)
    teacher, tokenizer = make_teacher(), make_tokenizer()
    passages = held_out_passages(book, tokenizer, count=6, seed=0, shortest=8)

    rows, gaps = prefix_agreement(from_bert(teacher, attention_type="standard").eval(), teacher, tokenizer, passages)
    assert [row["bucket"] for row in rows] == ["1-24", "25-48", "49-64"]
    assert all(row["mean_cosine"] == pytest.approx(1.0, abs=1e-5) for row in rows)
    assert all(gap["within_noise"] and gap["paired"] for gap in gaps)

    student = from_bert(teacher, attention_type="shared").eval()
    rows, gaps = prefix_agreement(student, teacher, tokenizer, passages)
    for index, row in enumerate(rows):
        assert row["texts"] == 6 and row["mean_tokens"] == pytest.approx(sum(p["lengths"][index] for p in passages) / 6)
        assert row["mean_cosine"] < 1 - 1e-6
    # Each bucket's rows equal length_agreement on the prefixes themselves, cut by the tokenizer at those lengths.
    for index, row in enumerate(rows):
        prefixes = [tokenizer.decode(tokenizer(p["text"], truncation=True, max_length=p["lengths"][index])["input_ids"],
                                     skip_special_tokens=True) for p in passages]
        alone = length_agreement(student, teacher, tokenizer, {SMALL_BUCKETS[index]: prefixes}, batch_size=1)[0]
        assert alone["mean_cosine"] == pytest.approx(row["mean_cosine"], abs=1e-5)
    for gap, row in zip(gaps, rows[1:]):
        assert gap["difference"] == pytest.approx(row["mean_cosine"] - rows[0]["mean_cosine"])
        # Paired: the error is that of the per-passage differences, not the two buckets' errors in quadrature.
        assert gap["standard_error"] != pytest.approx(math.hypot(row["sem_cosine"], rows[0]["sem_cosine"]))


def test_prefix_curve_reads_every_passage_at_every_length_paired_against_one(book, monkeypatch):
    """The healing study's length curve (experiments/healing/length_curve.py), on the build's measure."""
    import sharedbert.recipes.build_minilm as build

    prefix_curve = experiment_script("healing/length_curve.py").prefix_curve

    monkeypatch.setattr(build, "BUCKETS", SMALL_BUCKETS)
    teacher, tokenizer = make_teacher(), make_tokenizer()
    passages = held_out_passages(book, tokenizer, count=6, seed=0, shortest=8)
    lengths = [8, 16, 32, 64]
    exact = prefix_curve(from_bert(teacher, attention_type="standard").eval(), teacher, tokenizer, passages, lengths,
                         against=32)
    assert [row["tokens"] for row in exact] == lengths and all(row["passages"] == 6 for row in exact)
    assert all(row["mean_cosine"] == pytest.approx(1.0, abs=1e-5) for row in exact)
    assert all(abs(row["difference"]) < 1e-5 for row in exact)

    student = from_bert(teacher, attention_type="shared").eval()
    curve = prefix_curve(student, teacher, tokenizer, passages, lengths, against=32)
    at = {row["tokens"]: row for row in curve}
    assert at[32]["difference"] == 0.0 and at[32]["standard_error"] == 0.0  # the reference against itself
    for row in curve:
        assert row["mean_cosine"] < 1 - 1e-6
        assert row["difference"] == pytest.approx(row["mean_cosine"] - at[32]["mean_cosine"])
    # The same numbers as prefix_agreement, whose passages read one length per bucket.
    fixed = [dict(text=p["text"], lengths=[16, 32, 64]) for p in passages]
    rows, gaps = prefix_agreement(student, teacher, tokenizer, fixed)
    assert [row["mean_cosine"] for row in rows] == pytest.approx([at[n]["mean_cosine"] for n in (16, 32, 64)],
                                                                 abs=1e-6)
    assert gaps[0]["difference"] == pytest.approx(at[32]["mean_cosine"] - at[16]["mean_cosine"], abs=1e-6)
    with pytest.raises(ValueError, match="against=128 must be one of the lengths"):
        prefix_curve(student, teacher, tokenizer, passages, lengths, against=128)


def test_the_card_describes_the_batches_the_healing_read():
    from sharedbert.recipes.build_minilm import describe_batches, heal_recipe

    assert describe_batches(heal_recipe(45.0)) == ("16 pieces of 6-40 words; 25% of the steps 2 pieces of 100-400 "
                                                   "words; up to 512 tokens")
    assert describe_batches(heal_recipe(45.0, batch_size=32, max_words=64, long_fraction=0.0)) == (
        "32 pieces of 6-64 words; no long pieces; up to 512 tokens")


def test_build_minilm_passes_every_option_to_the_library_and_heals_uncalibrated_by_default(monkeypatch, tmp_path):
    from sharedbert.cli import main
    from sharedbert.recipes import build_minilm

    calls = []
    monkeypatch.setattr(build_minilm, "build_minilm_checkpoint", lambda arguments: calls.append(asdict(arguments)))
    assert main(["build-minilm", str(tmp_path / "out")]) == 0
    # By default, the published recipe's step budget and no time limit.
    assert calls[-1]["calibration_sentences"] == 0 and (calls[-1]["steps"], calls[-1]["minutes"]) == (9184, None)
    assert main(["build-minilm", str(tmp_path / "out"), "--calibration-sentences", "512", "--minutes", "5",
                 "--work-dir", str(tmp_path / "work"), "--threads", "2"]) == 0
    expected = dict(out=str(tmp_path / "out"), work_dir=str(tmp_path / "work"), minutes=5.0, steps=None, threads=2,
                    corpus=None, sts=None, repo_id="your-name/sharedbert-all-MiniLM-L6-v2", calibration_sentences=512)
    assert {key: calls[-1][key] for key in expected} == expected
    # Either budget given replaces the default; both given, both apply.
    assert main(["build-minilm", str(tmp_path / "out"), "--steps", "6888"]) == 0
    assert calls[-1]["steps"] == 6888 and calls[-1]["minutes"] is None
    assert main(["build-minilm", str(tmp_path / "out"), "--steps", "6888", "--minutes", "90"]) == 0
    assert calls[-1]["steps"] == 6888 and calls[-1]["minutes"] == 90.0


def test_a_step_budget_anneals_over_the_steps_with_no_time_limit_unless_one_is_given():
    from sharedbert.recipes.build_minilm import heal_recipe

    by_steps = heal_recipe(None, max_steps=6888)
    assert (by_steps.max_steps, by_steps.max_minutes, by_steps.snapshot_minutes) == (6888, None, [10.0, 20.0])
    capped = heal_recipe(15.0, max_steps=6888)
    assert (capped.max_steps, capped.max_minutes, capped.snapshot_minutes) == (6888, 15.0, [10.0])
    with pytest.raises(ValueError, match="needs a budget"):
        heal_recipe(None)


@pytest.mark.slow
def test_build_minilm_heals_for_a_step_budget_and_stages_a_verified_hub_folder(minilm_path, tmp_path):
    """The documented command end to end on the real all-MiniLM-L6-v2, at a budget of 3 steps: a synthetic corpus
    (with the held-out book in its place) and a small STS-B file stand in for the shared data. One thread, the
    package's default and the suite's (two workers share two cores), and healing pieces cut at 128 tokens (the
    measured buckets still reach 512)."""
    import json
    import random

    from sharedbert.recipes.build_minilm import HELD_OUT, build_minilm_checkpoint

    rng = random.Random(0)
    words = ("the a man woman dog plays runs sees guitar ball park river city old young small red blue and but with "
             "on in under near house tree car book song day night sun moon walks reads sings").split()

    def prose(count):
        return " ".join(rng.choice(words) + ("." if rng.random() < 0.1 else "") for _ in range(count))

    corpus = tmp_path / "mlm-text"
    (corpus / HELD_OUT).parent.mkdir(parents=True)
    (corpus / HELD_OUT).write_text(prose(4000))
    (corpus / "gutenberg-nltk" / "healing.txt").write_text(prose(6000))
    sts = tmp_path / "dev.tsv"
    rows = ["index\tsentence1\tsentence2\tscore"] + [
        f"{i}\t{prose(8)}\t{prose(8)}\t{rng.uniform(0, 5):.2f}" for i in range(24)]
    sts.write_text("\n".join(rows) + "\n")

    report = build_minilm_checkpoint(
        out=tmp_path / "out", work_dir=tmp_path / "work", minutes=None, steps=3, threads=1, corpus=corpus, sts=sts,
        per_bucket=2, speed_rounds=1, heal_overrides=dict(batch_size=4, long_batch_size=1, max_length=128))

    assert report["heal"]["steps"] == 3 and not report["heal"]["interrupted"]
    assert report["heal_config"]["max_steps"] == 3 and report["heal_config"]["max_minutes"] is None
    assert report["heal_config"]["max_length"] == 128 and report["speed"]["threads"] == 1
    assert str(corpus / HELD_OUT) not in report["corpus"] and report["held_out"] == str(corpus / HELD_OUT)
    assert [row["bucket"] for row in report["length_buckets"]] == ["1-128", "129-256", "257-512"]
    assert report["parameters"]["sharedbert"] < report["parameters"]["original"]
    assert abs(report["unit_norm"] - 1.0) < 1e-4
    staged = set(report["staged_files"])
    assert {"model.safetensors", "modeling_sharedbert.py", "modules.json", "README.md"} <= staged
    assert "SentenceTransformer" in report["verification"]["loaded"]
    provenance = json.loads((tmp_path / "work" / "healed" / "sharedbert_provenance.json").read_text())
    assert provenance["healing steps"] == 3
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"{report['sts_sharedbert']:.4f}" in card
    # STS-B is what it was measured on, not trained on: the card names no training dataset.
    assert "\ndatasets:" not in card and "## Training" not in card and "| healing corpus |" in card


def test_the_healed_model_and_its_measurements_are_put_in_place_together(tmp_path, monkeypatch):
    """WORK_DIR/healed appears with eval_results.json and its provenance in one rename: a run killed while measuring,
    or whose healing was interrupted, leaves the previous healed folder (model and measurements) exactly as it was."""
    import json
    from types import SimpleNamespace

    from sharedbert.recipes import build_minilm

    corpus = tmp_path / "mlm-text"
    (corpus / HELD_OUT).parent.mkdir(parents=True)
    (corpus / HELD_OUT).write_text("held out words " * 50)
    (corpus / "healing.txt").write_text("healing words " * 50)
    sts = tmp_path / "dev.tsv"
    sts.write_text("index\tsentence1\tsentence2\tscore\n0\ta\tb\t1.0\n")
    run = {"version": "v1", "interrupted": False, "measure": lambda: None}

    def convert(**fields):
        (Path(fields["out"]) / "model.safetensors").write_text(run["version"])
        return {"heal": {"interrupted": run["interrupted"], "steps": 3, "elapsed_seconds": 1.0}, "calibration": None}

    def measure(args, model_dir, held_out, sts_file):
        assert (model_dir / "model.safetensors").read_text() == run["version"]  # measures the staged model
        run["measure"]()
        return {"sts_sharedbert": {"v1": 0.81, "v2": 0.82}[run["version"]], "sts_original": 0.86}

    # Replaced where build_minilm looks them up (it imports them at module level).
    monkeypatch.setattr(build_minilm, "convert_checkpoint", convert)
    monkeypatch.setattr(build_minilm, "_measure", measure)
    monkeypatch.setattr(build_minilm, "_provenance", lambda *a: {"version": run["version"]})
    monkeypatch.setattr(build_minilm, "load_for_hub", lambda folder: None)
    monkeypatch.setattr(build_minilm, "stage_for_hub", lambda *a, **k: SimpleNamespace(files=[], verification={}))
    work, healed = tmp_path / "work", tmp_path / "work" / "healed"

    def build():
        build_minilm.build_minilm_checkpoint(out=tmp_path / "out", work_dir=work, steps=3, corpus=corpus, sts=sts)

    def state():
        return {p.name: p.read_text() for p in sorted(healed.iterdir())}

    build()
    first = state()
    assert first["model.safetensors"] == "v1" and json.loads(first["sharedbert_provenance.json"]) == {"version": "v1"}
    assert json.loads(first["eval_results.json"])[0]["metrics"]["spearmanr"] == 0.81

    def killed():
        raise KeyboardInterrupt("killed while measuring")

    run.update(version="v2", measure=killed)
    with pytest.raises(KeyboardInterrupt, match="killed while measuring"):
        build()
    assert state() == first
    run.update(measure=lambda: None, interrupted=True)
    with pytest.raises(KeyboardInterrupt, match="run the same command again to resume"):
        build()
    assert state() == first
    assert sorted(p.name for p in work.iterdir()) == ["build_report.json", "healed"]  # no temporary folder left

    run.update(interrupted=False)
    build()
    assert state()["model.safetensors"] == "v2" and json.loads(state()["eval_results.json"])[0]["metrics"] == {
        "spearmanr": 0.82}
