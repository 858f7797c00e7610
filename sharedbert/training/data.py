"""Data for training and evaluating SharedBert.

* Labelled tasks: the six GLUE tasks shipped as TSV files (the GLUE download script's layout: ``SST-2/train.tsv``, ...),
  the same tasks from the Hub (``nyu-mll/glue``) when online, or any CSV/TSV/JSON file with text column(s) and a label.
  Every file is checked *before* any model is loaded or trained: a missing or empty file, missing columns, a row with
  the wrong number of fields, a label outside the label set or bytes that are not UTF-8 raise `DataError` naming the
  file and the line (and column). Files are then read through `datasets` (``load_dataset("csv" | "json")``, cached on
  disk) and tokenised with batched `map`. Every task comes out in one layout: ``text``, optional ``text_pair``, and
  ``label`` (class id, or float for regression).
* Metrics per task as GLUE reports them: accuracy, F1, Matthews correlation, Pearson/Spearman.
* Raw text for masked-LM pretraining: files or folders, decoded tolerantly (CRLF, Latin-1), one example per line or
  packed into fixed-length blocks.
"""

from __future__ import annotations

import csv
import glob
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


class DataError(ValueError):
    """A problem with an input file, found before training. The message names the file, the line and the fix."""


# ----------------------------------------------------------------------------------------------------------------------
# Task specifications
# ----------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSpec:
    """What a labelled task looks like on disk and how it is scored.

    `text_columns` / `label_column` name the columns in the files; `labels` are the label values as they appear in
    the files (their order defines the class ids) or None for a regression task; `label_names` are the readable names
    written to the model's `id2label`. `headerless_columns` names the columns of files that have no header row
    (GLUE's CoLA train/dev)."""

    name: str
    text_columns: tuple[str, ...]
    label_column: str
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    main_metric: str
    label_names: tuple[str, ...] | None = None
    folder: str | None = None
    headerless_columns: tuple[str, ...] | None = None
    hub_dataset: str | None = None
    hub_config: str | None = None
    hub_text_columns: tuple[str, ...] = ()
    dataset_name: str | None = None  # how results name the data set, e.g. "glue/sst2"

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def id2label(self) -> dict[int, str]:
        if self.labels is None:
            return {0: "score"}
        return dict(enumerate(self.label_names or self.labels))

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2


def _glue(name, folder, text_columns, label_column, labels, label_names, metrics, hub_text_columns, **extra):
    return TaskSpec(
        name=name,
        folder=folder,
        text_columns=text_columns,
        label_column=label_column,
        labels=labels,
        label_names=label_names,
        metrics=metrics,
        main_metric=metrics[0],
        hub_dataset="nyu-mll/glue",
        hub_config=name,
        hub_text_columns=hub_text_columns,
        dataset_name=f"glue/{name}",
        **extra,
    )


GLUE_TASKS: dict[str, TaskSpec] = {
    "sst2": _glue("sst2", "SST-2", ("sentence",), "label", ("0", "1"), ("negative", "positive"), ("accuracy",),
                  ("sentence",)),
    "cola": _glue("cola", "CoLA", ("sentence",), "label", ("0", "1"), ("unacceptable", "acceptable"),
                  ("matthews_correlation",), ("sentence",),
                  headerless_columns=("source", "label", "original_label", "sentence")),
    "mrpc": _glue("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", ("0", "1"), ("not_equivalent", "equivalent"),
                  ("f1", "accuracy"), ("sentence1", "sentence2")),
    "rte": _glue("rte", "RTE", ("sentence1", "sentence2"), "label", ("entailment", "not_entailment"), None,
                 ("accuracy",), ("sentence1", "sentence2")),
    "stsb": _glue("stsb", "STS-B", ("sentence1", "sentence2"), "score", None, None, ("spearman", "pearson"),
                  ("sentence1", "sentence2")),
    "wnli": _glue("wnli", "WNLI", ("sentence1", "sentence2"), "label", ("0", "1"), ("not_entailment", "entailment"),
                  ("accuracy",), ("sentence1", "sentence2")),
}

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "sts": "stsb"}

# GLUE's file name for each split.
GLUE_SPLIT_FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}


def get_task(name: str) -> TaskSpec:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise ValueError(
            f"Unknown task {name!r}: choose one of {sorted(GLUE_TASKS)}, or give your own files with --train-file / "
            "--validation-file, --text-columns and --label-column."
        )
    return GLUE_TASKS[key]


