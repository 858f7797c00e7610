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
   beside the healed model, then stages and verifies the Hub folder (`sharedbert.hub.stage_for_hub`: weights, code,
   tokenizer, sentence-transformers modules and the model card, loaded in a fresh process without the package).

The held-out text (`HELD_OUT`) is a book of the shared corpus that healing never reads.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import torch

from ..atomic import atomic_write_text
from .healing import HealConfig
from .data import corpus_files, read_text, shared_data_dir
from .models import HUB_BASE_MODEL, resolve_source

REPO_NAME = "sharedbert-all-MiniLM-L6-v2"
CORPUS = "mlm-text"
# Never read by healing: the length-bucket agreement is measured on it.
HELD_OUT = "gutenberg-nltk/chesterton-thursday.txt"
STS_DEV = "glue/STS-B/dev.tsv"
# Token-length buckets of the agreement report (inclusive upper bounds): ≤128, 129–256, 257–512.
BUCKETS = ((1, 128), (129, 256), (257, 512))


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
    """(the files healing reads, the held-out file): every text file of `corpus` (default: the shared mlm-text
    folder) except `HELD_OUT`."""
    if corpus is None:
        found = shared_data_dir(CORPUS)
        if found is None:
            raise FileNotFoundError(f"No {CORPUS}/ in the shared data folder: pass --corpus FOLDER.")
        corpus = found / CORPUS
    files = corpus_files(corpus)
    held = [f for f in files if f.as_posix().endswith(HELD_OUT)]
    if not held:
        raise FileNotFoundError(f"The held-out book {HELD_OUT} is not in {corpus}; healing needs it kept apart.")
    return [f for f in files if f not in held], held[0]


