"""The generation cache of shared attention holds the shared projection S alone: exactly half of standard attention's
bytes, with the outputs, greedy and beam generations of the implementation that cached K and V."""

from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from safetensors.torch import load_file
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from sharedbert import SharedBertLMHeadModel
from sharedbert.modeling_sharedbert import SharedBertForConditionalGeneration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def cache_bytes(cache) -> int:
    caches = ((cache.self_attention_cache, cache.cross_attention_cache) if isinstance(cache, EncoderDecoderCache)
              else (cache,))
    return sum(layer.keys.nbytes + layer.values.nbytes for c in caches for layer in c.layers)


def decoder(attention_type, cross_attention_type, **extra):
    torch.manual_seed(0)
    config = tiny_config(attention_type=attention_type, cross_attention_type=cross_attention_type, is_decoder=True,
                         add_cross_attention=True, **extra)
    return SharedBertLMHeadModel(config).eval()


@pytest.mark.parametrize("layer_sharing", ["none", "all"])
def test_the_cache_of_shared_attention_is_exactly_half_of_standard_attentions(layer_sharing):
    sharing = {"layer_sharing": layer_sharing, **({"num_unique_layers": 2} if layer_sharing == "all" else {})}
    ids, states = torch.randint(5, 99, (3, 7)), torch.randn(3, 5, 32)
    sizes = {}
    for name, types in (("shared", ("shared", "shared_kv")), ("standard", ("standard", "standard")),
                        ("shared-cross", ("shared", "shared"))):
        with torch.no_grad():
            output = decoder(*types, **sharing)(ids, encoder_hidden_states=states, use_cache=True)
        sizes[name] = cache_bytes(output.past_key_values)
    assert sizes["shared"] * 2 == sizes["standard"] and sizes["shared-cross"] * 2 == sizes["standard"]
    # Per depth, not per stored module: the shared sublayers write one slot at each depth.
    assert len(output.past_key_values.self_attention_cache.layers) == 4


@pytest.mark.parametrize("attention_type", ["shared_kv", "shared_head_query", "shared_lowrank_query"])
def test_every_type_whose_keys_and_values_are_one_projection_caches_it_alone(attention_type):
    """K = V = S in self- and cross-attention: the cache holds S alone, half of standard attention's bytes."""
    ids, states = torch.randint(5, 99, (3, 7)), torch.randn(3, 5, 32)
    with torch.no_grad():
        ours = decoder(attention_type, attention_type)(ids, encoder_hidden_states=states, use_cache=True)
        standard = decoder("standard", "standard")(ids, encoder_hidden_states=states, use_cache=True)
    assert cache_bytes(ours.past_key_values) * 2 == cache_bytes(standard.past_key_values)
    caches = (ours.past_key_values.self_attention_cache, ours.past_key_values.cross_attention_cache)
    assert all(layer.values.shape[-1] == 0 for cache in caches for layer in cache.layers)


def test_the_seq2seq_cache_is_exactly_half_too():
    sizes = {}
    for name, types in (("shared", {"attention_type": "shared", "cross_attention_type": "shared_kv"}),
                        ("standard", {"attention_type": "standard"})):
        torch.manual_seed(0)
        model = SharedBertForConditionalGeneration(tiny_config(is_encoder_decoder=True, decoder_start_token_id=2,
                                                               **types)).eval()
        with torch.no_grad():
            output = model(input_ids=torch.randint(5, 99, (2, 9)), decoder_input_ids=torch.randint(5, 99, (2, 4)),
                           use_cache=True)
        sizes[name] = cache_bytes(output.past_key_values)
    assert sizes["shared"] * 2 == sizes["standard"]


