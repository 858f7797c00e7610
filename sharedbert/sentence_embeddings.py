"""Sentence embeddings through sentence-transformers: a SharedBert folder as a `SentenceTransformer`, its module
files, and STS-B scored with sentence-transformers' own `EmbeddingSimilarityEvaluator`.

all-MiniLM-L6-v2 is a sentence-transformers model: its `modules.json` chains Transformer → Pooling (mean) → Normalize,
and `sentence_bert_config.json` sets max_seq_length 256. A SharedBert converted from it keeps those files
(`copy_modules`), so that

    >>> from sentence_transformers import SentenceTransformer
    >>> model = SentenceTransformer(folder)  # trust_remote_code=True where the sharedbert package is not installed
    >>> vectors = model.encode(["A man is playing a guitar.", "Someone plays music."])  # unit length

gives the embeddings healing optimised (`pooling_of(folder)` is the Pooling module healing uses). Nothing here
pools or scores by hand: sentence-transformers does. It is imported in the functions that use it (it is an extra, and
slow to import), so the module-file helpers work without it.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch

from .loading import MODULES_FILE, is_sentence_transformer, load_sentence_transformer, read_modules

# Files of a sentence-transformers model beside the transformers files (module folders are listed in modules.json).
SENTENCE_TRANSFORMERS_FILES = (MODULES_FILE, "sentence_bert_config.json", "config_sentence_transformers.json")
# What a plain encoder gets when it has no modules of its own: all-MiniLM-L6-v2's chain.
DEFAULT_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def module_files(folder) -> list[str]:
    """The sentence-transformers files of `folder` as relative POSIX paths: modules.json, the two config files
    present, and every file in the module folders modules.json names (the Transformer at path "" excluded: its
    files are the transformers model's). Empty for a folder that is not a sentence-transformers model."""
    folder = Path(folder)
    if not is_sentence_transformer(folder):
        return []
    found = [name for name in SENTENCE_TRANSFORMERS_FILES if (folder / name).is_file()]
    for module in read_modules(folder):
        path = module.get("path", "")
        if not path:
            continue
        sub = folder / path
        if sub.is_dir():
            found += sorted(p.relative_to(folder).as_posix() for p in sub.rglob("*") if p.is_file())
    return found


def module_folders(folder) -> list[str]:
    """The module folders modules.json names (e.g. 1_Pooling, 2_Normalize), whether or not they hold files."""
    return [m["path"] for m in read_modules(folder) if m.get("path")] if is_sentence_transformer(folder) else []


def copy_modules(source, target) -> list[str]:
    """Copy the sentence-transformers files of `source` (see `module_files`) into `target`, creating the module
    folders modules.json names (an empty one, such as 2_Normalize, included). Returns the files copied."""
    source, target = Path(source), Path(target)
    for path in module_folders(source):
        (target / path).mkdir(parents=True, exist_ok=True)
    files = module_files(source)
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target / name)
    return files


