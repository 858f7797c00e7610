"""Raw text for masked-LM pretraining and healing: files or folders, decoded in the encoding their byte-order mark
names, as UTF-8 or in an encoding the user names (anything else is refused), one example per line or packed into
fixed-length blocks; a corpus held in memory (`TextInMemory`); healing's pieces of random word length
(`TextPieces`)."""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from .decoding import byte_order_mark, check_encoding_name, decode, read_bytes
from .tasks import DataError

logger = logging.getLogger(__name__)


TEXT_SUFFIXES = (".txt", ".raw", ".text")


def corpus_files(inputs) -> list[Path]:
    """Expand files, folders (their *.txt / *.raw / *.text files, recursively) and glob patterns into a sorted,
    duplicate-free list. The one corpus finder: pretraining and healing both read their text through it.
    Raises DataError when nothing is given or an input matches nothing."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: dict[Path, None] = {}
    for item in inputs:
        item = str(item)
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
            if not found:
                raise DataError(f"{path}: the folder has no text files ({', '.join(TEXT_SUFFIXES)}); pass text files "
                                "or a folder of them.")
        elif path.is_file():
            found = [path]
        else:
            found = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
            if not found:
                raise DataError(f"{item}: no such file or folder, and no file matches it as a pattern; pass existing "
                                "text files, folders or patterns (--corpus).")
        files.update(dict.fromkeys(found))
    if not files:
        raise DataError("No corpus given: pass one or more text files or folders (--corpus PATHS).")
    return list(files)


def read_corpus_text(path, encoding: str | None = None) -> str:
    """A pretraining corpus file as text, strictly (`decoding.decode`): in the encoding its byte-order mark names
    (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE), else UTF-8, else `encoding` (for files that are not UTF-8 and have no mark,
    such as old Latin-1 Gutenberg files: cp1252). Anything else raises DataError naming the file, the line and the
    byte; nothing is replaced or guessed. CRLF and CR line ends become LF."""
    raw = read_bytes(path, allow_empty=True)  # an empty file adds nothing; a corpus of nothing is refused as such
    text, used = decode(raw, path, encoding, fix="pass --encoding NAME (encoding= from Python)")
    if used != "UTF-8":
        logger.info("%s: read as %s.", path, used)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text(path: Path) -> str:
    """Decode a text file tolerantly, for text where a few odd bytes do not matter (held-out passages, studies):
    the encoding its byte-order mark names, else UTF-8 when it is UTF-8, otherwise Windows-1252/Latin-1 (old
    Gutenberg files) with undecodable bytes replaced; CRLF and CR line ends become LF. The pretraining corpus is read
    strictly instead (`read_corpus_text`)."""
    raw = Path(path).read_bytes()
    mark = byte_order_mark(raw)
    try:
        text = raw[len(mark[0]):].decode(mark[1]) if mark else raw.decode("utf-8")
    except UnicodeDecodeError:
        utf8 = raw.decode("utf-8", errors="replace")
        # A UTF-8 file with a few broken bytes still has real multi-byte characters; a Latin-1 file has none.
        if any(ord(ch) > 127 and ch != "\ufffd" for ch in utf8):
            text = utf8
        else:
            text = raw.decode("cp1252", errors="replace")
        logger.warning("%s is not valid UTF-8; decoded with replacement of undecodable bytes.", path)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def corpus_units(files, line_by_line: bool = False, documents: str = "file", encoding: str | None = None) -> dict:
    """Split files into units for tokenisation: `text` (one non-empty line each) and `doc` (a document number; a new
    document starts at each file, and also at each blank line when `documents="blank-line"`). Files are read by
    `read_corpus_text`: a file that is not UTF-8 and has no byte-order mark is refused unless `encoding` names its
    encoding."""
    if documents not in ("file", "blank-line"):
        raise ValueError(f"documents must be 'file' or 'blank-line', got {documents!r}.")
    if encoding is not None:
        check_encoding_name(encoding, "encoding=")
    texts, docs, doc = [], [], -1
    for path in files:
        doc += 1
        previous_blank = False
        for line in read_corpus_text(path, encoding).split("\n"):
            line = line.strip()
            if not line:
                previous_blank = True
                continue
            if previous_blank and documents == "blank-line" and texts and docs[-1] == doc:
                doc += 1
            previous_blank = False
            texts.append(line)
            docs.append(doc)
    if not texts:
        raise DataError(f"No text in {[str(f) for f in files]}: every line is empty.")
    return {"text": texts, "doc": docs}


def corpus_units_from_dataset(name, config=None, split="train", text_column="text") -> dict:
    """Units (`text`, `doc`) from a datasets dataset: every row is a document; empty rows are skipped."""
    import datasets  # in the functions that need it, so reading text files does not load it

    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as error:
        raise ValueError(f"Cannot load dataset {name!r} ({config}, split {split}): {error}") from error
    if text_column not in dataset.column_names:
        raise ValueError(f"Dataset {name!r} has no column {text_column!r}; its columns are {dataset.column_names}. "
                         "Pass --text-column.")
    texts, docs = [], []
    for doc, text in enumerate(dataset[text_column]):
        if isinstance(text, str) and text.strip():
            texts.append(text.strip())
            docs.append(doc)
    if not texts:
        raise ValueError(f"Dataset {name!r} has no text in column {text_column!r}.")
    return {"text": texts, "doc": docs}


def mlm_dataset(units: dict[str, list], tokenizer, block_size: int = 128, line_by_line: bool = False):
    """Tokenise corpus units for masked-LM training.

    `line_by_line`: each line is one example ([CLS] line [SEP], truncated to `block_size`).
    Otherwise the lines are concatenated and cut into blocks of exactly `block_size` tokens, each [CLS] ... [SEP],
    with a [SEP] where one document ends and the next starts (RoBERTa's FULL-SENTENCES packing); the last partial
    block is dropped."""
    import datasets

    if block_size < 8:
        raise ValueError(f"block_size must be at least 8 tokens, got {block_size}.")
    dataset = datasets.Dataset.from_dict(units)
    if line_by_line:
        def encode_lines(batch):
            return tokenizer(batch["text"], truncation=True, max_length=block_size)

        return dataset.map(encode_lines, batched=True, remove_columns=["text", "doc"], desc="Tokenising lines")

    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    body = block_size - 2

    def encode(batch):
        return {"ids": tokenizer(batch["text"], add_special_tokens=False)["input_ids"], "doc": batch["doc"]}

    def pack(batch):
        stream: list[int] = []
        previous = None
        for ids, doc in zip(batch["ids"], batch["doc"]):
            if previous is not None and doc != previous:
                stream.append(sep_id)
            stream.extend(ids)
            previous = doc
        blocks = [stream[i : i + body] for i in range(0, len(stream) - body + 1, body)]
        input_ids = [[cls_id, *block, sep_id] for block in blocks]
        return {
            "input_ids": input_ids,
            "token_type_ids": [[0] * block_size for _ in input_ids],
            "attention_mask": [[1] * block_size for _ in input_ids],
        }

    encoded = dataset.map(encode, batched=True, remove_columns=["text"], desc="Tokenising")
    # Large batches: only the remainder of each batch (under one block) is lost.
    packed = encoded.map(pack, batched=True, batch_size=10_000, remove_columns=["ids", "doc"], desc="Packing blocks")
    if len(packed) == 0:
        raise DataError(f"The corpus is shorter than one block of {block_size} tokens; use more text or --block-size.")
    return packed


@dataclass(frozen=True)
class TextInMemory:
    """A corpus held in memory rather than in files, such as a task's training sentences (labels unused): pass it
    wherever a corpus goes (`heal`, `convert_checkpoint`). `name` says what it is in reports and model cards."""

    name: str
    texts: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "texts", tuple(self.texts))
        if not all(isinstance(text, str) for text in self.texts):
            raise TypeError(f"TextInMemory {self.name!r} holds something other than strings; pass a sequence of texts.")

    def __str__(self):
        return self.name

    def digest(self) -> str:
        digest = hashlib.sha256()
        for text in self.texts:
            digest.update(text.encode("utf-8") + b"\0")
        return digest.hexdigest()


class TextPieces:
    """Raw text cut into pieces of random word length, in a reproducible shuffled order.

    The corpus is text files or folders (`corpus_files`), or a `TextInMemory`. Files are decoded as UTF-8 with
    undecodable bytes replaced (some Gutenberg files are Latin-1) and split on any whitespace (so CRLF files are fine).
    Piece lengths come from `seed`, so the same corpus and seed always give the same pieces; epoch e visits them in the
    permutation drawn from (seed, e).
    """

    def __init__(self, paths, min_words: int, max_words: int, seed: int):
        digest = hashlib.sha256()
        if isinstance(paths, TextInMemory):
            self.files = []
            words = " ".join(paths.texts).split()
            digest.update(f"{paths.name}:{paths.digest()};".encode())
            described = paths.name
        else:
            self.files = corpus_files(paths)
            words = []
            for path in self.files:
                words.extend(path.read_bytes().decode("utf-8", errors="replace").split())
                digest.update(f"{path.name}:{path.stat().st_size};".encode())
            described = ", ".join(str(p) for p in self.files[:3]) + (" ..." if len(self.files) > 3 else "")
        if len(words) < min_words:
            raise ValueError(
                f"The corpus ({described}) holds {len(words)} words; healing needs real text (at least {min_words} "
                "words, ideally megabytes)."
            )
        rng = random.Random(seed)
        self.pieces = []
        start = 0
        while start < len(words):
            length = rng.randint(min_words, max_words)
            self.pieces.append(" ".join(words[start : start + length]))
            start += length
        self.seed = seed
        self.fingerprint = f"{digest.hexdigest()[:16]}:{len(self.pieces)}"

    def __len__(self):
        return len(self.pieces)

    def batch(self, position: int, batch_size: int) -> list[str]:
        """The batch starting at global `position` (counting pieces over epochs)."""
        out = []
        for p in range(position, position + batch_size):
            epoch, index = divmod(p, len(self.pieces))
            out.append(self.pieces[self._order(epoch)[index]])
        return out

    def _order(self, epoch: int):
        if getattr(self, "_cached_epoch", None) != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._cached_order = torch.randperm(len(self.pieces), generator=generator).tolist()
            self._cached_epoch = epoch
        return self._cached_order


__all__ = ["TEXT_SUFFIXES", "TextInMemory", "TextPieces", "corpus_files", "corpus_units", "corpus_units_from_dataset",
           "mlm_dataset", "read_corpus_text", "read_text"]
