"""The checkpoint people would download: `sharedbert build-minilm OUT` builds the Hub-ready
`sharedbert-all-MiniLM-L6-v2` folder (all-MiniLM-L6-v2 converted to shared attention and healed) in one command.

1. converts and heals all-MiniLM-L6-v2 (`convert_checkpoint`: invariant fit, uncalibrated by default, then
   distillation on the shared raw text with every length up to the position table; resumable, so running the command
   again continues or reuses the run);
2. measures it against the original in the same process: STS-B dev through sentence-transformers'
   `EmbeddingSimilarityEvaluator`, agreement in length buckets on held-out text (`length_agreement` on different
   passages per bucket, `prefix_agreement` on the same passages cut to each length), parameters, and
   inference speed (`speed_ratio`, the two models alternating round-robin);
3. writes `eval_results.json` (STS-B, for the card's model-index) and `sharedbert_provenance.json` (how it was made)
   beside the healed model (steps 1 to 3 fill a temporary folder that one rename puts in place as WORK_DIR/healed:
   never a healed model without its measurements, nor with an earlier run's), then stages and verifies the Hub folder (`sharedbert.hub.stage_for_hub`: weights, code,
   tokenizer, sentence-transformers modules and the model card, loaded in a fresh process without the package).

The held-out text (`HELD_OUT`) is a book of the shared corpus that healing never reads. `BuildArguments` holds every
option, its default and its help; `sharedbert build-minilm` makes its flags from it.
"""

from __future__ import annotations

import json
import logging
import math
import random
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoTokenizer

from .. import sentence_embeddings
from ..atomic import atomic_directory, atomic_write_text
from ..export.folding import fold_for_inference
from ..hub import load_for_hub, stage_for_hub
from ..hub.staging import check_staging_folder
from ..modeling_sharedbert import SharedBertModel
from ..parameter_counts import count_model_parameters
from ..data import corpus_files, read_text, shared_data_dir
from ..data.location import RAW_TEXT, not_found_message, raw_text_dir
from ..threads import restores_torch_threads
from ..training.distillation import Distiller
from ..training.healing_arguments import HealConfig, HealLossConfig
from ..training.models import HUB_BASE_MODEL, load_bert_encoder, resolve_source
from .convert_and_heal import convert_checkpoint

logger = logging.getLogger(__name__)

REPO_NAME = "sharedbert-all-MiniLM-L6-v2"
CORPUS = RAW_TEXT
# Never read by healing: the length-bucket agreement is measured on it.
HELD_OUT = "gutenberg-nltk/chesterton-thursday.txt"
STS_DEV = "glue/STS-B/dev.tsv"
# Token-length buckets of the agreement report (inclusive upper bounds): ≤128, 129–256, 257–512.
BUCKETS = ((1, 128), (129, 256), (257, 512))
# The published build's healing budget (uncal-4x in experiments/healing/README.md, which gives what it measured).
PUBLISHED_STEPS = 9184


def heal_recipe(minutes: float | None, threads: int | None = 1, **overrides) -> HealConfig:
    """The healing of the published checkpoint: `HealConfig`'s defaults, which are its recipe, with a budget of
    `minutes` of training, or of `max_steps` when an override gives them (the learning rate then anneals over the
    steps, and `minutes`, if not None, only caps the time); on `threads` threads, with a checkpoint every 2 training
    minutes and model snapshots at 10 and 20. `overrides` change any other field."""
    values = dict(max_minutes=minutes, threads=threads, checkpoint_minutes=2.0,
                  snapshot_minutes=[m for m in (10.0, 20.0) if minutes is None or m < minutes])
    values.update(overrides)
    return HealConfig(**values)


def describe_batches(config: HealConfig) -> str:
    """What a healing run's batches held, in words for a model card."""
    long = (f"{config.long_fraction:.0%} of the steps {config.resolved_long_batch_size()} pieces of "
            f"{config.long_min_words}-{config.long_max_words} words" if config.long_fraction > 0 else "no long pieces")
    return (f"{config.batch_size} pieces of {config.min_words}-{config.max_words} words; {long}; "
            f"up to {config.max_length} tokens")


