"""Transfer study: does a converted, healed SharedBert fine-tune like the BERT it came from? (README.md: the design,
declared before the runs, and the report.)

    python experiments/transfer/study.py prepare --healed DIR        # data, the noise control, the 2,860-step heal
    python experiments/transfer/study.py prepare --arms noise-healed  # one of the two heals (one process per core)
    python experiments/transfer/study.py run --healed DIR --threads 1 # every cell; re-run to resume
    python experiments/transfer/study.py report                      # and verdicts.json: the rules' verdicts
    python experiments/transfer/study.py run --arms directed-shared directed-shared-kv ... --directed DIR --results F
                                                                      # the directed-attention study's builds

`--healed` is the published build (`sharedbert build-minilm OUT --work-dir W`: W/healed). Everything the study makes
goes to --work-dir (default runs/transfer); results.json beside this script collects each cell as it finishes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
SEEDS = (1, 2, 3)
BUCKETS = ((65, 128), (129, 256), (257, 512))
DOCS_PER_BUCKET = 300
TEST_SENTENCES, DOC_POOL_SENTENCES, MIN_HELD_OUT_WORDS = 2_000, 3_000, 8
FINETUNE_SAMPLES = 8_000
DATA_SEED = 2026
NOISE_SEED = 7
HEAL_STEPS, SHORT_HEAL_STEPS = 9_184, 2_860

# How each arm starts ("start") and what it changes in the fine-tuning recipe ("finetune": keyword overrides of
# `sharedbert.training.finetuning.FinetuneArguments`); README.md gives the reasons.
ARMS = {
    "bert": {"start": "bert", "finetune": {}},
    "healed": {"start": "healed", "finetune": {}},
    "noise-healed": {"start": "noise-healed", "finetune": {}},
    "healed-2860": {"start": "healed-2860", "finetune": {}},
    "ft-lr2e-5": {"start": "healed", "finetune": {"learning_rate": 2e-5}},
    "ft-llrd": {"start": "healed", "finetune": {"layerwise_lr_decay": 0.8}},
    "ft-freeze-attention": {"start": "healed", "finetune": {"freeze_attention_fraction": 0.3}},
    "ft-pull": {"start": "healed", "finetune": {"pull_to_start": 0.1}},
    "ft-distill": {"start": "healed", "finetune": {"distill_weight": 0.5, "distill_temperature": 2.0}},
    "demo-path": {"start": "demo-path", "finetune": {}},
}
# The directed-attention study's conversion arm: all-MiniLM-L6-v2 converted to each type and healed 2,860 steps
# (`sharedbert convert ... --attention-type T --heal --steps 2860`), one build per type in --directed DIR/T, compared
# with the `shared` build by this study's paired rule. Run only when named (`--arms`), into that study's results.
DIRECTED_TYPES = ("shared", "shared_lowrank_query", "shared_head_query", "shared_kv")
DIRECTED_BUILDS = Path("runs/directed-convert")  # the default of --directed
DIRECTED_ARMS = {f"directed-{kind.replace('_', '-')}": {"start": f"directed:{kind}", "finetune": {}}
                 for kind in DIRECTED_TYPES}
STUDY_ARMS = tuple(ARMS)  # the default of --arms: this study's own
ARMS.update(DIRECTED_ARMS)
PROBED = ("bert", "healed", "noise-healed", "healed-2860", *DIRECTED_ARMS)


# ---------------------------------------------------------------------------------------------------------- data
def sst2_dir() -> Path:
    from sharedbert.data import shared_data_dir

    root = shared_data_dir("glue")
    if root is None:
        raise SystemExit("The GLUE data (shared/data/glue) was not found beside the repository.")
    return root / "glue" / "SST-2"


def read_sst2(path: Path) -> list[tuple[str, int]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], start=2):
        text, label = line.rsplit("\t", 1)
        rows.append((text.strip(), int(label)))
    return rows


def spans(words: list[str]) -> set[str]:
    """Every contiguous word span of `words`, joined by single spaces."""
    return {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}


def split_sst2(rows: list[tuple[str, int]], rng: random.Random) -> dict[str, list[tuple[str, int]]]:
    """Held-out test sentences, the document pool, and the fine-tuning pool with every item that is a word span of a
    held-out item, or contains one, removed (SST-2 train holds the sub-phrases of its sentences)."""
    unique = list(dict.fromkeys(rows))
    long_enough = [row for row in unique if len(row[0].split()) >= MIN_HELD_OUT_WORDS]
    rng.shuffle(long_enough)
    test = long_enough[:TEST_SENTENCES]
    pool = long_enough[TEST_SENTENCES:TEST_SENTENCES + DOC_POOL_SENTENCES]
    held_texts = {text for text, _ in test + pool}
    inside_held = set().union(*(spans(text.split()) for text in held_texts))
    finetune = [row for row in unique if row[0] not in inside_held and not (spans(row[0].split()) & held_texts)]
    return {"test": test, "doc_pool": pool, "finetune": finetune}


def make_documents(pool: list[tuple[str, int]], tokenizer, rng: random.Random) -> list[dict]:
    """DOCS_PER_BUCKET documents per bucket, half of each label: sentences of one label joined until a target
    length drawn in the bucket; a sentence that would pass the target ends the document."""
    by_label = {label: [text for text, lab in pool if lab == label] for label in (0, 1)}
    lengths = {text: len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text, _ in pool}
    documents = []
    for low, high in BUCKETS:
        for label in (0, 1):
            made = 0
            while made < DOCS_PER_BUCKET // 2:
                target = rng.randint(low, high)
                chosen, length = [], 2  # [CLS] and [SEP]
                for text in rng.sample(by_label[label], len(by_label[label])):
                    if length + lengths[text] > target:
                        break
                    chosen.append(text)
                    length += lengths[text]
                if length >= low:
                    documents.append({"bucket": f"{low}-{high}", "label": label, "text": " ".join(chosen),
                                      "tokens": length})
                    made += 1
    return documents


MIXED_MAJORITY = 0.7


def make_mixed_documents(pool: list[tuple[str, int]], tokenizer, rng: random.Random) -> list[dict]:
    """The second evaluation's documents: as `make_documents`, but each sentence comes from the majority label with
    probability MIXED_MAJORITY and from the other label otherwise (at least one of each); the majority is the label."""
    by_label = {label: [text for text, lab in pool if lab == label] for label in (0, 1)}
    lengths = {text: len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text, _ in pool}
    documents = []
    for low, high in BUCKETS:
        for label in (0, 1):
            made = 0
            while made < DOCS_PER_BUCKET // 2:
                target, chosen, labels, length = rng.randint(low, high), [], [], 2
                while True:
                    drawn = label if rng.random() < MIXED_MAJORITY else 1 - label
                    text = rng.choice(by_label[drawn])
                    if length + lengths[text] > target:
                        break
                    chosen.append(text)
                    labels.append(drawn)
                    length += lengths[text]
                if length >= low and len(set(labels)) == 2 and labels.count(label) > len(labels) / 2:
                    documents.append({"bucket": f"{low}-{high}", "label": label, "text": " ".join(chosen),
                                      "tokens": length, "majority_share": labels.count(label) / len(labels)})
                    made += 1
    return documents


def prepare_mixed(work: Path) -> Path:
    """Write data/mixed.jsonl once (its own seed), from the same document pool as the first documents."""
    from transformers import AutoTokenizer

    from sharedbert.atomic import atomic_write_text
    from sharedbert.training import resolve_source

    path = work / "data" / "mixed.jsonl"
    if not path.is_file():
        split = split_sst2(read_sst2(sst2_dir() / "train.tsv"), random.Random(DATA_SEED))
        tokenizer = AutoTokenizer.from_pretrained(resolve_source("all-MiniLM-L6-v2"))
        documents = make_mixed_documents(split["doc_pool"], tokenizer, random.Random(DATA_SEED + 1))
        atomic_write_text(path, "".join(json.dumps(d) + "\n" for d in documents))
    return path


def mixed_sets(data: Path) -> dict[str, list[tuple[str, int]]]:
    sets = {}
    for line in (data / "mixed.jsonl").read_text(encoding="utf-8").splitlines():
        document = json.loads(line)
        sets.setdefault(f"mixed {document['bucket']}", []).append((document["text"], document["label"]))
    return sets


def prepare_data(work: Path) -> Path:
    """Write the study's data once (a fixed seed): finetune/train.tsv, validation.tsv (SST-2 dev), test.tsv,
    documents.jsonl and probe.tsv. Returns the folder."""
    from transformers import AutoTokenizer

    from sharedbert.atomic import atomic_directory
    from sharedbert.training import resolve_source

    folder = work / "data"
    if (folder / "documents.jsonl").is_file():
        return folder
    rng = random.Random(DATA_SEED)
    split = split_sst2(read_sst2(sst2_dir() / "train.tsv"), rng)
    tokenizer = AutoTokenizer.from_pretrained(resolve_source("all-MiniLM-L6-v2"))
    documents = make_documents(split["doc_pool"], tokenizer, rng)
    probe = rng.sample(split["finetune"], FINETUNE_SAMPLES)

    def tsv(rows):
        return "sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows)

    with atomic_directory(folder) as tmp:
        (tmp / "train.tsv").write_text(tsv(split["finetune"]), encoding="utf-8")
        (tmp / "validation.tsv").write_text(tsv(read_sst2(sst2_dir() / "dev.tsv")), encoding="utf-8")
        (tmp / "test.tsv").write_text(tsv(split["test"]), encoding="utf-8")
        (tmp / "probe.tsv").write_text(tsv(probe), encoding="utf-8")
        (tmp / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return folder


def read_tsv(path: Path) -> list[tuple[str, int]]:
    return read_sst2(path)


def evaluation_sets(data: Path) -> dict[str, list[tuple[str, int]]]:
    """The test sentences ("test") and each document bucket ("65-128", ...), as (text, label) lists."""
    sets = {"test": read_tsv(data / "test.tsv")}
    for line in (data / "documents.jsonl").read_text(encoding="utf-8").splitlines():
        document = json.loads(line)
        sets.setdefault(document["bucket"], []).append((document["text"], document["label"]))
    return sets


# ------------------------------------------------------------------------------------------------------- models
def noise_control(work: Path, threads: int) -> Path:
    """all-MiniLM-L6-v2 with Gaussian noise on its Wq, Wk, Wv, sized so that the healing loss at step 0 equals the
    shared conversion's, then healed with the published recipe for HEAL_STEPS steps. Resumable; returns the folder."""
    import torch
    from transformers import AutoTokenizer, BertModel

    from sharedbert.atomic import atomic_directory, atomic_write_text
    from sharedbert.conversion.bert import from_bert
    from sharedbert.sentence_embeddings import pooling_of
    from sharedbert.data import TextPieces
    from sharedbert.training.distillation import Distiller
    from sharedbert.training.healing import heal
    from sharedbert.training import resolve_source
    from sharedbert.recipes.build_minilm import heal_recipe, healing_corpus

    out = work / "noise-healed"
    if (out / "model.safetensors").is_file():
        return out
    torch.set_num_threads(threads)
    source = resolve_source("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(source)
    teacher = BertModel.from_pretrained(source).eval()
    files, _ = healing_corpus()
    recipe = heal_recipe(None, threads, max_steps=HEAL_STEPS)
    pooling = pooling_of(source)
    pieces = TextPieces(files, recipe.min_words, recipe.max_words, seed=12345)
    batches = [tokenizer(pieces.batch(i * 16, 16), padding=True, truncation=True, max_length=512,
                         return_tensors="pt") for i in range(8)]

    def step0_loss(student) -> float:
        distiller = Distiller(student, teacher, recipe, pooling=pooling)
        try:
            with torch.no_grad():
                return statistics.fmean(float(distiller.loss(dict(batch))[0]) for batch in batches)
        finally:
            distiller.close()

    target = step0_loss(from_bert(source, attention_type="shared", fit_method="invariant").eval())

    def noised(sigma: float):
        student = from_bert(source, attention_type="standard").eval()
        generator = torch.Generator().manual_seed(NOISE_SEED)
        with torch.no_grad():
            for attention in student.encoder.attention:
                for linear in (attention.self.query, attention.self.key, attention.self.value):
                    weight = linear.weight
                    noise = torch.randn(weight.shape, generator=generator)
                    weight.add_(sigma * weight.pow(2).mean().sqrt() * noise)
        return student

    low, high = 0.0, 4.0  # relative noise (× each matrix's RMS); the loss grows with it
    for _ in range(14):
        middle = (low + high) / 2
        low, high = (middle, high) if step0_loss(noised(middle)) < target else (low, middle)
    sigma = (low + high) / 2
    student = noised(sigma)
    matched = step0_loss(student)
    checkpoints = work / "noise-healed-checkpoints"
    result = heal(student, teacher, tokenizer, files, checkpoints, recipe, pooling=pooling)
    if result.interrupted:
        raise SystemExit(f"Healing the noise control was interrupted; run again to resume ({checkpoints}).")
    with atomic_directory(out) as tmp:
        student.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        atomic_write_text(tmp / "noise_control.json", json.dumps({
            "relative_sigma": sigma, "step0_loss": matched, "conversion_step0_loss": target,
            "heal_steps": result.steps, "heal_first_loss": result.first_loss, "heal_last_loss": result.last_loss,
            "precision": result.precision, "noise_seed": NOISE_SEED}, indent=1))
    return out


def short_heal(work: Path, threads: int) -> Path:
    """The published build's recipe for SHORT_HEAL_STEPS steps (`sharedbert build-minilm --steps 2860`)."""
    from sharedbert.recipes.build_minilm import build_minilm_checkpoint

    build = work / "healed-2860-build"
    if not (build / "healed" / "eval_results.json").is_file():
        build_minilm_checkpoint(out=work / "healed-2860-staged", work_dir=build, minutes=None, steps=SHORT_HEAL_STEPS,
                                threads=threads)
    return build / "healed"


# -------------------------------------------------------------------------------------------------------- cells
def start_of(arm: str, seed: int, work: Path, healed: Path | None, threads: int,
             directed: Path | None = None) -> tuple[str, dict]:
    """The model an arm's fine-tuning starts from, and the options that go with it."""
    from sharedbert.training import resolve_source

    kind = ARMS[arm]["start"]
    if kind.startswith("directed:"):
        folder = (directed or DIRECTED_BUILDS) / kind.partition(":")[2]
        if not (folder / "config.json").is_file():
            raise SystemExit(f"{arm} starts from {folder}, which holds no model: build it with `sharedbert convert "
                             f"all-MiniLM-L6-v2 {folder} --attention-type {kind.partition(':')[2]} --heal --steps "
                             f"{SHORT_HEAL_STEPS} --threads 1`, or pass --directed DIR.")
        return str(folder), {}
    if kind == "bert":
        return resolve_source("all-MiniLM-L6-v2"), {"no_convert": True}
    if kind == "healed":
        if healed is None or not (healed / "config.json").is_file():
            raise SystemExit(f"{arm} starts from the published build: pass --healed DIR (build-minilm W/healed).")
        return str(healed), {}
    if kind in ("noise-healed", "healed-2860"):
        folder = work / "noise-healed" if kind == "noise-healed" else work / "healed-2860-build" / "healed"
        if not (folder / "config.json").is_file():
            raise SystemExit(f"{arm} needs {folder}: run `study.py prepare` first.")
        return str(folder), {}
    return str(demo_path_model(seed, work, threads)), {}


def demo_path_model(seed: int, work: Path, threads: int) -> Path:
    """`sharedbert demo`'s way: the fine-tuned `bert` of this seed converted to shared attention and healed toward
    it for 200 steps on the fine-tuning pool's text (not the held-out sentences)."""
    from sharedbert.data import TextInMemory
    from sharedbert.recipes.demo import heal_here

    out = work / f"demo-path-seed{seed}" / "healed"
    if (out / "config.json").is_file():
        return out
    teacher = cell_dir(work, "bert", seed)
    if not (teacher / "config.json").is_file():
        raise SystemExit(f"demo-path seed {seed} converts the fine-tuned bert of that seed: run the bert cell first.")
    texts = [text for text, _ in read_tsv(work / "data" / "train.tsv")]
    corpus = TextInMemory(f"the study's fine-tuning pool ({len(texts):,} SST-2 sentences)", texts)
    heal_here(teacher, out, corpus, minutes=None, steps=200, attention_type="shared", data_kwargs={},
              max_length=64)
    return out


def shown(path) -> str:
    """A path as results files record it: relative to the repository (no machine's absolute paths in committed
    files)."""
    return os.path.relpath(Path(path).resolve(), HERE.parents[1])


def cell_dir(work: Path, arm: str, seed: int) -> Path:
    return work / "cells" / f"{arm}-seed{seed}"


def run_cell(arm: str, seed: int, work: Path, healed: Path | None, threads: int, directed: Path | None = None) -> dict:
    """Fine-tune the arm's start with the recipe (and the arm's changes), then score it on every evaluation set."""
    import torch

    from sharedbert.training.finetuning import FinetuneArguments, finetune

    torch.set_num_threads(threads)
    data = work / "data"
    model, start_options = start_of(arm, seed, work, healed, threads, directed)
    options = dict(ARMS[arm]["finetune"])
    if arm == "ft-distill":
        options["distill_from"] = str(cell_dir(work, "bert", seed))
        if not (cell_dir(work, "bert", seed) / "config.json").is_file():
            raise SystemExit(f"ft-distill seed {seed} distils from the bert cell of that seed: run it first.")
    arguments = FinetuneArguments(
        model=model, train_file=str(data / "train.tsv"), validation_file=str(data / "validation.tsv"),
        text_columns="sentence", label_column="label", max_train_samples=FINETUNE_SAMPLES, num_train_epochs=1, seed=seed,
        output_dir=str(cell_dir(work, arm, seed)), overwrite=True, **start_options, **options,
    )
    started = time.time()
    result = finetune(arguments)
    scores = score(cell_dir(work, arm, seed), evaluation_sets(data), threads)
    mixed = score(cell_dir(work, arm, seed), mixed_sets(data), threads)
    recipe = dict(result["recipe"])
    if recipe.get("distill_from"):
        recipe["distill_from"] = shown(recipe["distill_from"])
    return {"arm": arm, "seed": seed, "start": shown(model) if Path(str(model)).exists() else model, "accuracy": scores, "accuracy_mixed": mixed,
            "dev_accuracy": result["metrics"],
            "best_step": result["best_step"], "total_steps": result["total_steps"],
            "train_seconds": result["train_seconds"], "seconds": time.time() - started,
            "precision": result["precision"], "recipe": recipe, "learning_rate": result["learning_rate"]}


def score(model_dir: Path, sets: dict, threads: int) -> dict[str, float]:
    """Accuracy of the fine-tuned classifier in `model_dir` on each evaluation set (inputs up to 512 tokens)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    label_of = {i: int(name) for i, name in model.config.id2label.items()}
    accuracies = {}
    for name, rows in sets.items():
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        correct = 0
        for start in range(0, len(order), 32):
            chunk = [rows[i] for i in order[start:start + 32]]
            batch = tokenizer([text for text, _ in chunk], padding=True, truncation=True, max_length=512,
                              return_tensors="pt")
            with torch.inference_mode():
                predicted = model(**batch).logits.argmax(-1).tolist()
            correct += sum(label_of[p] == label for p, (_, label) in zip(predicted, chunk))
        accuracies[name] = correct / len(rows)
    return accuracies


# -------------------------------------------------------------------------------------------------------- probe
def embed(model_dir: str, texts: list[str]):
    """Mean-pooled, normalised embeddings of `texts` by the encoder in `model_dir` (inputs up to 512 tokens)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    encoder = AutoModel.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    rows = [None] * len(texts)
    for start in range(0, len(order), 32):
        chunk = order[start:start + 32]
        batch = tokenizer([texts[i] for i in chunk], padding=True, truncation=True, max_length=512,
                          return_tensors="pt")
        with torch.inference_mode():
            hidden = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
        for i, vector in zip(chunk, pooled):
            rows[i] = vector.numpy()
    import numpy as np

    return np.stack(rows)


def probe(model_dir: str, data: Path, sets: dict | None = None) -> dict[str, float]:
    """Logistic regression (C = 1) on the frozen embeddings of the probe's 8,000 sentences, scored on every set
    (default: `evaluation_sets`)."""
    from sklearn.linear_model import LogisticRegression

    train = read_tsv(data / "probe.tsv")
    classifier = LogisticRegression(C=1.0, max_iter=5000)
    classifier.fit(embed(model_dir, [t for t, _ in train]), [label for _, label in train])
    sets = evaluation_sets(data) if sets is None else sets
    return {name: float(classifier.score(embed(model_dir, [t for t, _ in rows]), [label for _, label in rows]))
            for name, rows in sets.items()}


# ------------------------------------------------------------------------------------------------------ results
def load_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


def rescore_mixed(work: Path, healed: Path | None, threads: int) -> None:
    """Score every finished cell (its saved fine-tuned model) and probe every starting model on the mixed documents,
    adding them to the results as "accuracy_mixed" / "probes_mixed"."""
    data = work / "data"
    prepare_mixed(work)
    sets = mixed_sets(data)
    for key, cell in sorted(load_results().get("cells", {}).items()):
        if "accuracy_mixed" not in cell:
            merge("cells", key, {**cell, "accuracy_mixed": score(cell_dir(work, cell["arm"], cell["seed"]), sets,
                                                                 threads)})
            print(f"{key}: mixed {load_results()['cells'][key]['accuracy_mixed']}", flush=True)
    for name in load_results().get("probes", {}):
        if name not in load_results().get("probes_mixed", {}):
            model, _ = start_of(name, SEEDS[0], work, healed, threads)
            merge("probes_mixed", name, probe(model, data, sets))


def merge(section: str, key: str, value: dict) -> None:
    from sharedbert.atomic import atomic_write_text, file_lock

    with file_lock(RESULTS.with_suffix(".lock")):
        results = load_results()
        results.setdefault(section, {})[key] = value
        atomic_write_text(RESULTS, json.dumps(results, indent=1) + "\n")


def paired(cells: dict, arm: str, against: str, measure) -> tuple[float, float | None, int] | None:
    """Mean and standard error of measure(arm cell) − measure(against cell) over shared seeds, in points."""
    base = {c["seed"]: measure(c) for c in cells.values() if c["arm"] == against}
    diffs = [100 * (measure(c) - base[c["seed"]]) for c in cells.values() if c["arm"] == arm and c["seed"] in base]
    if not diffs:
        return None
    return statistics.mean(diffs), (statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None), \
        len(diffs)


def long_mean(cell: dict) -> float:
    return statistics.mean(cell["accuracy"][f"{low}-{high}"] for low, high in BUCKETS)


def accuracies(cell: dict) -> dict[str, float]:
    """Every evaluation set's accuracy of a cell: the first evaluation's and, once scored, the mixed documents'."""
    return {**cell["accuracy"], **cell.get("accuracy_mixed", {})}


def mixed_mean(cell: dict) -> float:
    return statistics.mean(cell["accuracy_mixed"][f"mixed {low}-{high}"] for low, high in BUCKETS)


def _fmt(value) -> str:
    if value is None:
        return "–"
    mean, error, n = value
    return f"{mean:+.1f}" + (f" ± {error:.1f}" if error is not None else "") + ("" if n == 3 else f" (n={n})")


def gap_table(cells: dict, title: str, arms: list[str], against: str, sets: list[str], means) -> list[str]:
    """A titled table of each arm's paired gaps to `against`, per evaluation set and mean; arms without cells left
    out."""
    lines = ["", title, "", "| arm | " + " | ".join([*sets, *(name for name, _ in means)]) + " |",
             "|---|" + "---|" * (len(sets) + len(means))]
    for arm in arms:
        gaps = [paired(cells, arm, against, lambda c, s=s: accuracies(c)[s]) for s in sets]
        gaps += [paired(cells, arm, against, measure) for _, measure in means]
        if any(g is not None for g in gaps):
            lines.append(f"| {arm} | " + " | ".join(_fmt(g) for g in gaps) + " |")
    return lines


# The declared rules read 95% Student-t intervals of paired differences in points (sharedbert.verdicts), with no
# practical margin: "ahead" / "trails" where the interval lies entirely above / below zero, else "left open".
MARGIN_POINTS = 0.0
MAX_IN_DOMAIN_LOSS = 0.5  # points: a candidate that helps may lose no more than this in domain (its mean)


def compared(cells: dict, arm: str, against: str, measure) -> dict | None:
    """measure(arm) - measure(against) in points paired by seed, judged by sharedbert.verdicts (higher is better),
    with the first rule's verdict (mean ± 2 SE) beside; None without a shared seed."""
    from sharedbert.verdicts import paired_comparison

    base = {c["seed"]: 100 * measure(c) for c in cells.values() if c["arm"] == against}
    values = {c["seed"]: 100 * measure(c) for c in cells.values() if c["arm"] == arm and c["seed"] in base}
    if not values:
        return None
    comparison = paired_comparison(values, base, margin=MARGIN_POINTS, higher_is_better=True)
    return {**comparison.as_dict(), "verdict_2se": comparison.verdict_at(2)}


def _measures(cells: dict) -> dict:
    mixed = bool(cells) and all("accuracy_mixed" in c for c in cells.values())
    return {"in domain": lambda c: c["accuracy"]["test"], "mean of buckets": long_mean,
            **({"mean of mixed": mixed_mean} if mixed else {})}


def verdicts(cells: dict) -> dict:
    """The declared rules on the cells: whether the loss is specific to the shared form (`healed` behind
    `noise-healed` in domain or on a mean of the documents), whether each candidate helps (ahead of `healed` on a mean
    of the documents, losing no more than 0.5 points in domain), and the directed types' builds against the `shared`
    build; each comparison with its per-seed differences and interval, each rule with the 2-SE reading beside."""
    measures = _measures(cells)

    def against(arm: str, base: str) -> dict:
        return {name: compared(cells, arm, base, measure) for name, measure in measures.items()}

    judged: dict = {"margin_points": MARGIN_POINTS}
    specific = against("healed", "noise-healed")
    if all(specific.values()):
        judged["specific_to_shared_form"] = {
            "comparisons": specific,
            **{key: any(c[field] == "trails" for c in specific.values())
               for key, field in (("specific", "verdict"), ("specific_2se", "verdict_2se"))}}
    candidates = {}
    for arm in STUDY_ARMS:
        if ARMS[arm]["start"] in ("bert", "noise-healed") or arm == "healed" or not against(arm, "healed")["in domain"]:
            continue
        gaps = against(arm, "healed")
        keeps_domain = gaps["in domain"]["mean"] >= -MAX_IN_DOMAIN_LOSS
        candidates[arm] = {"comparisons": gaps, **{
            key: keeps_domain and any(c[field] == "ahead" for name, c in gaps.items() if name != "in domain")
            for key, field in (("helps", "verdict"), ("helps_2se", "verdict_2se"))}}
    judged["candidates"] = candidates
    judged["directed"] = {arm: against(arm, "directed-shared") for arm in DIRECTED_ARMS
                          if arm != "directed-shared" and against(arm, "directed-shared")["in domain"]}
    return judged


def verdicts_path() -> Path:
    """Where `report` writes the rules' verdicts: verdicts.json beside this study's results.json, else
    STEM-verdicts.json beside another results file."""
    return RESULTS.with_name("verdicts.json" if RESULTS == HERE / "results.json" else f"{RESULTS.stem}-verdicts.json")


def _judged_cell(comparison: dict) -> str:
    was = "" if comparison["verdict"] == comparison["verdict_2se"] else f" (was: {comparison['verdict_2se']} with 2 SE)"
    low, high = comparison["interval"] if comparison["interval"] else (math.nan, math.nan)
    return f"{_fmt((comparison['mean'], comparison['standard_error'], comparison['n']))} [{low:+.1f}, {high:+.1f}] " \
           f"{comparison['verdict']}{was}"


def verdicts_markdown(judged: dict) -> list[str]:
    """The rules' verdicts: each comparison with its 95% t interval, and what the first rule (2 SE) said where it
    differs."""
    lines = ["", "Verdicts by the declared rules on 95% Student-t intervals (paired by seed, points, no margin; "
             "`sharedbert.verdicts`):", ""]
    rows = []
    if "specific_to_shared_form" in judged:
        rule = judged["specific_to_shared_form"]
        rows.append(("`healed` against `noise-healed` (specific to the shared form?)", rule["comparisons"],
                     ("yes" if rule["specific"] else "not shown") + ("" if rule["specific"] == rule["specific_2se"]
                     else f" (was: {'yes' if rule['specific_2se'] else 'not shown'} with 2 SE)")))
    for arm, rule in judged["candidates"].items():
        rows.append((f"{arm} against `healed` (helps?)", rule["comparisons"],
                     ("helps" if rule["helps"] else "does not help") + ("" if rule["helps"] == rule["helps_2se"]
                     else f" (was: {'helps' if rule['helps_2se'] else 'does not help'} with 2 SE)")))
    for arm, gaps in judged["directed"].items():
        rows.append((f"{arm} against `directed-shared`", gaps, ""))
    if not rows:
        return []
    names = list(rows[0][1])
    lines += ["| comparison | " + " | ".join(names) + " | rule |", "|---|" + "---|" * (len(names) + 1)]
    lines += [f"| {title} | " + " | ".join(_judged_cell(gaps[name]) if gaps.get(name) else "–" for name in names)
              + f" | {outcome} |" for title, gaps, outcome in rows]
    return lines


def report() -> str:
    results = load_results()
    cells, probes = results.get("cells", {}), results.get("probes", {})
    mixed = all("accuracy_mixed" in c for c in cells.values()) and bool(cells)
    sets = ["test", *(f"{low}-{high}" for low, high in BUCKETS)]
    sets += [f"mixed {low}-{high}" for low, high in BUCKETS] if mixed else []
    means = [("mean of buckets", long_mean)] + ([("mean of mixed", mixed_mean)] if mixed else [])
    lines = ["| arm | " + " | ".join(sets) + " | seeds |", "|---|" + "---|" * (len(sets) + 1)]
    for arm in ARMS:
        rows = sorted((c for c in cells.values() if c["arm"] == arm), key=lambda c: c["seed"])
        if rows:
            lines.append(f"| {arm} | " + " | ".join(f"{statistics.mean(accuracies(c)[s] for c in rows):.3f}"
                                                   for s in sets) + f" | {', '.join(str(c['seed']) for c in rows)} |")
    lines += gap_table(cells, "Gaps to `bert` in points (paired by seed, mean ± standard error):",
                       [a for a in ARMS if a != "bert"], "bert", sets, means)
    lines += ["", "Against `healed` (the candidates' improvement, paired by seed):", "",
              "| arm | test | " + " | ".join(name for name, _ in means) + " |", "|---|---|" + "---|" * len(means)]
    for arm in STUDY_ARMS:
        if ARMS[arm]["start"] in ("bert", "noise-healed") or arm == "healed":
            continue
        gaps = [paired(cells, arm, "healed", lambda c: c["accuracy"]["test"])]
        gaps += [paired(cells, arm, "healed", measure) for _, measure in means]
        if any(gaps):
            lines.append(f"| {arm} | " + " | ".join(_fmt(g) for g in gaps) + " |")
    if any(c["arm"] in DIRECTED_ARMS for c in cells.values()):
        lines += gap_table(cells, "The directed types' builds against the `shared` build (paired by seed):",
                           [a for a in DIRECTED_ARMS if a != "directed-shared"], "directed-shared", sets, means)
    if probes:
        mixed_probes = results.get("probes_mixed", {})
        lines += ["", "Linear probe (frozen starting models):", "", "| model | " + " | ".join(sets) + " |",
                  "|---|" + "---|" * len(sets)]
        for model, scores in probes.items():
            scores = {**scores, **mixed_probes.get(model, {})}
            lines.append(f"| {model} | " + " | ".join(f"{scores[s]:.3f}" if s in scores else "–" for s in sets) + " |")
    if cells:
        lines += verdicts_markdown(verdicts(cells))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    global RESULTS  # --results: where load_results and merge read and write
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("prepare", "run", "rescore", "report"))
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file (default: beside the script)")
    parser.add_argument("--healed", type=Path, help="the published build's healed model (build-minilm W/healed)")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(STUDY_ARMS),
                        help="default: this study's own arms; the directed-* arms run only when named")
    parser.add_argument("--directed", type=Path, default=DIRECTED_BUILDS,
                        help="the directed-attention study's builds, one folder per attention type")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import sharedbert  # noqa: F401  (registers the Auto classes)

    RESULTS = args.results
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "prepare":
        data = prepare_data(args.work_dir)
        print(f"data: {data}", flush=True)
        # --arms picks which starting models to make, so that the two heals can run one process per core
        if "noise-healed" in args.arms:
            print(f"noise control: {noise_control(args.work_dir, args.threads)}", flush=True)
        if "healed-2860" in args.arms:
            print(f"2,860-step heal: {short_heal(args.work_dir, args.threads)}", flush=True)
    elif args.command == "rescore":
        import torch

        torch.set_num_threads(args.threads)
        rescore_mixed(args.work_dir, args.healed, args.threads)
    elif args.command == "run":
        data = prepare_data(args.work_dir)
        prepare_mixed(args.work_dir)
        both = {**evaluation_sets(data), **mixed_sets(data)}
        for name in PROBED:  # the starting models, before any fine-tuning: one probe fit scores both evaluations
            done = [name in load_results().get(section, {}) for section in ("probes", "probes_mixed")]
            if name in args.arms and not all(done):
                model, _ = start_of(name, SEEDS[0], args.work_dir, args.healed, args.threads, args.directed)
                scores = probe(model, data, both)
                merge("probes", name, {k: v for k, v in scores.items() if not k.startswith("mixed ")})
                merge("probes_mixed", name, {k: v for k, v in scores.items() if k.startswith("mixed ")})
                print(f"probe {name}: {scores}", flush=True)
        for seed in args.seeds:
            for arm in args.arms:
                key = f"{arm}/seed{seed}"
                if key in load_results().get("cells", {}):
                    continue
                print(f"{key}: fine-tuning", flush=True)
                cell = run_cell(arm, seed, args.work_dir, args.healed, args.threads, args.directed)
                merge("cells", key, cell)
                print(f"{key}: {cell['accuracy']}", flush=True)
    if args.command == "report" and load_results().get("cells"):
        from sharedbert.atomic import atomic_write_text

        atomic_write_text(verdicts_path(), json.dumps(verdicts(load_results()["cells"]), indent=1) + "\n")
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
