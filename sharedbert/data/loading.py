"""Finding and loading a task's data: the shared data folder, GLUE's TSVs (checked first), the Hub's nyu-mll/glue, or
your own files, read through `datasets` into one layout (`text`, optional `text_pair`, `label`)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from .location import SHARED_DATA_PLACES, shared_data_dir
from .checks import CheckedFile, check_custom_task, check_glue_file, label_keys, label_string
from .tasks import GLUE_SPLIT_FILES, GLUE_TASKS, DataError, TaskSpec, get_task


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
    import datasets  # in the functions that read data, so importing the data checks does not load it

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
            else:  # the checked columns only: a spreadsheet's unnamed, empty last column is left out
                kwargs.update(usecols=list(info.columns))
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
    label_ids = label_keys(tuple(spec.labels or ()))  # "1.0" in a file is the class "1" (see `label_string`)

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
            out["label"] = [label_ids[label_string(v)] for v in batch[label_column]]
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


__all__ = ["SHARED_DATA_PLACES", "TaskData", "check_glue_task", "find_glue_dir", "glue_file", "hub_offline",
           "load_checked", "load_glue_from_hub", "load_task", "shared_data_dir"]
