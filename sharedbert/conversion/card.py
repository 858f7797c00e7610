"""The short model card `sharedbert convert` writes beside a converted (and healed) model: the base model, the fit,
the calibration and the healing run. The card of a published model is the Hub publisher's (`sharedbert.hub.card`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write_text
from ..model_files import CARD_FILE


@dataclass
class HealingSummary:
    """What the card says about a healing run (distillation from the base model)."""

    corpus: list[str]
    steps: int
    batch_size: int
    minutes: float
    first_loss: float
    last_loss: float


def conversion_card(
    base_model: str,
    attention_type: str,
    layer_sharing: str,
    *,
    retained_energy: list[float] | tuple[float, ...] = (),
    healing: HealingSummary | None = None,
    calibration_sentences: int | None = None,
    sharing: dict | None = None,
) -> str:
    """A short README.md noting the base model, the conversion and the healing run. `retained_energy` is the share of
    the attention weight energy the initial fit kept, per attention set; `calibration_sentences`, how many pieces of
    text `sharedbert.conversion.calibration` fitted it to (None: not calibrated); `sharing`, the config's other sharing
    fields worth naming (`num_key_value_heads`, `query_rank`, ...; None values left out) and `sharing_preset`, the
    preset that set them."""
    sharing = dict(sharing or {})
    preset = sharing.pop("sharing_preset", None)
    described = ", ".join([f"attention_type `{attention_type}`", f"layer_sharing `{layer_sharing}`"]
                          + [f"{key} `{value}`" for key, value in sharing.items() if value is not None])
    lines = [
        "---",
        "library_name: transformers",
        "tags: [sharedbert, distillation]",
        f"base_model: {base_model}",
        "---",
        "",
        f"# SharedBert converted from `{base_model}`",
        "",
        f"Converted with `sharedbert convert` ({f'sharing preset `{preset}`: ' if preset else ''}{described}): "
        "every weight without a counterpart change is copied from the base model; the attention projections are a "
        "least-squares fit to the base model's.",
    ]
    if retained_energy:
        kept = ", ".join(f"{energy:.3f}" for energy in retained_energy)
        lines += ["", "Share of the attention weight energy kept by the initial fit, per stored attention layer: "
                      f"{kept}."]
    if calibration_sentences:
        lines += ["", f"Calibrated in closed form on {calibration_sentences} pieces of text (attention fit weighted by "
                      "the layer inputs' second moment, output projections refitted by least squares, layer by layer; "
                      "`sharedbert.conversion.calibration`)."]
    if healing is not None:
        lines += [
            "",
            f"Healed by distillation from the base model on {', '.join(healing.corpus)}: {healing.steps} steps of "
            f"batch {healing.batch_size} in {healing.minutes:.1f} minutes of training, distillation loss "
            f"{healing.first_loss:.4f} → {healing.last_loss:.4f} (layer-wise hidden states, attention outputs, "
            "mean-pooled embedding cosine).",
        ]
    lines += [
        "",
        "Load with `AutoModel.from_pretrained(path, trust_remote_code=True)`. A model converted from a "
        "sentence-transformers model keeps its modules (pooling, Normalize, max_seq_length): "
        "`SentenceTransformer(path, trust_remote_code=True).encode(sentences)`.",
        "",
    ]
    return "\n".join(lines)


def write_conversion_card(
    folder: str | os.PathLike,
    base_model: str,
    attention_type: str,
    layer_sharing: str,
    *,
    retained_energy: list[float] | tuple[float, ...] = (),
    healing: HealingSummary | None = None,
    calibration_sentences: int | None = None,
    sharing: dict | None = None,
) -> Path:
    """Write the `conversion_card` to `folder/README.md` (atomically); return its path."""
    path = Path(folder) / CARD_FILE
    text = conversion_card(base_model, attention_type, layer_sharing, retained_energy=retained_energy, healing=healing,
                           calibration_sentences=calibration_sentences, sharing=sharing)
    atomic_write_text(path, text)
    return path


__all__ = ["HealingSummary", "conversion_card", "write_conversion_card"]
