"""Data that is valid but odd is read correctly, and data that is damaged is refused with a message naming the file,
the line (and column or byte) and the fix, never a raw csv / datasets / torch traceback (issue 52, item 3).

* Line breaks: lines end where csv, json and the loader end them (LF, CRLF, CR), not where `str.splitlines` does
  (also at U+2028, U+0085, a form feed, ...), so such characters are read as text and later errors keep their lines.
* CSV: a field-size limit of the checks' own and its message; a quote never closed; a spreadsheet's trailing comma.
* JSON: a label NaN, Infinity or 1e400 (non-finite) is refused, not made a class named "nan" or "inf".
* The pretraining corpus: its encoding from its byte-order mark; text that is not UTF-8 (nor marked) is refused
  unless `--encoding` names its encoding.

Every case plants a small file in a temporary folder."""

import codecs
import csv
import json
import re

import pytest

from sharedbert import data
from sharedbert.data import DataError
from sharedbert.data.checks import FIELD_SIZE_LIMIT


def _load(tmp_path, name, content, text_columns="text", label_column="label", regression=False):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", newline="")
    return data.load_task(files={"train": path}, text_columns=text_columns, label_column=label_column,
                          regression=regression, splits=("train",), cache_dir=str(tmp_path / "cache"))


# Characters `str.splitlines` splits on that csv, json and the loader keep inside a line.
ODD_BREAKS = {"U+2028": "\u2028", "U+2029": "\u2029", "form-feed": "\x0c", "U+0085": "\x85", "vertical-tab": "\x0b",
              "U+001E": "\x1e"}


# ---------------------------------------------------------------------------------------------------------------------
# Line breaks: what splitlines splits on is text


@pytest.mark.parametrize("char", ODD_BREAKS.values(), ids=ODD_BREAKS.keys())
def test_csv_text_holding_a_character_splitlines_splits_on_is_read_as_written(tmp_path, char):
    task = _load(tmp_path, "t.csv", f'text,label\n"good{char}film",1\nbad{char}film,0\nfine,1\n')
    assert task.datasets["train"]["text"] == [f"good{char}film", f"bad{char}film", "fine"]
    assert task.datasets["train"]["label"] == [1, 0, 1]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"], ids=["U+2028", "U+2029", "U+0085"])
def test_jsonl_text_holding_a_character_splitlines_splits_on_is_read_as_written(tmp_path, char):
    """JSON allows these raw in a string (a form feed must be written \\f, and is: json.dumps escapes it)."""
    rows = [{"text": f"good{char}film", "label": 1}, {"text": "bad\x0cfilm", "label": 0}]
    task = _load(tmp_path, "t.jsonl", "\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n")
    assert task.datasets["train"]["text"] == [f"good{char}film", "bad\x0cfilm"]


def test_an_error_after_such_characters_names_its_own_line_and_column(tmp_path):
    csv_text = 'text,label\n"a\u2028b",1\nc\x0cd\x85e,0\n"f\ng",1\nshort\n'
    with pytest.raises(DataError, match=r"t\.csv, line 6, column 2: expected 2 comma-separated fields"):
        _load(tmp_path, "t.csv", csv_text)
    jsonl = '{"text": "a\u2028b", "label": 1}\n{"text": "c\x85d", "label": 0}\n{"text": "e\u2028f", "label": }\n'
    column = jsonl.split("\n")[2].index("}") + 1  # json's own column: the character where a value was expected
    with pytest.raises(DataError, match=rf"t\.jsonl, line 3, column {column}: invalid JSON \(Expecting value\)"):
        _load(tmp_path, "t.jsonl", jsonl)


def test_an_error_in_a_file_with_bare_cr_line_ends_names_the_line_an_editor_shows(tmp_path):
    with pytest.raises(DataError, match=r"t\.csv, line 4, column 'label': the label is empty"):
        _load(tmp_path, "t.csv", "text,label\rgood\u2028film,1\rbad,0\rmeh,\r")


