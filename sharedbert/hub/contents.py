"""What staging may take from a model folder, checked before anything of it is loaded (`check_publishable`), and what
a staged folder may ask a Hub user's Python to import (`check_staged_code`).

* Only regular files that live inside the folder: a file, or a module folder (1_Pooling/, onnx/ ...), that is a link
  leading out of the folder is refused, as is anything that is not a plain file (a FIFO, a device), so nothing from
  elsewhere on the disk is published.
* No credentials: a file named like one (`.env`, `token`, `hf_token.txt`, `credentials.json`, `secrets.txt`, `id_rsa`,
  `*.pem` ...) anywhere staging reads, module folders included, is refused; so is a key in the JSON files published
  as they are (config.json, tokenizer_config.json, the sentence-transformers and module configs) that holds a secret:
  `token`, `hub_token`, `*_api_key`, `*secret*`, `*password*` with a text value, and any value in a known token
  format (`hf_...`, `sk-...`, `ghp_...`, `AKIA...`).
* No code of the folder's own: an `auto_map` in config.json or tokenizer_config.json that names anything but this
  package's classes (another module, or a `folder--module.Class` / `repo--module.Class` reference) is refused, even
  where the tokenizer class it would replace is installed; the staged folder's code files must be byte for byte the
  package's, its `auto_map`s name only them, and its modules.json only sentence-transformers' own classes.

Every refusal is a `ModelFolderError` (or `VerificationError` for a staged folder) naming each file or key and the fix.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import re
import stat
from pathlib import Path
from typing import Callable

from ..configuration_sharedbert import AUTO_MAP
from ..sentence_embeddings import SENTENCE_TRANSFORMERS_FILES, module_folders
from .errors import ModelFolderError, VerificationError
from ..model_files import EVAL_RESULTS_FILE, PROVENANCE_FILE, TRAINING_ARGS_FILE

CODE_MODULES = ("configuration_sharedbert", "modeling_sharedbert", "tokenization_sharedbert")
# Top-level files staging reads besides the Hub files (their contents reach the card).
METADATA_FILES = (EVAL_RESULTS_FILE, TRAINING_ARGS_FILE, PROVENANCE_FILE)
# JSON files published as they are (or re-saved from what they hold), whose keys are checked for secrets.
PUBLISHED_JSON = ("config.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                  "generation_config.json", *SENTENCE_TRANSFORMERS_FILES)
BACKEND_FOLDERS = ("onnx", "openvino")

# A file name that says it holds a credential: a word of the name (split at . _ -) or the whole name.
_CREDENTIAL_WORDS = {"token", "secret", "secrets", "credential", "credentials", "password", "passwd", "apikey",
                     "netrc", "pem", "key", "p12", "pfx", "id_rsa", "id_ed25519", "id_ecdsa", "htpasswd"}
_CREDENTIAL_NAME = re.compile(r"\.?env(\..*)?|\.?netrc|\.git-credentials|id_(rsa|dsa|ecdsa|ed25519)(\.pub)?|"
                              r".*(api[_-]?key|private[_-]?key|access[_-]?key).*", re.IGNORECASE)
# Keys whose text value is a credential whatever it looks like.
_CREDENTIAL_KEY = re.compile(r"token|hf_token|hub_token|access_token|auth_token|api_token|bearer_token|refresh_token|"
                             r"session_token|use_auth_token|.*(api_?key|secret|password|passwd|private_key|"
                             r"access_key|credential).*", re.IGNORECASE)
# Other keys naming a token (cls_token, pad_token, tokenizer_class ...) hold a secret only when the value looks like
# one: long, one word of letters and digits (a special token is short, in brackets: "[CLS]", "<s>").
_TOKEN_KEY = re.compile(r".*token.*", re.IGNORECASE)
_RANDOM_LOOKING = re.compile(r"(?=(?:.*\d){3})(?=(?:.*[A-Za-z]){3})[A-Za-z0-9_\-.=+]{24,}")
# Values in the formats of well-known credentials.
_SECRET_VALUE = re.compile(r"hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|"
                           r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|"
                           r"AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,}")


def check_publishable(model_dir: str | os.PathLike, is_published: Callable[[str], bool]) -> None:
    """Refuse `model_dir` when staging would read a file that is not a regular file inside it, a file named like a
    credential, a secret in a published JSON file, or an `auto_map` naming code that is not this package's.
    `is_published(relative_path)` says which files of the folder a published model holds (`folder.is_hub_file`).
    Reads only JSON and directory entries; imports and loads nothing."""
    model_dir = Path(model_dir)
    problems = []
    for relative in _files_read(model_dir, is_published):
        problems += _file_problems(model_dir, relative)
    for relative in _json_published(model_dir, is_published):
        problems += secret_keys(model_dir / relative, relative)
    problems += foreign_auto_maps(model_dir, exact=False)
    if problems:
        raise ModelFolderError(f"{model_dir} cannot be published as it is:\n" + "\n".join(f"  - {p}" for p in problems))


def _files_read(model_dir: Path, is_published) -> list[str]:
    """Every path, relative to `model_dir`, that staging may read: top-level files and module/backend folders by
    name (whatever they are), and every entry of those folders."""
    found = sorted(p.name for p in model_dir.iterdir() if is_published(p.name) or p.name in METADATA_FILES)
    try:
        named = module_folders(model_dir)
    except ValueError:
        named = []  # a broken modules.json: folder.py refuses it in its own words
    for folder in sorted({*named, *(name for name in BACKEND_FOLDERS if (model_dir / name).exists())}):
        path = model_dir / folder
        if not (path.exists() or path.is_symlink()):
            continue
        found.append(folder)
        if path.is_dir() and _inside(path, model_dir):
            found += sorted(p.relative_to(model_dir).as_posix() for p in path.rglob("*"))
    return found


def _inside(path: Path, root: Path) -> bool:
    resolved, top = path.resolve(), root.resolve()
    return resolved == top or top in resolved.parents


def _file_problems(model_dir: Path, relative: str) -> list[str]:
    path = model_dir / relative
    problems = []
    if not _inside(path, model_dir):
        problems.append(f"{relative} is a link to {path.resolve()}, outside the folder: staging publishes only files "
                        "that live in the model folder. Replace the link by a copy of what it points to, or remove it.")
    elif not path.is_dir():
        mode = path.lstat().st_mode if not path.exists() else path.stat().st_mode
        if not stat.S_ISREG(mode):
            problems.append(f"{relative} is not a regular file (a broken link, pipe or device); replace it by the "
                            "file it stands for, or remove it.")
    name = path.name
    words = set(re.split(r"[._-]+", name.lower())) - {""}
    if _CREDENTIAL_NAME.fullmatch(name) or words & _CREDENTIAL_WORDS:
        problems.append(f"{relative} is named like a credential (token, key, password or .env file); nothing of the "
                        "kind is published. Move it out of the model folder.")
    return problems


def _json_published(model_dir: Path, is_published) -> list[str]:
    names = [name for name in PUBLISHED_JSON if (model_dir / name).is_file()]
    for folder in _module_folder_names(model_dir):
        path = model_dir / folder
        if path.is_dir() and _inside(path, model_dir):
            names += sorted(p.relative_to(model_dir).as_posix() for p in path.rglob("*.json")
                            if is_published(p.relative_to(model_dir).as_posix()) and _inside(p, model_dir))
    return [name for name in names if _inside(model_dir / name, model_dir)]


def _module_folder_names(model_dir: Path) -> list[str]:
    try:
        return module_folders(model_dir)
    except ValueError:
        return []


def secret_keys(path: Path, shown: str) -> list[str]:
    """The secrets a JSON file holds, one line each naming the file, the key and the fix; empty for a file that is
    not JSON (its loader says so in its own words)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    found = []
    for key_path, key, value in _leaves(data):
        if _is_secret(key, value):
            found.append(f"{shown} holds a secret under {key_path!r}: a credential never belongs in a published "
                         f"file. Remove the key from {shown} (pass credentials at run time, e.g. in an environment "
                         "variable).")
    return found