def healing_corpus(corpus=None) -> tuple[list[Path], Path]:
    """(the files healing reads, the held-out file): every text file of `corpus` (default: the shared raw text,
    `sharedbert.data.raw_text_dir`, as for `sharedbert convert --heal`) except `HELD_OUT`."""
    if corpus is None:
        corpus = raw_text_dir("--corpus FOLDER")
    files = corpus_files(corpus)
    held = [f for f in files if f.as_posix().endswith(HELD_OUT)]
    if not held:
        raise FileNotFoundError(f"The held-out book {HELD_OUT} is not in {corpus}; healing needs it kept apart.")
    return [f for f in files if f not in held], held[0]


def held_out_texts(path, tokenizer, per_bucket: int = 48, seed: int = 0) -> dict[tuple[int, int], list[str]]:
    """Pieces of the held-out text whose token length falls in each of `BUCKETS`, `per_bucket` each: consecutive
    words cut at random lengths, so each bucket reads different passages."""
    words = read_text(Path(path)).split()
    rng = random.Random(seed)
    found = {bucket: [] for bucket in BUCKETS}
    start = 0
    while start < len(words) and any(len(v) < per_bucket for v in found.values()):
        low, high = rng.choice([b for b in BUCKETS if len(found[b]) < per_bucket])
        # ~1.3 tokens per word in this text: aim inside the bucket, then check with the tokenizer.
        count = rng.randint(max(1, int(low / 1.5)), max(2, int(high / 1.3)))
        text = " ".join(words[start:start + count])
        start += count
        length = len(tokenizer(text)["input_ids"])
        for bucket in BUCKETS:
            if bucket[0] <= length <= bucket[1] and len(found[bucket]) < per_bucket:
                found[bucket].append(text)
    return found


def held_out_passages(path, tokenizer, count: int = 48, seed: int = 0, shortest: int = 32) -> list[dict]:
    """`count` passages of the held-out text, each at least as long as the longest bucket, with one token length drawn
    in every bucket (from `shortest` tokens up in the first): `{"text", "lengths"}`. The prefixes of one passage at
    those lengths differ in nothing but length, so `prefix_agreement` compares the buckets passage by passage, where
    `held_out_texts` puts different passages in each bucket."""
    words = read_text(Path(path)).split()
    rng = random.Random(seed)
    longest = BUCKETS[-1][1]
    span = longest  # words: a word is at least one token, so nearly always `longest` tokens or more (else skipped)
    passages = []
    for start in range(0, len(words) - span + 1, span):
        if len(passages) == count:
            break
        text = " ".join(words[start:start + span])
        if len(tokenizer(text, truncation=True, max_length=longest)["input_ids"]) == longest:  # cut: no length warning
            lengths = [rng.randint(min(max(low, shortest), high), high) for low, high in BUCKETS]
            passages.append(dict(text=text, lengths=lengths))
    if len(passages) < count:
        raise ValueError(f"{path} holds {len(passages)} passages of {longest}+ tokens; {count} were asked for.")
    return passages


def _agreement(distiller, tokenizer, items: list[tuple[str, int]], batch_size: int) -> tuple[list[float], list[float]]:
    """(per item cosine between the student's and the teacher's sentence embeddings, per item distillation loss) for
    `(text, max_length)` items, each text cut to its own max_length in tokens."""
    cosines, losses = [], []
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        encoded = [tokenizer(text, truncation=True, max_length=length) for text, length in chunk]
        batch = tokenizer.pad(encoded, return_tensors="pt")
        batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        loss, _ = distiller.loss(batch)
        cosines += distiller.last_cosines.tolist()
        losses += [float(loss)] * len(encoded)  # the batch mean stands for each of its items
    return cosines, losses


@torch.no_grad()
def _agreements(student, teacher, tokenizer, item_lists, pooling, batch_size) -> list[tuple[list[float], list[float]]]:
    """`_agreement` for each list of items, with one `distillation.Distiller` (the loss healing minimises, with the
    recipe's weights)."""
    student.eval()
    teacher.eval()
    distiller = Distiller(student, teacher, HealLossConfig(), pooling=pooling)
    try:
        return [_agreement(distiller, tokenizer, items, batch_size) for items in item_lists]
    finally:
        distiller.close()


def _sem(values: list[float]) -> float:
    """The standard error of the mean of `values` (NaN for fewer than two)."""
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")


