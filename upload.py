#!/usr/bin/env python
"""Publish a trained SharedBert on the Hugging Face Hub.

    python upload.py MODEL_DIR --repo-id owner/name [--private] [--revision BRANCH] [--commit-message MSG]
    python upload.py MODEL_DIR --repo-id owner/name --dry-run OUT_DIR

The work is done by sharedbert.hub; this file only parses arguments and prints.
"""

import argparse
import contextlib
import sys
import tempfile
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
  python upload.py runs/sst2 --repo-id alice/sharedbert-sst2 --dry-run staged/
  HF_TOKEN=hf_... python upload.py runs/sst2 --repo-id alice/sharedbert-sst2 --private
  python upload.py staged/ --repo-id alice/sharedbert-sst2 --card staged/README.md --revision v2
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="upload.py", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    return parser


@contextlib.contextmanager
def quiet_transformers():
    """Hide transformers' load reports and progress bars, which would drown the steps; restore them afterwards."""
    from transformers.utils import logging as transformers_logging

    verbosity, bars = transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()


def publish(args, say) -> int:
    from sharedbert import hub

    # Cheap checks first, so that a typo or a missing token fails before the model is loaded.
    hub.check_repo_id(args.repo_id)
    if args.dry_run and args.create_pr:
        raise hub.HubError("--create-pr has no effect with --dry-run; drop one of them.")
    token = None
    if not args.dry_run:
        token = hub.get_token()
        hub.check_can_upload(token)

    stage_kwargs = dict(repo_id=args.repo_id, license=args.license, language=args.language,
                        base_model=args.base_model, datasets=args.dataset, card=args.card, log=say)
    if args.dry_run:
        staged = hub.stage_for_hub(args.model_dir, args.dry_run, **stage_kwargs)
        say(f"Dry run: the verified folder is in {staged.path}; nothing was uploaded.")
        say(f"Upload it with: python upload.py {args.model_dir} --repo-id {args.repo_id} --card "
            f"{args.card or staged.path / 'README.md'}")
        return 0

    with tempfile.TemporaryDirectory(prefix="sharedbert-upload-") as work:
        staged = hub.stage_for_hub(args.model_dir, Path(work) / "staged", **stage_kwargs)
        say(f"Uploading {len(staged.files)} files to {args.repo_id} ({args.revision or 'main'}) in one commit ...")
        info = hub.upload_staged(
            staged.path,
            args.repo_id,
            private=args.private,
            revision=args.revision,
            commit_message=args.commit_message,
            commit_description=args.commit_description,
            create_pr=args.create_pr,
            token=token,
        )
    print(f"Uploaded: {info.pr_url or info.commit_url}")
    revision = f', revision="{args.revision}"' if args.revision and args.revision != "main" else ""
    print(f'Load it with: {staged.auto_class}.from_pretrained("{args.repo_id}"{revision}, trust_remote_code=True)')
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    say = (lambda message: None) if args.quiet else print
    try:
        with quiet_transformers():
            return publish(args, say)
    except KeyboardInterrupt:
        print("interrupted; nothing was committed unless the upload had finished", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - one clear line instead of a traceback, with the token redacted
        from sharedbert.hub import HubError, get_token, redact

        message = str(error) if isinstance(error, HubError) else f"{type(error).__name__}: {error}"
        print(f"error: {redact(message, get_token())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