def custom_task(
    name: str,
    text_columns: tuple[str, ...] | list[str],
    label_column: str,
    labels: tuple[str, ...] | None,
    regression: bool = False,
) -> TaskSpec:
    """A TaskSpec for user files. Binary tasks report accuracy and F1, others accuracy; regression Pearson/Spearman."""
    text_columns = tuple(text_columns)
    if not 1 <= len(text_columns) <= 2:
        raise ValueError(f"Give one or two text columns (a sentence or a sentence pair), got {list(text_columns)}.")
    if regression:
        metrics, labels = ("spearman", "pearson"), None
    else:
        metrics = ("accuracy", "f1") if labels is not None and len(labels) == 2 else ("accuracy",)
    return TaskSpec(
        name=name, text_columns=text_columns, label_column=label_column, labels=labels, metrics=metrics,
        main_metric=metrics[0], dataset_name=name,
    )


# ----------------------------------------------------------------------------------------------------------------------
# Checking files before training
# ----------------------------------------------------------------------------------------------------------------------


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
            value = _label_string(row.get(spec.label_column))
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


def _label_string(value) -> str:
    """Labels compare as strings: 1, 1.0 (from JSON) and "1" are the same class."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


# ----------------------------------------------------------------------------------------------------------------------
# Finding and loading data
# ----------------------------------------------------------------------------------------------------------------------


# Where the project keeps its data: GLUE TSVs in glue/, raw text in mlm-text/ (see its README). Said in messages.
SHARED_DATA_PLACES = "shared/data beside the repository, or beside or inside the current folder"


def shared_data_dir(holding: str | None = None) -> Path | None:
    """The shared data folder: `shared/data` beside the repository (../shared/data from its root), else beside or
    inside the current folder; with `holding` (a relative path such as "glue/SST-2"), the first that holds it. None
    when there is none. The one place that knows this layout: commands, benchmarks and the demo default to it."""
    repo_root = Path(__file__).resolve().parents[2]
    for base in (repo_root, Path.cwd()):
        for candidate in (base.parent / "shared" / "data", base / "shared" / "data"):
            if candidate.is_dir() and (holding is None or (candidate / holding).exists()):
                return candidate
    return None


def find_glue_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """The GLUE folder: `explicit` if given (must exist), else the shared data folder's glue/ (`shared_data_dir`)
    when it holds a GLUE task. None if none is found."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_dir():
            raise DataError(f"--data-dir {path}: no such folder (it should hold SST-2/, CoLA/, ... with GLUE TSVs).")
        return path
    for spec in GLUE_TASKS.values():
        shared = shared_data_dir(f"glue/{spec.folder}")
        if shared is not None:
            return shared / "glue"
    return None


def glue_file(data_dir: Path, spec: TaskSpec, split: str) -> Path:
    if split not in GLUE_SPLIT_FILES:
        raise ValueError(f"Unknown split {split!r}; choose one of {list(GLUE_SPLIT_FILES)} (dev = validation).")
    return Path(data_dir) / spec.folder / GLUE_SPLIT_FILES[split]


def check_glue_task(data_dir: Path, spec: TaskSpec, splits=("train", "validation")) -> dict[str, CheckedFile]:
    """Check the task's files for `splits`; test files are unlabelled."""
    folder = Path(data_dir) / spec.folder
    if not folder.is_dir():
        raise DataError(
            f"{folder}: no such folder. --data-dir must be the GLUE root holding {spec.folder}/train.tsv, "
            f"{spec.folder}/dev.tsv (the layout of the GLUE download script)."
        )
    return {
        split: check_glue_file(glue_file(data_dir, spec, split), spec, labelled=split != "test") for split in splits
    }


def load_checked(checked: dict[str, CheckedFile], spec: TaskSpec, cache_dir: str | None = None):
    """Read checked files through `datasets` (cached on disk, keyed by the files' contents) into the common layout
    (`text`, optional `text_pair`, `label`). Returns a `datasets.DatasetDict` keyed by split."""
    import datasets

    out = {}
    for split, info in checked.items():
        string_features = datasets.Features({column: datasets.Value("string") for column in info.columns})
        if info.format in ("tsv", "csv"):
            kwargs = dict(
                sep="\t" if info.format == "tsv" else ",",
                # GLUE TSVs are not quoted: a `"` is an ordinary character. User CSVs use standard quoting.
                quoting=csv.QUOTE_NONE if info.format == "tsv" and spec.hub_dataset else csv.QUOTE_MINIMAL,
                keep_default_na=False,
                na_filter=False,  # "null", "NA", "nan" are words, not missing values
                encoding="utf-8-sig",
                features=string_features,
            )
            if not info.has_header:
                kwargs.update(column_names=list(info.columns), header=None)
            dataset = datasets.load_dataset(
                "csv", data_files={split: str(info.path)}, split=split, cache_dir=cache_dir, **kwargs
            )
        else:
            dataset = datasets.load_dataset(
                "json", data_files={split: str(info.path)}, split=split, cache_dir=cache_dir
            )
        out[split] = _to_common_layout(dataset, spec, spec.text_columns, spec.label_column if info.labelled else None)
    return datasets.DatasetDict(out)


