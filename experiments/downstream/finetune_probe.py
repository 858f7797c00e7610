"""Fine-tuning probe (a diagnostic, not a result; README.md, "After the gate"): does SST-2 fine-tuning get past a
bag-of-characters model when the encoder has learned masked LM, given more steps, another learning rate, or no
pretraining at all? Training data only: every probe trains on 90% of SST-2's training rows and scores the fixed 10%
the study's pilots score (`holdout_split`); no dev set is read.

    python experiments/downstream/finetune_probe.py --pretrained RUN/pretrained --recipe cpu-c64 --threads 1 \\
        --out experiments/downstream/results/diagnostic-text/finetune-probe.json

RUN/pretrained is a pilot or cell's saved encoder (it carries `char_vocabulary.json`). Each probe is the study's own
`finetune_task` (AutoModelForSequenceClassification on that folder, Trainer, the [CLS] pooler and head) with the
recipe's fine-tuning steps and learning rate replaced; "scratch" probes fine-tune a model of the same configuration
that never pretrained (random initialisation, seed 1). Beside them, two references that need no encoder: the majority
class, and a bag of characters (a linear classifier on character counts, full-batch L-BFGS), which no model that reads
order should trail. The results file is written when every probe has run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (initialisation, fine-tuning steps, learning rate): the study's 120 steps at 3e-4, then 5x and 25x the steps; the 25x
# budget at a third of the learning rate; the 25x budget from a random initialisation.
PROBES = (("pretrained", 120, 3e-4), ("pretrained", 600, 3e-4), ("pretrained", 3000, 3e-4),
          ("pretrained", 3000, 1e-4), ("scratch", 3000, 3e-4))


def load_study():
    spec = importlib.util.spec_from_file_location("downstream_study", HERE / "study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bag_of_characters(train, scored, vocabulary, max_length: int, seed: int = 1) -> float:
    """Accuracy (points) of a linear classifier on each row's character frequencies (the encoder's own inputs,
    truncated alike), fitted to the training rows by full-batch L-BFGS with a small L2 penalty."""
    import torch

    def counts(rows):
        features = torch.zeros(len(rows), vocabulary.size)
        for row, texts in enumerate(rows.texts):
            # the encoder's inputs without [CLS] and the final [SEP]; an empty row counts as one [PAD]
            ids = STUDY.encode_example(vocabulary, texts, max_length)["input_ids"][1:-1] or [STUDY.PAD]
            features[row].index_add_(0, torch.tensor(ids), torch.ones(len(ids)))
            features[row] /= len(ids)
        return features

    torch.manual_seed(seed)
    x, y = counts(train), torch.tensor(train.labels)
    linear = torch.nn.Linear(vocabulary.size, 2)
    optimiser = torch.optim.LBFGS(linear.parameters(), max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(x), y) + 1e-4 * linear.weight.square().sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    with torch.no_grad():
        predictions = linear(counts(scored)).argmax(-1)
    return 100 * (predictions == torch.tensor(scored.labels)).float().mean().item()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", type=Path, required=True, help="a pilot or cell's pretrained/ folder")
    parser.add_argument("--recipe", default="cpu-c64", help="the recipe the encoder was pretrained with")
    parser.add_argument("--glue-dir", type=Path, help="GLUE folder (default: the shared data's glue)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.overwrite:
        raise SystemExit(f"{args.out} exists; --overwrite replaces it.")
    vocabulary_file = args.pretrained / "char_vocabulary.json"
    if not vocabulary_file.is_file():
        raise SystemExit(f"{vocabulary_file}: no such file (--pretrained must be a folder the study saved).")

    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # the classifier's new head is expected; put back in the end
    try:
        run_probes(args, vocabulary_file)
    finally:
        transformers_logging.set_verbosity(verbosity)
    return 0


def run_probes(args, vocabulary_file: Path) -> None:
    """Every probe of PROBES and the two references, then the results file (written only when all have run)."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    import sharedbert  # noqa: F401  (registers the Auto classes)
    from sharedbert.atomic import atomic_write_text

    torch.set_num_threads(args.threads)
    vocabulary = STUDY.Vocabulary.from_json(json.loads(vocabulary_file.read_text()))
    recipe = STUDY.RECIPES[args.recipe]
    train, scored = STUDY.load_tasks(args.glue_dir or STUDY.default_data("glue"), pilot=True)["sst2"]
    precision, device = STUDY.precision_and_device("auto")
    results = {"task": "sst2", "scored_on": "train split", "train_rows": len(train), "scored_rows": len(scored),
               "pretrained": json.loads((args.pretrained / "pretraining.json").read_text())
               if (args.pretrained / "pretraining.json").is_file() else None,
               "recipe": args.recipe, "seed": args.seed, "precision": precision, "device": device,
               "majority": STUDY.baseline("sst2", train, scored)["score"],
               "bag_of_characters": bag_of_characters(train, scored, vocabulary, recipe.context, args.seed),
               "probes": [], **STUDY.machine()}
    print(f"majority {results['majority']:.1f}, bag of characters {results['bag_of_characters']:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="finetune-probe-") as scratch:
        for init, steps, lr in PROBES:
            run_dir = Path(scratch) / f"{init}-{steps}-{lr:g}"
            run_dir.mkdir()
            if init == "pretrained":
                (run_dir / "pretrained").symlink_to(args.pretrained.resolve(), target_is_directory=True)
            else:
                torch.manual_seed(args.seed)
                AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(args.pretrained)).save_pretrained(
                    run_dir / "pretrained")
            cell = STUDY.make_cell("standard", args.seed, args.recipe)
            cell.recipe = dataclasses.replace(recipe, finetune_steps=steps, finetune_lr=lr, noise_types=())
            started = time.process_time()
            record = STUDY.finetune_task("sst2", cell, vocabulary, train, scored, run_dir, precision, device)
            probe = {"initialisation": init, "steps": steps, "learning_rate": lr,
                     "score": record["dev"]["clean"]["score"], "train_losses": record["train_losses"],
                     "cpu_seconds": time.process_time() - started}
            results["probes"].append(probe)
            print(f"{init} {steps} steps lr {lr:g}: {probe['score']:.1f} (final training loss "
                  f"{record['train_losses'][-1]['loss']:.3f})", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(results, indent=1) + "\n")


STUDY = load_study()

if __name__ == "__main__":
    sys.exit(main())