def held_out_texts(path, tokenizer, per_bucket: int = 48, seed: int = 0) -> dict[tuple[int, int], list[str]]:
    """Pieces of the held-out text whose token length falls in each of `BUCKETS`, `per_bucket` each: consecutive
    words cut at random lengths, so each bucket reads different passages."""
    import random

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
    import random

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
    """`_agreement` for each list of items, with one `heal.Distiller` (the loss healing minimises)."""
    from .healing import Distiller

    student.eval()
    teacher.eval()
    distiller = Distiller(student, teacher, HealConfig(max_steps=1), pooling=pooling)
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
    mean by default), its standard error and minimum, and the distillation loss healing minimises (`heal.Distiller`)."""
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


def prefix_curve(student, teacher, tokenizer, passages: list[dict], lengths: list[int], against: int,
                 pooling=None, batch_size: int = 8) -> list[dict]:
    """The agreement as a curve over length: every passage (`held_out_passages`' `text`) read cut to each of
    `lengths` tokens. Per length: the mean embedding cosine to the teacher, its standard error, and the paired
    difference to the passages' own cosine at length `against` (one of `lengths`) with its standard error."""
    if against not in lengths:
        raise ValueError(f"against={against} must be one of the lengths {lengths}.")
    measured = _agreements(student, teacher, tokenizer, [[(p["text"], n) for p in passages] for n in lengths],
                           pooling, batch_size)
    reference = measured[lengths.index(against)][0]
    rows = []
    for length, (cosines, _) in zip(lengths, measured):
        differences = [c - r for c, r in zip(cosines, reference)]
        rows.append(dict(tokens=length, passages=len(cosines), mean_cosine=statistics.fmean(cosines),
                         sem_cosine=_sem(cosines), difference=statistics.fmean(differences),
                         standard_error=_sem(differences)))
    return rows


def length_gaps(rows: list[dict]) -> list[dict]:
    """Each longer bucket's mean cosine against the first (shortest) bucket's: the difference, its standard error
    (the buckets hold different pieces, so the two errors add in quadrature) and whether it is within noise, i.e.
    not below the short bucket's by more than two standard errors."""
    first = rows[0]
    return [_gap(row, first, row["mean_cosine"] - first["mean_cosine"],
                 math.hypot(row["sem_cosine"], first["sem_cosine"])) for row in rows[1:]]


def _log_gaps(gaps: list[dict], design: str, log) -> None:
    for gap in gaps:
        log(f"   tokens {gap['bucket']:>7} against {gap['against']} ({design}): cosine {gap['difference']:+.4f} ± "
            f"{gap['standard_error']:.4f} (standard error): "
            + ("within noise" if gap["within_noise"] else "worse by more than two standard errors"))


@torch.no_grad()
def speed_ratio(model, reference, tokenizer, texts: list[str], rounds: int = 5, batch_size: int = 32,
                max_length: int = 128) -> dict:
    """Inference throughput of `model` against `reference` on the same batches, alternating round-robin after a
    warm-up; the ratio of median round times (above 1: `model` is faster). `model` runs folded for inference."""
    batches = [tokenizer(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_length,
                         return_tensors="pt") for i in range(0, len(texts), batch_size)]
    batches = [{k: v for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")} for b in batches]
    fold = getattr(model, "fold_for_inference", None)
    if fold is not None:
        fold()
    model.eval()
    reference.eval()
    times = {"model": [], "reference": []}
    try:
        for round_index in range(rounds + 1):
            for name, m in (("model", model), ("reference", reference)):
                started = time.perf_counter()
                for batch in batches:
                    m(**batch)
                if round_index:  # round 0 is the warm-up
                    times[name].append(time.perf_counter() - started)
    finally:
        if fold is not None:
            model.unfold()
    ratio = statistics.median(times["reference"]) / statistics.median(times["model"])
    return dict(ratio=ratio, rounds=rounds, batches=len(batches), batch_size=batch_size, max_length=max_length,
                model_seconds=statistics.median(times["model"]),
                reference_seconds=statistics.median(times["reference"]), threads=torch.get_num_threads())


def build_minilm_checkpoint(
    out,
    *,
    work_dir="runs/build-minilm",
    minutes: float | None = 20.0,
    steps: int | None = None,
    threads: int | None = 1,
    corpus=None,
    sts=None,
    repo_id: str = f"your-name/{REPO_NAME}",
    per_bucket: int = 48,
    speed_rounds: int = 5,
    heal_overrides: dict | None = None,
    calibration_sentences: int = 0,
    log=print,
) -> dict:
    """Build, measure and stage the Hub-ready folder `out`; return the report (also in WORK_DIR/build_report.json).
    The healed model is WORK_DIR/healed (checkpoints in WORK_DIR/healed-checkpoints: running again resumes).
    Healing stops after `minutes` of training or `steps` optimizer steps, whichever comes first (None: no such
    limit); with `steps`, the learning rate anneals over the steps, so the build does not depend on how busy the
    machine is. `heal_overrides` change fields of `heal_recipe`. `calibration_sentences=N` calibrates the conversion
    on N pieces of the corpus before healing; the default, 0, heals the uncalibrated conversion, which measured better
    here on STS-B and in every length bucket (benchmarks/build_recipes.py: `uncal` against `base-bf16`)."""
    from transformers import AutoTokenizer, BertModel

    from .. import SharedBertModel, embeddings
    from ..hub import load_for_hub, stage_for_hub
    from ..params import count_model_parameters
    from .conversion import convert_checkpoint

    if threads:
        torch.set_num_threads(threads)
    work_dir = Path(work_dir)
    healed_dir = work_dir / "healed"
    sts = Path(sts) if sts else (shared_data_dir(STS_DEV) or Path(".")) / STS_DEV
    if not sts.is_file():
        raise FileNotFoundError(f"STS-B dev file {sts} not found: pass --sts GLUE_ROOT/STS-B/dev.tsv.")
    files, held_out = healing_corpus(corpus)
    source = resolve_source("all-MiniLM-L6-v2")
    budget = {"max_steps": steps} if steps is not None else {}
    recipe = heal_recipe(minutes, threads, **budget, **(heal_overrides or {}))
    limits = [f"{recipe.max_steps:,} steps" if recipe.max_steps is not None else "",
              f"{recipe.max_minutes:g} training minutes" if recipe.max_minutes is not None else ""]

    log(f"1. Convert and heal all-MiniLM-L6-v2 ({' or '.join(filter(None, limits))}, {len(files)} corpus files, "
        f"held out: {held_out.name})")
    conversion = convert_checkpoint(src="all-MiniLM-L6-v2", out=healed_dir, attention_type="shared", heal=recipe,
                                    corpus=files, checkpoint_dir=work_dir / "healed-checkpoints", threads=threads,
                                    calibration_sentences=calibration_sentences)
    heal_report = conversion["heal"]
    if heal_report["interrupted"]:
        raise KeyboardInterrupt(f"Healing was interrupted; run the same command again to resume ({work_dir}).")

    log("2. Measure against the original")
    tokenizer = AutoTokenizer.from_pretrained(source)
    original = BertModel.from_pretrained(source).eval()
    healed = SharedBertModel.from_pretrained(healed_dir).eval()
    original_st, healed_st = embeddings.load(source), embeddings.load(healed_dir)
    unit_norm = float(healed_st.encode(["A man is playing a guitar."], convert_to_tensor=True).norm())
    sts_original = embeddings.sts_spearman(original_st, sts)
    sts_healed = embeddings.sts_spearman(healed_st, sts)
    log(f"   STS-B dev Spearman (EmbeddingSimilarityEvaluator, cosine): original {sts_original:.4f}, "
        f"SharedBert {sts_healed:.4f}")
    texts = held_out_texts(held_out, tokenizer, per_bucket=per_bucket)
    pooling = embeddings.pooling_of(source)
    buckets = length_agreement(healed, original, tokenizer, texts, pooling=pooling)
    for row in buckets:
        log(f"   tokens {row['bucket']:>7}: embedding cosine {row['mean_cosine']:.4f} (min {row['min_cosine']:.4f}), "
            f"distillation loss {row['distillation_loss']:.4f} ({row['texts']} held-out texts)")
    gaps = length_gaps(buckets)
    _log_gaps(gaps, "different passages per bucket", log)
    passages = held_out_passages(held_out, tokenizer, count=per_bucket)
    prefixes, prefix_gaps = prefix_agreement(healed, original, tokenizer, passages, pooling=pooling)
    for row in prefixes:
        log(f"   the same {row['texts']} passages cut to {row['bucket']:>7} tokens (mean {row['mean_tokens']:.0f}): "
            f"embedding cosine {row['mean_cosine']:.4f} (min {row['min_cosine']:.4f})")
    _log_gaps(prefix_gaps, "the same passages, paired", log)
    params_healed, params_original = count_model_parameters(healed), count_model_parameters(original)
    first, second, _ = embeddings.read_sts(sts)
    speed = speed_ratio(healed, original, tokenizer, (first + second)[:256], rounds=speed_rounds)
    log(f"   parameters {params_healed:,} vs {params_original:,} (×{params_healed / params_original:.3f}); "
        f"inference ×{speed['ratio']:.3f} the original's speed (STS-B sentences, batch 32, folded, "
        f"{speed['threads']} thread(s), median of {speed['rounds']} alternating rounds)")

    eval_results = [
        {"task": "STS-B", "task_type": "sentence-similarity", "dataset": "nyu-mll/glue", "dataset_config": "stsb",
         "dataset_name": "GLUE STS-B", "split": "validation",
         "metrics": {"spearmanr": round(sts_healed, 4)}},
    ]
    provenance = {
        "base_model": HUB_BASE_MODEL,
        "datasets": [],
        "conversion": "sharedbert convert (attention_type shared, invariant fit"
                      + (f", calibrated on {conversion['calibration']['sentences']} pieces of the healing corpus"
                         if conversion.get("calibration") else "") + "), healed by distillation",
        "healing corpus": ("WikiText-2 raw test + 12 Project Gutenberg books (shared mlm-text, "
                           if corpus is None else f"{len(files)} text files ({', '.join(f.name for f in files)}; ")
                          + f"{held_out.name} held out)",
        "healing minutes": round(heal_report["elapsed_seconds"] / 60, 1),
        "healing steps": heal_report["steps"],
        "healing precision": heal_report.get("precision", recipe.precision),
        "healing batches": describe_batches(recipe),
        "distillation loss weights": f"hidden states {recipe.hidden_weight:g}, attention outputs "
                                     f"{recipe.attention_weight:g}, embedding cosine {recipe.embedding_weight:g}, "
                                     f"in-batch similarity matrix {recipe.similarity_weight:g}",
        "STS-B dev Spearman of the original": round(sts_original, 4),
        "parameters vs the original": f"{params_healed:,} vs {params_original:,} "
                                      f"(×{params_healed / params_original:.3f})",
        "inference speed vs the original": f"×{speed['ratio']:.2f} (CPU, {speed['threads']} thread(s), batch 32, "
                                           "folded shared attention)",
        "embedding cosine to the original by length": ", ".join(
            f"{row['bucket']} tokens {row['mean_cosine']:.4f}" for row in buckets),
        "embedding cosine to the original, the same passages cut to each length": ", ".join(
            f"{row['bucket']} tokens {row['mean_cosine']:.4f}" for row in prefixes),
    }
    atomic_write_text(healed_dir / "eval_results.json", json.dumps(eval_results, indent=1))
    atomic_write_text(healed_dir / "sharedbert_provenance.json", json.dumps(provenance, indent=1))

    log(f"3. Stage and verify the Hub folder {out}")
    loaded = load_for_hub(healed_dir)
    staged = stage_for_hub(healed_dir, out, repo_id=repo_id, log=lambda line: log("   " + line), loaded=loaded)
    report = dict(
        out=str(out), repo_id=repo_id, heal=heal_report, heal_config=asdict(recipe), corpus=[str(f) for f in files],
        calibration=conversion.get("calibration"),
        held_out=str(held_out), sts_original=sts_original, sts_sharedbert=sts_healed, unit_norm=unit_norm,
        length_buckets=buckets, length_gaps=gaps, prefix_buckets=prefixes, prefix_gaps=prefix_gaps,
        parameters=dict(sharedbert=params_healed, original=params_original),
        speed=speed,
        staged_files=staged.files, verification=staged.verification,
    )
    atomic_write_text(work_dir / "build_report.json", json.dumps(report, indent=1, default=str))
    log(f"Built {out}: STS-B {sts_healed:.4f} (original {sts_original:.4f}); report {work_dir / 'build_report.json'}")
    return report


__all__ = [
    "BUCKETS",
    "HELD_OUT",
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
    "prefix_curve",
    "speed_ratio",
]
