"""`sharedbert upload MODEL_DIR --repo-id OWNER/NAME` (also `python upload.py ...` at the top of the repository):
publish a trained SharedBert on the Hugging Face Hub. Argument parsing and printing only: the steps are
`sharedbert.hub.publish`, whose options are `sharedbert.hub.publishing.UploadArguments`; its log (each step) is shown
on stdout unless --quiet."""

import argparse
import sys
from pathlib import Path

from .common import JobArgumentParser, add_command, arguments_from, show_library_log

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
    from ..hub.publishing import UploadArguments

    parser = add_command(
        subparsers, "upload", [UploadArguments],
        help="publish a trained SharedBert on the Hugging Face Hub (stage, verify without the package, upload)",
        description=DESCRIPTION,
        epilog=EPILOG.format(command="sharedbert upload"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(run=run, invocation="sharedbert upload")


def build_parser(prog: str = "upload.py") -> argparse.ArgumentParser:
    """The same command as a parser of its own, for the repository's `upload.py`."""
    from ..hub.publishing import UploadArguments

    parser = JobArgumentParser(
        [UploadArguments], prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG.format(command=f"python {prog}"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(run=run, invocation=f"python {prog}")
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """What the command has beside `UploadArguments`' flags."""
    parser.add_argument("-q", "--quiet", action="store_true", help="Print only errors and the final result.")


def run(args) -> int:
    from ..hub import HubError, get_token, quiet_transformers, redact
    from ..hub.publishing import UploadArguments, publish

    try:
        with quiet_transformers(), show_library_log(not args.quiet, stream=sys.stdout):
            result = publish(arguments_from(args, UploadArguments))
    except KeyboardInterrupt:
        print("interrupted; nothing was committed unless the upload had finished", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - one clear line instead of a traceback, with the token redacted
        message = str(error) if isinstance(error, HubError) else f"{type(error).__name__}: {error}"
        print(f"error: {redact(message, get_token())}", file=sys.stderr)
        return 1

    staged = result.staged
    if result.commit is None:
        if not args.quiet:
            print(f"Dry run: the verified folder is in {staged.path}; nothing was uploaded.")
            print(f"Upload it with: {args.invocation} {args.model_dir} --repo-id {args.repo_id} --card "
                  f"{args.card or Path(staged.path) / 'README.md'}")
        return 0
    print(f"Uploaded: {result.commit.pr_url or result.commit.commit_url}")
    revision = f', revision="{args.revision}"' if args.revision and args.revision != "main" else ""
    print(f'Load it with: {staged.auto_class}.from_pretrained("{args.repo_id}"{revision}, trust_remote_code=True)')
    return 0


def main(argv=None, prog: str = "upload.py") -> int:
    """Parse `argv` as the stand-alone `upload.py` command and run it; return the exit status."""
    args = build_parser(prog).parse_args(argv)
    return args.run(args)