def _to_common_layout(dataset, spec: TaskSpec, text_columns, label_column, label_is_id: bool = False):
    """Map any column layout to `text` (+ `text_pair`) and `label` (class id or float); unlabelled rows get -1."""
    label_ids = {value: i for i, value in enumerate(spec.labels or ())}

    def convert(batch):
        out = {"text": [str(t).strip() for t in batch[text_columns[0]]]}
        if len(text_columns) == 2:
            out["text_pair"] = [str(t).strip() for t in batch[text_columns[1]]]
        n = len(out["text"])
        if label_column is None:
            out["label"] = [-1.0 if spec.is_regression else -1] * n
        elif label_is_id:
            out["label"] = list(batch[label_column])
        elif spec.is_regression:
            out["label"] = [float(v) for v in batch[label_column]]
        else:
            out["label"] = [label_ids[_label_string(v)] for v in batch[label_column]]
        return out

    return dataset.map(convert, batched=True, remove_columns=dataset.column_names, desc="Reading rows")


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE forbids downloads (any value but 0 / false / empty)."""
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def load_glue_from_hub(spec: TaskSpec, splits=("train", "validation"), cache_dir: str | None = None):
    """The task from the Hub (`nyu-mll/glue`), in the common layout. Raises DataError when it cannot be reached."""
    import datasets

    if spec.hub_dataset is None:
        raise DataError(f"Task {spec.name!r} has no Hub dataset; give its files.")
    if hub_offline():
        raise DataError(f"Cannot load {spec.hub_dataset} ({spec.hub_config}): HF_HUB_OFFLINE is set.")
    try:
        loaded = datasets.load_dataset(spec.hub_dataset, spec.hub_config, cache_dir=cache_dir)
    except Exception as error:  # network errors come in many types; all mean "not available here"
        raise DataError(f"Cannot load {spec.hub_dataset} ({spec.hub_config}) from the Hub: {error}") from error
    return datasets.DatasetDict(
        {split: _to_common_layout(loaded[split], spec, spec.hub_text_columns, "label", label_is_id=True)
         for split in splits}
    )


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


@dataclass
class TaskData:
    """A task ready for tokenisation: its spec, a DatasetDict in the common layout, and where it came from."""

    spec: TaskSpec
    datasets: object
    source: str


def load_task(
    task: str | None = None,
    data_dir=None,
    dataset: str | None = None,
    files: dict[str, str] | None = None,
    text_columns=None,
    label_column: str | None = None,
    regression: bool = False,
    labels: tuple[str, ...] | None = None,
    splits=("train", "validation"),
    cache_dir: str | None = None,
) -> TaskData:
    """Check, then load, a task's data from one of three sources:

    * `files` (split -> CSV/TSV/JSON path) with `text_columns` and `label_column`: the user's own task;
    * `dataset` (e.g. "nyu-mll/glue") with a GLUE `task`: the Hub;
    * otherwise the GLUE TSVs of `task` under `data_dir` (default: `find_glue_dir()`).
    Every file is checked before anything is loaded (DataError names the file and line)."""
    if files:
        if not text_columns or not label_column:
            raise DataError("Own data files need --text-columns and --label-column.")
        if isinstance(text_columns, str):
            text_columns = [c.strip() for c in text_columns.split(",") if c.strip()]
        spec, checked = check_custom_task(files, text_columns, label_column, regression=regression, labels=labels,
                                          name=task)
        return TaskData(spec, load_checked(checked, spec, cache_dir), "files " + ", ".join(map(str, files.values())))
    if task is None:
        raise DataError("Name a GLUE task (--task sst2, cola, mrpc, rte, stsb, wnli) or give data files.")
    spec = get_task(task)
    if dataset is not None:
        if dataset != spec.hub_dataset:
            raise DataError(f"--dataset {dataset}: only {spec.hub_dataset} is supported for the GLUE tasks; use "
                            "--train-file/--validation-file for other data.")
        loaded = load_glue_from_hub(spec, splits, cache_dir)
        return TaskData(spec, loaded, f"{dataset} ({spec.hub_config}) from the Hub")
    glue_dir = find_glue_dir(data_dir)
    if glue_dir is None:
        raise DataError(
            f"No GLUE data found: looked for glue/ in {SHARED_DATA_PLACES}. "
            "Pass --data-dir GLUE_ROOT (holding SST-2/train.tsv, ...) or --dataset nyu-mll/glue when online."
        )
    checked = check_glue_task(glue_dir, spec, splits)
    return TaskData(spec, load_checked(checked, spec, cache_dir), f"GLUE TSVs in {glue_dir / spec.folder}")


# ----------------------------------------------------------------------------------------------------------------------
# Tokenisation and metrics
# ----------------------------------------------------------------------------------------------------------------------


def tokenize(dataset, tokenizer, max_length: int = 128, desc: str = "Tokenising"):
    """Batched tokenisation (truncation only; padding is per batch, by the collator). Adds `length` for
    length-grouped sampling."""
    pair = "text_pair" in dataset.column_names

    def encode(batch):
        encoded = tokenizer(batch["text"], batch["text_pair"] if pair else None, truncation=True, max_length=max_length)
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    texts = [column for column in ("text", "text_pair") if column in dataset.column_names]
    return dataset.map(encode, batched=True, remove_columns=texts, desc=desc)


def compute_metrics(spec: TaskSpec, predictions, labels) -> dict[str, float]:
    """The task's metrics. `predictions` are class ids (classification) or scores (regression)."""
    import numpy as np

    predictions, labels = np.asarray(predictions), np.asarray(labels)
    results = {}
    for name in spec.metrics:
        if name == "accuracy":
            results[name] = float((predictions == labels).mean())
        elif name == "f1":
            from sklearn.metrics import f1_score

            results[name] = float(f1_score(labels, predictions, average="binary" if spec.num_labels == 2 else "macro"))
        elif name == "matthews_correlation":
            from sklearn.metrics import matthews_corrcoef

            results[name] = float(matthews_corrcoef(labels, predictions))
        elif name == "pearson":
            from scipy.stats import pearsonr

            results[name] = float(pearsonr(predictions, labels)[0])
        elif name == "spearman":
            from scipy.stats import spearmanr

            results[name] = float(spearmanr(predictions, labels)[0])
        else:
            raise ValueError(f"Unknown metric {name!r}.")
    return results


