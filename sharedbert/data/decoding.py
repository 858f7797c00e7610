"""Bytes to text, strictly: the encoding a file's byte-order mark names (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE), else
UTF-8, else an encoding the user names. Text that is none of these, or UTF-8 holding NUL bytes (UTF-16 or UTF-32
without a byte-order mark reads as ASCII with a NUL beside every letter), raises `DataError` naming the file, the line
and the byte, and the fix. Positions count bytes of the file as it is on disk."""

from __future__ import annotations

import codecs
from pathlib import Path

from .tasks import DataError

# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16 BE"),
)


def byte_order_mark(raw: bytes) -> tuple[bytes, str, str] | None:
    """(mark, codec, readable name) of the byte-order mark `raw` starts with, or None."""
    return next((entry for entry in BYTE_ORDER_MARKS if raw.startswith(entry[0])), None)


def check_encoding_name(name: str, option: str = "--encoding") -> str:
    """`name` if Python knows the encoding; else a ValueError naming the option and a few common ones."""
    try:
        codecs.lookup(name)
    except LookupError:
        raise ValueError(f"{option} {name}: unknown encoding. Name one Python knows, e.g. cp1252 (Windows Western), "
                         "latin-1, utf-16-le, utf-16-be or shift_jis.") from None
    return name


def where(raw: bytes, offset: int) -> str:
    """Byte `offset` of `raw` as 'line L, byte B of the line', both counted from 1."""
    line = raw.count(b"\n", 0, offset) + 1
    column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, byte {column} of the line"


def read_bytes(path, allow_empty: bool = False) -> bytes:
    """A file's bytes; a missing or unreadable file, or unless `allow_empty` an empty one (nothing but whitespace),
    raises DataError naming it."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found.")
    if not path.is_file():
        raise DataError(f"{path}: not a file.")
    try:
        raw = path.read_bytes()
    except PermissionError:
        raise DataError(f"{path}: the file cannot be read (permission denied); make it readable (chmod +r).") from None
    if not allow_empty and not raw.strip():
        raise DataError(f"{path}: the file is empty.")
    return raw


def decode(raw: bytes, path, encoding: str | None = None, fix: str = "") -> tuple[str, str]:
    """(text, the encoding it was read in): by the byte-order mark if there is one, else as UTF-8, else as
    `encoding`. `fix`: what the user can pass instead (e.g. "pass --encoding NAME"), added to the refusals."""
    mark = byte_order_mark(raw)
    if mark is not None:
        prefix, codec, name = mark
        try:
            return raw[len(prefix):].decode(codec), name
        except UnicodeDecodeError as error:
            at = len(prefix) + error.start
            raise DataError(f"{path}, {where(raw, at)}: the file starts with a {name} byte-order mark, but its bytes "
                            f"are not {name} from byte {at + 1:,} of the file on ({error.reason}). Re-save the file "
                            "in one encoding (UTF-8 is best).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        utf8_error = error
    else:
        utf8_error, nul = None, raw.find(b"\0")
        if nul < 0:
            return text, "UTF-8"
    if encoding is not None:
        try:
            return raw.decode(encoding), encoding
        except UnicodeDecodeError as error:
            raise DataError(f"{path}, {where(raw, error.start)}: not {encoding} text either (byte "
                            f"0x{raw[error.start]:02x}, byte {error.start + 1:,} of the file: {error.reason}). Name "
                            "the file's real encoding, or re-save it as UTF-8.") from None
    if utf8_error is not None:
        at = utf8_error.start
        raise DataError(f"{path}, {where(raw, at)}: not UTF-8 text (byte 0x{raw[at]:02x}, byte {at + 1:,} of the "
                        "file), and no byte-order mark names another encoding. Re-save the file as UTF-8 (e.g. "
                        "`iconv -f cp1252 -t utf-8`)" + (f", or {fix}" if fix else "") + ".")
    raise DataError(f"{path}, {where(raw, nul)}: a NUL byte (byte {nul + 1:,} of the file), as UTF-16 or UTF-32 text "
                    "without a byte-order mark has between its letters. Re-save the file as UTF-8"
                    + (f", or {fix} (e.g. utf-16-le)" if fix else "") + ".")


__all__ = ["BYTE_ORDER_MARKS", "byte_order_mark", "check_encoding_name", "decode", "read_bytes", "where"]
