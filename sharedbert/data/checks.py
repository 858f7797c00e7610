"""Checking a task's files before anything is loaded or trained: a missing or empty file, missing columns, a column
named twice or left unnamed, a row with the wrong number of fields, a quote never closed, a field over
`FIELD_SIZE_LIMIT`, an empty label, a label outside the label set, a regression score or JSON label that is not a
finite number or bytes that are not UTF-8 raise `DataError` naming the file and the line (and column). Lines are
counted as csv, json and the loader count them, never by `str.splitlines`."""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .decoding import byte_order_mark, decode, read_bytes
from .tasks import DataError, TaskSpec, custom_task

logger = logging.getLogger(__name__)


@dataclass
class CheckedFile:
    """The outcome of checking one file: how to read it and what it holds."""

    path: Path
    format: str  # "tsv", "csv" or "json"
    columns: tuple[str, ...]
    has_header: bool
    rows: int
    labelled: bool
    label_values: tuple[str, ...] = ()  # distinct label values, in order of first appearance
    encoding: str = "utf-8"


def read_utf8(path: Path) -> str:
    """Read a whole file as UTF-8 (a UTF-8 byte-order mark is allowed), as the loader reads it. Raises DataError for a
    missing, empty or non-UTF-8 file (another byte-order mark, a byte that is not UTF-8, a NUL byte), naming the line
    and the byte."""
    raw = read_bytes(path)
    mark = byte_order_mark(raw)
    if mark is not None and mark[1] != "utf-8":
        raise DataError(f"{path}: the file is {mark[2]} text (it starts with that byte-order mark), and data files "
                        f"are read as UTF-8. Re-save it as UTF-8 (e.g. `iconv -f {mark[1]} -t utf-8`).")
    return decode(raw, path)[0]


