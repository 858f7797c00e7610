"""Talking to the Hub: repository ids, the token and endpoint, and `upload_staged`, which uploads a staged folder in
one commit. Error messages never contain the token (`redact`)."""

from __future__ import annotations

import os
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub import get_token as hf_get_token
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import HFValidationError, validate_repo_id

from .errors import HubError, UploadError
from ..model_files import is_hub_file
from .folder import hub_files


def check_repo_id(repo_id: str) -> str:
    """Return `repo_id` if it is a valid `owner/name` Hub model id; raise `HubError` saying what is wrong otherwise."""
    if not isinstance(repo_id, str) or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HubError(
            f"Invalid repo id {repo_id!r}: use the form owner/name, e.g. --repo-id your-username/sharedbert-sst2 "
            "(owner is your user name or an organisation you can write to)."
        )
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise HubError(f"Invalid repo id {repo_id!r}: {error}") from None
    return repo_id


def hub_endpoint() -> str:
    """The Hub URL, read when called (HF_ENDPOINT, else huggingface_hub's default)."""
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def get_token() -> str | None:
    """The token huggingface_hub would use: HF_TOKEN, else the one saved by `hf auth login`."""
    return hf_get_token()


def redact(text: str, token: str | None) -> str:
    """`text` with every occurrence of `token` replaced, so that error messages can be printed safely."""
    return text.replace(token, "hf_***") if token else text


def check_can_upload(token: str | None) -> None:
    """Raise UploadError when an upload cannot start: offline mode, or no token."""
    if constants.is_offline_mode():
        raise UploadError(
            "HF_HUB_OFFLINE is set, so nothing can be uploaded: unset HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE), or "
            "use --dry-run to only stage and verify the folder."
        )
    if not token:
        raise UploadError(
            "No Hugging Face token found: set the HF_TOKEN environment variable to a token with write access "
            "(https://huggingface.co/settings/tokens) or log in once with `hf auth login`."
        )


def upload_staged(
    staged_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    create_pr: bool = False,
    token: str | None = None,
):
    """Create `repo_id` if needed and upload every file of `staged_dir` in one commit; return the `CommitInfo`.

    The files go in a single `create_commit` call (not `upload_folder`, which splits large folders into several
    commits when hf_xet is installed): the Hub applies a commit whole or not at all, so a failure leaves the
    repository as it was. Raises UploadError with a message that never contains the token."""
    check_repo_id(repo_id)
    staged_dir = Path(staged_dir)
    token = token or get_token()
    check_can_upload(token)
    endpoint = hub_endpoint()
    revision = revision or None
    where = f"{repo_id}" + (f" (branch {revision})" if revision else "")
    names = hub_files(staged_dir)  # module folders (1_Pooling/config.json) included
    files = [staged_dir / name for name in names]
    unexpected = [name for name in names if not is_hub_file(name)]
    if unexpected or not files:
        raise UploadError(f"{staged_dir} is not a staged SharedBert folder (unexpected files: {unexpected}).")
    for path in files:
        if file_contains(path, token.encode()):
            raise UploadError(f"{path.relative_to(staged_dir).as_posix()} contains your Hugging Face token; "
                              "refusing to upload it.")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if revision and revision != "main":
            api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
        operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(staged_dir / name)) for name in names]
        return api.create_commit(
            repo_id,
            operations=operations,
            commit_message=commit_message or "Upload SharedBert model with upload.py",
            commit_description=commit_description,
            revision=revision,
            create_pr=create_pr,
            repo_type="model",
        )
    except Exception as error:  # noqa: BLE001 - every failure becomes a message without the token
        raise UploadError(redact(describe_upload_error(error, endpoint, repo_id, where), token)) from None


def file_contains(path: Path, needle: bytes, chunk_size: int = 1 << 24) -> bool:
    """Whether `needle` occurs in the file, read in chunks (weights files can be large)."""
    overlap = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            window = overlap + chunk
            if needle in window:
                return True
            overlap = window[max(0, len(window) - len(needle) + 1):]  # a needle split across chunks
    return False


def describe_upload_error(error: Exception, endpoint: str, repo_id: str, where: str) -> str:
    """What went wrong talking to `endpoint` about `repo_id` (`where`: the repo and branch) and what to do next."""
    state = (
        f"A commit is applied whole or not at all, so {where} is either unchanged or holds the complete upload: "
        f"check {endpoint}/{repo_id} and re-run the same command to retry."
    )
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, HfHubHTTPError) and status is not None:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        hints = {
            401: "The token was rejected: check HF_TOKEN or log in again with `hf auth login`.",
            403: "The token may not write to this namespace: use a token with write access to the owner of the repo.",
            404: "The repository or branch was not found: check --repo-id and --revision.",
        }
        hint = hints.get(status)
        return f"Upload to {where} failed: the Hub answered {status} ({detail}). {hint + ' ' if hint else ''}{state}"
    module = type(error).__module__ or ""
    if isinstance(error, (OSError, ConnectionError)) or module.split(".")[0] in ("httpx", "httpx2", "httpcore",
                                                                                  "requests", "urllib3"):
        return (
            f"Upload to {where} failed: network error talking to {endpoint} ({type(error).__name__}: {error}). "
            f"{state}"
        )
    return f"Upload to {where} failed: {type(error).__name__}: {error}. {state}"
