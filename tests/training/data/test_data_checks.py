"""Training data that used to pass the checks (issue 43, section 3), refused before training starts with a message
naming the file, the line, the column and the fix; and the one case that is normalised instead (numeric labels
spelled two ways, `1` and `1.0`: one class, see `label_string`).

Each case goes through the path a user takes: `load_task(files=...)` and `sharedbert finetune --train-file ...`."""

import json
import logging

import pytest

from sharedbert import data
from sharedbert.data import DataError

GOOD_ROWS = "good film,1\nbad film,0\n"


def _load(tmp_path, name, content, text_columns="text", label_column="label", regression=False, validation=None):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    files = {"train": path, "validation": path}
    if validation is not None:
        files["validation"] = tmp_path / ("valid" + path.suffix)
        files["validation"].write_text(validation, encoding="utf-8")
    return data.load_task(files=files, text_columns=text_columns, label_column=label_column, regression=regression,
                          cache_dir=str(tmp_path / "cache"))


# ---------------------------------------------------------------------------------------------------------------------
# Empty labels (once a class of their own: the label set became ('', '0', '1'))


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("t.csv", "text,label\n" + GOOD_ROWS + "meh film,\n",
         r"t\.csv, line 4, column 'label': the label is empty\. .*fill it in or remove the row"),
        ("t.csv", "text,label\n" + GOOD_ROWS + 'meh film," "\n', r"t\.csv, line 4, column 'label': the label is empty"),
        ("t.tsv", "text\tlabel\ngood film\t1\nmeh film\t\nbad film\t0\n",
         r"t\.tsv, line 3, column 'label': the label is empty"),
        ("t.jsonl", '{"text": "good", "label": 1}\n{"text": "bad", "label": 0}\n{"text": "meh", "label": null}\n',
         r"t\.jsonl, line 3, column 'label': the label is empty"),
        ("t.json", '[{"text": "good", "label": 1}, {"text": "meh", "label": ""}]',
         r"t\.json, record 2, column 'label': the label is empty"),
    ],
    ids=["csv", "csv-blank", "tsv", "jsonl-null", "json"],
)
def test_an_empty_label_in_the_training_file_is_refused(tmp_path, name, content, message):
    with pytest.raises(DataError, match=message):
        _load(tmp_path, name, content)


def test_an_empty_label_in_the_validation_file_names_the_label_set(tmp_path):
    with pytest.raises(DataError, match=r"valid\.csv, line 3, column 'label': the label is empty\. Every labelled row "
                                        r"needs one of \['0', '1'\]"):
        _load(tmp_path, "t.csv", "text,label\n" + GOOD_ROWS, validation="text,label\nok,1\nmeh,\n")


def test_an_empty_label_in_a_glue_file_is_refused(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence\tlabel\nfine\t1\nmeh\t\n")
    (folder / "dev.tsv").write_text("sentence\tlabel\nfine\t1\n")
    with pytest.raises(DataError, match=r"train\.tsv, line 3, column 'label': the label is empty"):
        data.load_task("sst2", data_dir=tmp_path)


def test_a_label_that_is_a_json_list_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"t\.jsonl, line 2, column 'label': \[1, 0\] is not a single label"):
        _load(tmp_path, "t.jsonl", '{"text": "good", "label": 1}\n{"text": "bad", "label": [1, 0]}\n')


# ---------------------------------------------------------------------------------------------------------------------
# The same number spelled two ways is one class


