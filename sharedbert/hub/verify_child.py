"""Child half of `sharedbert.hub.verify.verify_staged`: run by `run_isolated` in a fresh interpreter where the
sharedbert package cannot be imported. Loads a staged folder the way a Hub user does (Auto classes,
trust_remote_code=True), encodes the fixed text and runs every model on the parent's inputs, and writes what it saw
for the parent to compare.

Usage: python verify_child.py SPEC.json (run as a script, never imported). It imports only torch, transformers and
safetensors, and sentence-transformers when the folder is a sentence-transformers model.
"""

import json
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file


def _origin(obj) -> str:
    return type(obj).__module__


def trust_only_package_code(folder: str, code_files: dict) -> None:
    """Let transformers import no module but the staged folder's code files, each first checked to be the package's
    byte for byte (`code_files`: name -> SHA-256): an auto_map naming another module, or another folder or repository
    (`folder--module.Class`), is refused before that module is read, although the loads below pass
    trust_remote_code=True."""
    import hashlib
    import os

    from transformers import dynamic_module_utils

    root = os.path.realpath(folder)
    for name, digest in code_files.items():
        with open(os.path.join(root, name), "rb") as handle:
            if hashlib.sha256(handle.read()).hexdigest() != digest:
                raise SystemExit(f"{name} in the staged folder is not the sharedbert package's file; not run")
    original = dynamic_module_utils.get_cached_module_file

    def package_code_only(pretrained_model_name_or_path, module_file, *args, **kwargs):
        if os.path.realpath(str(pretrained_model_name_or_path)) != root or module_file not in code_files:
            raise ImportError(f"refused to import {module_file} from {pretrained_model_name_or_path}: only the staged "
                              f"folder's own code files ({', '.join(sorted(code_files))}) may run")
        return original(pretrained_model_name_or_path, module_file, *args, **kwargs)

    dynamic_module_utils.get_cached_module_file = package_code_only
    generation = sys.modules.get("transformers.generation.utils")
    if generation is not None and hasattr(generation, "get_cached_module_file"):
        generation.get_cached_module_file = package_code_only


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    folder = spec["folder"]
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    trust_only_package_code(folder, spec["code_files"])

    classes, modules = {}, {}
    config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
    classes["AutoConfig"], modules["AutoConfig"] = type(config).__name__, _origin(config)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    classes["AutoTokenizer"], modules["AutoTokenizer"] = type(tokenizer).__name__, _origin(tokenizer)
    call = spec["tokenizer_call"]
    encoded = tokenizer(call["text"], call["text_pair"], padding=True, truncation=True, max_length=call["max_length"])
    encoded = {key: list(map(list, encoded[key])) for key in ("input_ids", "attention_mask", "token_type_ids")
               if key in encoded}

    inputs, head_inputs = load_file(spec["inputs"]), load_file(spec["head_inputs"])
    outputs = {}
    for auto_name in spec["auto_classes"]:
        model = getattr(transformers, auto_name).from_pretrained(folder, trust_remote_code=True).eval()
        classes[auto_name], modules[auto_name] = type(model).__name__, _origin(model)
        feed = inputs if auto_name == "AutoModel" else head_inputs  # the head's class comes first in the list
        with torch.no_grad():
            output = model(**feed)
        for key, value in output.items():
            if torch.is_tensor(value):
                outputs[f"{auto_name}.{key}"] = value.contiguous()
    result = {"classes": classes, "modules": modules, "encoded": encoded}
    if spec.get("sentence_transformers"):
        from sentence_transformers import SentenceTransformer

        sentence_model = SentenceTransformer(folder, trust_remote_code=True, device="cpu")
        transformer = sentence_model[0].auto_model if hasattr(sentence_model[0], "auto_model") else sentence_model[0]
        classes["SentenceTransformer"], modules["SentenceTransformer"] = type(transformer).__name__, _origin(
            transformer)
        embeddings = sentence_model.encode(spec["sentences"], convert_to_tensor=True, show_progress_bar=False)
        outputs["SentenceTransformer.sentence_embedding"] = embeddings.float().cpu().contiguous()
        result["sentence_modules"] = [type(module).__name__ for module in sentence_model]
        result["sentence_max_seq_length"] = sentence_model.max_seq_length
        result["sentence_norms"] = embeddings.norm(dim=-1).tolist()
    save_file(outputs, spec["outputs"])
    with open(spec["result"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv[1])
