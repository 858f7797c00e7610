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


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    folder = spec["folder"]
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

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