def predictions_from_logits(spec: TaskSpec, logits):
    import numpy as np

    logits = np.asarray(logits)
    return logits.reshape(-1) if spec.is_regression else logits.argmax(-1)


# ----------------------------------------------------------------------------------------------------------------------
# Raw text for masked-LM pretraining
# ----------------------------------------------------------------------------------------------------------------------

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


def read_text(path: Path) -> str:
    """Decode a text file tolerantly: UTF-8 when it is UTF-8, otherwise Windows-1252/Latin-1 (old Gutenberg
    files) with undecodable bytes replaced; CRLF and CR line ends become LF."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        utf8 = raw.decode("utf-8", errors="replace")
        # A UTF-8 file with a few broken bytes still has real multi-byte characters; a Latin-1 file has none.
        if any(ord(ch) > 127 and ch != "\ufffd" for ch in utf8):
            text = utf8
        else:
            text = raw.decode("cp1252", errors="replace")
        logger.warning("%s is not valid UTF-8; decoded with replacement of undecodable bytes.", path)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def corpus_units(files, line_by_line: bool = False, documents: str = "file") -> dict[str, list]:
    """Split files into units for tokenisation: `text` (one non-empty line each) and `doc` (a document number; a new
    document starts at each file, and also at each blank line when `documents="blank-line"`)."""
    if documents not in ("file", "blank-line"):
        raise ValueError(f"documents must be 'file' or 'blank-line', got {documents!r}.")
    texts, docs, doc = [], [], -1
    for path in files:
        doc += 1
        previous_blank = False
        for line in read_text(path).split("\n"):
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
    import datasets

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


__all__ = [
    "CheckedFile",
    "DataError",
    "GLUE_TASKS",
    "SHARED_DATA_PLACES",
    "TaskData",
    "TaskSpec",
    "check_custom_task",
    "check_glue_file",
    "check_glue_task",
    "check_table_file",
    "compute_metrics",
    "corpus_files",
    "corpus_units",
    "corpus_units_from_dataset",
    "custom_task",
    "find_glue_dir",
    "get_task",
    "glue_file",
    "hub_offline",
    "load_checked",
    "load_glue_from_hub",
    "load_task",
    "mlm_dataset",
    "predictions_from_logits",
    "read_text",
    "read_utf8",
    "shared_data_dir",
    "tokenize",
]
