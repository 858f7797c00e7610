"""sharedbert.data: GLUE/CSV/JSON checking and loading, metrics, and the raw-text corpus for MLM pretraining.

Real files from ../shared/data where it matters (their quirks: CoLA without header, MRPC's byte-order mark, SST-2's
trailing spaces, RTE's string labels, STS-B's float scores, Moby Dick's CRLF, Julius Caesar's Latin-1)."""

import math

import numpy as np
import pytest

from sharedbert import data
from sharedbert.data import DataError

GLUE_COUNTS = {  # rows per split, from the data README
    "sst2": (67349, 872),
    "cola": (8551, 1043),
    "mrpc": (3667, 408),
    "rte": (2490, 277),
    "stsb": (5749, 1500),
    "wnli": (635, 71),
}


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


# ---------------------------------------------------------------------------------------------------------------------
# The real GLUE files


@pytest.mark.parametrize("task", sorted(GLUE_COUNTS))
def test_real_glue_files_pass_the_checks(glue_dir, task):
    spec = data.get_task(task)
    checked = data.check_glue_task(glue_dir, spec, ("train", "validation", "test"))
    assert (checked["train"].rows, checked["validation"].rows) == GLUE_COUNTS[task]
    assert not checked["test"].labelled
    if spec.labels is not None:
        assert set(checked["train"].label_values) == set(spec.labels)


def test_task_specs_carry_the_glue_metric():
    assert data.get_task("SST-2").metrics == ("accuracy",)
    assert data.get_task("cola").metrics == ("matthews_correlation",)
    assert set(data.get_task("mrpc").metrics) == {"f1", "accuracy"}
    assert set(data.get_task("sts-b").metrics) == {"pearson", "spearman"}
    assert data.get_task("stsb").is_regression and data.get_task("stsb").num_labels == 1
    assert data.get_task("rte").metrics == data.get_task("wnli").metrics == ("accuracy",)
    with pytest.raises(ValueError, match="Unknown task 'qqq'.*sst2"):
        data.get_task("qqq")


def test_glue_loads_through_datasets_cached_and_maps_batched(glue_dir, tokenizer, tmp_path):
    cache = str(tmp_path / "cache")
    loaded = []
    for _ in range(2):
        task = data.load_task("rte", data_dir=glue_dir, splits=("validation",), cache_dir=cache)
        loaded.append(task.datasets["validation"])
    first, second = loaded
    assert len(first) == 277 and set(first.column_names) == {"text", "text_pair", "label"}
    # RTE labels are strings in the file; ids follow the spec's order.
    assert first[0]["label"] == data.get_task("rte").labels.index("not_entailment")
    # The second load reads the Arrow cache written by the first (same cache files, nothing regenerated).
    files = [f["filename"] for f in first.cache_files]
    assert files and files == [f["filename"] for f in second.cache_files]
    assert all(name.startswith(cache) for name in files)

    encoded = data.tokenize(first, tokenizer, max_length=32)
    assert {"input_ids", "attention_mask", "token_type_ids", "label", "length"} <= set(encoded.column_names)
    assert max(encoded["length"]) == 32  # RTE premises are long: truncation happened
    # Pairs are encoded as [CLS] a [SEP] b [SEP] with segment ids 0 then 1.
    row = encoded[0]
    assert row["input_ids"][0] == tokenizer.cls_token_id and row["input_ids"].count(tokenizer.sep_token_id) == 2
    assert row["token_type_ids"][-1] == 1


def test_glue_quirks_are_handled(glue_dir, tmp_path):
    cache = str(tmp_path / "cache")
    sst2 = data.load_task("sst2", data_dir=glue_dir, splits=("validation",), cache_dir=cache).datasets["validation"]
    assert sst2[0]["text"] == "it 's a charming and often affecting journey ."  # GLUE's trailing space stripped
    assert sorted(set(sst2["label"])) == [0, 1]
    cola = data.load_task("cola", data_dir=glue_dir, splits=("validation",), cache_dir=cache).datasets["validation"]
    assert cola[0]["text"] == "The sailors rode the breeze clear of the rocks."  # no header row: nothing lost
    assert len(cola) == 1043
    mrpc = data.load_task("mrpc", data_dir=glue_dir, splits=("validation",), cache_dir=cache).datasets["validation"]
    assert mrpc[0]["label"] == 1 and mrpc[0]["text_pair"].startswith('" The foodservice')  # quotes kept as text
    stsb = data.load_task("stsb", data_dir=glue_dir, splits=("validation",), cache_dir=cache).datasets["validation"]
    assert stsb[0]["label"] == pytest.approx(5.0) and isinstance(stsb[1]["label"], float)
    test = data.load_task("sst2", data_dir=glue_dir, splits=("test",), cache_dir=cache).datasets["test"]
    assert len(test) == 1821 and set(test["label"]) == {-1}


