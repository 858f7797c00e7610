"""`sharedbert.conversion.calibration`: the closed-form calibration of a converted SharedBert on real text."""

import pytest
import torch
from transformers import BertConfig, BertModel

from sharedbert.conversion.calibration import calibrate, calibration_batches
from sharedbert.conversion.bert import from_bert


def tiny_bert(seed=0, layers=3):
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64,
                        initializer_range=0.1)  # BERT's 0.02 makes the attention outputs of a random model ~1e-4
    model = BertModel(config).eval()
    with torch.no_grad():  # anisotropic hidden states, as in a trained BERT: a few strong embedding channels
        model.embeddings.LayerNorm.weight[:6] *= 8.0
    return model


def id_batches(seed, count=6, batch_size=8, length=20):
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(5, 120, (batch_size, length), generator=generator)
        mask = torch.ones_like(ids)
        mask[: batch_size // 2, length // 2 :] = 0  # padding must not enter the statistics
        batches.append({"input_ids": ids, "attention_mask": mask})
    return batches


def hidden_error(student, teacher, batches):
    """Mean squared difference of the last hidden states over real tokens."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            mask = batch["attention_mask"].bool()
            diff = student(**batch).last_hidden_state[mask] - teacher(**batch).last_hidden_state[mask]
            total, count = total + float(diff.pow(2).sum()), count + diff.numel()
    return total / count


@pytest.mark.parametrize("attention_type", ["shared", "symmetric", "pairwise", "shared_kv", "shared_head_query",
                                            "shared_lowrank_query"])
@pytest.mark.parametrize("layer_sharing", ["none", "ffn"])
def test_calibration_brings_the_student_closer_to_the_teacher_on_held_out_input(attention_type, layer_sharing):
    teacher = tiny_bert()
    student = from_bert(teacher, attention_type=attention_type, layer_sharing=layer_sharing, fit_method="invariant")
    held_out = id_batches(seed=99)
    before = hidden_error(student, teacher, held_out)
    fits = calibrate(student, teacher, id_batches(seed=1))
    after = hidden_error(student, teacher, held_out)
    assert after < 0.8 * before, (before, after)
    assert [fit.depth for fit in fits] == [0, 1, 2]
    for fit in fits:
        assert fit.output_mse_after <= fit.output_mse_before + 1e-9
    assert not student.training  # left as it was found (from_bert returns eval mode)


def test_the_refit_error_reported_at_every_depth_is_that_of_the_calibrated_model_run_whole():
    """Calibration runs each depth alone on the states the one below left; a whole forward of the calibrated student
    must see the same attention contexts at every depth (those of the refitted layers below), so each reported
    error is recomputed here from whole-model forwards, with the test's own hooks."""
    teacher = tiny_bert()
    student = from_bert(teacher, attention_type="shared", fit_method="invariant")
    batches = id_batches(seed=1, count=2)
    fits = calibrate(student, teacher, batches, ridge=0.0)
    contexts, targets, hooks = {}, {}, []
    for depth in range(3):
        hooks += [student.encoder.attention[depth].output.dense.register_forward_hook(
                      lambda m, a, out, depth=depth: contexts.setdefault(depth, []).append(out)),
                  teacher.encoder.layer[depth].attention.output.dense.register_forward_hook(
                      lambda m, a, out, depth=depth: targets.setdefault(depth, []).append(out))]
    with torch.no_grad():
        for batch in batches:
            student(**batch)
            teacher(**batch)
    for hook in hooks:
        hook.remove()
    masks = [b["attention_mask"].bool() for b in batches]
    for depth, fit in enumerate(fits):
        error = torch.cat([(c - t)[m] for c, t, m in zip(contexts[depth], targets[depth], masks)]).double().pow(2)
        assert float(error.mean()) == pytest.approx(fit.output_mse_after, rel=1e-3, abs=1e-8), depth


def test_each_layer_runs_a_fixed_number_of_times_a_batch_whatever_its_depth():
    """One recording pass, then for the student one pass up to the output projection and one to move on, for the
    teacher (never refitted) one pass that does both: three and two calls of each layer a batch (the pre-hook counts
    the last layer's call in the recording pass too, which stops there), not a call for every depth at or above it."""
    teacher = tiny_bert(layers=4)
    student = from_bert(teacher, attention_type="shared", fit_method="invariant")
    runs = {}
    hooks = [layer.register_forward_pre_hook(lambda m, a, key=(model, depth): runs.update({key: runs.get(key, 0) + 1}))
             for model, layers in (("student", student.encoder.layer), ("teacher", teacher.encoder.layer))
             for depth, layer in enumerate(layers)]
    calibrate(student, teacher, id_batches(seed=1, count=2))
    for hook in hooks:
        hook.remove()
    assert runs == {(model, depth): 2 * calls for model, calls in (("student", 3), ("teacher", 2))
                    for depth in range(4)}, runs


def test_standard_attention_is_exact_already_and_left_alone():
    teacher = tiny_bert()
    student = from_bert(teacher, attention_type="standard")
    before = {k: v.clone() for k, v in student.state_dict().items()}
    assert calibrate(student, teacher, id_batches(seed=1, count=1)) == []
    assert all(torch.equal(before[k], v) for k, v in student.state_dict().items())


def test_bad_input_is_refused_with_the_reason():
    teacher = tiny_bert()
    decoder = from_bert(teacher, attention_type="shared", is_decoder=True)
    with pytest.raises(ValueError, match="covers encoders"):
        calibrate(decoder, teacher, id_batches(seed=1, count=1))
    student = from_bert(teacher, attention_type="shared")
    with pytest.raises(ValueError, match="layers"):
        calibrate(student, tiny_bert(layers=2), id_batches(seed=1, count=1))
    shared_sets = from_bert(teacher, attention_type="shared", layer_sharing="attention")
    with pytest.raises(ValueError, match="attention is shared across layers"):
        calibrate(shared_sets, teacher, id_batches(seed=1, count=1))
    with pytest.raises(ValueError, match="no sentences"):
        calibration_batches(None, [])


@pytest.mark.slow
def test_calibration_on_real_text_improves_minilm_embeddings(minilm_path, mlm_text_dir):
    from transformers import AutoTokenizer

    from sharedbert.data import TextPieces

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    teacher = BertModel.from_pretrained(minilm_path).eval()
    student = from_bert(minilm_path, attention_type="shared", fit_method="invariant")
    pieces = TextPieces([mlm_text_dir], 6, 40, seed=0)
    calibration = calibration_batches(tokenizer, pieces.batch(0, 64), max_length=128)
    held_out = calibration_batches(tokenizer, pieces.batch(10_000, 32), max_length=128)

    def mean_pooled(model, batch):
        mask = batch["attention_mask"][..., None].float()
        return (model(**batch).last_hidden_state * mask).sum(1) / mask.sum(1)

    def embedding_cosine():
        with torch.no_grad():
            return float(torch.cat([torch.cosine_similarity(mean_pooled(student, b), mean_pooled(teacher, b))
                                    for b in held_out]).mean())

    before = embedding_cosine()
    calibrate(student, teacher, calibration)
    after = embedding_cosine()
    print(f"held-out embedding cosine to the teacher: {before:.4f} -> {after:.4f}")
    assert after > before + 0.01, (before, after)
