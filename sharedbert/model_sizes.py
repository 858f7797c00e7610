"""Named model sizes (the BERT family of Turc et al. 2019 plus MiniLM-L6) for `pretrain(config=...)` and
`sharedbert params`.

Each preset gives the four numbers that fix a BERT's size: layers, hidden size, attention heads, feed-forward size.
Everything else (vocabulary, positions, attention type, sharing) comes from the command line or SharedBertConfig's
defaults.
"""

from __future__ import annotations

import json
from pathlib import Path

from .loading import check_config_fields

# name -> (num_hidden_layers, hidden_size, num_attention_heads, intermediate_size)
_SIZES = {
    "bert-tiny": (2, 128, 2, 512),
    "bert-mini": (4, 256, 4, 1024),
    "bert-small": (4, 512, 8, 2048),
    "bert-medium": (8, 512, 8, 2048),
    "bert-base": (12, 768, 12, 3072),
    "bert-large": (24, 1024, 16, 4096),
    "minilm-l6": (6, 384, 12, 1536),
}

PRESETS: dict[str, dict[str, int]] = {
    name: dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=ffn)
    for name, (layers, hidden, heads, ffn) in _SIZES.items()
}


def config_values(preset_or_json: str) -> dict:
    """The SharedBertConfig keyword arguments named by a preset name or read from a JSON file (a config.json works).

    Raises ValueError naming the choices when the argument is neither."""
    if preset_or_json in PRESETS:
        return dict(PRESETS[preset_or_json])
    path = Path(preset_or_json)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(
                f"{path} is not valid JSON ({error}); give a preset name or a config JSON file."
            ) from error
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a JSON object of config fields, got {type(values).__name__}.")
        check_config_fields(values, path)  # a misspelled field is refused, not left at its default
        # Fields that describe a saved model rather than an architecture to build.
        for key in ("architectures", "auto_map", "transformers_version", "model_type", "dtype", "torch_dtype"):
            values.pop(key, None)
        return values
    raise ValueError(
        f"Unknown config {preset_or_json!r}: give a preset ({', '.join(PRESETS)}) or the path of a config JSON file."
    )


__all__ = ["PRESETS", "config_values"]