def test_pairs_and_generation_sources_keep_such_characters(tmp_path):
    from sharedbert.data.pairs import read_pairs, read_sources

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"s": "a\u2028b", "t": "c\x85d"}\n{"s": "e", "t": "f"}\n', encoding="utf-8")
    assert read_pairs(pairs, "s", "t") == [("a\u2028b", "c\x85d"), ("e", "f")]
    sources = tmp_path / "sources.txt"
    sources.write_text("one\u2028source\nsecond\x0csource\n", encoding="utf-8")
    assert read_sources(sources) == ["one\u2028source", "second\x0csource"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"s": "a\u2028b", "t": "c"}\n{"s": "e" "t": "f"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl, line 2: invalid JSON at column 11 \(Expecting ','"):
        read_pairs(bad, "s", "t")


# ---------------------------------------------------------------------------------------------------------------------
# CSV: the field-size limit, quotes never closed


def test_a_field_over_csvs_default_limit_is_read_and_the_limit_is_left_as_it_was(tmp_path):
    before = csv.field_size_limit()
    long_text = "word " * 40_000  # 200,000 characters: over csv's default 131,072, which raised a raw error
    task = _load(tmp_path, "t.csv", f'text,label\n"{long_text}",1\nshort,0\n')
    assert task.datasets["train"]["text"][0] == long_text.strip() and task.datasets["train"]["label"] == [1, 0]
    assert csv.field_size_limit() == before  # process-wide: set for the checks' reads only


def test_a_field_over_the_limit_is_refused_naming_the_line_and_the_limit(tmp_path):
    content = "text,label\ngood,1\n" + '"' + "x" * (FIELD_SIZE_LIMIT + 1) + '",0\n'
    with pytest.raises(DataError, match=r"t\.csv, line 3: a field longer than 1,048,576 characters, the most the "
                                        r"checks read in one field\. Shorten the text"):
        _load(tmp_path, "t.csv", content)


@pytest.mark.parametrize(
    "content, message",
    [
        ('text,label\ngood film,"1\nbad film,0\nfine film,1\n', r"line 2, column 2 \('label'\)"),
        ('text,label\ngood film,1\n"bad film,0\nfine film,1\n', r"line 3, column 1 \('text'\)"),
        ('text,label\n"a ""quoted"" word",1\n"a\nbroken line",0\nbad,"0\n', r"line 5, column 2 \('label'\)"),
        ("text,label\ngood film,1\nbad film,\"0\n" + "more text,1\n" * 100_000, r"line 3, column 2 \('label'\)"),
    ],
    ids=["label", "text", "after-closed-quotes", "past-the-field-limit"],
)
def test_a_quote_never_closed_is_refused_naming_its_line_and_column(tmp_path, content, message):
    """A label column that swallowed the rest of the file became one class ('1\\nbad film,0...'); past the field
    limit it was csv's raw error."""
    with pytest.raises(DataError, match=rf"t\.csv, {message}: the quote that opens this field is never closed, so "
                                        r"the field runs to the end of the file\. Close it"):
        _load(tmp_path, "t.csv", content)


# ---------------------------------------------------------------------------------------------------------------------
# A spreadsheet's trailing comma


@pytest.mark.parametrize("name, separator", [("t.csv", ","), ("t.tsv", "\t")])
def test_a_trailing_separator_on_every_row_and_the_header_is_read(tmp_path, name, separator):
    """Excel writes an empty last column when a cell to the right was ever used: a trailing comma on every row."""
    rows = ["text", "label", ""], ["good film", "1", ""], ["bad film", "0", ""], ["fine film", "1"]
    task = _load(tmp_path, name, "\r\n".join(separator.join(row) for row in rows) + "\r\n")
    assert task.datasets["train"]["text"] == ["good film", "bad film", "fine film"]
    assert task.datasets["train"]["label"] == [1, 0, 1] and task.spec.labels == ("0", "1")


@pytest.mark.parametrize(
    "content, message",
    [
        ("text,label\ngood film,1,\nbad film,0,\n",
         r"line 2, column 3: expected 2 comma-separated fields \(\['text', 'label'\]\), found 3: the row ends with a "
         r"comma the header does not have \(an empty last field, as some spreadsheet exports write on every row\)\. "
         r"Remove the trailing comma, or, if every row has one, end the header with a comma too"),
        ("text,label,\ngood film,1,\nbad film,0,note\n",
         r"line 3, column 3: a value \('note'\) in a column the header gives no name\. Name the column"),
        ("text,,label\ngood film,,1\n", r"line 1, column 2: the header gives this column no name\. Name it"),
        ("text,label,\ngood film,1,,x\n", r"line 2, column 4: expected 3 comma-separated fields .* after column 3"),
    ],
    ids=["rows-only", "value-in-the-unnamed-column", "unnamed-in-the-middle", "too-long-for-the-header"],
)
def test_other_unnamed_columns_are_refused_naming_the_form(tmp_path, content, message):
    with pytest.raises(DataError, match=rf"t\.csv, {message}"):
        _load(tmp_path, "t.csv", content)


# ---------------------------------------------------------------------------------------------------------------------
# JSON labels that are not finite numbers


@pytest.mark.parametrize("written, named", [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"),
                                            ("1e400", "inf"), ("-1E999", "-inf")])
@pytest.mark.parametrize("name", ["t.jsonl", "t.json"])
def test_a_json_label_that_is_not_finite_is_refused(tmp_path, written, named, name):
    rows = ['{"text": "good", "label": 1}', f'{{"text": "bad", "label": {written}}}']
    content = "\n".join(rows) + "\n" if name == "t.jsonl" else "[" + ",\n".join(rows) + "]"
    where = "line 2" if name == "t.jsonl" else "record 2"
    with pytest.raises(DataError, match=rf"{re.escape(name)}, {where}, column 'label': the label {written} is not a "
                                        rf"finite number .* a class named '{named}'\. Give the row its class"):
        _load(tmp_path, name, content)


def test_a_json_label_that_is_not_finite_is_refused_in_the_validation_file_too(tmp_path):
    train, validation = tmp_path / "train.jsonl", tmp_path / "valid.jsonl"
    train.write_text('{"text": "good", "label": 1}\n{"text": "bad", "label": 0}\n')
    validation.write_text('{"text": "good", "label": 1}\n{"text": "odd", "label": Infinity}\n')
    with pytest.raises(DataError, match=r"valid\.jsonl, line 2, column 'label': the label Infinity is not a finite"):
        data.load_task(files={"train": train, "validation": validation}, text_columns="text", label_column="label")


def test_finetune_prints_the_non_finite_label_without_a_traceback(tmp_path, capsys, monkeypatch):
    from sharedbert.cli import main
    from sharedbert.training import finetuning

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr(finetuning, "load_classifier", no_model)
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "good", "label": 1}\n{"text": "bad", "label": 0}\n{"text": "x", "label": 1e400}\n')
    out = tmp_path / "out"
    assert main(["finetune", "--train-file", str(path), "--validation-file", str(path), "--text-columns", "text",
                 "--label-column", "label", "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache")]) == 2
    printed = capsys.readouterr().err
    assert "t.jsonl, line 3, column 'label': the label 1e400 is not a finite number" in printed
    assert "Traceback" not in printed and not out.exists()