def test_numeric_labels_spelled_differently_are_one_class(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sharedbert.data.checks"):
        task = _load(tmp_path, "t.csv", "text,label\ngood film,1\nbad film,0\nfine film,1.0\nawful film,0.00\n")
    assert task.spec.labels == ("0", "1")
    assert task.datasets["train"]["label"] == [1, 0, 1, 0]
    assert "'1' (line 2) and '1.0' (line 4)" in caplog.text and "'0' (line 3) and '0.00' (line 5)" in caplog.text


def test_regression_scores_are_read_as_written(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sharedbert.data.checks"):
        task = _load(tmp_path, "t.csv", "s,score\na,4.5\nb,4.50\nc,1e-3\n", "s", "score", regression=True)
    assert task.datasets["train"]["label"] == pytest.approx([4.5, 4.5, 0.001]) and "written" not in caplog.text


def test_labels_written_only_as_decimals_become_their_numbers(tmp_path):
    task = _load(tmp_path, "t.csv", "text,label\ngood,2.0\nbad,10.0\nmeh,2\nodd,1e1\nzero,02\n")
    assert task.spec.labels == ("2", "10")  # numeric order, not string order
    assert task.datasets["train"]["label"] == [0, 1, 0, 1, 0]


def test_words_and_fractions_stay_labels_of_their_own(tmp_path):
    task = _load(tmp_path, "t.csv", "text,label\na,0.5\nb,0.50\nc,nan\nd,Yes\ne,yes\n")
    assert task.spec.labels == ("0.5", "Yes", "nan", "yes")
    assert task.datasets["train"]["label"] == [0, 0, 2, 1, 3]


def test_a_model_trained_on_decimal_labels_still_reads_integer_spellings(tmp_path):
    """The label set handed in (the model's id2label when evaluating) is matched by number too."""
    path = tmp_path / "eval.csv"
    path.write_text("text,label\ngood,1\nbad,0\n")
    task = data.load_task(files={"validation": path}, text_columns="text", label_column="label",
                          labels=("0.0", "1.0"), cache_dir=str(tmp_path / "cache"))
    assert task.datasets["validation"]["label"] == [1, 0]
    with pytest.raises(DataError, match=r"the labels '1' and '1\.0' are the same number"):
        data.load_task(files={"validation": path}, text_columns="text", label_column="label", labels=("1", "1.0"))


# ---------------------------------------------------------------------------------------------------------------------
# Regression scores must be finite numbers


@pytest.mark.parametrize("score", ["inf", "-inf", "nan", "Infinity", "1e999"])
def test_a_score_that_is_not_finite_is_refused(tmp_path, score):
    with pytest.raises(DataError, match=rf"t\.csv, line 3, column 'score': the score {score!r} is not a finite "
                                        r"number\. .*fix it or remove the row"):
        _load(tmp_path, "t.csv", f"s1,s2,score\na,b,4.5\nc,d,{score}\n", "s1,s2", "score", regression=True)


def test_non_finite_json_scores_and_empty_scores_are_refused(tmp_path):
    with pytest.raises(DataError, match=r"t\.jsonl, line 2, column 'score': the score 'nan' is not a finite number"):
        _load(tmp_path, "t.jsonl", '{"s": "a", "score": 1.5}\n{"s": "b", "score": NaN}\n', "s", "score",
              regression=True)
    with pytest.raises(DataError, match=r"t\.csv, line 2, column 'score': the score is empty"):
        _load(tmp_path, "t.csv", "s,score\na,\n", "s", "score", regression=True)


def test_a_glue_score_that_is_not_finite_is_refused(tmp_path):
    folder = tmp_path / "STS-B"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t4.5\nc\td\tinf\n")
    with pytest.raises(DataError, match=r"train\.tsv, line 3, column 'score': the score 'inf' is not a finite"):
        data.check_glue_file(folder / "train.tsv", data.get_task("stsb"))


# ---------------------------------------------------------------------------------------------------------------------
# A column named twice: the checks and the loader could read different ones


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("t.csv", "text,label,text\n,1,good film\n,0,bad film\n",
         r"t\.csv, line 1, column 3: the header names 'text' twice \(columns 1 and 3\).*Rename or remove one"),
        ("t.csv", "text,label,label\ngood,1,0\nbad,0,1\n", r"t\.csv, line 1, column 3: the header names 'label' twice"),
        ("t.tsv", "notes\ttext\tlabel\tnotes\nx\tgood\t1\ty\n", r"t\.tsv, line 1, column 4: the header names 'notes'"),
        ("t.jsonl", '{"text": "good", "label": 1}\n{"text": "", "label": 0, "text": "bad"}\n',
         r"t\.jsonl, line 2: the object names 'text' twice.*Keep one"),
        ("t.json", '[{"text": "good", "label": 1}, {"label": 0, "label": 1, "text": "bad"}]',
         r"t\.json, record 2: the object names 'label' twice"),
    ],
    ids=["text", "label", "unused-column", "jsonl", "json"],
)
def test_a_column_named_twice_is_refused(tmp_path, name, content, message):
    with pytest.raises(DataError, match=message):
        _load(tmp_path, name, content)


