"""Data for training and evaluating SharedBert, one module per kind:

* `tasks`: labelled tasks (the six GLUE tasks, or your own CSV/TSV/JSON files with text column(s) and a label), their
  tokenisation, and their metrics as GLUE reports them (accuracy, F1, Matthews correlation, Pearson/Spearman);
* `checks`: every file is checked *before* any model is loaded or trained: a missing or empty file, missing columns, a
  column named twice or left unnamed, a row with the wrong number of fields, a quote never closed, a field over a
  million characters, an empty label, a label outside the label set, a regression score or JSON label that is not a
  finite number or bytes that are not UTF-8 raise `DataError` naming the file and the line (and column) and the fix.
  A label written as a number is that number (`1` and `1.0` are one class);
* `loading`: the shared data folder, GLUE's TSVs (the GLUE download script's layout: ``SST-2/train.tsv``, ...), the
  same tasks from the Hub (``nyu-mll/glue``) when online, or your files, read through `datasets` (cached on disk) into
  one layout: ``text``, optional ``text_pair``, and ``label`` (class id, or float for regression);
* `text`: raw text for masked-LM pretraining and healing: files or folders, decoded in the encoding their byte-order
  mark names (UTF-8, UTF-16, UTF-32), else as UTF-8, else in an encoding the user names (anything else is refused),
  one example per line or packed into fixed-length blocks; a corpus held in memory (`TextInMemory`); healing's
  pieces of random word length (`TextPieces`).

Every public name is importable from here (`from sharedbert.data import load_task`).
"""

from .checks import (
    CheckedFile,
    check_custom_task,
    check_glue_file,
    check_table_file,
    infer_labels,
    read_utf8,
    table_format,
)
from .decoding import check_encoding_name
from .loading import (
    SHARED_DATA_PLACES,
    TaskData,
    check_glue_task,
    find_glue_dir,
    glue_file,
    hub_offline,
    load_checked,
    load_glue_from_hub,
    load_task,
    shared_data_dir,
)
from .tasks import (
    GLUE_SPLIT_FILES,
    GLUE_TASKS,
    DataError,
    TaskSpec,
    compute_metrics,
    custom_task,
    get_task,
    predictions_from_logits,
    tokenize,
)
from .text import (
    TEXT_SUFFIXES,
    TextInMemory,
    TextPieces,
    corpus_files,
    corpus_units,
    corpus_units_from_dataset,
    mlm_dataset,
    read_corpus_text,
    read_text,
)

__all__ = [
    "CheckedFile",
    "DataError",
    "GLUE_SPLIT_FILES",
    "GLUE_TASKS",
    "SHARED_DATA_PLACES",
    "TEXT_SUFFIXES",
    "TaskData",
    "TaskSpec",
    "TextInMemory",
    "TextPieces",
    "check_custom_task",
    "check_encoding_name",
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
    "infer_labels",
    "load_checked",
    "load_glue_from_hub",
    "load_task",
    "mlm_dataset",
    "predictions_from_logits",
    "read_corpus_text",
    "read_text",
    "read_utf8",
    "shared_data_dir",
    "table_format",
    "tokenize",
]
