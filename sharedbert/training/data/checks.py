"""Checking a task's files before anything is loaded or trained: a missing or empty file, missing columns, a row with
the wrong number of fields, a label outside the label set or bytes that are not UTF-8 raise `DataError` naming the
file and the line (and column)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .tasks import DataError, TaskSpec, custom_task


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
    """Read a whole file as UTF-8 (a byte-order mark is allowed). Raises DataError for a missing, empty or non-UTF-8
    file, naming the line and the byte."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found.")
    if not path.is_file():
        raise DataError(f"{path}: not a file.")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path}: the file is empty.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        # utf-8-sig reports positions after the byte-order mark.
        start = error.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw.count(b"\n", 0, start) + 1
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        raise DataError(
            f"{path}, line {line}, byte {column} of the line: not UTF-8 text (byte 0x{raw[start]:02x}). Re-save the "
            "file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)."
        ) from None


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
            raise DataError(
                f"{path}, line {number}: expected {len(columns)} tab-separated fields ({list(columns)}), found "
                f"{len(fields)}. Check for a stray or missing tab on that line."
            )
        for column in spec.text_columns:
            if not fields[index[column]].strip():
                raise DataError(f"{path}, line {number}, column {column!r}: the text is empty.")
        if labelled:
            value = fields[index[spec.label_column]].strip()
            _check_label(path, f"line {number}", spec, value)
            if not spec.is_regression:
                label_values.setdefault(value)
    return CheckedFile(
        path=Path(path), format="tsv", columns=columns, has_header=has_header, rows=len(body), labelled=labelled,
        label_values=tuple(label_values),
    )


def _check_label(path, where: str, spec: TaskSpec, value: str) -> None:
    if spec.is_regression:
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if number != number:  # NaN or unparsable
            raise DataError(
                f"{path}, {where}, column {spec.label_column!r}: {value!r} is not a number (this is a regression "
                "task; every row needs a numeric score)."
            )
    elif value not in spec.labels:
        raise DataError(
            f"{path}, {where}, column {spec.label_column!r}: label {value!r} is not in the label set "
            f"{list(spec.labels)}."
        )


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

    def check_row(number, row, where):
        for column in spec.text_columns:
            value = row.get(column)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{path}, {where} {number}, column {column!r}: the text is empty or not a string.")
        if labelled:
            value = label_string(row.get(spec.label_column))
            if infer_labels:
                label_values.setdefault(value)
            else:
                _check_label(path, f"{where} {number}", spec, value)

    if fmt in ("csv", "tsv"):
        reader = csv.DictReader(text.splitlines(keepends=True), delimiter="\t" if fmt == "tsv" else ",")
        columns = tuple(reader.fieldnames or ())
        missing = [column for column in required if column not in columns]
        if missing:
            raise DataError(f"{path}, line 1: missing column(s) {missing}; the header has {list(columns)}.")
        rows = 0
        for row in reader:
            if None in row or any(value is None for value in row.values()):
                raise DataError(
                    f"{path}, line {reader.line_num}: expected {len(columns)} fields ({list(columns)}), found "
                    f"{len(row) - (None in row) + len(row.get(None) or [])}."
                )
            rows += 1
            check_row(reader.line_num, row, "line")
        if rows == 0:
            raise DataError(f"{path}: the file has a header but no data rows.")
        return CheckedFile(path, fmt, columns, True, rows, labelled, tuple(label_values))

    # JSON: either one array of objects, or one object per line.
    records: list[tuple[int, object]]
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}, line {error.lineno}, column {error.colno}: invalid JSON ({error.msg}).") from None
        records = [(i + 1, item) for i, item in enumerate(data)]
        where = "record"
    else:
        records, where = [], "line"
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((number, json.loads(line)))
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
        missing = [column for column in required if column not in record]
        if missing:
            raise DataError(f"{path}, {where} {number}: missing field(s) {missing}; it has {sorted(record)}.")
        columns = columns or tuple(record)
        check_row(number, record, where)
    return CheckedFile(path, "json", columns, True, len(records), labelled, tuple(label_values))


def label_string(value) -> str:
    """Labels compare as strings: 1, 1.0 (from JSON) and "1" are the same class."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def infer_labels(checked_train: CheckedFile) -> tuple[str, ...]:
    """A custom file's label set: its distinct values, numerically sorted when they are all integers."""
    values = list(checked_train.label_values)
    try:
        return tuple(sorted(values, key=int))
    except ValueError:
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


__all__ = ["CheckedFile", "check_custom_task", "check_glue_file", "check_table_file", "infer_labels", "read_utf8",
           "table_format"]