# ---------------------------------------------------------------------------------------------------------------------
# Bad files: each error names the file, the line and what is wrong


def _sst2_dir(tmp_path, train_text, encoding="utf-8"):
    folder = tmp_path / "glue" / "SST-2"
    folder.mkdir(parents=True)
    payload = train_text if isinstance(train_text, bytes) else train_text.encode(encoding)
    (folder / "train.tsv").write_bytes(payload)
    (folder / "dev.tsv").write_text("sentence\tlabel\ngood\t1\n")
    return tmp_path / "glue"


@pytest.mark.parametrize(
    "content, message",
    [
        ("sentence\tlabel\nfine film\t1\nbad film\t2\n",
         r"train\.tsv, line 3, column 'label': label '2' is not in the label set \['0', '1'\]"),
        ("text\tlabel\nfine film\t1\n", r"train\.tsv, line 1: the header lacks column\(s\) \['sentence'\]"),
        ("sentence\tscore\nfine film\t1\n", r"train\.tsv, line 1: missing column\(s\) \['label'\]"),
        ("sentence\tlabel\nfine film\t1\nsplit\tin\t1\n",
         r"train\.tsv, line 3, column 3: expected 2 tab-separated fields .*found 3.*Remove the stray tab\(s\)\.$"),
        ("sentence\tlabel\n \t1\n", r"train\.tsv, line 2, column 'sentence': the text is empty"),
        ("", r"train\.tsv: the file is empty"),
        ("sentence\tlabel\n", r"train\.tsv: the file has a header but no data rows"),
        (b"sentence\tlabel\nfine\t1\nC\xe6sar\t0\n",
         r"train\.tsv, line 3, byte 2 of the line: not UTF-8 text \(byte 0xe6, byte 24 of the file\).*Re-save the "
         r"file as UTF-8"),
    ],
    ids=["label", "header", "label-column", "fields", "empty-text", "empty-file", "no-rows", "not-utf8"],
)
def test_bad_glue_file_is_named_with_its_line(tmp_path, content, message):
    glue = _sst2_dir(tmp_path, content)
    with pytest.raises(DataError, match=message):
        data.load_task("sst2", data_dir=glue)


def test_missing_files_and_folders_are_named(tmp_path):
    with pytest.raises(DataError, match=r"SST-2: no such folder.*GLUE root"):
        data.load_task("sst2", data_dir=tmp_path)
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_text("sentence\tlabel\nok\t1\n")
    with pytest.raises(DataError, match=r"dev\.tsv: file not found"):
        data.load_task("sst2", data_dir=tmp_path)
    with pytest.raises(DataError, match="--data-dir .*: no such folder"):
        data.load_task("sst2", data_dir=tmp_path / "nowhere")


def test_regression_scores_must_be_numbers(tmp_path):
    folder = tmp_path / "STS-B"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t4.5\nc\td\thigh\n")
    with pytest.raises(DataError, match=r"line 3, column 'score': 'high' is not a number"):
        data.check_glue_file(folder / "train.tsv", data.get_task("stsb"))


def test_labels_in_test_file_are_not_required(glue_dir):
    checked = data.check_glue_file(data.glue_file(glue_dir, data.get_task("sst2"), "test"), data.get_task("sst2"),
                                   labelled=False)
    assert checked.rows == 1821
    with pytest.raises(DataError, match=r"missing column\(s\) \['label'\].*unlabelled test file"):
        data.check_glue_file(data.glue_file(glue_dir, data.get_task("sst2"), "test"), data.get_task("sst2"))


# ---------------------------------------------------------------------------------------------------------------------
# Own CSV / JSON files


