"""`finetune`'s arguments dataclass and command line, and its recipe options for converted models: layer-wise
learning-rate decay, a frozen-attention warm-up, a pull toward the starting weights, distillation from a teacher."""

import dataclasses
import random

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, BertConfig, BertModel

from sharedbert.cli.common import JobArgumentParser, arguments_from
from sharedbert.conversion.bert import from_bert
from sharedbert.training.finetune_recipe import is_attention_projection, parameter_depths
from sharedbert.training.finetuning import FinetuneArguments, finetune

WORDS = {0: ["dull", "bad", "boring", "awful", "weak"], 1: ["great", "fine", "lovely", "superb", "good"]}


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    """A two-label task of our own (CSV), so these tests need no shared data."""
    folder = tmp_path_factory.mktemp("task")
    rng = random.Random(0)
    for split, count in (("train", 64), ("validation", 32)):
        rows = ["text,label"]
        for _ in range(count):
            label = rng.randint(0, 1)
            rows.append(" ".join(rng.choice(WORDS[label]) for _ in range(6)) + f",{label}")
        (folder / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture(scope="module")
def tiny_shared_dir(tmp_path_factory, minilm_path):
    """A tiny SharedBert (converted from a random tiny BERT) with all-MiniLM-L6-v2's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-shared")
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=64))
    from_bert(bert, attention_type="shared").save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(folder)
    return folder


def run(task_files, model, tmp_path, name, **options):
    settings = dict(model=str(model), train_file=str(task_files / "train.csv"),
                    validation_file=str(task_files / "validation.csv"), text_columns="text", label_column="label",
                    max_length=16, batch_size=16, epochs=1, evaluations=0, precision="fp32", seed=1,
                    output_dir=str(tmp_path / name))
    return finetune(**{**settings, **options})


def weights(folder):
    return load_file(str(folder / "model.safetensors"))


# --- the arguments dataclass and the command line made from it ---------------------------------------------------


def test_every_field_is_a_flag_with_the_dataclass_default():
    parser = JobArgumentParser([FinetuneArguments])
    parsed = parser.parse_args([])
    built, default = arguments_from(parsed, FinetuneArguments), FinetuneArguments()
    flagged = {action.dest for action in parser._actions if action.option_strings}
    for field in dataclasses.fields(FinetuneArguments):
        if field.metadata.get("cli") is False and field.name not in FinetuneArguments.training_flags:
            assert field.name not in flagged, field.name  # no flag: the dataclass default only
            continue
        # The default instance's value: TrainingArguments' __post_init__ resolves some defaults (None -> False).
        assert getattr(built, field.name) == getattr(default, field.name), field.name
    changed = arguments_from(parser.parse_args(["--learning-rate", "2e-5", "--no-convert", "--layerwise-lr-decay",
                                                "0.8", "--attention-type", "standard"]), FinetuneArguments)
    assert (changed.learning_rate, changed.no_convert, changed.layerwise_lr_decay) == (2e-5, True, 0.8)
    with pytest.raises(SystemExit):
        parser.parse_args(["--attention-type", "shared-kv"])  # choices come from the config's constants


@pytest.mark.parametrize("options, message", [
    ({"max_length": 4}, "--max-length"),
    ({"layerwise_lr_decay": 0.0}, "--layerwise-lr-decay"),
    ({"freeze_attention_fraction": 1.0}, "--freeze-attention-fraction"),
    ({"pull_to_start": -1.0}, "--pull-to-start"),
    ({"train_file": "a.csv"}, "both --train-file and --validation-file"),
    ({"precision": "fp16"}, "precision must be one of"),
])
def test_bad_arguments_are_refused_when_made(options, message):
    with pytest.raises(ValueError, match=message):
        FinetuneArguments(**options)


# --- the recipe options ---------------------------------------------------------------------------------------


def test_depths_run_from_the_embeddings_to_the_head(tiny_shared_dir):
    from sharedbert import SharedBertForSequenceClassification

    model = SharedBertForSequenceClassification.from_pretrained(tiny_shared_dir, num_labels=2)
    depths = parameter_depths(model)
    assert depths["sharedbert.embeddings.word_embeddings.weight"] == 0
    assert depths["sharedbert.encoder.attention.0.self.shared_proj.weight"] == 1
    assert depths["sharedbert.encoder.feed_forward.1.output.weight"] == 2
    assert depths["classifier.weight"] == depths["sharedbert.pooler.dense.weight"] == 3
    names = [n for n in depths if is_attention_projection(n)]
    assert names and all(".self." in n for n in names)
    assert not any(is_attention_projection(n) for n in depths if ".output." in n or "feed_forward" in n)


def test_layerwise_decay_gives_each_depth_its_learning_rate(task_files, tiny_shared_dir, tmp_path, monkeypatch):
    from sharedbert.training import finetune_recipe

    seen = {}
    original = finetune_recipe.FinetuneTrainer.create_optimizer

    def spy(self, model=None):
        optimizer = original(self, model)
        seen["groups"] = [(group["lr"], [id(p) for p in group["params"]]) for group in optimizer.param_groups]
        seen["ids"] = {id(p): name for name, p in self.model.named_parameters()}
        return optimizer

    monkeypatch.setattr(finetune_recipe.FinetuneTrainer, "create_optimizer", spy)
    run(task_files, tiny_shared_dir, tmp_path, "llrd", layerwise_lr_decay=0.5, learning_rate=1e-3)
    lr_of = {seen["ids"][pid]: lr for lr, ids in seen["groups"] for pid in ids}
    assert lr_of["classifier.weight"] == pytest.approx(1e-3)
    assert lr_of["sharedbert.encoder.feed_forward.1.output.weight"] == pytest.approx(5e-4)
    assert lr_of["sharedbert.encoder.attention.0.self.shared_proj.weight"] == pytest.approx(2.5e-4)
    assert lr_of["sharedbert.embeddings.LayerNorm.weight"] == pytest.approx(1.25e-4)


def test_frozen_attention_stays_as_it_started_while_the_rest_trains(task_files, tiny_shared_dir, tmp_path):
    start = weights(tiny_shared_dir)
    run(task_files, tiny_shared_dir, tmp_path, "frozen", freeze_attention_fraction=0.99, learning_rate=1e-3)
    trained = weights(tmp_path / "frozen")
    for name, value in start.items():
        moved = not torch.equal(trained[f"sharedbert.{name}"], value)
        if is_attention_projection(f"sharedbert.{name}"):
            assert not moved, name  # 4 steps, round(0.99 × 4) = 4 frozen
        elif name.startswith("encoder.feed_forward.") and name.endswith("weight"):
            assert moved, name


def test_the_pull_adds_half_alpha_times_the_squared_distance_from_the_start(tiny_shared_dir, tmp_path):
    from transformers import TrainingArguments

    from sharedbert import SharedBertForSequenceClassification
    from sharedbert.training.finetune_recipe import FinetuneTrainer

    model = SharedBertForSequenceClassification.from_pretrained(tiny_shared_dir, num_labels=2).eval()
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    plain = FinetuneTrainer(model=model, args=args)
    pulled = FinetuneTrainer(model=model, args=args, pull_to_start=3.0)
    inputs = {"input_ids": torch.tensor([[101, 2204, 102]]), "labels": torch.tensor([1])}
    with torch.no_grad():
        model.sharedbert.encoder.feed_forward[0].output.bias.add_(0.5)  # 32 entries moved by 0.5: ‖δ‖² = 8
        model.classifier.bias.add_(10.0)  # the new head is not pulled
        difference = pulled.compute_loss(model, dict(inputs)) - plain.compute_loss(model, dict(inputs))
    assert float(difference) == pytest.approx(0.5 * 3.0 * 8.0, rel=1e-4)


def test_distillation_mixes_the_task_loss_with_the_teachers_kl_at_its_weight(tiny_shared_dir, tmp_path):
    """Fine-tuning's distillation is `DistillationTrainer`'s: (1 − w)·cross-entropy + w·T²·KL(teacher ‖ student); at
    w = 1 evaluation still gets the student's outputs (its predictions)."""
    from transformers import TrainingArguments

    from sharedbert import SharedBertForSequenceClassification
    from sharedbert.training.finetune_recipe import FinetuneTrainer

    model = SharedBertForSequenceClassification.from_pretrained(tiny_shared_dir, num_labels=2).eval()
    teacher = SharedBertForSequenceClassification.from_pretrained(tiny_shared_dir, num_labels=2).eval()
    with torch.no_grad():
        teacher.classifier.weight.normal_(0, 1.0)
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    inputs = {"input_ids": torch.tensor([[101, 2204, 102], [101, 2205, 102]]), "labels": torch.tensor([1, 0])}
    with torch.no_grad():
        cross_entropy = float(FinetuneTrainer(model=model, args=args).compute_loss(model, dict(inputs)))
        student = torch.log_softmax(model(input_ids=inputs["input_ids"]).logits / 2.0, dim=-1)
        target = torch.softmax(teacher(input_ids=inputs["input_ids"]).logits / 2.0, dim=-1)
        kl = float((target * (target.log() - student)).sum(-1).mean()) * 4.0
        assert kl > 1e-4
        for weight in (0.0, 0.3, 1.0):
            trainer = FinetuneTrainer(model=model, args=args, teacher=teacher, distill_weight=weight,
                                      distill_temperature=2.0)
            loss = float(trainer.compute_loss(model, dict(inputs)))
            assert loss == pytest.approx((1 - weight) * cross_entropy + weight * kl, rel=1e-5)
        _, outputs = trainer.compute_loss(model, dict(inputs), return_outputs=True)
    assert outputs.logits.shape == (2, 2)


def test_distillation_follows_the_teacher_and_refuses_another_task(task_files, tiny_shared_dir, tmp_path):
    teacher = run(task_files, tiny_shared_dir, tmp_path, "teacher", learning_rate=1e-3)
    plain = run(task_files, tiny_shared_dir, tmp_path, "plain", learning_rate=1e-3, seed=2)
    distilled = run(task_files, tiny_shared_dir, tmp_path, "distilled", learning_rate=1e-3, seed=2,
                    distill_from=teacher["output_dir"], distill_weight=1.0)
    assert distilled["recipe"]["distill_from"] == teacher["output_dir"]
    assert distilled["eval_loss"] != pytest.approx(plain["eval_loss"], rel=1e-6)  # the teacher changed the loss
    from sharedbert import SharedBertForSequenceClassification

    three = SharedBertForSequenceClassification.from_pretrained(tiny_shared_dir, num_labels=3)
    three.save_pretrained(tmp_path / "three-labels")
    with pytest.raises(ValueError, match="3 labels"):
        run(task_files, tiny_shared_dir, tmp_path, "bad", distill_from=str(tmp_path / "three-labels"))
