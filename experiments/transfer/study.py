"""Transfer study: does a converted, healed SharedBert fine-tune like the BERT it came from? (README.md: the design,
declared before the runs, and the report.)

    python experiments/transfer/study.py prepare --healed DIR        # data, the noise control, the 2,860-step heal
    python experiments/transfer/study.py run --healed DIR --threads 1 # every cell; re-run to resume
    python experiments/transfer/study.py report

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
PROBED = ("bert", "healed", "noise-healed", "healed-2860")


# ---------------------------------------------------------------------------------------------------------- data
def sst2_dir() -> Path:
    from sharedbert.training.data import shared_data_dir

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
    from sharedbert.convert import from_bert
    from sharedbert.embeddings import pooling_of
    from sharedbert.heal import Distiller, TextPieces, heal
    from sharedbert.training import resolve_source
    from sharedbert.training.checkpoint_build import heal_recipe, healing_corpus

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
    from sharedbert.training.checkpoint_build import build_minilm_checkpoint

    build = work / "healed-2860-build"
    if not (build / "healed" / "eval_results.json").is_file():
        build_minilm_checkpoint(work / "healed-2860-staged", work_dir=build, minutes=None, steps=SHORT_HEAL_STEPS,
                                threads=threads, log=lambda text: print(text, flush=True))
    return build / "healed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("prepare", "run", "report"))
    parser.add_argument("--healed", type=Path, help="the published build's healed model (build-minilm W/healed)")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import sharedbert  # noqa: F401  (registers the Auto classes)

    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "prepare":
        data = prepare_data(args.work_dir)
        print(f"data: {data}", flush=True)
        print(f"noise control: {noise_control(args.work_dir, args.threads)}", flush=True)
        print(f"2,860-step heal: {short_heal(args.work_dir, args.threads)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
