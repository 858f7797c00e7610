"""Conversion: a BERT checkpoint becomes a SharedBert, with no training.

* `bert`: `from_bert` (any BERT head class, as an instance or a folder) and the seq2seq warm starts
  (`warm_start_seq2seq`: BERT2BERT / BERTShare from one BERT; `encoder_decoder_to_seq2seq`);
* `fitting`: the closed-form fits of the attention projections to BERT's (`fit_attention`, `FIT_METHODS`);
* `calibration`: a conversion refitted in closed form on real text, layer by layer (`calibrate`);
* `card`: the short model card written beside a converted model (`write_conversion_card`).

    from sharedbert.conversion import from_bert, warm_start_seq2seq
    model = from_bert("path/or/hub-id-of-a-bert", attention_type="shared")

Healing by distillation is training (`sharedbert.training.healing`); `sharedbert convert`, which converts, calibrates
and heals, is a recipe (`sharedbert.recipes.convert_and_heal`).
"""

from .bert import encoder_decoder_to_seq2seq, from_bert, warm_start_seq2seq
from .calibration import calibrate
from .card import HealingSummary, conversion_card, write_conversion_card
from .fitting import AUTO_FIT_METHOD, FIT_METHODS, fit_attention, resolve_fit_method

__all__ = ["AUTO_FIT_METHOD", "FIT_METHODS", "HealingSummary", "calibrate", "conversion_card",
           "encoder_decoder_to_seq2seq", "fit_attention", "from_bert", "resolve_fit_method", "warm_start_seq2seq",
           "write_conversion_card"]
