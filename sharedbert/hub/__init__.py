"""Publishing a SharedBert on the Hugging Face Hub.

The steps `upload.py` / `sharedbert upload` run (`publish` runs them all), usable one by one from Python:

1. `load_for_hub(model_dir)` (folder.py) loads the model and tokenizer from a `save_pretrained` folder (or a training
   output folder with the final model at its root) and refuses, with a message naming the problem and the fix, a
   folder that is not a SharedBert, has no tokenizer, or holds weights that do not match its config.
2. `stage_for_hub(model_dir, out_dir, repo_id=...)` (staging.py; its options a `StagingOptions`) writes a Hub-ready
   folder: `model.safetensors`, `config.json` with the full `auto_map`, the three code files copied from this package,
   the tokenizer files and a `README.md` model card (card.py, from `template.md` shipped in this package, fed by the
   optional `eval_results.json`, `training_args.json` and `sharedbert_provenance.json` beside the model:
   metadata.py).
3. `verify_staged(staged_dir, loaded)` (verify.py) loads the staged folder in a fresh Python process in which the
   `sharedbert` package cannot be imported, through the Auto classes with `trust_remote_code=True`, exactly as a Hub
   user would, and checks the outputs equal the source model's on a fixed input. `stage_for_hub` runs it before the
   folder is put in place.
4. `upload_staged(staged_dir, repo_id, ...)` (upload.py) uploads the staged folder in one commit.

Every error the user should see is a `HubError` (errors.py) whose message names the problem and the fix.
"""

from .card import build_model_card, read_template
from .errors import HubError, ModelFolderError, UploadError, VerificationError
from ..model_files import CODE_FILES, TOKENIZER_FILES, is_hub_file
from .folder import LoadedModel, hub_files, load_for_hub
from .metadata import hub_base_model, read_eval_results, read_provenance, read_training_args, short_local_name
from .publishing import PublishResult, publish, quiet_transformers
from .staging import StagedModel, StagingOptions, stage_for_hub
from .hub_api import check_can_upload, check_repo_id, file_contains, get_token, hub_endpoint, redact, upload_staged
from .verify import TOLERANCE, compare_with_source, run_isolated, verify_inputs, verify_staged

__all__ = [
    "CODE_FILES",
    "TOKENIZER_FILES",
    "TOLERANCE",
    "HubError",
    "LoadedModel",
    "ModelFolderError",
    "PublishResult",
    "StagedModel",
    "StagingOptions",
    "UploadError",
    "VerificationError",
    "build_model_card",
    "check_can_upload",
    "check_repo_id",
    "compare_with_source",
    "file_contains",
    "get_token",
    "hub_base_model",
    "hub_endpoint",
    "hub_files",
    "is_hub_file",
    "load_for_hub",
    "publish",
    "quiet_transformers",
    "read_eval_results",
    "read_provenance",
    "read_template",
    "read_training_args",
    "redact",
    "run_isolated",
    "short_local_name",
    "stage_for_hub",
    "upload_staged",
    "verify_inputs",
    "verify_staged",
]
