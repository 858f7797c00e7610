"""Source/target pairs for sequence-to-sequence fine-tuning, and the sources to generate for: CSV, TSV (a header row),
JSON (an array of objects) or JSON lines, with the columns named by the caller; plain text (one source per line) for
generation. Every file is read and checked before a model is loaded: an unreadable file, a missing column or an empty
text raises `DataError` naming the file, the line and the fix."""

from __future__ import annotations

import json
from pathlib import Path

from .checks import delimited_rows, json_lines, read_utf8, table_format
from .tasks import DataError


def read_records(path, columns: list[str]) -> list[tuple[int, dict]]:
    """(line or record number, row) for every row of a CSV/TSV/JSON(L) file, each holding every one of `columns`."""
    path = Path(path)
    fmt = table_format(path)
    text = read_utf8(path)
    if fmt in ("csv", "tsv"):
        header, body = delimited_rows(path, fmt, text)  # a column named twice or a row of the wrong length: refused
        missing = [column for column in columns if column not in header]
        if missing:
            raise DataError(f"{path}, line 1: no column {missing} in the header {list(header)}; name the columns with "
                            "--source-column / --target-column.")
        rows = list(body)
    else:
        rows = _json_records(path, text)
        for number, row in rows:
            missing = [column for column in columns if column not in row]
            if missing:
                raise DataError(f"{path}, line {number}: no field {missing} (it has {sorted(row)}); name the fields "
                                "with --source-column / --target-column.")
    if not rows:
        raise DataError(f"{path}: no rows after the header.")
    return rows


def _json_records(path: Path, text: str) -> list[tuple[int, dict]]:
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}, line {error.lineno}: invalid JSON at column {error.colno} "
                            f"({error.msg}).") from None
        records = list(enumerate(data, start=1))
    else:
        records = []
        for number, line in json_lines(text):  # lines end at LF only: U+2028 in a string is a character of it
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise DataError(f"{path}, line {number}: invalid JSON at column {error.colno} ({error.msg}); a "
                                "JSON lines file holds one object per line.") from None
    for number, record in records:
        if not isinstance(record, dict):
            raise DataError(f"{path}, line {number}: expected a JSON object, got {type(record).__name__}.")
    return records


def _text(path, number: int, row: dict, column: str, what: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path}, line {number}: the {what} (column {column!r}) is empty or not text; remove the row "
                        "or fill it in.")
    return value.strip()


def read_pairs(path, source_column: str, target_column: str) -> list[tuple[str, str]]:
    """The (source, target) pairs of a training or validation file."""
    return [(_text(path, number, row, source_column, "source"), _text(path, number, row, target_column, "target"))
            for number, row in read_records(path, [source_column, target_column])]


def read_sources(path, source_column: str | None = None) -> list[str]:
    """The sources to generate for: one per line of a .txt file (blank lines are errors), or a column of a table."""
    path = Path(path)
    if path.suffix.lower() == ".txt":
        # Lines end at LF, CRLF or CR, as an editor ends them (U+2028 or a form feed is a character of the source).
        lines = read_utf8(path).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        while lines and not lines[-1].strip():
            lines.pop()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                raise DataError(f"{path}, line {number}: an empty line; a .txt input holds one source per line.")
        return [line.strip() for line in lines]
    if source_column is None:
        raise DataError(f"{path}: a table needs --source-column to name the column to generate from.")
    return [_text(path, number, row, source_column, "source") for number, row in read_records(path, [source_column])]


__all__ = ["read_pairs", "read_records", "read_sources"]