def check_glue_file(path: Path, spec: TaskSpec, labelled: bool = True) -> CheckedFile:
    """Check a GLUE TSV file (tab-separated, no quoting, header row except CoLA's train/dev)."""
    text = read_utf8(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    first = lines[0].split("\t")
    required = list(spec.text_columns) + ([spec.label_column] if labelled else [])
    if all(column in first for column in spec.text_columns):
        columns, has_header, body_start = tuple(first), True, 1
    elif spec.headerless_columns is not None:
        columns, has_header, body_start = spec.headerless_columns, False, 0
    else:
        raise DataError(
            f"{path}, line 1: the header lacks column(s) {[c for c in spec.text_columns if c not in first]}; found "
            f"{first}. A {spec.folder or spec.name} file needs the columns {required} (tab-separated)."
        )
    if has_header:
        check_unique_columns(path, columns)
    missing = [column for column in required if column not in columns]
    if missing:
        raise DataError(
            f"{path}, line 1: missing column(s) {missing}; found {list(columns)}. "
            + ("Is this the unlabelled test file? Use the train or dev file." if spec.label_column in missing else "")
        )
    body = lines[body_start:]
    if not body:
        raise DataError(f"{path}: the file has a header but no data rows.")
    index = {column: columns.index(column) for column in required}
    label_values: dict[str, None] = {}
    for number, line in enumerate(body, start=body_start + 1):
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise field_count_error(path, number, columns, fields, "tsv", quoted=False)
        for column in spec.text_columns:
            if not fields[index[column]].strip():
                raise DataError(f"{path}, line {number}, column {column!r}: the text is empty.")
        if labelled:
            value = label_string(fields[index[spec.label_column]])
            _check_label(path, f"line {number}", spec, value)
            if not spec.is_regression:
                label_values.setdefault(value)
    return CheckedFile(
        path=Path(path), format="tsv", columns=columns, has_header=has_header, rows=len(body), labelled=labelled,
        label_values=tuple(label_values),
    )


def check_unique_columns(path, columns) -> None:
    """Refuse a header that names a column twice: `csv.DictReader` keeps the last such column, pandas (which the
    loader uses) the first, so the checks and the training data could come from different columns."""
    first: dict[str, int] = {}
    for position, name in enumerate(columns, start=1):
        if name in first:
            raise DataError(
                f"{path}, line 1, column {position}: the header names {name!r} twice (columns {first[name]} and "
                f"{position}); the checks and the loader could read different ones. Rename or remove one of them."
            )
        first[name] = position


def field_count_error(path, line: int, columns, fields, fmt: str, quoted: bool = True) -> DataError:
    """The error for a row whose field count differs from the header's, pointing at the first missing or extra
    field. `quoted`: whether the format honours quotes (user tables do, GLUE's TSVs do not)."""
    separator = "tab" if fmt == "tsv" else "comma"
    expected, found = len(columns), len(fields)
    if found < expected:
        column = found + 1
        problem = (f"no value for {columns[found]!r}. Add the missing field(s) (separated by {separator}s) or remove "
                   "the row.")
    elif quoted and found == expected + 1 and not fields[-1]:
        column = found
        problem = (f"the row ends with a {separator} the header does not have (an empty last field, as some "
                   f"spreadsheet exports write on every row). Remove the trailing {separator}, or, if every row has "
                   f"one, end the header with a {separator} too: a last column without a name is left out.")
    else:
        column = expected + 1
        last = repr(columns[-1]) if columns[-1] else f"column {expected}"
        problem = f"{found - expected} field(s) after {last}. " + (
            ("Remove the stray tab(s)" + (", or quote a text that holds a tab." if quoted else ".")) if fmt == "tsv"
            else 'Quote a text that holds a comma ("like, this"), or remove the stray comma(s).'
        )
    return DataError(f"{path}, line {line}, column {column}: expected {expected} {separator}-separated fields "
                     f"({list(columns)}), found {found}: {problem}")


def _check_label(path, where: str, spec: TaskSpec, value: str) -> None:
    """Check one label (as `label_string` spells it) against the task: present, and in the label set (classes) or
    a finite number (regression)."""
    column = spec.label_column
    if spec.is_regression:
        if not value:
            raise DataError(f"{path}, {where}, column {column!r}: the score is empty. This is a regression task: every "
                            "row needs a finite number; fill it in or remove the row.")
        try:
            number = float(value)
        except ValueError:
            raise DataError(
                f"{path}, {where}, column {column!r}: {value!r} is not a number (this is a regression task; every row "
                "needs a numeric score)."
            ) from None
        if not math.isfinite(number):  # inf, -inf, nan (and 1e999): no loss or metric can use them
            raise DataError(f"{path}, {where}, column {column!r}: the score {value!r} is not a finite number. A "
                            "regression score must be a finite number such as 3.5; fix it or remove the row.")
        return
    if not value:
        raise _empty_label(path, where, column, spec.labels)
    if value not in label_keys(tuple(spec.labels)):
        raise DataError(
            f"{path}, {where}, column {column!r}: label {value!r} is not in the label set {list(spec.labels)}."
        )


def _empty_label(path, where: str, column: str, labels) -> DataError:
    # Left in, an empty cell would become a class of its own ('' beside '0' and '1': a three-class task).
    needs = f"one of {list(labels)}" if labels else "a label"
    return DataError(f"{path}, {where}, column {column!r}: the label is empty. Every labelled row needs {needs}; fill "
                     "it in or remove the row.")


def table_format(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".tsv", ".tab"):
        return "tsv"
    if suffix == ".csv":
        return "csv"
    if suffix in (".json", ".jsonl"):
        return "json"
    raise DataError(f"{path}: unknown file type {suffix!r}; use .csv, .tsv, .json or .jsonl.")


def check_table_file(path: Path, spec: TaskSpec, labelled: bool = True, infer_labels: bool = False) -> CheckedFile:
    """Check a user CSV/TSV (header row, standard quoting) or JSON file (a list of objects or JSON lines).

    With `infer_labels` the label values are collected (for the training file, whose values define the label set)
    instead of checked against `spec.labels`."""
    path = Path(path)
    fmt = table_format(path)
    text = read_utf8(path)
    required = list(spec.text_columns) + ([spec.label_column] if labelled else [])
    label_values: dict[str, None] = {}
    spellings = _Spellings(path)
    classes = infer_labels or not spec.is_regression  # a probe spec with labels=None looks like regression

    def check_row(number, row, where):
        for column in spec.text_columns:
            value = row.get(column)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{path}, {where} {number}, column {column!r}: the text is empty or not a string.")
        if labelled:
            raw = row.get(spec.label_column)
            if isinstance(raw, (list, dict)):
                raise DataError(f"{path}, {where} {number}, column {spec.label_column!r}: {raw!r} is not a single "
                                "label; give one value (a word or a number) per row.")
            if classes and isinstance(raw, _NonFinite):
                raise DataError(
                    f"{path}, {where} {number}, column {spec.label_column!r}: the label {raw.written} is not a finite "
                    "number (JSON reads NaN and Infinity as numbers, and one beyond a float's range, such as 1e400, as "
                    "infinity), so it would become a class named " + repr(str(float(raw))) + ". Give the row its "
                    "class (a word, or a finite number such as 1), or remove the row.")
            value = label_string(raw)
            if not infer_labels:
                _check_label(path, f"{where} {number}", spec, value)
            elif not value:
                raise _empty_label(path, f"{where} {number}", spec.label_column, None)
            else:
                label_values.setdefault(value)
            if classes:
                spellings.add(raw, value, f"{where} {number}")

    if fmt in ("csv", "tsv"):
        columns, rows = _check_delimited(path, fmt, text, required, check_row)
    else:
        columns, rows = _check_json(path, text, required, check_row)
    spellings.report()
    return CheckedFile(path, fmt, columns, True, rows, labelled, tuple(label_values))


# The longest field the checks read, in characters (csv's own default, 131,072, ended in a raw error). Far beyond
# what a model reads of a text (its first --max-length tokens): a longer field is nearly always a quote never closed.
FIELD_SIZE_LIMIT = 2**20


def delimited_rows(path, fmt: str, text: str):
    """The header of a CSV/TSV (quotes honoured) and an iterator over its data rows as (line, {column: value}).

    Lines are counted as csv and the loader count them (LF, CRLF or CR; U+2028, U+0085 or a form feed in a text are
    characters of it). Refuses a header naming a column twice or leaving one unnamed, and, as it reaches it, a row
    whose field count differs from the header's (`csv.DictReader` would pad a short row with None and put a long
    row's extra fields aside), a field over `FIELD_SIZE_LIMIT` and a quote never closed. Empty names at the header's
    end (a spreadsheet's trailing comma on every row) are left out, with their empty values."""
    delimiter = "\t" if fmt == "tsv" else ","
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(lines, delimiter=delimiter)
    header = tuple(_read_row(path, reader, lines, 1, delimiter, ()) or ())
    columns = _named_columns(path, header)

    def rows():
        last_line = reader.line_num
        while (fields := _read_row(path, reader, lines, last_line + 1, delimiter, header)) is not None:
            # A quoted field may hold line breaks: the row starts on the line after the previous row ended.
            line, last_line = last_line + 1, reader.line_num
            if not fields:  # a blank line: skipped, as the loader (pandas) skips it
                continue
            if not len(columns) <= len(fields) <= len(header):
                raise field_count_error(path, line, header if len(fields) > len(header) else columns, fields, fmt)
            for position in range(len(columns), len(fields)):
                if fields[position]:
                    raise DataError(f"{path}, line {line}, column {position + 1}: a value ({fields[position]!r}) in "
                                    "a column the header gives no name. Name the column in the header, or remove the "
                                    "value.")
            yield line, dict(zip(columns, fields))

    return columns, rows()


def _named_columns(path, header: tuple[str, ...]) -> tuple[str, ...]:
    """The header's columns without the empty names at its end (a trailing comma, as spreadsheets write when a
    column to the right was ever used); an empty name elsewhere, or a name given twice, is refused."""
    named = len(header)
    while named and not header[named - 1]:
        named -= 1
    columns = header[:named]
    if "" in columns:
        position = columns.index("") + 1
        raise DataError(f"{path}, line 1, column {position}: the header gives this column no name. Name it, or remove "
                        "the column.")
    check_unique_columns(path, columns)
    return columns


def _read_row(path, reader, lines: list[str], line: int, delimiter: str, header) -> list[str] | None:
    """The next row of `reader` (None at the end), starting at `line`, read under `FIELD_SIZE_LIMIT` (csv's limit
    is process-wide: it is set for this read only). The last row is checked for a quote left open."""
    previous = csv.field_size_limit(FIELD_SIZE_LIMIT)
    try:
        fields = next(reader, None)
    except csv.Error as error:
        if "field larger than field limit" not in str(error):
            raise DataError(f"{path}, line {line}: not valid CSV ({error}).") from None
        column = _unclosed_quote("".join(lines[line - 1:]), delimiter)
        if column is not None:
            raise _unclosed_quote_error(path, line, column, header) from None
        raise DataError(f"{path}, line {line}: a field longer than {FIELD_SIZE_LIMIT:,} characters, the most the "
                        "checks read in one field. Shorten the text (a model reads only its first --max-length "
                        "tokens) or split it over several rows.") from None
    finally:
        csv.field_size_limit(previous)
    if fields is not None and reader.line_num == len(lines):  # a quote left open runs to the end of the file
        column = _unclosed_quote("".join(lines[line - 1:]), delimiter)
        if column is not None:
            raise _unclosed_quote_error(path, line, column, header)
    return fields


def _unclosed_quote(rest: str, delimiter: str) -> int | None:
    """The column (from 1) of the field whose opening quote is never closed, in `rest`, the text from a row's start
    to the end of the file, read as csv reads it (a quote opens a field only at its start; "" inside is a quote);
    None if the row ends with every quote closed."""
    column, at, ends = 1, 0, re.compile(f"[{re.escape(delimiter)}\r\n]")
    while True:
        if rest.startswith('"', at):
            at += 1
            while True:
                at = rest.find('"', at)
                if at < 0:
                    return column
                if not rest.startswith('"', at + 1):
                    break
                at += 2
            at += 1
        end = ends.search(rest, at)
        if end is None or end.group() != delimiter:
            return None
        column, at = column + 1, end.end()


def _unclosed_quote_error(path, line: int, column: int, header) -> DataError:
    name = f" ({header[column - 1]!r})" if column <= len(header) else ""
    return DataError(f"{path}, line {line}, column {column}{name}: the quote that opens this field is never closed, so "
                     "the field runs to the end of the file. Close it; a quote inside a quoted text is written twice "
                     '("").')


def _check_delimited(path: Path, fmt: str, text: str, required, check_row) -> tuple[tuple[str, ...], int]:
    """Check a CSV/TSV with a header row, row by row."""
    columns, rows = delimited_rows(path, fmt, text)
    missing = [column for column in required if column not in columns]
    if missing:
        raise DataError(f"{path}, line 1: missing column(s) {missing}; the header has {list(columns)}.")
    count = 0
    for line, row in rows:
        count += 1
        check_row(line, row, "line")
    if count == 0:
        raise DataError(f"{path}: the file has a header but no data rows.")
    return columns, count


class _Record(dict):
    """A JSON object that remembers the keys it names more than once (json keeps only the last value)."""

    def __init__(self, pairs):
        super().__init__(pairs)
        keys = [key for key, _ in pairs]
        self.repeated = [key for i, key in enumerate(keys) if key in keys[:i]]


class _NonFinite(float):
    """A JSON number that is not finite (NaN, Infinity, -Infinity, or beyond a float's range such as 1e400), with
    its spelling in the file."""

    def __new__(cls, written: str):
        number = super().__new__(cls, written)
        number.written = written
        return number


def _json_float(written: str) -> float:
    number = float(written)
    return number if math.isfinite(number) else _NonFinite(written)


def json_loads(text: str):
    """`json.loads` as the checks read a record: objects that remember a key named twice (`_Record`) and
    non-finite numbers that remember their spelling (`_NonFinite`)."""
    return json.loads(text, object_pairs_hook=_Record, parse_float=_json_float, parse_constant=_NonFinite)


def json_lines(text: str):
    """(line number, line) for the non-blank lines of a JSON-lines text: lines end at LF (a CR before it is JSON
    whitespace), so U+2028, U+0085 or a form feed in a string is a character of it, as the loader reads it."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip(" \t\r"):
            yield number, line


def _check_json(path: Path, text: str, required, check_row) -> tuple[tuple[str, ...], int]:
    """Check one JSON array of objects, or one object per line."""
    records: list[tuple[int, object]]
    if text.lstrip().startswith("["):
        try:
            data = json_loads(text)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}, line {error.lineno}, column {error.colno}: invalid JSON ({error.msg}).") from None
        records, where = [(i + 1, item) for i, item in enumerate(data)], "record"
    else:
        records, where = [], "line"
        for number, line in json_lines(text):
            try:
                records.append((number, json_loads(line)))
            except json.JSONDecodeError as error:
                raise DataError(
                    f"{path}, line {number}, column {error.colno}: invalid JSON ({error.msg}). JSON files must be "
                    "one array of objects or one object per line."
                ) from None
    if not records:
        raise DataError(f"{path}: no records.")
    columns: tuple[str, ...] = ()
    for number, record in records:
        if not isinstance(record, dict):
            raise DataError(f"{path}, {where} {number}: expected a JSON object, got {type(record).__name__}.")
        if record.repeated:
            raise DataError(f"{path}, {where} {number}: the object names {record.repeated[0]!r} twice; the checks and "
                            "the loader could read different values. Keep one.")
        missing = [column for column in required if column not in record]
        if missing:
            raise DataError(f"{path}, {where} {number}: missing field(s) {missing}; it has {sorted(record)}.")
        columns = columns or tuple(record)
        check_row(number, record, where)
    return columns, len(records)


# A label written as a plain decimal number (not "1_000", "inf" or "nan", which float() would also read).
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def label_string(value) -> str:
    """A label as the class it names: its text, stripped; a label written as a number is that number.

    Decision (issue 43): `1` and `1.0` in one label column are one class, "1", not two classes and not an error.
    The spelling of a number carries no meaning a user intends: pandas and spreadsheets write an integer column as
    1.0 as soon as one cell is missing or a float, and a JSON `1.0` was already class "1". Refusing would make every
    such file an edit for nothing; keeping both made a third class that silently split the data. Words ("yes", "Yes",
    "nan") stay labels of their own, non-integral numbers are compared as numbers ("0.5" and "0.50" are one class),
    and so are codes with leading zeros ("02" is 2), which is why the checks log every spelling they merge.
    None (a JSON null) is an empty label."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    text = str(value).strip()
    if not _NUMBER.fullmatch(text):
        return text
    number = Decimal(text)
    if number.adjusted() > 40:  # a huge number: leave it as written rather than spell out its digits
        return text
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


@functools.lru_cache(maxsize=32)  # called for every row of a file, with one label set
def label_keys(labels: tuple[str, ...] | None) -> dict[str, int]:
    """Class ids by label as `label_string` spells it, for a given label set. Refuses a set naming a number twice."""
    keys: dict[str, int] = {}
    for i, label in enumerate(labels or ()):
        key = label_string(label)
        if key in keys:
            raise DataError(f"The label set {list(labels)} is ambiguous: the labels {labels[keys[key]]!r} and "
                            f"{label!r} are the same number. Give each class once.")
        keys[key] = i
    return keys


class _Spellings:
    """The spellings of each numeric label in one file, to log the ones that `label_string` merged."""

    def __init__(self, path):
        self.path, self.first, self.merged = path, {}, {}

    def add(self, raw, value: str, where: str) -> None:
        written = raw.strip() if isinstance(raw, str) else None  # a JSON number has no spelling of its own
        if written is None or not value:
            return
        first = self.first.setdefault(value, (written, where))
        if written != first[0] and value not in self.merged:
            self.merged[value] = f"{first[0]!r} ({first[1]}) and {written!r} ({where})"

    def report(self) -> None:
        if self.merged:
            logger.warning("%s: numeric labels written in different ways are one class each: %s", self.path,
                           "; ".join(f"{pair} -> {value!r}" for value, pair in self.merged.items()))


def infer_labels(checked_train: CheckedFile) -> tuple[str, ...]:
    """A custom file's label set: its distinct values (as `label_string` spells them), in numeric order when they are
    all numbers, else in string order."""
    values = list(checked_train.label_values)
    if all(_NUMBER.fullmatch(value) for value in values):
        return tuple(sorted(values, key=Decimal))
    return tuple(sorted(values))


def check_custom_task(
    files: dict[str, str | os.PathLike],
    text_columns,
    label_column: str,
    regression: bool = False,
    labels: tuple[str, ...] | None = None,
    name: str | None = None,
) -> tuple[TaskSpec, dict[str, CheckedFile]]:
    """Check user files (split -> path). The label set comes from `labels` or the training file; labels in the
    other files must belong to it."""
    if "train" not in files and labels is None and not regression:
        raise DataError("Give the training file (the label set is read from it) or the list of labels.")
    if labels is not None and not regression:
        label_keys(tuple(labels))  # a label set naming one number twice ("1", "1.0") is refused here
    name = name or Path(next(iter(files.values()))).stem
    probe = custom_task(name, text_columns, label_column, labels, regression)
    checked = {}
    order = ["train"] + [split for split in files if split != "train"]
    for split in order:
        if split not in files:
            continue
        infer = split == "train" and probe.labels is None and not regression
        checked[split] = check_table_file(Path(files[split]), probe, labelled=split != "test", infer_labels=infer)
        if infer:
            probe = custom_task(name, text_columns, label_column, infer_labels(checked["train"]), regression)
            if len(probe.labels) < 2:
                raise DataError(f"{files['train']}: only one label value {list(probe.labels)}; a classifier needs two.")
    return probe, checked


__all__ = ["CheckedFile", "check_custom_task", "check_glue_file", "check_table_file", "check_unique_columns",
           "delimited_rows", "field_count_error", "infer_labels", "label_keys", "label_string", "read_utf8",
           "table_format"]