@pytest.mark.parametrize("attention_type", ["shared", "standard", "pairwise", "shared_kv", "shared_head_query",
                                            "shared_lowrank_query"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_generation_equals_uncached_generation(attention_type, num_beams):
    model = decoder(attention_type, None, layer_sharing="attention", num_unique_layers=2)
    ids, states = torch.randint(5, 99, (2, 3)), torch.randn(2, 6, 32)
    arguments = dict(encoder_hidden_states=states, max_new_tokens=9, do_sample=False, num_beams=num_beams)
    assert torch.equal(model.generate(ids, use_cache=True, **arguments), model.generate(ids, use_cache=False,
                                                                                         **arguments))


@pytest.mark.parametrize("self_type, cross_type", [("shared", "shared_kv"), ("shared_kv", "shared_head_query"),
                                                   ("shared_lowrank_query", "shared_lowrank_query"),
                                                   ("shared_head_query", "standard")])
def test_step_by_step_logits_with_the_cache_equal_the_full_forward(self_type, cross_type):
    model = decoder(self_type, cross_type)
    with torch.no_grad():  # off the initial M_h = I and B = 0, where the new types are the paper's form
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    ids, states = torch.randint(5, 99, (2, 8)), torch.randn(2, 6, 32)
    with torch.no_grad():
        full = model(ids, encoder_hidden_states=states).logits
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        steps = [model(ids[:, i:i + 1], encoder_hidden_states=states, past_key_values=cache, use_cache=True).logits
                 for i in range(ids.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-5)
    assert all(layer.values.shape[-1] == 0 for layer in cache.self_attention_cache.layers)  # S alone


def test_outputs_and_generations_equal_the_implementation_that_cached_keys_and_values():
    """The fixtures hold what the package computed before the cache held S alone (commit e4d8749)."""
    saved = load_file(FIXTURES / "before-shared-kv-outputs.safetensors")
    seq2seq = SharedBertForConditionalGeneration.from_pretrained(FIXTURES / "seq2seq-before-shared-kv").eval()
    lm = SharedBertLMHeadModel.from_pretrained(FIXTURES / "decoder-before-shared-kv").eval()
    ids, mask, states = saved["input_ids"], saved["attention_mask"], saved["encoder_hidden_states"]
    prompt = saved["decoder_input_ids"][:, :2]
    for beams, suffix in ((1, "greedy"), (3, "beam")):
        generated = seq2seq.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False,
                                     num_beams=beams)
        assert torch.equal(generated, saved[f"seq2seq_{suffix}"])
        generated = lm.generate(prompt, encoder_hidden_states=states, encoder_attention_mask=mask, max_new_tokens=10,
                                do_sample=False, num_beams=beams)
        assert torch.equal(generated, saved[f"decoder_{suffix}"])


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="the benchmark reads the Linux kernel's VmHWM")
@pytest.mark.slow
def test_the_long_context_benchmark_runs_and_reports_half_the_cache_and_each_childs_own_peak_memory(tmp_path):
    """The quick benchmark end to end, run with 1 GiB resident in this process, the one its peak-memory children are
    forked from: ru_maxrss of a child counts the resident size of the process it was forked from, so with that
    measure every cell would read at least 1 GiB whatever the child used. Each cell must read the child's own peak.
    (One run checks both: a separate peak-memory child would start a fifth Python to measure what these four do.)"""
    import json

    from conftest import benchmark_script

    benchmark = benchmark_script("generation_cache")
    output = tmp_path / "generation_cache.json"
    ballast = torch.ones(256 * 2**20)  # 1 GiB, resident
    assert benchmark.main(["--quick", "--threads", "1", "--output", str(output)]) == 0
    assert ballast.sum() > 0

    rows = json.loads(output.read_text())["rows"]
    assert len(rows) == 1 and all(row["cache_ratio"] == 0.5 for row in rows)
    for row in rows:
        bound = row["models"]["sharedbert"]["bound_at_mid_decode"]
        assert bound["cache_bytes_read"] * 2 == row["models"]["bert"]["bound_at_mid_decode"]["cache_bytes_read"]
        assert row["bytes_bound_ratio"] > 1
        for kind in ("sharedbert", "bert"):
            assert 0 < row["models"][kind]["peak_rss_bytes"] < 2**30 * 0.8, (row["prompt"], kind)