# ---------------------------------------------------------------------------------------------------------------------
# Encodings: tables are UTF-8; the pretraining corpus is what its byte-order mark says, or UTF-8, or --encoding


TEXT = "naïve café — Ελληνικά, 日本語\nsecond line\r\nthird\n"
EXPECTED = "naïve café — Ελληνικά, 日本語\nsecond line\nthird\n"
MARKED = {"utf-8": codecs.BOM_UTF8, "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE,
          "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}


@pytest.mark.parametrize("encoding", MARKED)
def test_a_corpus_file_is_read_in_the_encoding_its_byte_order_mark_names(tmp_path, encoding):
    """A UTF-16 corpus was decoded as cp1252, a NUL between its letters, with a warning only."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(MARKED[encoding] + TEXT.encode(encoding))
    assert data.read_corpus_text(path) == EXPECTED
    assert data.corpus_units([path])["text"] == ["naïve café — Ελληνικά, 日本語", "second line", "third"]
    assert data.read_text(path) == EXPECTED  # the tolerant reader (held-out text, studies) reads the mark too


def test_a_corpus_file_that_is_not_utf8_is_refused_unless_its_encoding_is_named(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes("first line\nCæsar and Brunetière\n".encode("cp1252"))
    with pytest.raises(DataError, match=r"latin\.txt, line 2, byte 2 of the line: not UTF-8 text \(byte 0xe6, byte 13 "
                                        r"of the file\), and no byte-order mark names another encoding\. Re-save the "
                                        r"file as UTF-8 .*or pass --encoding NAME"):
        data.corpus_units([path])
    assert data.corpus_units([path], encoding="cp1252")["text"] == ["first line", "Cæsar and Brunetière"]


def test_encoding_names_the_files_that_are_not_utf8_and_leaves_utf8_and_marked_files_alone(tmp_path):
    """A corpus of old Latin-1 books beside UTF-8 ones (the shared raw text is one) is read right with one option."""
    latin, utf8, marked = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    latin.write_bytes("Cæsar\n".encode("cp1252"))
    utf8.write_text("Ελληνικά\n", encoding="utf-8")
    marked.write_bytes(codecs.BOM_UTF16_LE + "日本語\n".encode("utf-16-le"))
    assert data.corpus_units([latin, utf8, marked], encoding="cp1252")["text"] == ["Cæsar", "Ελληνικά", "日本語"]


def test_utf16_without_a_byte_order_mark_is_refused_at_its_first_nul(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes("plain words\nmore\n".encode("utf-16-le"))  # valid UTF-8 byte by byte: a NUL after each letter
    with pytest.raises(DataError, match=r"corpus\.txt, line 1, byte 2 of the line: a NUL byte \(byte 2 of the file\), "
                                        r"as UTF-16 or UTF-32 text without a byte-order mark has.*--encoding NAME"):
        data.read_corpus_text(path)
    assert data.read_corpus_text(path, "utf-16-le") == "plain words\nmore\n"


@pytest.mark.parametrize(
    "raw, encoding, message",
    [
        (codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"c", None,
         r"line 1, byte 7 of the line: the file starts with a UTF-16 LE byte-order mark, but its bytes are not UTF-16 "
         r"LE from byte 7 of the file on"),
        (codecs.BOM_UTF8 + b"ok\nbad \xff\n", None, r"line 2, byte 5 of the line: the file starts with a UTF-8"),
        (b"ok\n\x81 undefined in cp1252\n", "cp1252", r"line 2, byte 1 of the line: not cp1252 text either \(byte "
                                                      r"0x81, byte 4 of the file"),
    ],
    ids=["odd-utf16", "broken-after-a-utf8-mark", "not-the-named-encoding"],
)
def test_a_file_its_encoding_cannot_read_is_refused_naming_the_byte(tmp_path, raw, encoding, message):
    path = tmp_path / "corpus.txt"
    path.write_bytes(raw)
    with pytest.raises(DataError, match=rf"corpus\.txt, {message}"):
        data.read_corpus_text(path, encoding)


def test_an_unknown_encoding_is_refused_by_name(tmp_path):
    from sharedbert.training import PretrainArguments

    with pytest.raises(ValueError, match=r"--encoding latin-nine: unknown encoding\. Name one Python knows, e\.g\. "
                                         r"cp1252"):
        PretrainArguments(corpus=["x.txt"], encoding="latin-nine")
    with pytest.raises(ValueError, match=r"encoding= latin-nine: unknown encoding"):
        data.corpus_units([tmp_path / "x.txt"], encoding="latin-nine")


def test_pretrain_refuses_a_corpus_that_is_not_utf8_and_names_the_option(tmp_path, capsys):
    from sharedbert.cli import main

    corpus = tmp_path / "latin.txt"
    corpus.write_bytes("Cæsar\n".encode("cp1252") * 50)
    out = tmp_path / "out"
    assert main(["pretrain", "--corpus", str(corpus), "--config", "bert-tiny", "--output-dir", str(out),
                 "--max-steps", "1"]) == 2
    printed = capsys.readouterr().err
    assert "latin.txt, line 1, byte 2 of the line: not UTF-8 text (byte 0xe6" in printed
    assert "pass --encoding NAME" in printed and "Traceback" not in printed and not out.exists()


def test_the_pretrain_command_takes_encoding_and_hands_it_to_the_reader(tmp_path, monkeypatch):
    from sharedbert.cli import main
    from sharedbert.training import pretraining

    seen = {}

    def stop_after_reading(files, documents="file", encoding=None, **kwargs):
        seen["encoding"] = encoding
        raise data.DataError("stopped after reading")

    monkeypatch.setattr(pretraining.data_module, "corpus_units", stop_after_reading)
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    assert main(["pretrain", "--corpus", str(corpus), "--encoding", "cp1252", "--config", "bert-tiny",
                 "--output-dir", str(tmp_path / "out"), "--max-steps", "1"]) == 2
    assert seen == {"encoding": "cp1252"}


@pytest.mark.parametrize(
    "raw, message",
    [
        (codecs.BOM_UTF16_LE + "text,label\ngood,1\n".encode("utf-16-le"),
         r"t\.csv: the file is UTF-16 LE text \(it starts with that byte-order mark\), and data files are read as "
         r"UTF-8\. Re-save it as UTF-8 \(e\.g\. `iconv -f utf-16-le -t utf-8`\)"),
        ("text,label\ngood,1\n".encode("utf-16-be"), r"t\.csv, line 1, byte 1 of the line: a NUL byte"),
    ],
    ids=["marked", "unmarked"],
)
def test_a_utf16_table_is_refused_naming_its_encoding(tmp_path, raw, message):
    path = tmp_path / "t.csv"
    path.write_bytes(raw)
    with pytest.raises(DataError, match=message):
        data.load_task(files={"train": path}, text_columns="text", label_column="label", splits=("train",))