def write_default_modules(target, hidden_size: int, max_seq_length: int | None = None) -> list[str]:
    """Make `target` (a saved encoder) a sentence-transformers model: Transformer → mean Pooling → Normalize."""
    target = Path(target)
    (target / MODULES_FILE).write_text(json.dumps(DEFAULT_MODULES, indent=2) + "\n", encoding="utf-8")
    (target / "1_Pooling").mkdir(exist_ok=True)
    (target / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": hidden_size, "pooling_mode_mean_tokens": True}, indent=2) + "\n",
        encoding="utf-8")
    (target / "2_Normalize").mkdir(exist_ok=True)
    settings = {"do_lower_case": False}
    if max_seq_length is not None:
        settings["max_seq_length"] = max_seq_length
    (target / "sentence_bert_config.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return module_files(target)


# A folder as a SentenceTransformer, through the package's loader (both gates, the tokenizer checked).
load = load_sentence_transformer


def from_model(model, tokenizer, modules_from=None, max_seq_length: int | None = None):
    """A SentenceTransformer around an in-memory encoder (any head; its `base_model` is used): saved with its
    tokenizer to a temporary folder with the sentence-transformers modules of `modules_from` (a folder), or the
    default Transformer → mean Pooling → Normalize, then loaded. The returned model owns a copy of the weights."""
    base = getattr(model, "base_model", model)
    with tempfile.TemporaryDirectory(prefix="sharedbert-st-") as folder:
        base.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        if modules_from is not None and is_sentence_transformer(modules_from):
            copy_modules(modules_from, folder)
        else:
            write_default_modules(folder, base.config.hidden_size, max_seq_length)
        sentence_model = load(folder)
    if max_seq_length is not None:
        sentence_model.max_seq_length = max_seq_length
    return sentence_model


def pooling_of(folder=None, hidden_size: int | None = None):
    """The sentence-transformers Pooling module of `folder` (a sentence-transformers model), else mean pooling of
    width `hidden_size`: what healing matches between the original and the converted model."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    if folder is not None and is_sentence_transformer(folder):
        for module in read_modules(folder):
            if module["type"].endswith(".Pooling") and module.get("path"):
                return Pooling.load(str(Path(folder) / module["path"]))
    if hidden_size is None:
        raise ValueError(f"{folder} has no sentence-transformers Pooling module: pass hidden_size for mean pooling.")
    return Pooling(hidden_size, pooling_mode="mean")


def read_sts(tsv_path) -> tuple[list[str], list[str], list[float]]:
    """Read a GLUE STS-B TSV (header with `sentence1`, `sentence2`, `score`); quoting is off, as in GLUE's files."""
    path = Path(tsv_path)
    if not path.is_file():
        raise FileNotFoundError(f"STS-B file {path} not found (expected GLUE's STS-B/dev.tsv).")
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = rows[0]
    missing = [c for c in ("sentence1", "sentence2", "score") if c not in header]
    if missing:
        raise ValueError(f"{path} has no column(s) {missing} in its header {header}: is it a GLUE STS-B file?")
    a, b, s = header.index("sentence1"), header.index("sentence2"), header.index("score")
    rows = [r for r in rows[1:] if len(r) > max(a, b, s)]
    return [r[a] for r in rows], [r[b] for r in rows], [float(r[s]) for r in rows]


def sts_evaluator(tsv_path, name: str = "sts-dev", batch_size: int = 64):
    """sentence-transformers' `EmbeddingSimilarityEvaluator` on a GLUE STS-B TSV (gold scores scaled to 0-1)."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    first, second, gold = read_sts(tsv_path)
    return EmbeddingSimilarityEvaluator(first, second, [score / 5.0 for score in gold], main_similarity="cosine",
                                        similarity_fn_names=["cosine"], name=name, batch_size=batch_size,
                                        show_progress_bar=False)


def sts_spearman(model, tsv_path, tokenizer=None, batch_size: int = 64) -> float:
    """STS-B Spearman correlation of cosine similarities with the gold scores, by `EmbeddingSimilarityEvaluator`.
    `model` is a SentenceTransformer, a model folder, or an in-memory encoder (then pass its `tokenizer`)."""
    evaluator = sts_evaluator(tsv_path, batch_size=batch_size)
    sentence_model = as_sentence_transformer(model, tokenizer)
    results = evaluator(sentence_model)
    return float(results[evaluator.primary_metric])


def as_sentence_transformer(model, tokenizer=None):
    """`model` as a SentenceTransformer: returned as is when it is one, loaded when it is a folder, else wrapped
    (`from_model`, which needs the `tokenizer`)."""
    from sentence_transformers import SentenceTransformer

    if isinstance(model, SentenceTransformer):
        return model
    if isinstance(model, (str, Path)):
        return load(model)
    if tokenizer is None:
        raise ValueError("An in-memory model needs its tokenizer: pass tokenizer=... (or give a model folder).")
    return from_model(model, tokenizer)


def finetune_sts(model, train_tsv, dev_tsv, output_dir, *, max_steps: int = 100, batch_size: int = 16,
                 learning_rate: float = 2e-5, max_train_pairs: int | None = None, seed: int = 0,
                 save: bool = True) -> dict:
    """Fine-tune a sentence-transformers model (a SentenceTransformer or a folder) on STS-B pairs with
    sentence-transformers' own `SentenceTransformerTrainer` and `CosineSimilarityLoss` (gold scores scaled to 0-1),
    for `max_steps` steps; score the dev set with `EmbeddingSimilarityEvaluator` before and after. Saves the model to
    `output_dir` (SentenceTransformer.save) when `save`. Returns {"dev_before", "dev_after", "steps", "seconds"}."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

    sentence_model = as_sentence_transformer(model)
    first, second, gold = read_sts(train_tsv)
    if max_train_pairs is not None:
        first, second, gold = first[:max_train_pairs], second[:max_train_pairs], gold[:max_train_pairs]
    train = Dataset.from_dict({"sentence1": first, "sentence2": second, "score": [g / 5.0 for g in gold]})
    evaluator = sts_evaluator(dev_tsv)
    before = float(evaluator(sentence_model)[evaluator.primary_metric])
    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=batch_size,
        learning_rate=learning_rate, warmup_steps=0.1, seed=seed, save_strategy="no", report_to="none",
        logging_steps=max(1, max_steps // 5), use_cpu=True, disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(model=sentence_model, args=arguments, train_dataset=train,
                                         loss=CosineSimilarityLoss(sentence_model))
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    after = float(evaluator(sentence_model)[evaluator.primary_metric])
    if save:
        sentence_model.save(str(output_dir))
    return {"dev_before": before, "dev_after": after, "steps": max_steps, "seconds": seconds,
            "train_pairs": len(first), "batch_size": batch_size, "learning_rate": learning_rate}


@torch.no_grad()
def encode(model, sentences: list[str], tokenizer=None, batch_size: int = 64) -> torch.Tensor:
    """Embed `sentences` with sentence-transformers (the model's own modules; unit length when it normalises)."""
    if isinstance(sentences, str):
        raise TypeError("encode expects a list of sentences, not a single string: wrap it as [sentence].")
    sentence_model = as_sentence_transformer(model, tokenizer)
    return sentence_model.encode(list(sentences), batch_size=batch_size, convert_to_tensor=True,
                                 show_progress_bar=False).float().cpu()


__all__ = [
    "DEFAULT_MODULES",
    "MODULES_FILE",
    "SENTENCE_TRANSFORMERS_FILES",
    "as_sentence_transformer",
    "copy_modules",
    "encode",
    "finetune_sts",
    "from_model",
    "is_sentence_transformer",
    "load",
    "module_files",
    "module_folders",
    "pooling_of",
    "read_sts",
    "sts_evaluator",
    "sts_spearman",
    "write_default_modules",
]
