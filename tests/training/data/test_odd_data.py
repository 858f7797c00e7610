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

import pytest

from sharedbert.training import data
from sharedbert.training.data import DataError


def _load(tmp_path, name, content, text_columns="text", label_column="label", regression=False):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", newline="")
    return data.load_task(files={"train": path}, text_columns=text_columns, label_column=label_column,
                          regression=regression, splits=("train",), cache_dir=str(tmp_path / "cache"))


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
