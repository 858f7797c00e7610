"""Old configs and old checkpoints load as saved (issue 44, item 6).

tests/fixtures holds what earlier versions of the package wrote:

* `*-before-cross-attention-type`: an encoder, a decoder and a seq2seq model saved at commit 46f86e3, before configs
  had `cross_attention_type` (cross-attention then followed `attention_type`), with the outputs that package computed
  (tests/fixtures/make_old_model_fixtures.py);
* `*-before-shared-kv`: configs that record `cross_attention_type: null`, saved while null meant "follow
  `attention_type`" (their outputs are checked by test_cache.py and test_cross_attention.py);
* `*-shared-kv-default`: configs that record the type they resolved to, as every config has since.

`SharedBertConfig.from_dict` reads the first two formats as their cross-attention followed `attention_type`: today's
default (`DEFAULT_CROSS_ATTENTION_TYPE`) would give them other cross-attention weights than the ones saved.
"""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

import sharedbert  # noqa: F401  (registers the Auto classes)
from sharedbert import SharedBertConfig
from sharedbert.configuration_sharedbert import DEFAULT_CROSS_ATTENTION_TYPE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD = "before-cross-attention-type"

# Each fixture's config, the cross-attention type it was saved with, and whether config.json names it.
SAVED_CROSS_ATTENTION = [
    (f"decoder-{OLD}", "shared", False),
    (f"seq2seq-{OLD}", "symmetric", False),
    ("decoder-before-shared-kv", "shared", True),  # recorded as null
    ("seq2seq-before-shared-kv", "shared", True),
    ("decoder-shared-kv-default", "shared_kv", True),  # recorded as resolved
    ("seq2seq-shared-kv-default", "shared_kv", True),
]


@pytest.mark.parametrize("fixture, saved_type, key_in_file", SAVED_CROSS_ATTENTION)
def test_an_old_config_loads_with_the_cross_attention_it_was_saved_with(fixture, saved_type, key_in_file, tmp_path):
    import json

    raw = json.loads((FIXTURES / fixture / "config.json").read_text())
    assert ("cross_attention_type" in raw) == key_in_file
    for config in (SharedBertConfig.from_pretrained(FIXTURES / fixture), AutoConfig.from_pretrained(FIXTURES / fixture)):
        config.validate()
        assert config.effective_cross_attention_type == saved_type
    if raw.get("cross_attention_type") is None:  # the fixture does need the migration: today's default differs
        assert DEFAULT_CROSS_ATTENTION_TYPE != saved_type
    config.save_pretrained(tmp_path)  # saved again, it names its type and keeps it
    assert json.loads((tmp_path / "config.json").read_text())["cross_attention_type"] == saved_type
    assert SharedBertConfig.from_pretrained(tmp_path).effective_cross_attention_type == saved_type


def test_an_old_encoder_config_keeps_every_field_and_takes_the_old_behaviour_of_newer_ones():
    config = SharedBertConfig.from_pretrained(FIXTURES / f"encoder-{OLD}")
    assert (config.attention_type, config.layer_sharing, config.num_unique_layers, config.sharing_order) == (
        "shared", "all", 2, "cycle")
    assert config.attention_layer_map == config.ffn_layer_map == [0, 1, 0, 1]
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.vocab_size) == (
        16, 4, 2, 40)
    # Fields added since take the behaviour the package had without them.
    assert config.layer_norm_position == "post" and config.sparse_prediction is False
    assert config.attention_rank is None and not config.has_cross_attention


@pytest.mark.parametrize("kind, auto_class", [("encoder", AutoModelForMaskedLM), ("decoder", AutoModelForCausalLM),
                                              ("seq2seq", AutoModelForSeq2SeqLM)])
def test_an_old_checkpoint_gives_the_outputs_it_gave_when_saved(kind, auto_class):
    saved = load_file(FIXTURES / f"{OLD}-outputs.safetensors")
    model = auto_class.from_pretrained(FIXTURES / f"{kind}-{OLD}").eval()
    ids, mask, states, decoder_ids = (saved[name] for name in ("input_ids", "attention_mask",
                                                               "encoder_hidden_states", "decoder_input_ids"))
    with torch.no_grad():
        if kind == "encoder":
            logits = model(input_ids=ids, attention_mask=mask).logits
        elif kind == "decoder":
            logits = model(input_ids=decoder_ids, encoder_hidden_states=states).logits
        else:
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
    torch.testing.assert_close(logits, saved[f"{kind}_logits"], rtol=0, atol=1e-5)