def _bucket_row(bucket, cosines, losses, **extra) -> dict:
    return dict(bucket=f"{bucket[0]}-{bucket[1]}", texts=len(cosines), mean_cosine=statistics.fmean(cosines),
                sem_cosine=_sem(cosines), min_cosine=min(cosines), distillation_loss=statistics.fmean(losses), **extra)


def _gap(row: dict, against: dict, difference: float, error: float, **extra) -> dict:
    """A longer bucket's cosine gap to the shortest, within noise unless below it by more than two standard errors."""
    return dict(bucket=row["bucket"], against=against["bucket"], difference=difference, standard_error=error,
                within_noise=difference >= -2 * error, **extra)


def length_agreement(student, teacher, tokenizer, texts: dict, pooling=None, batch_size: int = 8) -> list[dict]:
    """Per length bucket: the mean cosine between the student's and the teacher's sentence embeddings (their Pooling,
    mean by default), its standard error and minimum, and the distillation loss healing minimises
    (`distillation.Distiller`)."""
    buckets = list(texts)
    item_lists = [[(text, bucket[1]) for text in texts[bucket]] for bucket in buckets]
    measured = _agreements(student, teacher, tokenizer, item_lists, pooling, batch_size)
    return [_bucket_row(bucket, cosines, losses) for bucket, (cosines, losses) in zip(buckets, measured)]


def prefix_agreement(student, teacher, tokenizer, passages: list[dict], pooling=None,
                     batch_size: int = 8) -> tuple[list[dict], list[dict]]:
    """The length report on `held_out_passages`: every passage is read at one prefix length per bucket. Returns
    (rows as `length_agreement`'s, plus the mean prefix length; gaps as `length_gaps`', but paired: each passage's
    cosine at the longer prefix minus its own at the shortest, mean and standard error over passages)."""
    item_lists = [[(p["text"], p["lengths"][index]) for p in passages] for index in range(len(BUCKETS))]
    measured = _agreements(student, teacher, tokenizer, item_lists, pooling, batch_size)
    rows = [_bucket_row(bucket, cosines, losses, mean_tokens=statistics.fmean(p["lengths"][i] for p in passages))
            for i, (bucket, (cosines, losses)) in enumerate(zip(BUCKETS, measured))]
    shortest = measured[0][0]
    gaps = []
    for row, (cosines, _) in zip(rows[1:], measured[1:]):
        differences = [c - s for c, s in zip(cosines, shortest)]
        gaps.append(_gap(row, rows[0], statistics.fmean(differences), _sem(differences), paired=True))
    return rows, gaps


def length_gaps(rows: list[dict]) -> list[dict]:
    """Each longer bucket's mean cosine against the first (shortest) bucket's: the difference, its standard error
    (the buckets hold different pieces, so the two errors add in quadrature) and whether it is within noise, i.e.
    not below the short bucket's by more than two standard errors."""
    first = rows[0]
    return [_gap(row, first, row["mean_cosine"] - first["mean_cosine"],
                 math.hypot(row["sem_cosine"], first["sem_cosine"])) for row in rows[1:]]


def _log_gaps(gaps: list[dict], design: str) -> None:
    for gap in gaps:
        logger.info("   tokens %7s against %s (%s): cosine %+.4f ± %.4f (standard error): %s", gap["bucket"],
                    gap["against"], design, gap["difference"], gap["standard_error"],
                    "within noise" if gap["within_noise"] else "worse by more than two standard errors")


