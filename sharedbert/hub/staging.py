"""Staging: `stage_for_hub` writes a verified, Hub-ready copy of a model folder: `model.safetensors`, `config.json`
with the full `auto_map`, the three code files copied from this package, the tokenizer files, the sentence-transformers
files of a sentence-transformers model (modules.json, sentence_bert_config.json, config_sentence_transformers.json,
module folders such as 1_Pooling/ and 2_Normalize/), the exported ONNX and OpenVINO files found in the model folder's
onnx/ and openvino/ (`sharedbert export MODEL MODEL --layout sentence-transformers`; each checked again in its own
runtime: hub/exported_files.py) and a `README.md` model card. Nothing else is copied (no optimizer states, checkpoints, logs,
`.env` files or tokens)."""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from huggingface_hub import ModelCard

from ..atomic import OutputFolderError, atomic_directory, check_output_folder
from ..configuration_sharedbert import AUTO_MAP
from .card import build_model_card
from .contents import check_staged_code, foreign_entries, secret_keys
from .errors import HubError, StagingFolderError
from ..sentence_embeddings import copy_modules
from .exported_files import check_backend_files, copy_backend_files
from ..model_files import CARD_FILE, CODE_FILES, WEIGHTS_FILE, WEIGHTS_INDEX, holds_only_model_files, is_hub_file
from .folder import LoadedModel, hub_files, load_for_hub
from .metadata import hub_base_model, looks_like_local_path, short_local_name
from .hub_api import check_repo_id
from .verify import TOLERANCE, verify_staged


@dataclass
class StagedModel:
    """A staged folder: where it is, the files in it, the model's class and Auto class, the verification report."""

    path: Path
    files: list[str]
    architecture: str
    auto_class: str
    verification: dict | None
    # One entry per exported ONNX / OpenVINO model file staged, with what its check in its own runtime gave.
    backends: list[dict] = field(default_factory=list)


@dataclass
class StagingOptions:
    """What `stage_for_hub` publishes a folder as: the repository, the card's metadata (each None: from the model's
    `sharedbert_provenance.json`, else the card's defaults), a card of your own, and whether to verify the folder."""

    repo_id: str
    license: str | None = None
    language: list[str] | tuple[str, ...] | None = None
    base_model: str | None = None  # a Hub id links the card to it
    datasets: list[str] | None = None
    card: str | os.PathLike | None = None  # an existing README.md to publish instead of the generated card
    verify: bool = True  # load the staged folder in a fresh Python without this package (verify.py)
    overwrite: bool = False  # replace an existing `out_dir` that holds more than an earlier staged folder


def stage_for_hub(
    model_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    options: StagingOptions | None = None,
    *,
    log: Callable[[str], None] | None = None,
    loaded: LoadedModel | None = None,
    **fields,
) -> StagedModel:
    """Write a verified, Hub-ready copy of `model_dir` to `out_dir` and return its description.

    Takes a `StagingOptions`, or its fields as keywords (`stage_for_hub(model_dir, out_dir, repo_id="o/n")`), or both
    (keywords replace fields). `out_dir` must not exist, be empty, or hold an earlier staged folder (which is
    replaced); with `out_dir=None` a new temporary folder is used (the caller deletes it). The folder is assembled and
    verified beside `out_dir` and only then renamed into place (sharedbert.atomic), so `out_dir` never holds a
    half-written or unverified folder. `log` receives progress lines (e.g. `print`); `loaded` skips loading when the
    caller already has the result of `load_for_hub(model_dir)`."""
    options = replace(options, **fields) if options is not None else StagingOptions(**fields)
    log = log or (lambda message: None)
    check_repo_id(options.repo_id)
    if out_dir is not None:
        out_dir = check_staging_folder(out_dir, model_dir, options.overwrite)
    if loaded is None:
        loaded = load_for_hub(model_dir)
        log(
            f"Loaded {loaded.architecture} from {model_dir} (attention_type={loaded.config.attention_type}, "
            f"layer_sharing={loaded.config.layer_sharing}, {loaded.config.num_hidden_layers} layers) with "
            f"{type(loaded.tokenizer).__name__} ({len(loaded.tokenizer)} tokens)."
        )
    source = options.base_model or loaded.provenance.get("base_model")
    if source and not hub_base_model(source):
        log(f"Note: the base model {source} is not a Hub id, so the card names it without linking it; pass "
            "base_model='owner/name' (upload.py / sharedbert upload --base-model) to link it.")
    if options.card is not None and not Path(options.card).is_file():
        raise HubError(f"Model card {options.card} not found.")

    final = out_dir if out_dir is not None else Path(tempfile.mkdtemp(prefix="sharedbert-hub-"))
    # Assembled and verified in a temporary sibling of `final`, which replaces `final` only once verified.
    with atomic_directory(final) as staged:
        files, backends = _assemble(loaded, staged, options)
        total = sum((staged / name).stat().st_size for name in files)
        log(f"Staged {len(files)} files, all that would be pushed ({_size(total)} in all):")
        for name in files:
            log(f"  {name} ({_size((staged / name).stat().st_size)})")
        for check in backends:
            cosine = ("" if check["mean_cosine"] is None else f"sentence-embedding cosine {check['mean_cosine']:.4f} "
                      f"mean, {check['min_cosine']:.4f} worst; ")
            log(f"Checked {check['file']} in {check['runtime']} ({check['precision']}): {cosine}max |difference| "
                f"{check['max_abs_difference']:.1e} from the source model.")
        report = None
        if options.verify:
            log("Verifying in a fresh Python process without the sharedbert package (trust_remote_code=True) ...")
            report = verify_staged(staged, loaded)
            log(
                f"Verified: {', '.join(report['loaded'])} load from the staged files; outputs match the source model "
                f"(max |difference| {report['max_abs_diff']:.1e} <= {TOLERANCE:.0e})."
            )
            if report.get("sentence_transformers"):
                log(f"Sentence-transformers: {report['sentence_transformers']}")
            if backends:
                report["backends"] = backends
    return StagedModel(final, files, loaded.architecture, loaded.auto_class, report, backends)


