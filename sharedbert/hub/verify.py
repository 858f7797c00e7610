"""Verification in a fresh Python without the sharedbert package: `verify_staged` loads a staged folder as a Hub user
would (Auto classes, `trust_remote_code=True`) in a child process started by `run_isolated`, which runs
`verify_child.py` (shipped beside this module), and checks the outputs equal the source model's on a fixed input.
A sentence-transformers model is also loaded there with `SentenceTransformer(folder, trust_remote_code=True)`: its
modules and embeddings must equal the source folder's."""

from __future__ import annotations

import importlib.resources
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .contents import check_staged_code
from .errors import VerificationError
from .folder import LoadedModel

# The script the child runs; it imports only torch, transformers and safetensors.
CHILD_SCRIPT = "verify_child.py"
# The largest absolute difference allowed between the staged folder's outputs and the source model's.
TOLERANCE = 1e-5
# The fixed input every verification runs: two sentence pairs of different lengths (so padding and the attention
# mask are exercised) with a mask token where the tokenizer has one.
VERIFY_TEXTS = ("The cat sat on the mat.", "A shared projection gives queries, keys and values.")
VERIFY_PAIRS = ("It was a good day.", "Is it [MASK] enough?")

# Runs first in the child: makes `import sharedbert` fail (the editable install puts a finder on sys.meta_path, so
# changing the working directory or sys.path is not enough), checks it does, then runs the script given as argv[1].
_ISOLATION_PRELUDE = r"""
import runpy, sys

class _NoSharedBert:
    def find_spec(self, name, path=None, target=None):
        if name == "sharedbert" or name.startswith("sharedbert."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden to test the Hub files alone)", name=name)
        return None

sys.meta_path.insert(0, _NoSharedBert())
try:
    import sharedbert
except ImportError:
    pass
else:
    sys.exit("isolation failed: the sharedbert package is importable")
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# Environment variables a child may inherit (everything else, including HF_TOKEN and PYTHONPATH, is dropped).
_PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NO_PROXY", "no_proxy")


def run_isolated(
    script: str | os.PathLike,
    args: list[str] = (),
    *,
    cwd: str | os.PathLike,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
) -> subprocess.CompletedProcess:
    """Run `python script args...` in a fresh interpreter that cannot import `sharedbert`: isolated mode (`-I`: no
    PYTHONPATH, user site or script folder on sys.path), working directory `cwd`, a minimal environment (no token;
    HF_HUB_OFFLINE=1; HF_HOME under `cwd` unless `env` sets it, so no saved login or cached module is visible),
    plus a meta-path blocker for the package. Returns the completed process (stdout and stderr captured)."""
    child_env = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
    child_env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONDONTWRITEBYTECODE="1",
        HF_HOME=str(Path(cwd) / "hf_home"),
    )
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-I", "-c", _ISOLATION_PRELUDE, str(script), *map(str, args)],
        cwd=cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def verify_inputs(tokenizer, config) -> tuple[dict, dict, dict]:
    """The fixed verification input: (tokenizer call arguments, the token ids as lists, the model's input tensors)."""
    mask = getattr(tokenizer, "mask_token", None) or "[MASK]"
    call = {
        "text": list(VERIFY_TEXTS),
        "text_pair": [pair.replace("[MASK]", mask) for pair in VERIFY_PAIRS],
        "max_length": min(config.max_position_embeddings, 64),
    }
    encoded = tokenizer(**call, padding=True, truncation=True, return_tensors="pt")
    tensors = {key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded}
    ids = {key: value.tolist() for key, value in tensors.items()}
    if "token_type_ids" in tensors and int(tensors["token_type_ids"].max()) >= config.type_vocab_size:
        tensors["token_type_ids"] = torch.zeros_like(tensors["token_type_ids"])  # a model with one segment type
    return call, ids, tensors


def model_inputs(tensors: dict, architecture: str, config) -> tuple[dict, dict]:
    """(the encoder's inputs, the head's inputs) for the fixed text: a decoder with cross-attention also gets fixed
    encoder states, the sequence-to-sequence model decoder ids, multiple choice the two pairs as two choices."""
    encoder = dict(tensors)
    if getattr(config, "add_cross_attention", False):
        generator = torch.Generator().manual_seed(0)
        batch = tensors["input_ids"].shape[0]
        encoder["encoder_hidden_states"] = torch.randn(batch, 5, config.hidden_size, generator=generator)
        encoder["encoder_attention_mask"] = torch.ones(batch, 5, dtype=torch.long)
    head = dict(encoder)
    if architecture == "SharedBertForMultipleChoice":  # (batch, choices, sequence)
        head = {key: value.unsqueeze(0) for key, value in tensors.items()}
    elif architecture == "SharedBertForConditionalGeneration":  # the source text is also the decoder's prefix
        head["decoder_input_ids"] = tensors["input_ids"].clone()
        head["decoder_attention_mask"] = tensors["attention_mask"].clone()
    return encoder, head


def verify_staged(staged_dir: str | os.PathLike, loaded: LoadedModel, *, timeout: float = 1800) -> dict:
    """Load `staged_dir` as a Hub user would, in a process without the sharedbert package, and compare with `loaded`.

    Checks: the config, tokenizer, the model's own Auto class and AutoModel load with `trust_remote_code=True` from
    the staged code (module `transformers_modules.*`); the tokenizer encodes the fixed input to the same ids; and the
    outputs (head outputs, and the encoder's last hidden state through AutoModel) are within `TOLERANCE` of the
    source model's. Returns `{"loaded": [...], "max_abs_diff": float, "classes": {...}}`; raises VerificationError."""
    staged_dir = Path(staged_dir).resolve()
    # The child trusts remote code, so first make sure the only code there is the package's own (contents.py); the
    # child checks the digests again and refuses to import any other module (verify_child.py).
    code_files = check_staged_code(staged_dir)
    call, ids, tensors = verify_inputs(loaded.tokenizer, loaded.config)
    auto_classes = [loaded.auto_class] + (["AutoModel"] if loaded.auto_class != "AutoModel" else [])
    encoder_inputs, head_inputs = model_inputs(tensors, loaded.architecture, loaded.config)
    with torch.no_grad():
        head_output = loaded.model(**head_inputs)
        base_output = loaded.model.base_model(**encoder_inputs)
    reference = {f"{loaded.auto_class}.{key}": value for key, value in head_output.items() if torch.is_tensor(value)}
    reference["AutoModel.last_hidden_state"] = base_output.last_hidden_state
    sentence = _sentence_reference(loaded)
    if sentence is not None:
        reference["SentenceTransformer.sentence_embedding"] = sentence["embeddings"]

    with tempfile.TemporaryDirectory(prefix="sharedbert-verify-") as work:
        work = Path(work)
        for name, feed in (("inputs", encoder_inputs), ("head_inputs", head_inputs)):
            save_file({key: value.contiguous() for key, value in feed.items()}, str(work / f"{name}.safetensors"))
        spec = {
            "folder": str(staged_dir),
            "code_files": code_files,
            "auto_classes": auto_classes,
            "sentence_transformers": sentence is not None,
            "sentences": list(VERIFY_TEXTS + VERIFY_PAIRS),
            "tokenizer_call": call,
            "inputs": str(work / "inputs.safetensors"),
            "head_inputs": str(work / "head_inputs.safetensors"),
            "outputs": str(work / "outputs.safetensors"),
            "result": str(work / "result.json"),
        }
        (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        try:
            with importlib.resources.as_file(importlib.resources.files(__package__) / CHILD_SCRIPT) as script:
                process = run_isolated(script, [work / "spec.json"], cwd=work, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise VerificationError(f"Verifying the staged folder took longer than {timeout:.0f} s.") from None
        if process.returncode != 0 or not (work / "result.json").is_file():
            tail = "\n".join((process.stderr or process.stdout or "").strip().splitlines()[-15:])
            raise VerificationError(
                "The staged folder does not load through the Auto classes with trust_remote_code=True in a Python "
                f"without the sharedbert package (exit code {process.returncode}):\n{tail}"
            )
        result = json.loads((work / "result.json").read_text(encoding="utf-8"))
        outputs = load_file(str(work / "outputs.safetensors"))

    if sentence is not None and result.get("sentence_modules") != sentence["modules"]:
        raise VerificationError(
            f"SentenceTransformer loads the staged folder as {result.get('sentence_modules')}, the source folder as "
            f"{sentence['modules']}: the sentence-transformers files were not staged whole."
        )
    max_diff = compare_with_source(result, outputs, reference, ids)
    report = {"loaded": ["AutoConfig", "AutoTokenizer", *auto_classes], "max_abs_diff": max_diff,
              "classes": result["classes"]}
    if loaded.sentence_transformers_files:
        report["loaded"].append("SentenceTransformer" if sentence is not None else "SentenceTransformer (skipped)")
        report["sentence_transformers"] = (
            f"SentenceTransformer(folder, trust_remote_code=True) loads {' → '.join(sentence['modules'])} "
            f"(max_seq_length {result['sentence_max_seq_length']}); embeddings match the source folder's, norms "
            f"{min(result['sentence_norms']):.4f}-{max(result['sentence_norms']):.4f}"
            if sentence is not None else
            "not checked: sentence-transformers is not installed here (pip install sentence-transformers)"
        )
    return report


def _sentence_reference(loaded: LoadedModel) -> dict | None:
    """The source folder's sentence embeddings of the fixed sentences through sentence-transformers, and its module
    classes; None when the folder is not a sentence-transformers model or the library is missing."""
    if not loaded.sentence_transformers_files:
        return None
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    # load_for_hub refused a folder with code of its own: the registered classes load it.
    model = SentenceTransformer(str(loaded.model_dir), trust_remote_code=False, device="cpu")
    embeddings = model.encode(list(VERIFY_TEXTS + VERIFY_PAIRS), convert_to_tensor=True, show_progress_bar=False)
    return {"embeddings": embeddings.float().cpu(), "modules": [type(m).__name__ for m in model]}


def compare_with_source(result: dict, outputs: dict, reference: dict, ids: dict) -> float:
    """Check what the child saw against the source model: every class came from the staged code
    (`transformers_modules.*`; the tokenizer may be transformers' own), the tokenizer gave the same ids, every
    reference output is within TOLERANCE.
    Returns the largest absolute difference; raises VerificationError listing every problem."""
    problems = []
    for name, module in result["modules"].items():
        # The config and models must come from the staged code; a tokenizer may also be one of transformers' own
        # (e.g. the BertTokenizer of a converted BERT), which loads without remote code.
        if not (module.startswith("transformers_modules.") or (name == "AutoTokenizer" and module.startswith(
                "transformers."))):
            problems.append(f"{name} came from {module}, not from the staged code files")
    for key in ids:
        if result["encoded"].get(key) != ids[key]:
            problems.append(f"the staged tokenizer gives other {key} than the source tokenizer")
    max_diff = 0.0
    for key, expected in reference.items():
        got = outputs.get(key)
        if got is None or got.shape != expected.shape:
            problems.append(f"{key}: missing or of shape {None if got is None else tuple(got.shape)}, expected "
                            f"{tuple(expected.shape)}")
            continue
        diff = (got.double() - expected.double()).abs().max().item() if expected.numel() else 0.0
        max_diff = max(max_diff, diff)
        if not diff <= TOLERANCE:  # also catches NaN
            problems.append(f"{key} differs from the source model by up to {diff:.3g} (tolerance {TOLERANCE:g})")
    if problems:
        raise VerificationError("The staged folder does not reproduce the source model: " + "; ".join(problems) + ".")
    return max_diff