def test_a_glue_header_naming_a_column_twice_is_refused(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence\tlabel\tsentence\n\t1\tfine\n")
    with pytest.raises(DataError, match=r"train\.tsv, line 1, column 3: the header names 'sentence' twice"):
        data.check_glue_file(folder / "train.tsv", data.get_task("sst2"))


def test_a_pairs_file_naming_a_column_twice_is_refused(tmp_path):
    from sharedbert.data.pairs import read_pairs

    path = tmp_path / "pairs.csv"
    path.write_text("source,target,source\na,b,c\n")
    with pytest.raises(DataError, match=r"pairs\.csv, line 1, column 3: the header names 'source' twice"):
        read_pairs(path, "source", "target")


@pytest.mark.parametrize(
    "content, message",
    [
        ("source,target\nhello, world,bonjour le monde\ngood night,bonne nuit\n",
         r"pairs\.csv, line 2, column 3: expected 2 comma-separated fields \(\['source', 'target'\]\), found 3"),
        ("source,target\ngood night,bonne nuit\n\nhello world\n",
         r"pairs\.csv, line 4, column 2: expected 2 comma-separated fields .*found 1: no value for 'target'"),
    ],
    ids=["long", "short"],
)
def test_a_pairs_row_with_the_wrong_number_of_fields_is_refused(tmp_path, content, message):
    """A long row used to become the pair ('hello', ' world'), its real target dropped without a word."""
    from sharedbert.data.pairs import read_pairs

    path = tmp_path / "pairs.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_pairs(path, "source", "target")


def test_pairs_keep_their_quoted_commas_and_line_breaks(tmp_path):
    from sharedbert.data.pairs import read_pairs

    path = tmp_path / "pairs.csv"
    path.write_text('source,target\n"hello, world","bonjour,\nle monde"\n\ngood night,bonne nuit\n')
    pairs = read_pairs(path, "source", "target")
    assert pairs == [("hello, world", "bonjour,\nle monde"), ("good night", "bonne nuit")]


# ---------------------------------------------------------------------------------------------------------------------
# Rows with too few or too many fields: the count is right and the message says what to do


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("t.csv", "text,label\ngood film,1\nbad film\n",
         r"t\.csv, line 3, column 2: expected 2 comma-separated fields \(\['text', 'label'\]\), found 1: no value "
         r"for 'label'\. Add the missing field"),
        ("t.csv", "text,label\ngood film,1\nbad, film,0\n",
         r"t\.csv, line 3, column 3: expected 2 comma-separated fields \(\['text', 'label'\]\), found 3: 1 field\(s\) "
         r"after 'label'\. Quote a text that holds a comma"),
        ("t.tsv", "text\tlabel\ngood film\t1\nbad film\n",
         r"t\.tsv, line 3, column 2: expected 2 tab-separated fields \(\['text', 'label'\]\), found 1"),
        ("t.tsv", "text\tlabel\ngood film\t1\nbad\tfilm\t0\t\n",
         r"t\.tsv, line 3, column 3: expected 2 tab-separated fields \(\['text', 'label'\]\), found 4: 2 field\(s\) "
         r"after 'label'\. Remove the stray tab"),
        ("t.csv", 'text,label\n"a text\nover two lines",1\n"bad",0\n"short"\n',
         r"t\.csv, line 5, column 2: expected 2 comma-separated fields .*found 1"),
        ("t.csv", "text,label\n\ngood film,1\n\nbad film\n", r"t\.csv, line 5, column 2: .* found 1"),
    ],
    ids=["csv-short", "csv-long", "tsv-short", "tsv-long", "after-a-quoted-newline", "after-blank-lines"],
)
def test_a_row_with_the_wrong_number_of_fields_is_counted_right(tmp_path, name, content, message):
    with pytest.raises(DataError, match=message):
        _load(tmp_path, name, content)


def test_a_glue_row_with_the_wrong_number_of_fields_names_the_column(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence\tlabel\nfine\t1\nno label\n")
    with pytest.raises(DataError, match=r"train\.tsv, line 3, column 2: expected 2 tab-separated fields "
                                        r"\(\['sentence', 'label'\]\), found 1: no value for 'label'"):
        data.check_glue_file(folder / "train.tsv", data.get_task("sst2"))


def test_blank_lines_and_quoted_newlines_still_load(tmp_path):
    task = _load(tmp_path, "t.csv", 'text,label\n\n"a text\nover two lines",1\n\nbad film,0\n')
    assert task.datasets["train"]["text"] == ["a text\nover two lines", "bad film"]
    assert task.datasets["train"]["label"] == [1, 0]


# ---------------------------------------------------------------------------------------------------------------------
# Through the command a user runs: refused before any model is loaded, nothing written


@pytest.mark.parametrize(
    "content, regression, message",
    [
        ("text,label\ngood film,1\nbad film,0\nmeh film,\n", False,
         "t.csv, line 4, column 'label': the label is empty"),
        ("text,label\ngood film,1\nbad film,0\n", True, None),
        ("text,label\ngood film,1\nbad film,inf\n", True,
         "t.csv, line 3, column 'label': the score 'inf' is not a finite number"),
        ("text,label,text\n,1,good film\n,0,bad film\n", False,
         "t.csv, line 1, column 3: the header names 'text' twice"),
        ("text,label\ngood film,1\nbad film\n", False,
         "t.csv, line 3, column 2: expected 2 comma-separated fields (['text', 'label']), found 1"),
    ],
    ids=["empty-label", "control", "inf", "duplicate-column", "short-row"],
)
def test_finetune_refuses_bad_data_before_loading_a_model(tmp_path, capsys, monkeypatch, content, regression,
                                                          message):
    from sharedbert.cli import main
    from sharedbert.training import finetuning

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr(finetuning, "load_classifier", no_model)
    (tmp_path / "t.csv").write_text(content)
    out = tmp_path / "out"
    args = ["finetune", "--train-file", str(tmp_path / "t.csv"),
            "--validation-file", str(tmp_path / "t.csv"), "--text-columns", "text", "--label-column", "label",
            "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache")] + (["--regression"] if regression else [])
    if message is None:  # good data reaches the model
        with pytest.raises(AssertionError, match="the model was loaded"):
            main(args)
        return
    assert main(args) != 0
    printed = capsys.readouterr().err
    assert message in printed and "Traceback" not in printed
    assert not out.exists()


def test_json_scores_that_are_not_finite_never_reach_the_loader(tmp_path):
    """json.loads reads NaN / Infinity; the checks see the same values the loader would."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"s": "a", "score": 1.0}, {"s": "b", "score": float("inf")}]))
    with pytest.raises(DataError, match=r"record 2, column 'score': the score 'inf' is not a finite number"):
        data.load_task(files={"train": path}, text_columns="s", label_column="score", regression=True,
                       splits=("train",))
