"""`sharedbert upload MODEL_DIR --repo-id OWNER/NAME` (also `python upload.py ...` at the top of the repository):
publish a trained SharedBert on the Hugging Face Hub. Argument parsing and printing only: the steps are
`sharedbert.hub.publish`."""

import argparse
import sys
from pathlib import Path

DESCRIPTION = """\
Publish a trained SharedBert on the Hugging Face Hub, so that anyone can load it with
AutoModel...from_pretrained("owner/name", trust_remote_code=True).

Steps:
  1. load the model and tokenizer from MODEL_DIR, refusing a folder that is not a SharedBert,
     has no tokenizer, or holds weights that do not match its config;
  2. stage a Hub-ready folder: model.safetensors, config.json (full auto_map), the three code
     files, the tokenizer files and a generated README.md model card - nothing else (no
     optimizer states, checkpoints, logs, .env files or tokens);
  3. verify it in a fresh Python process in which the sharedbert package cannot be imported:
     load it through the Auto classes with trust_remote_code=True and check the outputs equal
     the source model's on a fixed input;
  4. upload it in one commit (the repository is created if needed; a failure leaves it as it was).
With --dry-run OUT_DIR it stops after step 3 and leaves the verified folder in OUT_DIR.

The model card reads, when MODEL_DIR has them: eval_results.json (evaluation results, also
written into the card's model-index), training_args.json (training settings) and
sharedbert_provenance.json (base_model and other conversion details).
"""

EPILOG = """\
authentication:
  The token comes from the HF_TOKEN environment variable or from a saved login
  (`hf auth login`); it is never taken on the command line, printed, or written to a file.
  HF_ENDPOINT selects another Hub endpoint.

exit status: 0 on success, 1 on any error (the message says what went wrong and what to do),
2 on invalid arguments, 130 when interrupted.

examples:
  {command} runs/sst2 --repo-id alice/sharedbert-sst2 --dry-run staged/
  HF_TOKEN=hf_... {command} runs/sst2 --repo-id alice/sharedbert-sst2 --private
  {command} staged/ --repo-id alice/sharedbert-sst2 --card staged/README.md --revision v2
"""


def add_parser(subparsers) -> None:
    """Register `sharedbert upload`."""
    parser = subparsers.add_parser(
        "upload",
        help="publish a trained SharedBert on the Hugging Face Hub (stage, verify without the package, upload)",
        description=DESCRIPTION,
        epilog=EPILOG.format(command="sharedbert upload"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(run=run, invocation="sharedbert upload")


def build_parser(prog: str = "upload.py") -> argparse.ArgumentParser:
    """The same command as a parser of its own, for the repository's `upload.py`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG.format(command=f"python {prog}"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(run=run, invocation=f"python {prog}")
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_dir", metavar="MODEL_DIR", type=Path,
                        help="folder with the trained SharedBert (save_pretrained output or a training output "
                             "folder with the final model at its root) and its tokenizer")
    parser.add_argument("--repo-id", required=True, metavar="OWNER/NAME",
                        help="Hub repository to publish to, e.g. alice/sharedbert-sst2 (created if missing)")
    parser.add_argument("--private", action="store_true",
                        help="create the repository as private (an existing repository keeps its visibility)")
    parser.add_argument("--revision", metavar="BRANCH",
                        help="branch to commit to (created from main if missing; default: main)")
    parser.add_argument("--commit-message", metavar="MSG", help="commit message (default: a generic one)")
    parser.add_argument("--commit-description", metavar="TEXT", help="longer commit description")
    parser.add_argument("--create-pr", action="store_true",
                        help="open a pull request with the files instead of committing to the branch")
    parser.add_argument("--dry-run", metavar="OUT_DIR", type=Path,
                        help="stage and verify into OUT_DIR (new, empty, or an earlier staged folder) and upload "
                             "nothing; no token needed")
    card = parser.add_argument_group("model card")
    card.add_argument("--card", metavar="README", type=Path,
                      help="publish this README.md instead of generating one (e.g. an edited dry-run card)")
    card.add_argument("--license", help="license id for the card metadata (default: from "
                                        "sharedbert_provenance.json, else apache-2.0)")
    card.add_argument("--language", action="append", metavar="CODE",
                      help="language code(s) of the model, repeatable (default: from provenance, else en)")
    card.add_argument("--base-model", metavar="OWNER/NAME",
                      help="Hub id of the checkpoint the model was converted from (default: from "
                           "sharedbert_provenance.json or config.json's converted_from)")
    card.add_argument("--dataset", action="append", metavar="OWNER/NAME",
                      help="Hub id of a training dataset, repeatable (added to those found in MODEL_DIR)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors and the final result")


def run(args) -> int:
    from ..hub import HubError, get_token, publish, quiet_transformers, redact

    say = (lambda message: None) if args.quiet else print
    try:
        with quiet_transformers():
            result = publish(
                args.model_dir,
                args.repo_id,
                dry_run=args.dry_run,
                private=args.private,
                revision=args.revision,
                commit_message=args.commit_message,
                commit_description=args.commit_description,
                create_pr=args.create_pr,
                license=args.license,
                language=args.language,
                base_model=args.base_model,
                datasets=args.dataset,
                card=args.card,
                log=say,
            )
    except KeyboardInterrupt:
        print("interrupted; nothing was committed unless the upload had finished", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - one clear line instead of a traceback, with the token redacted
        message = str(error) if isinstance(error, HubError) else f"{type(error).__name__}: {error}"
        print(f"error: {redact(message, get_token())}", file=sys.stderr)
        return 1

    staged = result.staged
    if result.commit is None:
        say(f"Dry run: the verified folder is in {staged.path}; nothing was uploaded.")
        say(f"Upload it with: {args.invocation} {args.model_dir} --repo-id {args.repo_id} --card "
            f"{args.card or staged.path / 'README.md'}")
        return 0
    print(f"Uploaded: {result.commit.pr_url or result.commit.commit_url}")
    revision = f', revision="{args.revision}"' if args.revision and args.revision != "main" else ""
    print(f'Load it with: {staged.auto_class}.from_pretrained("{args.repo_id}"{revision}, trust_remote_code=True)')
    return 0


def main(argv=None, prog: str = "upload.py") -> int:
    """Parse `argv` as the stand-alone `upload.py` command and run it; return the exit status."""
    args = build_parser(prog).parse_args(argv)
    return args.run(args)