def test_custom_csv_and_json_load_with_inferred_labels(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text('review,stars\n"Great, really great",5\n"meh",3\n"awful ""film""",1\n"fine",5\n')
    valid = tmp_path / "valid.jsonl"
    valid.write_text('{"review": "lovely", "stars": 5}\n\n{"review": "bad", "stars": 1.0}\n')
    task = data.load_task(files={"train": train, "validation": valid}, text_columns="review", label_column="stars",
                          cache_dir=str(tmp_path / "cache"))
    assert task.spec.labels == ("1", "3", "5") and task.spec.metrics == ("accuracy",)
    assert task.datasets["train"]["text"][2] == 'awful "film"'  # CSV quoting honoured
    assert task.datasets["train"]["label"] == [2, 1, 0, 2]
    assert task.datasets["validation"]["label"] == [2, 0]  # 5 and 1.0 map to the training label ids


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("v.csv", "review,stars\nok,4\n", r"v\.csv, line 2, column 'stars': label '4' is not in the label set"),
        ("v.csv", "review,rating\nok,5\n", r"v\.csv, line 1: missing column\(s\) \['stars'\]"),
        ("v.csv", "review,stars\nok,5,extra\n",
         r"v\.csv, line 2, column 3: expected 2 comma-separated fields \(\['review', 'stars'\]\), found 3"),
        ("v.jsonl", '{"review": "ok", "stars": 5}\n{"review": "x", "stars": 5\n',
         r"v\.jsonl, line 2, column \d+: invalid JSON"),
        ("v.json", '[{"review": "ok", "stars": 5}, {"stars": 1}]',
         r"v\.json, record 2: missing field\(s\) \['review'\]"),
        ("v.txt", "review,stars\n", r"unknown file type '\.txt'"),
    ],
    ids=["label", "column", "fields", "jsonl", "json", "suffix"],
)
def test_bad_custom_files_are_named(tmp_path, name, content, message):
    train = tmp_path / "train.csv"
    train.write_text("review,stars\ngood,5\nbad,1\n")
    (tmp_path / name).write_text(content)
    with pytest.raises(DataError, match=message):
        data.load_task(files={"train": train, "validation": tmp_path / name}, text_columns="review",
                       label_column="stars")


# ---------------------------------------------------------------------------------------------------------------------
# Metrics


def test_metrics_match_their_definitions():
    labels = np.array([1, 1, 1, 0, 0, 1, 0, 1])
    preds = np.array([1, 0, 1, 0, 1, 1, 0, 1])
    tp, tn, fp, fn = 4, 2, 1, 1
    mcc = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert data.compute_metrics(data.get_task("cola"), preds, labels) == pytest.approx({"matthews_correlation": mcc})
    assert data.compute_metrics(data.get_task("mrpc"), preds, labels) == pytest.approx(
        {"f1": 2 * tp / (2 * tp + fp + fn), "accuracy": 6 / 8}
    )
    scores, gold = np.array([0.1, 0.4, 0.2, 0.9]), np.array([0.0, 3.0, 1.0, 5.0])
    result = data.compute_metrics(data.get_task("stsb"), scores, gold)
    assert result["spearman"] == pytest.approx(1.0)  # same order
    assert result["pearson"] == pytest.approx(np.corrcoef(scores, gold)[0, 1])
    logits = np.array([[0.2, 0.1], [0.0, 3.0]])
    assert list(data.predictions_from_logits(data.get_task("sst2"), logits)) == [0, 1]
    assert data.predictions_from_logits(data.get_task("stsb"), np.array([[1.5], [2.0]])).shape == (2,)


# ---------------------------------------------------------------------------------------------------------------------
# Raw text for MLM