def _leaves(data, prefix: str = ""):
    """(dotted key path, key, value) for every value of nested dicts and lists; a list item's key is its parent's."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        key_path = f"{prefix}.{key}" if prefix and isinstance(key, str) else f"{prefix}[{key}]" if prefix else str(key)
        name = key if isinstance(key, str) else prefix.rsplit(".", 1)[-1]
        if isinstance(value, (dict, list)):
            yield from _leaves(value, key_path)
        else:
            yield key_path, name, value


def _is_secret(key: str, value) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    if _SECRET_VALUE.search(value) or _CREDENTIAL_KEY.fullmatch(key):
        return True
    return bool(_TOKEN_KEY.fullmatch(key) and _RANDOM_LOOKING.fullmatch(value))


def foreign_auto_maps(folder: Path, exact: bool = True) -> list[str]:
    """Every `auto_map` entry of config.json and tokenizer_config.json that names code other than this package's
    classes, one line each naming the file, the entry and the fix. With `exact=False` (a folder to stage, whose
    config.json auto_map staging replaces by the package's), config.json may name the package's classes in another
    repository (`owner/name--modeling_sharedbert.SharedBertModel`, as transformers saves a model loaded from the Hub);
    tokenizer_config.json may never point elsewhere."""
    found = []
    for name in ("config.json", "tokenizer_config.json"):
        path = Path(folder) / name
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        lenient = not exact and name == "config.json"
        for auto, target in foreign_entries(auto_map, other_repositories=lenient):
            found.append(f"{name}: auto_map {auto} -> {target} names code that is not this package's (a "
                         "`folder--module.Class` reference imports a module from another folder or repository). "
                         f"A published SharedBert runs only its own code files: remove the auto_map from {name} "
                         "(a SharedBert config and an installed tokenizer class need none).")
    return found


def foreign_entries(auto_map, other_repositories: bool = False) -> list[tuple[str, object]]:
    """The (Auto class, target) entries of an `auto_map` that name anything but this package's classes (each target
    a "module.Class" string, or a [slow, fast] pair of them). With `other_repositories`, "owner/name--" before one of
    the package's classes is allowed. Anything that is not a dict of such entries is one foreign entry."""
    if auto_map is None:
        return []
    if not isinstance(auto_map, dict):
        return [("auto_map", auto_map)]
    ours = {target for value in AUTO_MAP.values() for target in (value if isinstance(value, list) else [value])
            if target}
    found = []
    for auto, target in auto_map.items():
        targets = target if isinstance(target, list) else [target]
        if other_repositories:
            targets = [t.rpartition("--")[2] if isinstance(t, str) else t for t in targets]
        if any(t is not None and t not in ours for t in targets):
            found.append((auto, target))
    return found


