"""Publishing in one call: the steps `upload.py` / `sharedbert upload` run, in order, cheapest checks first."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import HubError
from .staging import StagedModel, stage_for_hub
from .upload import check_can_upload, check_repo_id, get_token, upload_staged


@dataclass
class PublishResult:
    """What `publish` did: the staged folder (for an upload, a temporary one, deleted by the time this is returned)
    and the Hub's `CommitInfo`, or None for a dry run."""

    staged: StagedModel
    commit: Any | None


def publish(
    model_dir: str | os.PathLike,
    repo_id: str,
    *,
    dry_run: str | os.PathLike | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    create_pr: bool = False,
    license: str | None = None,
    language: list[str] | tuple[str, ...] | None = None,
    base_model: str | None = None,
    datasets: list[str] | None = None,
    card: str | os.PathLike | None = None,
    log: Callable[[str], None] | None = None,
) -> PublishResult:
    """Load and check `model_dir`, stage and verify it, and upload it to `repo_id` in one commit.

    With `dry_run=OUT_DIR` it stops after verification and leaves the verified folder in OUT_DIR; no token is needed.
    A bad repo id, a missing token or offline mode fail before the model is loaded. The other arguments are those of
    `stage_for_hub` (card) and `upload_staged` (repository and commit); `log` receives progress lines."""
    log = log or (lambda message: None)
    check_repo_id(repo_id)
    if dry_run is not None and create_pr:
        raise HubError("--create-pr has no effect with --dry-run; drop one of them.")
    token = None
    if dry_run is None:
        token = get_token()
        check_can_upload(token)

    stage_kwargs = dict(repo_id=repo_id, license=license, language=language, base_model=base_model,
                        datasets=datasets, card=card, log=log)
    if dry_run is not None:
        return PublishResult(stage_for_hub(model_dir, dry_run, **stage_kwargs), None)
    with tempfile.TemporaryDirectory(prefix="sharedbert-upload-") as work:
        staged = stage_for_hub(model_dir, Path(work) / "staged", **stage_kwargs)
        log(f"Uploading {len(staged.files)} files to {repo_id} ({revision or 'main'}) in one commit ...")
        commit = upload_staged(
            staged.path,
            repo_id,
            private=private,
            revision=revision,
            commit_message=commit_message,
            commit_description=commit_description,
            create_pr=create_pr,
            token=token,
        )
    return PublishResult(staged, commit)


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
