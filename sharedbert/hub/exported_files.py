"""Exported ONNX and OpenVINO files in a published folder, in sentence-transformers' layout: `onnx/model.onnx`,
`onnx/model_qint8_<variant>.onnx`, `openvino/openvino_model.xml` / `.bin` and
`openvino/openvino_model_qint8_quantized.xml` / `.bin` (names: `sharedbert.export`).

`sharedbert export MODEL MODEL --layout sentence-transformers ...` writes them into a model folder; staging
(`stage_for_hub`, so `sharedbert upload` and `sharedbert build-minilm`) then copies the ones found there
(`backend_files`) and checks each again in its own runtime (`check_backend_files`): loaded with onnxruntime or
OpenVINO, run on real sentences tokenized by the staged tokenizer, compared with the source model in fp32 PyTorch by the
export's own checks (fp32 files within 1e-4 of the outputs; every file's sentence embeddings at the export's cosine
thresholds). A stale export (of an earlier state of the weights) fails there, and nothing is staged.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer

from .. import export
from .errors import VerificationError

logger = logging.getLogger(__name__)


def known_backend_names() -> list[str]:
    """Every file name the export writes, relative to the model folder, in a stable order (fp32 first)."""
    names = [f"{export.ONNX_FOLDER}/{export.ONNX_FILE}"]
    names += [f"{export.ONNX_FOLDER}/{variant.file_name}" for variant in export.QUANTIZATION_VARIANTS.values()]
    for xml in (export.OPENVINO_FILE, export.OPENVINO_INT8_FILE, export.OPENVINO_INT8_WEIGHTS_FILE):
        names += [f"{export.OPENVINO_FOLDER}/{xml}", f"{export.OPENVINO_FOLDER}/{Path(xml).with_suffix('.bin')}"]
    return names


def backend_files(model_dir: str | Path) -> list[str]:
    """The exported files present in `model_dir` (relative POSIX paths), an OpenVINO `.xml` only with its `.bin`.
    Other files in onnx/ and openvino/ (the export's report, anything else) are not published."""
    model_dir = Path(model_dir)
    found = [name for name in known_backend_names() if (model_dir / name).is_file()]
    for name in found:
        if name.endswith(".xml") and name[:-4] + ".bin" not in found:
            raise VerificationError(f"{model_dir / name} has no {Path(name).with_suffix('.bin').name} beside it: "
                                    "re-export it (sharedbert export MODEL MODEL --layout sentence-transformers "
                                    "--openvino).")
    return found


def copy_backend_files(model_dir: str | Path, staged: Path) -> list[str]:
    """Copy `backend_files(model_dir)` into `staged`; returns their names."""
    names = backend_files(model_dir)
    for name in names:
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(model_dir) / name, staged / name)
    return names


def check_backend_files(staged: Path, loaded, names: list[str]) -> list[dict]:
    """Check every exported model file (`.onnx`, `.xml`) among `names` in its own runtime against `loaded` (the
    source model in fp32 PyTorch) on `sharedbert.export.CHECK_SENTENCES`, tokenized by the staged tokenizer. Returns
    one dict per file (file, runtime, precision, cosines, difference, bytes); raises VerificationError naming the file
    and what it gave when a check fails."""
    models = [name for name in names if name.endswith((".onnx", ".xml"))]
    if not models:
        return []
    task = "sequence-classification" if loaded.architecture.endswith("ForSequenceClassification") else "base"
    tokenizer = AutoTokenizer.from_pretrained(str(staged), trust_remote_code=False)
    batch = tokenizer(list(export.CHECK_SENTENCES), padding=True, truncation=True, max_length=128,
                      return_tensors="pt")
    inputs = {name: batch[name] if name in batch else torch.zeros_like(batch["input_ids"])
              for name in export.INPUT_NAMES}
    model = loaded.model if task == "sequence-classification" else loaded.model.base_model
    with torch.inference_mode():
        output = model(**inputs)[export.OUTPUT_NAMES[task]].float().numpy()
    feed = {name: tensor.numpy().astype(np.int64) for name, tensor in inputs.items()}
    reference = {"output": output.astype(np.float64)}
    if task == "base":
        reference["embeddings"] = export.sentence_embeddings(output, feed["attention_mask"], task)
    checks = []
    for name in models:
        precision = "fp32" if name in (f"{export.ONNX_FOLDER}/{export.ONNX_FILE}",
                                       f"{export.OPENVINO_FOLDER}/{export.OPENVINO_FILE}") else "int8"
        try:
            check = export.check_file(staged / name, name, feed, reference, task, precision=precision,
                                      atol=1e-4 if precision == "fp32" else None,
                                      min_mean_cosine=export.MIN_MEAN_COSINE, min_cosine=export.MIN_COSINE)
        except export.ExportError as error:
            raise VerificationError(
                f"The exported file {name} does not reproduce the model being staged: {error} Export it again from "
                f"this model (sharedbert export {loaded.model_dir} {loaded.model_dir} --layout "
                "sentence-transformers ...) or delete it.") from None
        except Exception as error:  # noqa: BLE001 - a runtime that cannot load the file: say which file
            raise VerificationError(f"The exported file {name} does not load in {_runtime(name)}: {error}") from None
        checks.append({**check.__dict__, "variant": _variant(name)})
        logger.info("%s: %s %s, sentence-embedding cosine %s mean / %s worst, max |difference| %s", name,
                    check.runtime, check.precision, check.mean_cosine, check.min_cosine, check.max_abs_difference)
    return checks


def _runtime(name: str) -> str:
    return "OpenVINO" if name.endswith(".xml") else "onnxruntime"


def _variant(name: str) -> str | None:
    """The CPU family an int8 ONNX file is named for (None for the others)."""
    for variant in export.QUANTIZATION_VARIANTS.values():
        if name.endswith("/" + variant.file_name):
            return variant.name
    return None
