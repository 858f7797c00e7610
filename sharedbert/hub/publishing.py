"""Publishing in one call: the steps `upload.py` / `sharedbert upload` run, in order, cheapest checks first."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from transformers.utils import logging as transformers_logging

from .errors import HubError
from .staging import StagedModel, stage_for_hub
from .hub_api import check_can_upload, check_repo_id, get_token, upload_staged

logger = logging.getLogger(__name__)


@dataclass
class UploadArguments:
    """Every option of `publish` / `upload.py` / `sharedbert upload`, with its default and help."""

    model_dir: str = field(metadata={
        "positional": True, "metavar": "MODEL_DIR", "help": "Folder with the trained SharedBert (save_pretrained "
        "output or a training output folder with the final model at its root) and its tokenizer."})
    repo_id: str = field(metadata={"metavar": "OWNER/NAME", "help": "Hub repository to publish to, e.g. "
                                   "alice/sharedbert-sst2 (created if missing)."})
    private: bool = field(default=False, metadata={
        "help": "Create the repository as private (an existing repository keeps its visibility)."})
    revision: str | None = field(default=None, metadata={
        "metavar": "BRANCH", "help": "Branch to commit to (created from main if missing; default: main)."})
    commit_message: str | None = field(default=None, metadata={"metavar": "MSG",
                                                                "help": "Commit message (default: a generic one)."})
    commit_description: str | None = field(default=None, metadata={"metavar": "TEXT",
                                                                    "help": "Longer commit description."})
    create_pr: bool = field(default=False, metadata={
        "help": "Open a pull request with the files instead of committing to the branch."})
    dry_run: str | None = field(default=None, metadata={
        "metavar": "OUT_DIR", "help": "Stage and verify into OUT_DIR (new, empty, or an earlier staged folder) and "
        "upload nothing; no token needed."})
    overwrite: bool = field(default=False, metadata={
        "help": "With --dry-run: replace OUT_DIR even when it holds files staging did not write (they are deleted)."})
    card: str | None = field(default=None, metadata={
        "metavar": "README", "group": "model card",
        "help": "Publish this README.md instead of generating one (e.g. an edited dry-run card)."})
    license: str | None = field(default=None, metadata={
        "group": "model card",
        "help": "License id for the card metadata (default: from sharedbert_provenance.json, else apache-2.0)."})
    language: list[str] | None = field(default=None, metadata={
        "metavar": "CODE", "action": "extend", "group": "model card",
        "help": "Language code(s) of the model, repeatable (default: from provenance, else en)."})
    base_model: str | None = field(default=None, metadata={
        "metavar": "OWNER/NAME", "group": "model card", "help": "Hub id of the checkpoint the model was converted "
        "from (default: from sharedbert_provenance.json or config.json's converted_from)."})
    datasets: list[str] | None = field(default=None, metadata={
        "aliases": ["--dataset"], "metavar": "OWNER/NAME", "action": "extend", "group": "model card",
        "help": "Hub id of a training dataset, repeatable (added to those found in MODEL_DIR)."})


@dataclass
class PublishResult:
    """What `publish` did: the staged folder (for an upload, a temporary one, deleted by the time this is returned)
    and the Hub's `CommitInfo`, or None for a dry run."""

    staged: StagedModel
    commit: Any | None


def publish(arguments: UploadArguments | None = None, /, **fields) -> PublishResult:
    """Load and check `model_dir`, stage and verify it, and upload it to `repo_id` in one commit; logs each step.

    Takes an `UploadArguments`, or its fields as keywords, or both (keywords replace fields). With
    `dry_run=OUT_DIR` it stops after verification and leaves the verified folder in OUT_DIR; no token is needed. A
    bad repo id, a missing token or offline mode fail before the model is loaded. The card options are those of
    `stage_for_hub`, the repository and commit options those of `upload_staged`."""
    args = replace(arguments, **fields) if arguments is not None else UploadArguments(**fields)
    check_repo_id(args.repo_id)
    if args.dry_run is not None and args.create_pr:
        raise HubError("--create-pr has no effect with --dry-run; drop one of them.")
    if args.dry_run is None and args.overwrite:
        raise HubError("--overwrite only applies to --dry-run OUT_DIR (an upload stages into a new temporary folder); "
                       "drop it.")
    token = None
    if args.dry_run is None:
        token = get_token()
        check_can_upload(token)

    stage_kwargs = dict(repo_id=args.repo_id, license=args.license, language=args.language,
                        base_model=args.base_model, datasets=args.datasets, card=args.card, log=logger.info)
    if args.dry_run is not None:
        return PublishResult(stage_for_hub(args.model_dir, args.dry_run, overwrite=args.overwrite, **stage_kwargs),
                             None)
    with tempfile.TemporaryDirectory(prefix="sharedbert-upload-") as work:
        staged = stage_for_hub(args.model_dir, Path(work) / "staged", **stage_kwargs)
        logger.info("Uploading %d files to %s (%s) in one commit ...", len(staged.files), args.repo_id,
                    args.revision or "main")
        commit = upload_staged(
            staged.path,
            args.repo_id,
            private=args.private,
            revision=args.revision,
            commit_message=args.commit_message,
            commit_description=args.commit_description,
            create_pr=args.create_pr,
            token=token,
        )
    return PublishResult(staged, commit)


@contextlib.contextmanager
def quiet_transformers():
    """Hide transformers' load reports and progress bars, which would drown the steps; restore them afterwards."""
    verbosity, bars = transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()