def check_staging_folder(out_dir, model_dir, overwrite: bool = False) -> Path:
    """The package's one output rule (`atomic.check_output_folder`) for a staged folder: not the model folder, nor
    inside or around it; new, empty, or an earlier staged folder (`is_staged_folder`, replaced as it is), or anything
    else only with `overwrite`. Cleans up a killed run's temporary copies. Raises HubError naming the fix."""
    try:
        return check_output_folder(out_dir, overwrite, inputs=[model_dir], earlier_output=is_staged_folder,
                                   label="The staging folder", flag="--overwrite")
    except OutputFolderError as error:
        raise StagingFolderError(f"{error} (An earlier staged folder, holding only the Hub files, is replaced "
                                 "without it.)") from None


def is_staged_folder(folder: Path) -> bool:
    """Whether `folder` holds nothing but what staging writes: Hub files and module folders of Hub files, no links."""
    return holds_only_model_files(folder)


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 1e5 else f"{count / 1e3:.1f} kB"


# Loading arguments that must not be saved into a published tokenizer_config.json.
LOADER_ARGUMENTS = ("is_local", "local_files_only", "cache_dir", "token", "use_auth_token", "_commit_hash",
                    "trust_remote_code", "force_download", "proxies", "subfolder")


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _assemble(loaded, staged: Path, options: StagingOptions):
    """Write the Hub files into the empty folder `staged`; return their names and the checks of the exported ONNX /
    OpenVINO files (run before the card is written, which lists them)."""
    model = loaded.model
    # Every Auto class in the auto_map, whatever the source config held, so any head loads from the repository.
    model.config.auto_map = dict(AUTO_MAP)
    with tempfile.TemporaryDirectory(prefix="sharedbert-save-") as scratch:
        model.save_pretrained(scratch)
        loaded.tokenizer.save_pretrained(scratch)
        for path in sorted(Path(scratch).iterdir()):
            if path.name in CODE_FILES or not is_hub_file(path.name):
                continue  # the code files are copied from the package below; anything unexpected stays behind
            shutil.move(path, staged / path.name)
    package = importlib.resources.files("sharedbert")
    for name in CODE_FILES:
        (staged / name).write_bytes(package.joinpath(name).read_bytes())
    if loaded.sentence_transformers_files:
        # The sentence-transformers modules (pooling, Normalize, max_seq_length, prompts) as the source has them.
        copy_modules(loaded.model_dir, staged)
    backends = check_backend_files(staged, loaded, copy_backend_files(loaded.model_dir, staged))
    config_json = json.loads((staged / "config.json").read_text(encoding="utf-8"))
    source = config_json.get("converted_from")
    if isinstance(source, str) and looks_like_local_path(source):
        # A path on the author's disk means nothing on the Hub (and tells the world where their files are).
        config_json["converted_from"] = (hub_base_model(options.base_model) or hub_base_model(source)
                                         or short_local_name(source))
    config_json["auto_map"] = dict(AUTO_MAP)
    _write_json(staged / "config.json", config_json)
    tokenizer_config_path = staged / "tokenizer_config.json"
    if tokenizer_config_path.is_file():
        # transformers 5 saves some of the arguments the tokenizer was *loaded* with (is_local, local_files_only,
        # and a token if one was passed): they describe the author's machine, not the tokenizer.
        # Nor is an auto_map the user did not ask for re-saved: only the package's own tokenizer entry stays (the
        # config's auto_map, the package's, names the tokenizer too).
        tokenizer_config = json.loads(tokenizer_config_path.read_text(encoding="utf-8"))
        foreign_map = bool(foreign_entries(tokenizer_config.get("auto_map")))
        if foreign_map or any(key in tokenizer_config for key in LOADER_ARGUMENTS):
            for key in LOADER_ARGUMENTS + (("auto_map",) if foreign_map else ()):
                tokenizer_config.pop(key, None)
            _write_json(tokenizer_config_path, tokenizer_config)
    if options.card is not None:
        text = Path(options.card).read_text(encoding="utf-8")
        try:
            ModelCard(text)  # parses the YAML metadata block
        except ValueError as error:
            raise HubError(f"The model card {options.card} has malformed metadata: {error}") from None
    else:
        text = str(build_model_card(loaded, options.repo_id, license=options.license, language=options.language,
                                    base_model=options.base_model, datasets=options.datasets, backends=backends))
    (staged / CARD_FILE).write_text(text, encoding="utf-8")
    files = hub_files(staged)
    if WEIGHTS_FILE not in files and WEIGHTS_INDEX not in files:
        raise HubError(f"save_pretrained wrote no {WEIGHTS_FILE} (files: {files}).")
    # The last gate before anything is verified or pushed: the package's code only, and no secret in any JSON file.
    check_staged_code(staged)
    secrets = [line for name in files if name.endswith(".json") for line in secret_keys(staged / name, name)]
    if secrets:
        raise HubError("The staged folder would publish secrets:\n" + "\n".join(f"  - {line}" for line in secrets))
    return files, backends