def code_file_digests() -> dict[str, str]:
    """The SHA-256 of each of the package's code files, as staging copies them."""
    package = importlib.resources.files("sharedbert")
    return {f"{module}.py": hashlib.sha256(package.joinpath(f"{module}.py").read_bytes()).hexdigest()
            for module in CODE_MODULES}


def check_staged_code(staged: str | os.PathLike) -> dict[str, str]:
    """Refuse a staged folder a Hub user's Python would run foreign code from: code files other than the package's
    own (byte for byte), an `auto_map` naming anything else, a modules.json class that is not sentence-transformers'
    own. Returns the code files' digests (the verification child checks them again before loading)."""
    staged = Path(staged)
    digests = code_file_digests()
    problems = []
    for path in sorted(staged.rglob("*.py")):
        relative = path.relative_to(staged).as_posix()
        if relative not in digests or hashlib.sha256(path.read_bytes()).hexdigest() != digests[relative]:
            problems.append(f"{relative} is not one of the package's code files as the package ships it")
    problems += foreign_auto_maps(staged)
    modules_file = staged / "modules.json"
    if modules_file.is_file():
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        problems += [f"modules.json names {m.get('type')!r}, not a sentence-transformers class" for m in modules
                     if not str(m.get("type", "")).startswith("sentence_transformers.")]
    if problems:
        raise VerificationError("The staged folder would run code that is not this package's: " + "; ".join(problems)
                                + ". Nothing was verified or published.")
    return digests