def test_corpus_files_expand_folders_and_patterns(mlm_text_dir, tmp_path):
    files = data.corpus_files([mlm_text_dir])
    names = {f.name for f in files}
    assert "melville-moby_dick.txt" in names and "wiki.test.raw" in names and "README" not in names
    assert len(files) == 14
    pattern = data.corpus_files([str(mlm_text_dir / "gutenberg-nltk" / "shakespeare-*.txt")])
    assert [f.name for f in pattern] == ["shakespeare-caesar.txt", "shakespeare-hamlet.txt", "shakespeare-macbeth.txt"]
    with pytest.raises(DataError, match="no such file or folder"):
        data.corpus_files([str(tmp_path / "none*.txt")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="the folder has no text files"):
        data.corpus_files([tmp_path / "empty"])


def test_read_text_handles_crlf_and_latin1(mlm_text_dir):
    caesar = data.read_text(mlm_text_dir / "gutenberg-nltk" / "shakespeare-caesar.txt")
    assert "Cæsar" in caesar and "\ufffd" not in caesar
    moby = data.read_text(mlm_text_dir / "gutenberg-nltk" / "melville-moby_dick.txt")
    assert "\r" not in moby and "Call me Ishmael." in moby


def test_read_text_keeps_utf8_when_only_a_few_bytes_are_broken(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes("naïve café\r\n".encode() + b"bad \xff byte\n")
    assert data.read_text(path) == "naïve café\nbad \ufffd byte\n"


def test_packing_makes_full_blocks_with_document_separators(mlm_text_dir, tokenizer):
    gutenberg = mlm_text_dir / "gutenberg-nltk"
    files = [gutenberg / "blake-poems.txt", gutenberg / "shakespeare-caesar.txt"]
    units = data.corpus_units(files, encoding="cp1252")  # Caesar is Latin-1 (its Cæsar), without a byte-order mark
    assert set(units["doc"]) == {0, 1}
    blocks = data.mlm_dataset(units, tokenizer, block_size=64)
    ids = blocks["input_ids"]
    assert all(len(block) == 64 and block[0] == tokenizer.cls_token_id and block[-1] == tokenizer.sep_token_id
               for block in ids)
    # Exactly one [SEP] inside the blocks: where Blake ends and Caesar starts.
    assert sum(block[1:-1].count(tokenizer.sep_token_id) for block in ids) == 1
    # Nothing but the tail is lost: blocks hold the whole token stream.
    total = sum(len(t) for t in tokenizer(units["text"], add_special_tokens=False)["input_ids"]) + 1
    assert total - 62 < len(ids) * 62 <= total

    by_paragraph = data.corpus_units(files, documents="blank-line", encoding="cp1252")
    assert max(by_paragraph["doc"]) > 100  # poems and speeches are separated by blank lines


def test_pretraining_batches_of_packed_blocks_hold_no_padding(mlm_text_dir, tokenizer):
    """Batches as `pretrain` builds them (packed blocks, masked by the seeded MLM collator): every position is a real
    token, so no compute goes to padding. Line by line, the same text is padded to the longest line of each batch."""
    from transformers import DataCollatorForLanguageModeling

    from sharedbert.training import BatchSeededCollator

    units = data.corpus_units([mlm_text_dir / "gutenberg-nltk" / "blake-poems.txt"])
    collate = BatchSeededCollator(DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=0.15), 0)
    packed = data.mlm_dataset(units, tokenizer, block_size=64)
    lines = data.mlm_dataset(units, tokenizer, block_size=64, line_by_line=True)

    def padding_share(examples) -> float:
        padded = real = 0
        for start in range(0, len(examples) - 15, 16):
            batch = collate([examples[i] for i in range(start, start + 16)])
            padded += int((batch["attention_mask"] == 0).sum())
            real += int(batch["attention_mask"].sum())
            # Padding is never a prediction target either.
            assert not bool(((batch["attention_mask"] == 0) & (batch["labels"] != -100)).any())
        return padded / (padded + real)

    assert padding_share(packed) == 0.0
    batch = collate([packed[i] for i in range(16)])
    assert batch["input_ids"].shape == (16, 64) and tokenizer.pad_token_id not in batch["input_ids"]
    assert padding_share(lines) > 0.1  # lines padded to the batch's longest: 27% of the positions on these poems


def test_line_by_line_examples_are_truncated_lines(tmp_path, tokenizer):
    path = tmp_path / "lines.txt"
    path.write_text("short line\n\n" + "word " * 100 + "\nlast\n")
    units = data.corpus_units([path])
    assert units["text"] == ["short line", ("word " * 100).strip(), "last"]
    examples = data.mlm_dataset(units, tokenizer, block_size=16, line_by_line=True)
    lengths = [len(x) for x in examples["input_ids"]]
    assert lengths == [4, 16, 3]


def test_empty_corpus_and_short_corpus_are_errors(tmp_path, tokenizer):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\r\n")
    with pytest.raises(DataError, match="every line is empty"):
        data.corpus_units([blank])
    short = tmp_path / "short.txt"
    short.write_text("just a few words\n")
    with pytest.raises(DataError, match="shorter than one block of 128 tokens"):
        data.mlm_dataset(data.corpus_units([short]), tokenizer, block_size=128)
