"""experiments/downstream: a tiny end-to-end cell on a synthetic corpus and synthetic GLUE-like TSVs (so nothing
skips), the masks, the noise, `evaluate --cell --tsv`, resume/skip and the report on made-up results."""

import json
import random

import pytest
import torch
from conftest import experiment_script

study = experiment_script("downstream/study.py")

WORDS = "the a good bad film movie plot actor story great awful fine dull bright dark king queen".split()


def sentence(rng, n=None):
    return " ".join(rng.choice(WORDS) for _ in range(n or rng.randint(3, 9)))


def write_tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (["\t".join(header)] if header else []) + ["\t".join(map(str, row)) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def make_data(root):
    """A corpus folder (two books, the held-out one, a Latin-1 file the study must read with its encoding) and a GLUE
    folder laid out as GLUE's download script lays it out."""
    rng = random.Random(0)
    corpus = root / "mlm-text" / "books"
    corpus.mkdir(parents=True)
    for name in ("one.txt", "two.txt", study.HELD_OUT_FILE):
        (corpus / name).write_text("\n".join(sentence(rng).capitalize() + "." for _ in range(300)) + "\n")
    (corpus / "chesterton-ball.txt").write_bytes("Brunetière and Coppée.\n".encode("latin-1") * 40)
    glue = root / "glue"
    for split, n in (("train", 40), ("dev", 16)):
        write_tsv(glue / "SST-2" / f"{split}.tsv", ["sentence", "label"], [(sentence(rng) + " ", i % 2) for i in range(n)])
        write_tsv(glue / "CoLA" / f"{split}.tsv", None, [("src", i % 2, "", sentence(rng)) for i in range(n)])
        write_tsv(glue / "MRPC" / f"{split}.tsv", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                  [(i % 2, i, i, sentence(rng), sentence(rng)) for i in range(n)])
        write_tsv(glue / "RTE" / f"{split}.tsv", ["index", "sentence1", "sentence2", "label"],
                  [(i, sentence(rng), sentence(rng), ("entailment", "not_entailment")[i % 2]) for i in range(n)])
        write_tsv(glue / "STS-B" / f"{split}.tsv", ["index", "genre", "filename", "year", "old_index", "source1",
                                                   "source2", "sentence1", "sentence2", "score"],
                  [(i, "g", "f", "y", i, "s", "s", sentence(rng), sentence(rng), f"{rng.uniform(0, 5):.2f}")
                   for i in range(n)])
    return root / "mlm-text", glue


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One tiny cell run to its results file (shared by the tests that read it)."""
    root = tmp_path_factory.mktemp("downstream")
    corpus, glue = make_data(root)
    arguments = ["--recipe", "test", "--threads", "1", "--corpus", str(corpus), "--glue-dir", str(glue),
                 "--results-dir", str(root / "cells"), "--work-dir", str(root / "work")]
    assert study.main(["cell", "--arm", "shared", "--seed", "1", *arguments]) == 0
    return root, arguments


@pytest.mark.slow
def test_a_tiny_cell_writes_a_complete_result(finished):
    root, _ = finished
    cell = json.loads((root / "cells" / "test-shared-seed1.json").read_text())
    assert (cell["arm"], cell["seed"], cell["recipe"], cell["pilot"]) == ("shared", 1, "test", False)
    for key in ("git_commit", "device", "precision", "cpu", "torch", "transformers", "corpus_sha256"):
        assert key in cell
    assert cell["precision"] in ("bf16", "fp32") and cell["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    pretraining = cell["pretraining"]
    assert [p["iteration"] for p in pretraining["curve"]] == [0, 3, 6]
    assert pretraining["nulls"]["validation"]["context_free"] < pretraining["nulls"]["validation"]["unigram"]
    assert pretraining["learns"] == (pretraining["below_context_free_null"] >= study.LEARNS_BELOW_NULL)
    assert study.HELD_OUT_FILE in cell["corpus_files"] and cell["held_out_file"] == study.HELD_OUT_FILE
    assert set(cell["tasks"]) == set(study.TASKS)
    conditions = {"clean"} | {f"{k}-{i:g}" for k in ("swap", "delete", "keyboard") for i in (0.05, 0.15)}
    for task, record in cell["tasks"].items():
        assert set(record["dev"]) == conditions, task
        assert record["dev_rows"] == 12  # the test recipe's eval_limit
        assert "score" in record["baseline"] and "score" in record["dev"]["clean"]
    assert cell["tasks"]["mrpc"]["baseline"]["predicts"] in (0, 1)
    book = cell["tasks"]["sst2"]["unlabelled"]
    assert len(book["held_out_book"]) == 10 and "held_out_book:swap-0.15" in book


@pytest.mark.slow
def test_the_encoder_loads_with_automodel_and_the_latin1_book_is_read(finished):
    from transformers import AutoModel

    root, _ = finished
    folder = root / "work" / "test-shared-seed1" / "pretrained"
    assert (folder / "model.safetensors").exists()
    model = AutoModel.from_pretrained(folder)
    assert type(model).__name__ == "SharedBertModel" and model.config.attention_type == "shared"
    vocabulary = json.loads((folder / "char_vocabulary.json").read_text())
    assert "è" in vocabulary["characters"] and "é" in vocabulary["characters"]  # decoded as Latin-1, not replaced
    assert not (root / "work" / "test-shared-seed1" / "pretraining").exists()  # checkpoints gone once saved
    assert model.config.hidden_dropout_prob == 0.0  # pretraining's dropout; fine-tuning's is the recipe's 0.1
    tuned = json.loads((root / "work" / "test-shared-seed1" / "finetuned" / "sst2" / "config.json").read_text())
    assert tuned["hidden_dropout_prob"] == tuned["attention_probs_dropout_prob"] == 0.1


def test_the_held_out_book_stays_out_of_pretraining(tmp_path):
    corpus_dir, _ = make_data(tmp_path)
    book = tmp_path / "mlm-text" / "books" / study.HELD_OUT_FILE
    book.write_text("Zyzzyva quux! " * 200)  # characters no other file has
    corpus = study.load_corpus(corpus_dir, study.RECIPES["test"])
    train = "".join(corpus.vocabulary.characters[i - 5] if i >= 5 else "?" for i in corpus.train_ids.tolist())
    assert "Zyzzyva" not in train and "Z" not in corpus.vocabulary.characters
    assert len(corpus.ood_ids) == len(study.normalise(book.read_text()))


@pytest.mark.slow
def test_a_finished_cell_is_skipped_and_a_cut_cell_reuses_its_finished_stages(finished, capsys):
    root, arguments = finished
    path = root / "cells" / "test-shared-seed1.json"
    before = path.read_text()
    assert study.main(["cell", "--arm", "shared", "--seed", "1", *arguments]) == 0
    assert "finished already" in capsys.readouterr().out and path.read_text() == before
    # As if killed after the fine-tunings: the results file is gone, the saved stages stay and are reused.
    path.rename(root / "saved.json")
    try:
        assert study.main(["cell", "--arm", "shared", "--seed", "1", *arguments]) == 0
        again, first = json.loads(path.read_text()), json.loads((root / "saved.json").read_text())
        assert again["pretraining"] == first["pretraining"] and again["tasks"]["sst2"]["dev"] == first["tasks"]["sst2"]["dev"]
    finally:
        (root / "saved.json").replace(path)


@pytest.mark.slow
def test_pretraining_resumes_from_its_latest_complete_checkpoint(tmp_path, monkeypatch):
    from transformers import TrainerCallback

    class StopAfterFirstSave(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            raise KeyboardInterrupt  # as a kill right after checkpoint-3 is on disk

    corpus_dir, _ = make_data(tmp_path)
    recipe = study.RECIPES["test"]
    corpus = study.load_corpus(corpus_dir, recipe)
    whole = study.pretrain("standard", 1, recipe, corpus, tmp_path / "whole", "fp32", "cpu")
    run_dir = tmp_path / "cut"
    monkeypatch.setattr(study, "TRAINER_CALLBACKS", [StopAfterFirstSave()])
    with pytest.raises(KeyboardInterrupt):
        study.pretrain("standard", 1, recipe, corpus, run_dir, "fp32", "cpu")
    monkeypatch.setattr(study, "TRAINER_CALLBACKS", [])
    assert study.latest_complete_checkpoint(run_dir / "pretraining").name == "checkpoint-3"
    broken = run_dir / "pretraining" / "checkpoint-4"
    broken.mkdir()  # no trainer_state.json: a save cut short by a kill
    resumed = study.pretrain("standard", 1, recipe, corpus, run_dir, "fp32", "cpu")
    assert resumed["resumed_from"] == "checkpoint-3" and not broken.exists()
    assert resumed["validation_loss"] == pytest.approx(whole["validation_loss"], abs=1e-4)
    assert (run_dir / "pretrained" / "model.safetensors").exists()


def test_validation_masks_are_fixed_and_count_exact(tmp_path):
    ids = torch.randint(5, 40, (5000,), generator=torch.Generator().manual_seed(1))
    first = study.fixed_windows(ids, 66, 20, 0.15, 40)
    again = study.fixed_windows(ids, 66, 20, 0.15, 40)
    assert study.examples_sha256(first) == study.examples_sha256(again) and len(first) == 20
    for example in first:
        assert example["input_ids"][0] == study.CLS and example["input_ids"][-1] == study.SEP
        assert int((example["labels"] != -100).sum()) == round(0.15 * 64)
    windows = study.TrainWindows(ids, 4000, 66, 7, 0.15, 40)
    masked = torch.stack([windows[k]["input_ids"] for k in range(4000)])
    labels = torch.stack([windows[k]["labels"] for k in range(4000)])
    selected = labels != -100
    assert abs(selected[:, 1:-1].float().mean() - 0.15) < 0.01
    share_mask = float((masked[selected] == study.MASK).float().mean())
    assert abs(share_mask - 0.8) < 0.02 and torch.equal(windows[5]["input_ids"], windows[5]["input_ids"])


@pytest.mark.parametrize("kind", study.NOISES)
def test_noise_is_seeded_and_at_its_intensity(kind):
    text = "The quick brown fox jumps over the lazy dog while Emma reads. " * 40
    rows = study.Rows([(text, "a second sentence here")], [1])
    first = study.noisy_rows(rows, kind, 0.15, "sst2")
    assert first.texts == study.noisy_rows(rows, kind, 0.15, "sst2").texts  # the same for every arm and seed
    assert first.texts != study.noisy_rows(rows, kind, 0.15, "mrpc").texts  # but drawn per task and row
    assert study.noisy_rows(rows, kind, 0.0, "sst2").texts == rows.texts
    noisy = first.texts[0][0]
    letters = sum(c.isalpha() for c in text)
    if kind == "delete":
        rate = (len(text) - len(noisy)) / letters
    elif kind == "insert":
        rate = (len(noisy) - len(text)) / len(text)
    else:
        assert len(noisy) == len(text)
        rate = sum(a != b for a, b in zip(text, noisy)) / letters / (2 if kind == "swap" else 1)
    # a swap needs a letter after the letter, takes two letters and changes nothing in "ee": fewer changes
    assert (0.06 if kind == "swap" else 0.10) < rate < 0.20, (kind, rate)
    low = study.noisy_rows(rows, kind, 0.05, "sst2").texts[0][0]
    changes = (lambda out: abs(len(out) - len(text))) if kind in ("delete", "insert") else (
        lambda out: sum(a != b for a, b in zip(text, out)))
    assert 0 < changes(low) < changes(noisy)


def test_keyboard_neighbours_are_adjacent_keys():
    assert set(study.NEIGHBOURS["g"]) == set("tyfhvb") and set(study.NEIGHBOURS["q"]) == set("wa")
    assert all(c not in study.NEIGHBOURS[c] for c in study.NEIGHBOURS)
    assert study.noisy("AAAA", "keyboard", 1.0, random.Random(0)).isupper()


@pytest.mark.slow
def test_evaluate_scores_a_tsv_and_names_a_bad_line(finished, tmp_path, capsys):
    root, _ = finished
    good = tmp_path / "good.tsv"
    good.write_text("sentence\tlabel\na fine film\t1\na dull plot\t0\nbright and good\t1\n")
    assert study.main(["evaluate", "--cell", "test-shared-seed1", "--tsv", str(good), "--work-dir",
                       str(root / "work")]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["rows"] == 3 and 0 <= scored["accuracy"] <= 1 and scored["labelled_positive"] == 2
    bad_columns = tmp_path / "columns.tsv"
    bad_columns.write_text("a fine film\t1\na dull plot\t0\textra\n")
    with pytest.raises(SystemExit, match=r"columns\.tsv, line 2: 3 tab-separated column"):
        study.main(["evaluate", "--cell", "test-shared-seed1", "--tsv", str(bad_columns), "--work-dir",
                    str(root / "work")])
    bad_label = tmp_path / "label.tsv"
    bad_label.write_text("a fine film\t1\na dull plot\tpositive\n")
    with pytest.raises(SystemExit, match=r"label\.tsv, line 2, column 2: label 'positive'"):
        study.main(["evaluate", "--cell", "test-shared-seed1", "--tsv", str(bad_label), "--work-dir",
                    str(root / "work")])
    with pytest.raises(SystemExit, match="no fine-tuned SST-2 model of cell 'cpu-shared-seed9'"):
        study.main(["evaluate", "--cell", "cpu-shared-seed9", "--tsv", str(good), "--work-dir", str(root / "work")])


def made_up_cell(arm, seed, scores, baseline, drop=0.0, learns=True):
    """A results file as a cell writes it, with the fields the report reads."""
    tasks = {}
    for task in study.TASKS:
        clean = scores[task]
        tasks[task] = {"dev": {"clean": {"score": clean}, "swap-0.05": {"score": clean - drop},
                               "delete-0.15": {"score": clean - 2 * drop}},
                       "baseline": {"score": baseline[task]}}
    tasks["sst2"]["unlabelled"] = {"held_out_book": [0, 1, 1, 0], "held_out_book:swap-0.05": [0, 1, 0, 0]}
    return {"arm": arm, "seed": seed, "recipe": "cpu", "pilot": False, "git_commit": "abc", "precision": "bf16",
            "device": "cpu", "cpu": "made up",
            "pretraining": {"learns": learns, "validation_loss": 1.5, "held_out_book_loss": 1.7}, "tasks": tasks}


BASELINE = {"sst2": 50.9, "mrpc": 75.0, "rte": 52.7, "cola": 0.0, "stsb": 0.0}


def made_up_grid(shared_offset, symmetric_offset=-8.0, noise=(2.0, 1.0)):
    """standard clearly above baseline on sst2 and stsb, everything at baseline (plus noise) on mrpc, rte, cola."""
    cells = []
    for seed in range(1, 6):
        jitter = [0.3, -0.2, 0.1, -0.4, 0.2][seed - 1]
        base = {"sst2": 75 + jitter, "mrpc": 75 + jitter, "rte": 52.7 - jitter, "cola": 0.5 * jitter, "stsb": 40 + jitter}
        for arm, offset, drop, spread in (("standard", 0.0, noise[0], 0.1), ("shared", shared_offset, noise[1], 0.3),
                                          ("symmetric", symmetric_offset, noise[0], 0.1),
                                          ("pairwise", -1.0, noise[0], -0.5)):
            scores = {t: v + (offset + spread * jitter if t in ("sst2", "stsb") else 0) for t, v in base.items()}
            cells.append(made_up_cell(arm, seed, scores, BASELINE, drop))
    return cells


def test_the_report_judges_the_claims_on_informative_tasks_only():
    summary = study.summarise(made_up_grid(shared_offset=0.2))
    assert summary["informative"] == ["sst2", "stsb"]
    assert summary["uninformative"] == ["mrpc", "rte", "cola"]
    claims = summary["claims"]
    assert claims["shared vs standard"]["verdict"] == study.SUPPORTED  # on par
    assert claims["shared vs symmetric"]["verdict"] == study.SUPPORTED  # ahead by 8 points
    assert claims["shared vs pairwise"]["verdict"] == study.OPEN  # +1.2 ± 0.1 against a 1-point margin: not decided
    measured = claims["shared vs standard"]["measured"]
    assert measured["higher_is_better"] is True and measured["margin"] == study.MARGINS["average"]
    assert len(measured["differences"]) == 5 and measured["verdict"] == "on par"
    assert claims["noise"]["verdict"] == study.SUPPORTED  # shared drops 1 point a condition less than standard
    assert claims["noise"]["measured"]["higher_is_better"] is False
    assert claims["out_of_domain"]["verdict"] == study.OPEN
    assert summary["held_out_book_consistency"]["shared"][1] == 75.0
    row = summary["comparisons_to_standard"]["shared"]
    assert set(row) == {*study.TASKS, "average"} and all("differences" in c for c in row.values())
    low, high = measured["interval"]
    assert f"measured {measured['mean']:+.2f}, interval [{low:+.2f}, {high:+.2f}]" in study.summary_markdown(summary)


def test_the_report_contradicts_a_trailing_shared_and_refuses_parity_without_informative_tasks():
    trailing = study.summarise(made_up_grid(shared_offset=-3.0, symmetric_offset=-3.0))
    assert trailing["claims"]["shared vs standard"]["verdict"] == study.CONTRADICTED
    assert trailing["claims"]["shared vs symmetric"]["verdict"] == study.CONTRADICTED  # on par, not 5.81 ahead
    flat = [made_up_cell(arm, seed, BASELINE, BASELINE) for seed in range(1, 6) for arm in ("standard", "shared")]
    summary = study.summarise(flat)
    assert summary["informative"] == [] and summary["glue_average_informative"] == {}
    assert all(summary["claims"][k]["verdict"] == study.OPEN for k in summary["claims"])
    assert "uninformative" in summary["claims"]["shared vs standard"]["why"]
    markdown = study.summary_markdown(summary)
    assert "uninformative at this scale: sst2, mrpc, rte, cola, stsb" in markdown


def test_an_arm_that_does_not_learn_leaves_its_claims_open():
    cells = made_up_grid(shared_offset=0.2)
    for cell in cells:
        if cell["arm"] == "shared" and cell["seed"] == 3:
            cell["pretraining"]["learns"] = False
    summary = study.summarise(cells)
    assert summary["claims"]["shared vs standard"]["verdict"] == study.OPEN
    assert "did not learn" in summary["claims"]["shared vs standard"]["why"]


def test_the_report_refuses_cells_of_two_precisions_or_commits():
    """A machine without native bf16 runs `auto` in fp32 under the same CPU name: such a cell is refused, not pooled."""
    cells = made_up_grid(shared_offset=0.2)
    cells[3]["precision"] = "fp32"
    with pytest.raises(SystemExit, match=r"these differ: \{'precision': \['bf16', 'fp32'\]\}"):
        study.summarise(cells)
    cells[3]["precision"], cells[5]["git_commit"] = "bf16", "def"
    with pytest.raises(SystemExit, match="git_commit"):
        study.summarise(cells)


def declared_grid(shared_offset):
    """made_up_grid with every declared arm: the arms it lacks score as `standard` does."""
    cells = made_up_grid(shared_offset)
    made = {cell["arm"] for cell in cells}
    for cell in [c for c in cells if c["arm"] == "standard"]:
        cells += [{**cell, "arm": arm} for arm in study.DEFAULT_ARMS if arm not in made]
    return cells


def test_a_partial_grid_is_reported_with_every_claim_pending(tmp_path, capsys):
    """The declaration writes verdicts only when every arm has its five seeds: until then the report says how many
    declared cells have landed, and each claim is pending with what the cells so far give beside it."""
    cells = [c for c in declared_grid(shared_offset=0.2) if not (c["arm"] == "bert" and c["seed"] == 5)]
    for index, cell in enumerate(cells):
        (tmp_path / f"{index}.json").write_text(json.dumps(cell))
    assert study.main(["report", "--results-dir", str(tmp_path), "--out-dir", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary-cpu.json").read_text())
    assert summary["missing_cells"] == ["bert-seed5"] and summary["declared_cells"] == 35
    claims = summary["claims"]
    assert {claim["verdict"] for claim in claims.values()} == {study.PENDING}
    assert claims["shared vs standard"]["provisional_verdict"] == study.SUPPORTED
    assert claims["shared vs standard"]["why"] == "34 of 35 declared cells have landed; provisionally supported"
    assert claims["out_of_domain"]["why"].startswith("34 of 35 declared cells have landed; provisionally left open: ")
    markdown = (tmp_path / "out" / "summary-cpu.md").read_text()
    assert "**Partial: 34 of 35 declared cells have landed.**" in markdown
    assert "shared vs standard: **pending**" in markdown and "**supported**" not in markdown


def test_the_added_arm_is_the_frontiers_best_and_stays_out_of_the_declared_grid():
    """The frontier named its best configuration at <= 35% before this grid ended, so it is one more line of ARMS,
    as its summary gives it at width 128 (this recipe's sizes): one stored standard layer, its savings on width. The
    declared arms, the grid's default and the declared cells are unchanged."""
    frontier = json.loads((study.HERE.parent / "frontier" / "results" / "summary.json").read_text())["best"]
    assert set(study.ADDED_ARMS) == {frontier["arm"]} and study.ARMS[frontier["arm"]] == frontier["config"]["w128"]
    assert frontier["arm"] not in study.DEFAULT_ARMS and len(study.DEFAULT_ARMS) == 7
    recipe = study.RECIPES["shakespeare"]
    assert (recipe.width, recipe.layers, recipe.heads) == (128, 4, 4)  # the frontier's width-128 sizes
    model = study.mlm_model(frontier["arm"], recipe, 67)
    assert (model.config.hidden_size, model.config.intermediate_size) == (148, 592)
    standard = study.mlm_model("standard", recipe, 67)
    share = study.attention_projection_parameters(model) / study.attention_projection_parameters(standard)
    assert round(share, 3) == round(frontier["budget"]["128"], 3)
    assert abs(study.parameter_count(frontier["arm"], recipe, 67) / study.parameter_count("standard", recipe, 67)
               - 1) < 0.011


def test_an_added_arms_cells_are_a_comparison_of_their_own(tmp_path, capsys):
    """The added arm's cells run at the commit that adds it: the report keeps them out of the declared summary (its
    35 cells and claims) and pairs them by seed with `standard`'s, refusing a cell of another precision."""
    cells = declared_grid(shared_offset=0.2)
    wide = [{**cell, "arm": "standard-att1-wide", "git_commit": "later"} for cell in cells if cell["arm"] == "shared"]
    for index, cell in enumerate(cells + wide):
        (tmp_path / f"{index}.json").write_text(json.dumps(cell))
    assert study.main(["report", "--results-dir", str(tmp_path), "--out-dir", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary-cpu.json").read_text())
    assert summary["declared_cells"] == 35 and not summary["missing_cells"]
    assert "standard-att1-wide" not in summary["arms"]
    assert summary["claims"]["shared vs standard"]["verdict"] == study.SUPPORTED
    added = summary["added_arms"]["standard-att1-wide"]
    assert added["seeds"] == [1, 2, 3, 4, 5] and added["git_commit"] == ["later"]
    shared = summary["comparisons_to_standard"]["shared"]
    for task in ("sst2", "stsb"):  # the same scores as `shared`, so the same paired differences
        assert added["against_standard"][task]["differences"] == shared[task]["differences"]
    assert added["noise_against_standard"]["mean_drop"]["verdict"] == \
        summary["noise_comparisons_to_standard"]["shared"]["mean_drop"]["verdict"]
    assert "## Added arm `standard-att1-wide` (a comparison of its own, at later)" in \
        (tmp_path / "out" / "summary-cpu.md").read_text()
    (tmp_path / "odd.json").write_text(json.dumps({**wide[0], "seed": 6, "precision": "fp32"}))
    with pytest.raises(SystemExit, match="precision"):
        study.main(["report", "--results-dir", str(tmp_path), "--out-dir", str(tmp_path / "out")])


def declared_summary(shared_offset, landed=35):
    """The report's summary of declared_grid, with its first `landed` cells."""
    declared = [(arm, seed) for seed in study.DECLARED_SEEDS for arm in study.DEFAULT_ARMS]
    return study.summarise(declared_grid(shared_offset)[:landed], declared=declared)


def test_a_claim_over_grids_is_what_every_complete_grid_says_and_open_where_they_differ():
    """shakespeare/README.md, "A third grid": grids are never pooled; a claim every complete grid judges alike keeps
    that verdict and one they judge differently is left open; while only one is complete, its verdict."""
    key = "shared vs standard"
    ahead, behind, partial = declared_summary(0.2), declared_summary(-5.0), declared_summary(-5.0, landed=34)
    assert (ahead["claims"][key]["verdict"], behind["claims"][key]["verdict"]) == (study.SUPPORTED, study.CONTRADICTED)
    assert study.combine_grids({"fp32": ahead, "bf16": behind})["claims"][key] == {
        "verdict": study.OPEN, "why": "the complete grids differ",
        "by_grid": {"fp32": study.SUPPORTED, "bf16": study.CONTRADICTED}}
    alike = study.combine_grids({"fp32": ahead, "bf16": ahead})["claims"][key]
    assert (alike["verdict"], alike["why"]) == (study.SUPPORTED, "the verdict of the fp32 grid and the bf16 grid")
    one = study.combine_grids({"fp32": partial, "bf16": ahead})
    assert one["claims"][key] == {"verdict": study.SUPPORTED, "why": "the verdict of the bf16 grid",
                                  "by_grid": {"fp32": study.PENDING, "bf16": study.SUPPORTED}}
    assert (one["grids"]["fp32"]["landed"], one["grids"]["fp32"]["complete"]) == (34, False)
    assert study.combine_grids({"fp32": partial})["claims"][key]["verdict"] == study.PENDING
    # A third grid can only leave open what two complete grids settle alike, never settle it otherwise.
    three = study.combine_grids({"fp32": ahead, "bf16": ahead, "xeon-bf16": behind})["claims"][key]
    assert (three["verdict"], three["why"]) == (study.OPEN, "the complete grids differ")
    three_partial = study.combine_grids({"fp32": ahead, "bf16": ahead, "xeon-bf16": partial})["claims"][key]
    assert three_partial["verdict"] == study.SUPPORTED and three_partial["by_grid"]["xeon-bf16"] == study.PENDING


def test_the_grids_command_writes_the_combined_claims_and_names_a_bad_grid(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps(declared_summary(0.2, landed=34)))
    (tmp_path / "b.json").write_text(json.dumps(declared_summary(0.2)))
    grids = ["--grid", f"fp32={tmp_path / 'a.json'}", "--grid", f"bf16={tmp_path / 'b.json'}"]
    assert study.main(["grids", *grids, "--out-dir", str(tmp_path / "out")]) == 0
    combined = json.loads((tmp_path / "out" / "grids-shakespeare.json").read_text())
    assert combined["claims"]["shared vs standard"]["verdict"] == study.SUPPORTED
    markdown = (tmp_path / "out" / "grids-shakespeare.md").read_text()
    assert "| fp32 | 34 of 35 (under way) | bf16 | made up |" in markdown
    assert "| shared vs standard | **supported** | the verdict of the bf16 grid | pending | supported |" in markdown
    for bad, why in ((f"{tmp_path / 'a.json'}", "expected NAME=SUMMARY.json"), ("c=missing.json", "not a file"),
                     (f"fp32={tmp_path / 'b.json'}", "given twice")):
        with pytest.raises(SystemExit, match=why):
            study.main(["grids", "--grid", f"fp32={tmp_path / 'a.json'}", "--grid", bad, "--out-dir", str(tmp_path)])


def test_the_report_command_writes_its_three_files(tmp_path, capsys):
    cells = declared_grid(shared_offset=0.2)
    assert len(cells) == len(study.DEFAULT_ARMS) * len(study.DECLARED_SEEDS)
    for index, cell in enumerate(cells):
        (tmp_path / f"{index}.json").write_text(json.dumps(cell))
    assert study.main(["report", "--results-dir", str(tmp_path), "--out-dir", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary-cpu.json").read_text())
    assert summary["informative"] == ["sst2", "stsb"] and summary["missing_cells"] == []
    markdown = (tmp_path / "out" / "summary-cpu.md").read_text()
    assert "shared vs standard: **supported**" in markdown and "Partial" not in markdown
    assert (tmp_path / "out" / "summary-cpu.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(SystemExit, match="no finished cells"):
        study.main(["report", "--recipe", "gpu", "--results-dir", str(tmp_path), "--out-dir", str(tmp_path)])


def test_the_plots_noise_curves_are_the_mean_score_lost_on_the_given_tasks():
    """made_up_grid: each task loses `drop` points at swap 0.05 and twice that at delete 0.15 (standard 2, shared 1)."""
    curves = study.noise_curves(made_up_grid(shared_offset=0.2, noise=(2.0, 1.0)), ["sst2", "stsb"])
    assert curves["standard"] == {"delete": [(0.0, 0.0), (0.15, pytest.approx(4.0))],
                                  "swap": [(0.0, 0.0), (0.05, pytest.approx(2.0))]}
    assert curves["shared"]["delete"][1] == (0.15, pytest.approx(2.0))


def test_the_plots_pretraining_curve_averages_seeds_where_every_seed_recorded():
    cells = made_up_grid(shared_offset=0.2)[:2]  # standard and shared, seed 1
    cells.append({**cells[0], "seed": 2, "pretraining": {**cells[0]["pretraining"]}})
    cells[0]["pretraining"]["curve"] = [{"iteration": 0, "loss": 4.0}, {"iteration": 10, "loss": 2.0}]
    cells[2]["pretraining"]["curve"] = [{"iteration": 0, "loss": 3.0}, {"iteration": 5, "loss": 2.5}]
    assert study.pretraining_curves(cells) == {"standard": [(0, 3.5)]}  # shared recorded none: no line


def test_every_arm_builds_and_the_matched_arm_matches_standard():
    recipe = study.RECIPES["cpu"]
    counts = {arm: study.parameter_count(arm, recipe, 102) for arm in study.ARMS}
    assert abs(counts["shared-matched"] - counts["standard"]) < 2 * recipe.width + 10
    assert counts["shared"] < counts["standard"] and counts["bert"] == counts["standard"]
    with pytest.raises(SystemExit, match="Unknown arm"):
        study.make_cell("no-such-arm", 1, "cpu")


def test_the_pilot_never_reads_a_dev_set_and_names_its_overrides(tmp_path):
    _, glue = make_data(tmp_path)
    for task_folder in ("SST-2", "CoLA", "MRPC", "RTE", "STS-B"):
        (glue / task_folder / "dev.tsv").unlink()
    tasks = study.load_tasks(glue, pilot=True)
    train, scored = tasks["sst2"]
    assert len(train) == 36 and len(scored) == 4  # a fixed 10% of the 40 training rows
    with pytest.raises(SystemExit, match="dev.tsv: no such file"):
        study.load_tasks(glue, pilot=False)
    cell = study.make_cell("shared", 1, "cpu", overrides={"pretrain_iters": 20, "pretrain_batch": 4})
    assert cell.name == "cpu-i20-b4-shared-seed1" and cell.recipe.pretrain_iters == 20
    assert cell.recipe.eval_interval == 20 and cell.recipe.warmup_iters == 10
    assert study.make_cell("shared", 1, "cpu").name == "cpu-shared-seed1"
    # the recipe gate's fallbacks differ from cpu only where declared
    cpu, short, long = study.RECIPES["cpu"], study.RECIPES["cpu-c64"], study.RECIPES["cpu-long"]
    assert study.dataclasses.replace(short, context=128, pretrain_batch=8) == cpu
    assert study.dataclasses.replace(long, pretrain_iters=6000) == cpu
    assert study.make_cell("standard", 2, "cpu-c64").name == "cpu-c64-standard-seed2"


def report_table(heading: str) -> list[list[str]]:
    """The body rows of the first table under `heading` in the study's README, cells stripped of backticks."""
    text = (study.HERE / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows]


@pytest.mark.parametrize("heading, folder", [("### Recipe gate: what ran", "pilot"),
                                             ("### After the gate: the same pipeline on tiny Shakespeare",
                                              "diagnostic-text")])
def test_the_reports_pilot_tables_are_their_results_files(heading, folder):
    """Each row of the report's gate and diagnostic tables (recipe, arm, validation loss, context-free null, below it,
    learns, SST-2 on the training split, CPU seconds of pretraining) reads as its committed pilot cell says."""
    rows = report_table(heading)
    assert rows, f"no table under {heading!r}"
    for recipe, arm, loss, null, below, learns, sst2, cpu_seconds in rows:
        cell = json.loads((study.HERE / "results" / folder / f"{recipe}-{arm}-seed1.json").read_text())
        pretraining = cell["pretraining"]
        assert cell["pilot"] and cell["scored_on"] == "train split" and cell["recipe"] == recipe
        assert loss == f"{pretraining['validation_loss']:.3f}"
        assert null == f"{pretraining['nulls']['validation']['context_free']:.3f}"
        assert below == f"{pretraining['below_context_free_null']:.3f}"
        assert learns == ("yes" if pretraining["learns"] else "no")
        assert sst2 == f"{cell['tasks']['sst2']['dev']['clean']['score']:.1f}"
        assert cpu_seconds == f"{pretraining['cpu_seconds_this_process']:,.0f}"
        if folder != "pilot":  # the diagnostic: the gate's cell changed in nothing but the corpus
            gate = json.loads((study.HERE / "results" / "pilot" / f"{recipe}-{arm}-seed1.json").read_text())
            assert cell["hyperparameters"] == gate["hyperparameters"] and cell["seed"] == gate["seed"]
            assert set(cell["corpus_files"]) == {"input.txt", study.HELD_OUT_FILE} != set(gate["corpus_files"])


probe = experiment_script("downstream/finetune_probe.py")


def test_the_bag_of_characters_reference_learns_what_characters_tell():
    """The probe's encoder-free reference separates rows whose classes use different letters, and is at chance where
    the classes use the same letters in another order (it reads frequencies, never order)."""
    vocabulary = probe.STUDY.Vocabulary(list("abcdefghijklmnopqrstuvwxyz "))
    rng = random.Random(0)
    rows = lambda words, n: probe.STUDY.Rows([(" ".join(rng.choice(words[i % 2]) for _ in range(4)),)  # noqa: E731
                                              for i in range(n)], [i % 2 for i in range(n)])
    letters = (["good", "fine"], ["bad", "awful"])
    assert probe.bag_of_characters(rows(letters, 200), rows(letters, 100), vocabulary, 64) == 100.0
    anagrams = (["stop", "pots"], ["tops", "spot"])
    assert 30 <= probe.bag_of_characters(rows(anagrams, 200), rows(anagrams, 100), vocabulary, 64) <= 70


@pytest.mark.slow
def test_the_finetune_probe_trains_on_training_rows_only_and_keeps_its_results(finished, tmp_path, monkeypatch):
    root, _ = finished
    glue = root / "glue"
    monkeypatch.setattr(probe, "PROBES", (("pretrained", 2, 3e-4), ("scratch", 2, 3e-4)))
    out = tmp_path / "probe.json"
    pretrained = root / "work" / "test-shared-seed1" / "pretrained"
    arguments = ["--pretrained", str(pretrained), "--recipe", "test", "--glue-dir", str(glue), "--out", str(out)]
    (tmp_path / "no-dev").mkdir()
    for task_folder in ("SST-2", "CoLA", "MRPC", "RTE", "STS-B"):  # a probe that read a dev set would fail here
        (tmp_path / "no-dev" / task_folder).mkdir()
        (tmp_path / "no-dev" / task_folder / "train.tsv").write_bytes((glue / task_folder / "train.tsv").read_bytes())
    arguments[arguments.index(str(glue))] = str(tmp_path / "no-dev")
    assert probe.main(arguments) == 0
    result = json.loads(out.read_text())
    assert result["scored_on"] == "train split" and (result["train_rows"], result["scored_rows"]) == (36, 4)
    assert [(p["initialisation"], p["steps"]) for p in result["probes"]] == [("pretrained", 2), ("scratch", 2)]
    assert all(0 <= p["score"] <= 100 and p["train_losses"] for p in result["probes"])
    assert result["majority"] == 50.0 and 0 <= result["bag_of_characters"] <= 100
    assert result["pretrained"]["validation_loss"] > 0 and result["git_commit"]
    with pytest.raises(SystemExit, match="exists; --overwrite replaces it"):
        probe.main(arguments)
    with pytest.raises(SystemExit, match="char_vocabulary.json: no such file"):
        probe.main(["--pretrained", str(tmp_path), "--out", str(tmp_path / "other.json")])


def test_the_reports_probe_table_is_its_results_file():
    """The fine-tuning probe's table, its two references and the figures its bullets quote read as the committed
    results file says."""
    text = (study.HERE / "README.md").read_text(encoding="utf-8")
    section = text.split("#### Fine-tuning probe", 1)[1].split("\n#", 1)[0]
    result = json.loads((study.HERE / "results" / "diagnostic-text" / "finetune-probe.json").read_text())
    assert result["scored_on"] == "train split" and result["git_commit"].startswith("27a5f68")
    assert (f"Majority class {result['majority']:.1f}, bag of characters {result['bag_of_characters']:.1f} "
            f"({result['scored_rows']:,} rows scored, {result['train_rows']:,} trained on)") in section
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith(("| pretrained", "| scratch"))]
    assert len(rows) == len(result["probes"])
    for row, probe_run in zip(rows, result["probes"]):
        assert row == [probe_run["initialisation"], f"{probe_run['steps']:,}", f"{probe_run['learning_rate']:.0e}"
                       .replace("e-0", "e-"), f"{probe_run['score']:.1f}",
                       f"{probe_run['train_losses'][-1]['loss']:.3f}", f"{probe_run['cpu_seconds']:.0f}"]
    scores = {(p["initialisation"], p["steps"], p["learning_rate"]): p["score"] for p in result["probes"]}
    long_pretrained = [scores[("pretrained", 3000, 3e-4)], scores[("pretrained", 3000, 1e-4)]]
    scratch = scores[("scratch", 3000, 3e-4)]
    assert f"reaches {long_pretrained[0]:.1f} (3e-4) and {long_pretrained[1]:.1f} (1e-4)" in section
    assert f"3,000 steps reach {scratch:.1f}" in section
    assert [round(s - scratch, 1) for s in long_pretrained] == [1.3, 1.8] and "1.3 to 1.8 points" in section
    assert all(round(s - result["bag_of_characters"]) == 3 for s in long_pretrained)  # "about 3 points above"
    assert scores[("pretrained", 600, 3e-4)] < result["bag_of_characters"]  # "600 steps stay below"
    assert round(scores[("pretrained", 120, 3e-4)], 1) == round(result["majority"], 1)  # "at the majority class"


# --- The second study's recipe (shakespeare/README.md) -----------------------------------------------------------------

def test_the_shakespeare_recipe_differs_from_cpu_c64_only_where_declared():
    shakespeare = study.RECIPES["shakespeare"]
    assert study.dataclasses.replace(shakespeare, finetune_steps=120, finetune_max_epochs=None, corpus=()) == \
        study.RECIPES["cpu-c64"]
    assert shakespeare.corpus[-1].endswith(study.HELD_OUT_FILE)
    assert study.make_cell("shared", 3, "shakespeare").name == "shakespeare-shared-seed3"


@pytest.mark.parametrize("rows, steps", [(67349, 3000), (3668, 1147), (2490, 779), (8551, 2673), (5749, 1797),
                                         (10, 4)])
def test_fine_tuning_stops_at_its_steps_or_its_epoch_cap(rows, steps):
    assert study.finetune_steps(study.RECIPES["shakespeare"], rows) == steps
    assert study.finetune_steps(study.RECIPES["cpu"], rows) == 120  # the first study: no cap


def test_a_corpus_of_named_files_reads_only_those_and_holds_the_book_out(tmp_path):
    corpus_dir, _ = make_data(tmp_path)
    books = corpus_dir / "books"
    files = [books / "one.txt", books / study.HELD_OUT_FILE]
    corpus = study.load_corpus(files, study.RECIPES["test"])
    assert sorted(corpus.files) == sorted(p.name for p in files)
    assert study.ood_sentences(files, 5) == study.ood_sentences(corpus_dir, 5)
    with pytest.raises(SystemExit, match=f"has no {study.HELD_OUT_FILE}"):
        study.load_corpus(files[:1], study.RECIPES["test"])


def test_a_cell_file_written_before_a_recipe_field_existed_still_counts_as_finished():
    cell = study.make_cell("shared", 1, "cpu")
    wanted = study.identity(cell, "abc")
    stored = json.loads(json.dumps(wanted))
    for key in ("finetune_max_epochs", "corpus"):  # the first study's files lack these
        del stored["hyperparameters"][key]
    assert study.configuration_differences(stored, wanted) == []
    stored["hyperparameters"]["finetune_steps"] = 3000
    stored["corpus_sha256"] = "def"
    assert study.configuration_differences(stored, wanted) == ["corpus_sha256", "hyperparameters.finetune_steps"]
    other = study.identity(study.make_cell("shared", 1, "shakespeare"), "abc")
    assert "hyperparameters.corpus" in study.configuration_differences(stored, other)


def test_the_shakespeare_recipes_text_is_the_diagnostics_text():
    """The declared corpus, read from the shared data, is the one the diagnostic's encoders learned on."""
    from sharedbert.data.location import shared_data_dir

    recipe = study.RECIPES["shakespeare"]
    missing = [path for path in recipe.corpus if shared_data_dir(path) is None]
    if missing:
        pytest.skip(f"{missing} not in a shared data folder (the shared data folder sits beside the repository)")
    source = [study.default_data(path) for path in recipe.corpus]
    corpus = study.load_corpus(source, recipe)
    diagnostic = json.loads((study.HERE / "results" / "diagnostic-text" / "cpu-c64-standard-seed1.json").read_text())
    assert corpus.sha256 == diagnostic["corpus_sha256"] and corpus.vocabulary.size == diagnostic["vocab_size"]
    declared = " ".join((study.HERE / "shakespeare" / "README.md").read_text(encoding="utf-8").split())
    book = corpus.files[study.HELD_OUT_FILE]["characters"]
    assert (f"{corpus.files['input.txt']['characters']:,} characters once whitespace runs are one space), its last 2% "
            f"the in-domain validation text ({len(corpus.validation_ids):,} characters)") in declared
    assert f"({book:,} characters)" in declared and f"the {corpus.vocabulary.size - 5} characters seen" in declared


def test_the_second_studys_unknown_and_truncated_shares_are_the_dev_texts(glue_dir):
    """The declaration's [UNK] and truncation shares, recomputed from the dev sets' text (no labels are read)."""
    recipe = study.RECIPES["shakespeare"]
    from sharedbert.data.location import shared_data_dir

    if any(shared_data_dir(path) is None for path in recipe.corpus):
        pytest.skip("tiny Shakespeare not in a shared data folder (it sits beside the repository)")
    characters = set(study.load_corpus([study.default_data(p) for p in recipe.corpus], recipe).vocabulary.characters)
    declared = " ".join((study.HERE / "shakespeare" / "README.md").read_text(encoding="utf-8").split())
    unknown, truncated = [], {}
    for task, name in (("sst2", "SST-2"), ("mrpc", "MRPC"), ("rte", "RTE"), ("cola", "CoLA"), ("stsb", "STS-B")):
        rows = study.read_glue(glue_dir, task, "dev")
        text = "".join("".join(pair) for pair in rows.texts)
        unknown.append(f"{100 * sum(c not in characters for c in text) / len(text):.2f}% of {name}'s")
        room = recipe.context - 1 - len(rows.texts[0])
        truncated[task] = 100 * sum(sum(map(len, pair)) > room for pair in rows.texts) / len(rows)
    assert "[UNK]`: " + ", ".join(unknown[:-1]).replace("of SST-2's", "of SST-2's dev characters") in declared
    assert unknown[-1] in declared
    assert (f"cuts {truncated['sst2']:.0f}% of SST-2's dev sentences" in declared
            and f"{truncated['cola']:.0f}% of CoLA's, {truncated['stsb']:.0f}% of STS-B's pairs" in declared)
    assert truncated["mrpc"] == truncated["rte"] == 100


def test_the_second_studys_declared_tables_are_the_codes():
    """shakespeare/README.md's arms table (parameters, projections) and its per-task steps come from study.py."""
    recipe = study.RECIPES["shakespeare"]
    text = (study.HERE / "shakespeare" / "README.md").read_text(encoding="utf-8")
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            for line in text.split("- **Arms**", 1)[1].splitlines() if line.strip().startswith("| `")]
    assert [row[0] for row in rows] == list(study.ARMS)
    assert "(FFN 639)" in dict((row[0], row[1]) for row in rows)["shared-matched"]
    assert study.matched_intermediate_size("shared-matched", recipe, 67) == 639
    standard = study.attention_projection_parameters(study.mlm_model("standard", recipe, 67))
    for arm, parameters, projections in rows:
        assert int(parameters.split()[0].replace(",", "")) == study.parameter_count(arm, recipe, 67)
        stored = study.attention_projection_parameters(study.mlm_model(arm, recipe, 67))
        assert projections == f"{stored:,} ({100 * stored / standard:.1f}%)".replace("(100.0%)", "(100%)")
    steps = {"sst2": 67349, "mrpc": 3667, "rte": 2490, "cola": 8551, "stsb": 5749}  # GLUE's training rows
    phrase = ("SST-2 {} steps ({:.2f} epochs), MRPC {:,}, RTE {:,}, CoLA {:,}, STS-B {:,} ({:,} in all)".format(
        f"{study.finetune_steps(recipe, steps['sst2']):,}", study.finetune_steps(recipe, steps["sst2"]) * 32 / 67349,
        *(study.finetune_steps(recipe, steps[t]) for t in ("mrpc", "rte", "cola", "stsb")),
        sum(study.finetune_steps(recipe, n) for n in steps.values())))
    assert phrase in " ".join(text.split())


def test_the_indexes_and_the_first_studys_pointers_name_the_second_studys_budget():
    steps = f"{study.RECIPES['shakespeare'].finetune_steps:,}"
    for path in (study.HERE.parent / "README.md", study.HERE / "README.md", study.HERE / "shakespeare" / "README.md"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert f"up to {steps} steps a task" in text, path
