"""Recipes: the commands that combine the rooms below them, conversion with training (healing), fine-tuning and Hub
staging. They sit above `sharedbert.training` and `sharedbert.hub`, so neither of those imports the other.

* `convert_and_heal.convert_checkpoint` (`ConvertArguments`; `sharedbert convert`): a BERT checkpoint converted,
  calibrated and healed into a saved SharedBert folder;
* `build_minilm.build_minilm_checkpoint` (`BuildArguments`; `sharedbert build-minilm`): the Hub-ready
  sharedbert-all-MiniLM-L6-v2 folder (convert, heal, measure, stage);
* `demo.run_demo` (`DemoArguments`; `sharedbert demo`): a healed conversion fine-tuned and compared with BERT, and Hub
  staging.

    from sharedbert.recipes import convert_checkpoint
    convert_checkpoint(src="all-MiniLM-L6-v2", out="runs/minilm-shared")

Names are imported on first use, as `sharedbert.training`'s are.
"""

from __future__ import annotations

from ..lazy_exports import lazy_exports

# public name -> the module of this package that defines it
_EXPORTS = {
    "convert_checkpoint": "convert_and_heal",
    "ConvertArguments": "convert_and_heal",
    "build_minilm_checkpoint": "build_minilm",
    "BuildArguments": "build_minilm",
    "run_demo": "demo",
    "DemoArguments": "demo",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