@torch.no_grad()
def speed_ratio(model, reference, tokenizer, texts: list[str], rounds: int = 5, batch_size: int = 32,
                max_length: int = 128) -> dict:
    """Inference throughput of `model` against `reference` on the same batches, alternating round-robin after a
    warm-up; the ratio of median round times (above 1: `model` is faster). `model` runs as a folded copy."""
    batches = [tokenizer(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_length,
                         return_tensors="pt") for i in range(0, len(texts), batch_size)]
    batches = [{k: v for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")} for b in batches]
    model = fold_for_inference(model)
    reference.eval()
    times = {"model": [], "reference": []}
    for round_index in range(rounds + 1):
        for name, m in (("model", model), ("reference", reference)):
            started = time.perf_counter()
            for batch in batches:
                m(**batch)
            if round_index:  # round 0 is the warm-up
                times[name].append(time.perf_counter() - started)
    ratio = statistics.median(times["reference"]) / statistics.median(times["model"])
    return dict(ratio=ratio, rounds=rounds, batches=len(batches), batch_size=batch_size, max_length=max_length,
                model_seconds=statistics.median(times["model"]),
                reference_seconds=statistics.median(times["reference"]), threads=torch.get_num_threads())


@dataclass
class BuildArguments:
    """Every option of `build_minilm_checkpoint` / `sharedbert build-minilm`, with its default and help. The healing
    recipe is `heal_recipe`'s; the budget's default, `PUBLISHED_STEPS`, is the published build's."""

    out: str = field(metadata={"positional": True, "help": "The staged, Hub-ready folder to write (new, empty, or an "
                                                            "earlier staged one)."})
    work_dir: str = field(default="runs/build-minilm", metadata={
        "help": "The healed model and its checkpoints (resumable: the same command continues there)."})
    steps: int | None = field(default=None, metadata={
        "help": f"Heal for this many optimizer steps, the learning rate annealed over them, so the build does not "
        f"depend on the machine's speed (default: the published build's {PUBLISHED_STEPS:,}, unless --minutes is "
        "given; with --minutes too, whichever comes first)."})
    minutes: float | None = field(default=None, metadata={
        "help": "Healing budget in training minutes; alone, it replaces the default step budget and the learning "
        "rate anneals over the minutes."})
    threads: int | None = field(default=1, metadata={"help": "torch threads (1: best on a shared machine)."})
    corpus: str | None = field(default=None, metadata={
        "help": f"Raw-text folder (default: {CORPUS}/ in the shared data folder: $SHAREDBERT_DATA, else shared/data "
        f"beside the repository or the current folder); {HELD_OUT} must be in it."})
    sts: str | None = field(default=None, metadata={
        "help": f"STS-B dev TSV (default: {STS_DEV} in the shared data folder, found as --corpus's)."})
    calibration_sentences: int = field(default=0, metadata={
        "help": "Calibrate the conversion on N corpus pieces before healing (0: heal the uncalibrated conversion, "
        "which measured better: experiments/healing/README.md, `uncal` against `base-bf16`)."})
    repo_id: str = field(default=f"your-name/{REPO_NAME}", metadata={"help": "Written into the model card."})
    per_bucket: int = field(default=48, metadata={"help": "Held-out texts per length bucket of the agreement report."})
    speed_rounds: int = field(default=5, metadata={"help": "Alternating rounds of the speed measurement."})
    heal_overrides: dict | None = field(default=None, metadata={
        "cli": False, "help": "Fields of heal_recipe's HealConfig to change (for recipe studies)."})
    overwrite: bool = field(default=False, metadata={
        "help": "Replace OUT even when it holds files staging did not write (they are deleted)."})

    def __post_init__(self):
        if self.steps is None and self.minutes is None:
            self.steps = PUBLISHED_STEPS


@restores_torch_threads
def build_minilm_checkpoint(arguments: BuildArguments | None = None, /, **fields) -> dict:
    """Build, measure and stage the Hub-ready folder `out`; return the report (also in WORK_DIR/build_report.json).

    Takes a `BuildArguments`, or its fields as keywords, or both (keywords replace fields). The healed model is
    WORK_DIR/healed (checkpoints in WORK_DIR/healed-checkpoints: running again resumes). Healing stops after `minutes`
    of training or `steps` optimizer steps, whichever comes first; with `steps`, the learning rate anneals over the
    steps, so the build does not depend on how busy the machine is. `calibration_sentences=N` calibrates the
    conversion on N pieces of the corpus before healing. Logs each step."""
    args = replace(arguments, **fields) if arguments is not None else BuildArguments(**fields)
    if args.threads:
        torch.set_num_threads(args.threads)
    work_dir = Path(args.work_dir)
    healed_dir = work_dir / "healed"
    check_staging_folder(args.out, healed_dir, args.overwrite)  # before hours of healing, not after
    if args.sts is None and shared_data_dir(STS_DEV) is None:
        raise FileNotFoundError(not_found_message(STS_DEV, "--sts GLUE_ROOT/STS-B/dev.tsv"))
    sts = Path(args.sts) if args.sts else shared_data_dir(STS_DEV) / STS_DEV
    if not sts.is_file():
        raise FileNotFoundError(f"STS-B dev file {sts} not found: pass --sts GLUE_ROOT/STS-B/dev.tsv.")
    files, held_out = healing_corpus(args.corpus)
    budget = {"max_steps": args.steps} if args.steps is not None else {}
    recipe = heal_recipe(args.minutes, args.threads, **budget, **(args.heal_overrides or {}))
    limits = [f"{recipe.max_steps:,} steps" if recipe.max_steps is not None else "",
              f"{recipe.max_minutes:g} training minutes" if recipe.max_minutes is not None else ""]

    logger.info("1. Convert and heal all-MiniLM-L6-v2 (%s, %d corpus files, held out: %s)",
                " or ".join(filter(None, limits)), len(files), held_out.name)
    # The healed model, its measurements and its provenance are staged together and renamed into place at once.
    with atomic_directory(healed_dir) as staging:
        conversion = convert_checkpoint(src="all-MiniLM-L6-v2", out=staging, attention_type="shared", heal=recipe,
                                        corpus=files, checkpoint_dir=work_dir / "healed-checkpoints",
                                        threads=args.threads, calibration_sentences=args.calibration_sentences)
        if conversion["heal"]["interrupted"]:  # the checkpoints hold the run; no half-healed model is put in place
            raise KeyboardInterrupt(f"Healing was interrupted; run the same command again to resume ({work_dir}).")

        logger.info("2. Measure against the original")
        measured = _measure(args, staging, held_out, sts)
        eval_results = [
            {"task": "STS-B", "task_type": "sentence-similarity", "dataset": "nyu-mll/glue", "dataset_config": "stsb",
             "dataset_name": "GLUE STS-B", "split": "validation",
             "metrics": {"spearmanr": round(measured["sts_sharedbert"], 4)}},
        ]
        (staging / "eval_results.json").write_text(json.dumps(eval_results, indent=1))
        (staging / "sharedbert_provenance.json").write_text(json.dumps(
            _provenance(args, conversion, recipe, files, held_out, measured), indent=1))

    logger.info("3. Stage and verify the Hub folder %s", args.out)
    staged = stage_for_hub(healed_dir, args.out, repo_id=args.repo_id, overwrite=args.overwrite,
                           log=lambda line: logger.info("   %s", line),
                           loaded=load_for_hub(healed_dir))
    report = dict(
        out=str(args.out), repo_id=args.repo_id, heal=conversion["heal"], heal_config=recipe.heal_settings(),
        corpus=[str(f) for f in files], calibration=conversion.get("calibration"), held_out=str(held_out),
        **measured, staged_files=staged.files, verification=staged.verification,
    )
    atomic_write_text(work_dir / "build_report.json", json.dumps(report, indent=1, default=str))
    logger.info("Built %s: STS-B %.4f (original %.4f); report %s", args.out, measured["sts_sharedbert"],
                measured["sts_original"], work_dir / "build_report.json")
    return report


def _measure(args: BuildArguments, healed_dir: Path, held_out: Path, sts: Path) -> dict:
    """The healed model against the original, in this process: STS-B, agreement by length (different passages per
    bucket, and the same passages cut to each length), parameters and inference speed."""
    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(source)
    original = load_bert_encoder(source).eval()
    healed = SharedBertModel.from_pretrained(healed_dir).eval()
    original_st, healed_st = sentence_embeddings.load(source), sentence_embeddings.load(healed_dir)
    unit_norm = float(healed_st.encode(["A man is playing a guitar."], convert_to_tensor=True).norm())
    sts_original, sts_healed = sentence_embeddings.sts_spearman(original_st, sts), sentence_embeddings.sts_spearman(healed_st, sts)
    logger.info("   STS-B dev Spearman (EmbeddingSimilarityEvaluator, cosine): original %.4f, SharedBert %.4f",
                sts_original, sts_healed)
    pooling = sentence_embeddings.pooling_of(source)
    buckets = length_agreement(healed, original, tokenizer, held_out_texts(held_out, tokenizer, args.per_bucket),
                               pooling=pooling)
    for row in buckets:
        logger.info("   tokens %7s: embedding cosine %.4f (min %.4f), distillation loss %.4f (%d held-out texts)",
                    row["bucket"], row["mean_cosine"], row["min_cosine"], row["distillation_loss"], row["texts"])
    gaps = length_gaps(buckets)
    _log_gaps(gaps, "different passages per bucket")
    passages = held_out_passages(held_out, tokenizer, count=args.per_bucket)
    prefixes, prefix_gaps = prefix_agreement(healed, original, tokenizer, passages, pooling=pooling)
    for row in prefixes:
        logger.info("   the same %d passages cut to %7s tokens (mean %.0f): embedding cosine %.4f (min %.4f)",
                    row["texts"], row["bucket"], row["mean_tokens"], row["mean_cosine"], row["min_cosine"])
    _log_gaps(prefix_gaps, "the same passages, paired")
    parameters = dict(sharedbert=count_model_parameters(healed), original=count_model_parameters(original))
    first, second, _ = sentence_embeddings.read_sts(sts)
    speed = speed_ratio(healed, original, tokenizer, (first + second)[:256], rounds=args.speed_rounds)
    logger.info("   parameters %s vs %s (×%.3f); inference ×%.3f the original's speed (STS-B sentences, batch 32, "
                "folded, %d thread(s), median of %d alternating rounds)", f"{parameters['sharedbert']:,}",
                f"{parameters['original']:,}", parameters["sharedbert"] / parameters["original"], speed["ratio"],
                speed["threads"], speed["rounds"])
    return dict(sts_original=sts_original, sts_sharedbert=sts_healed, unit_norm=unit_norm, length_buckets=buckets,
                length_gaps=gaps, prefix_buckets=prefixes, prefix_gaps=prefix_gaps, parameters=parameters,
                speed=speed)


def _provenance(args: BuildArguments, conversion: dict, recipe: HealConfig, files, held_out: Path,
                measured: dict) -> dict:
    """sharedbert_provenance.json: how the model was made, for its card."""
    parameters, speed = measured["parameters"], measured["speed"]
    ratio = parameters["sharedbert"] / parameters["original"]
    calibrated = conversion.get("calibration")
    return {
        "base_model": HUB_BASE_MODEL,
        "datasets": [],
        "conversion": "sharedbert convert (attention_type shared, invariant fit"
                      + (f", calibrated on {calibrated['sentences']} pieces of the healing corpus" if calibrated
                         else "") + "), healed by distillation",
        "healing corpus": ("WikiText-2 raw test + 12 Project Gutenberg books (shared mlm-text, "
                           if args.corpus is None else f"{len(files)} text files ({', '.join(f.name for f in files)}; ")
                          + f"{held_out.name} held out)",
        "healing minutes": round(conversion["heal"]["elapsed_seconds"] / 60, 1),
        "healing steps": conversion["heal"]["steps"],
        "healing precision": conversion["heal"].get("precision", recipe.precision),
        "healing batches": describe_batches(recipe),
        "distillation loss weights": f"hidden states {recipe.hidden_weight:g}, attention outputs "
                                     f"{recipe.attention_weight:g}, embedding cosine {recipe.embedding_weight:g}, "
                                     f"in-batch similarity matrix {recipe.similarity_weight:g}",
        "STS-B dev Spearman of the original": round(measured["sts_original"], 4),
        "parameters vs the original": f"{parameters['sharedbert']:,} vs {parameters['original']:,} (×{ratio:.3f})",
        "inference speed vs the original": f"×{speed['ratio']:.2f} (CPU, {speed['threads']} thread(s), batch 32, "
                                           "folded shared attention)",
        "embedding cosine to the original by length": ", ".join(
            f"{row['bucket']} tokens {row['mean_cosine']:.4f}" for row in measured["length_buckets"]),
        "embedding cosine to the original, the same passages cut to each length": ", ".join(
            f"{row['bucket']} tokens {row['mean_cosine']:.4f}" for row in measured["prefix_buckets"]),
    }


__all__ = [
    "BUCKETS",
    "BuildArguments",
    "HELD_OUT",
    "PUBLISHED_STEPS",
    "REPO_NAME",
    "build_minilm_checkpoint",
    "describe_batches",
    "heal_recipe",
    "healing_corpus",
    "held_out_passages",
    "held_out_texts",
    "length_agreement",
    "length_gaps",
    "prefix_agreement",
    "speed_ratio",
]
