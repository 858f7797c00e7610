"""Character-level language modelling on tiny Shakespeare (nanoGPT's `shakespeare_char`), causal and masked, with
transformers' GPT-2 / BERT as references and SharedBert's attention types as arms (issue 41; README.md is the report).

    python experiments/charlm/study.py --objective clm --arm standard --seed 1 --threads 1       # one cell
    python experiments/charlm/study.py --grid --objective clm --arms gpt2 standard --seeds 1 2 3 --threads 1
    python experiments/charlm/study.py --objective clm --arm shared --width 256 --heads 8 --seed 1  # a grid point
    python experiments/charlm/study.py --objective clm --arm standard --recipe gpu --iters 3000      # the GPU model

Data: nanoGPT's split of the text (first 90% of the characters train, last 10% validate); the vocabulary is the
sorted distinct characters of the training text, and MLM adds one [MASK] id after them.

Training runs on transformers' `Trainer` with nanoGPT's optimiser and schedule (AdamW, decay on tensors with dim >= 2
only, linear warm-up then cosine to min_lr at the last iteration). Training item k is the window at a position drawn
from a generator seeded by (seed, k), read in order, so every arm sees the same windows for a seed and a resumed run
sees exactly the windows it would have. Validation loss is the token mean over every non-overlapping window of the
validation text (the quantity nanoGPT's random-batch estimate estimates), every `eval_interval` iterations and at the
end.

A cell writes results/cells/NAME.json atomically when it finishes; its Trainer checkpoints (every eval_interval
iterations) sit in runs/charlm/NAME/ and a re-run resumes from the latest complete one. A finished cell is skipped
unless --force.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS_DIR = HERE / "results" / "cells"
WORK_DIR = REPO / "runs" / "charlm"
OBJECTIVES = ("clm", "mlm")
MASK_TOKEN = "[MASK]"
VALIDATION_MASK_SEED = 0  # the same validation masks for every arm and seed


@dataclasses.dataclass(frozen=True)
class Recipe:
    """nanoGPT's shakespeare_char hyper-parameters (config/train_shakespeare_char.py and its README's CPU line)."""

    layers: int
    heads: int
    width: int
    context: int
    batch: int
    iters: int
    dropout: float
    learning_rate: float = 1e-3
    min_learning_rate: float = 1e-4
    warmup_iters: int = 100
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 250
    train_fraction: float = 0.9
    mask_probability: float = 0.15  # MLM only: BERT's 15%, then 80% [MASK] / 10% random character / 10% unchanged

    @property
    def ffn(self) -> int:
        return 4 * self.width


RECIPES = {
    "cpu": Recipe(layers=4, heads=4, width=128, context=64, batch=12, iters=2000, dropout=0.0),
    "gpu": Recipe(layers=6, heads=6, width=384, context=256, batch=64, iters=5000, dropout=0.2),
}
OVERRIDES = {"width": "w", "heads": "h", "layers": "l", "iters": "i"}  # option -> its tag in a cell's name

# The arms, one line each. A SharedBert arm is its SharedBertConfig fields beyond the recipe's sizes; a new attention
# type is one more line here. "reference" arms are transformers' own models; "match_parameters_of" raises the FFN
# width until the arm has (within one FFN unit) the named arm's parameter count.
ARMS = {
    "gpt2": {"reference": "gpt2", "objectives": ("clm",)},
    "bert": {"reference": "bert", "objectives": ("mlm",)},
    "standard": {"attention_type": "standard"},
    "shared": {"attention_type": "shared"},
    "symmetric": {"attention_type": "symmetric"},
    "pairwise": {"attention_type": "pairwise"},
    "shared-matched": {"attention_type": "shared", "match_parameters_of": "standard"},
    # The directed-attention study (experiments/directed-attention, issue 42).
    "shared-kv": {"attention_type": "shared_kv"},
    "shared-head-query": {"attention_type": "shared_head_query"},
    "shared-lowrank-query": {"attention_type": "shared_lowrank_query"},
    # The LayerNorm-placement ablation (issue 41 item 5): standard attention in GPT-2's pre-LayerNorm layout.
    "standard-pre-ln": {"attention_type": "standard", "layer_norm_position": "pre"},
}

# The frontier study (experiments/frontier): every way the package cuts attention's projections, alone and composed.
# "-attN": attention-only cross-layer sharing with N stored attention layers (ALBERT; Takase & Kiyono's order is
# "sequence" unless the name says "-cycle" / "-cycle-rev"). "gqa-2" / "mqa": standard attention with 2 / 1 key-value
# heads. "-ffn": the saved parameters spent on the feed-forward width, "-wide" on the model width, to the named arm's
# parameter count; "standard-narrow": standard attention narrowed to `shared`'s parameter count.
ATT = {"layer_sharing": "attention"}
FRONTIER_ARMS = {
    "gqa-2": {"attention_type": "standard", "num_key_value_heads": 2},
    "mqa": {"attention_type": "standard", "num_key_value_heads": 1},
    "standard-att2": {"attention_type": "standard", **ATT, "num_unique_layers": 2},
    "standard-att2-cycle": {"attention_type": "standard", **ATT, "num_unique_layers": 2, "sharing_order": "cycle"},
    "standard-att2-cycle-rev": {"attention_type": "standard", **ATT, "num_unique_layers": 2,
                                "sharing_order": "cycle_rev"},
    "standard-att1": {"attention_type": "standard", **ATT, "num_unique_layers": 1},
    "mqa-att1": {"attention_type": "standard", "num_key_value_heads": 1, **ATT, "num_unique_layers": 1},
    "shared-kv-att2": {"attention_type": "shared_kv", **ATT, "num_unique_layers": 2},
    "shared-att1": {"attention_type": "shared", **ATT, "num_unique_layers": 1},
    "shared-head-query-att1": {"attention_type": "shared_head_query", **ATT, "num_unique_layers": 1},
    "shared-lowrank-query-att1": {"attention_type": "shared_lowrank_query", **ATT, "num_unique_layers": 1},
    "standard-narrow": {"attention_type": "standard", "match_parameters_of": "shared", "match_by": "width"},
    "standard-att1-ffn": {"attention_type": "standard", **ATT, "num_unique_layers": 1,
                          "match_parameters_of": "standard"},
    "shared-lowrank-query-att1-ffn": {"attention_type": "shared_lowrank_query", **ATT, "num_unique_layers": 1,
                                      "match_parameters_of": "standard"},
    "standard-att1-wide": {"attention_type": "standard", **ATT, "num_unique_layers": 1,
                           "match_parameters_of": "standard", "match_by": "width"},
}
ARMS.update(FRONTIER_ARMS)
# The frontier's follow-up (experiments/frontier/query-rank): multi-query attention with a rank-r query
# (`query_rank`), r = width / `query_rank_divisor` ("quarter": 4, "eighth": 8) so that its share holds at every width.
MQA = {"attention_type": "standard", "num_key_value_heads": 1}
QUERY_RANK_ARMS = {
    "mqa-query-quarter": {**MQA, "query_rank_divisor": 4},
    "mqa-query-quarter-att1": {**MQA, "query_rank_divisor": 4, **ATT, "num_unique_layers": 1},
    "mqa-query-eighth-att1": {**MQA, "query_rank_divisor": 8, **ATT, "num_unique_layers": 1},
    "mqa-query-quarter-att1-ffn": {**MQA, "query_rank_divisor": 4, **ATT, "num_unique_layers": 1,
                                   "match_parameters_of": "standard"},
}
ARMS.update(QUERY_RANK_ARMS)
# Its follow-up (experiments/frontier/query-rank-wide): the eighth-rank query stored once, with the parameters it saves
# spent on the model's width (as `standard-att1-wide` spends `standard-att1`'s), matched to `standard`'s count.
QUERY_RANK_WIDE_ARMS = {
    "mqa-query-eighth-att1-wide": {**MQA, "query_rank_divisor": 8, **ATT, "num_unique_layers": 1,
                                   "match_parameters_of": "standard", "match_by": "width"},
}
ARMS.update(QUERY_RANK_WIDE_ARMS)
# The third follow-up (experiments/frontier/query-norm): the rank-r query with its code RMS-normalised before B
# (`query_latent_norm`), as multi-head latent attention has it, stored once for every layer.
QUERY_NORM_ARMS = {
    "mqa-query-quarter-norm-att1": {**MQA, "query_rank_divisor": 4, "query_latent_norm": True, **ATT,
                                    "num_unique_layers": 1},
    "mqa-query-eighth-norm-att1": {**MQA, "query_rank_divisor": 8, "query_latent_norm": True, **ATT,
                                   "num_unique_layers": 1},
}
ARMS.update(QUERY_NORM_ARMS)
# The fourth follow-up (experiments/frontier/depth): at eight layers one stored multi-query attention layer is under a
# tenth of standard's projections; "-wide" spends what it saves on the model's width, to `standard`'s count.
DEPTH_ARMS = {
    "mqa-att1-wide": {**MQA, **ATT, "num_unique_layers": 1, "match_parameters_of": "standard", "match_by": "width"},
}
ARMS.update(DEPTH_ARMS)
# Keys of an arm that are not SharedBertConfig fields.
ARM_KEYS = ("match_parameters_of", "match_by", "query_rank_divisor")


def config_fields(settings: dict, width: int) -> dict:
    """An arm's SharedBertConfig keyword arguments beyond the recipe's sizes, at the model width `width`."""
    fields = {key: value for key, value in settings.items() if key not in ARM_KEYS}
    if "query_rank_divisor" in settings:
        fields["query_rank"] = width // settings["query_rank_divisor"]
    return fields


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------

def default_data_path() -> Path:
    from sharedbert.data.location import SHARED_DATA_PLACES, shared_data_dir

    found = shared_data_dir("tinyshakespeare/input.txt")
    if found is None:
        raise SystemExit(f"tinyshakespeare/input.txt not found in {SHARED_DATA_PLACES}: pass --data PATH.")
    return found / "tinyshakespeare" / "input.txt"


@dataclasses.dataclass
class CharData:
    """The text split as nanoGPT splits it, encoded with the training text's characters."""

    path: str
    sha256: str
    vocabulary: list[str]  # ids 0..V-1; MLM's [MASK] is id V
    train_ids: "torch.Tensor"
    validation_ids: "torch.Tensor"

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)


def position_of(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of `text[index]`."""
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


def load_data(path: Path, train_fraction: float) -> CharData:
    import torch

    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SystemExit(f"{path} is not UTF-8 text (byte {error.start}): {error.reason}.") from None
    split = int(len(text) * train_fraction)
    train, validation = text[:split], text[split:]
    if not train or not validation:
        raise SystemExit(f"{path} has {len(text)} characters: too few to split {train_fraction:.0%} / rest.")
    vocabulary = sorted(set(train))
    index = {character: i for i, character in enumerate(vocabulary)}
    unseen = set(validation) - index.keys()
    if unseen:
        first = split + min(validation.find(character) for character in unseen)
        line, column = position_of(text, first)
        raise SystemExit(
            f"{path}, line {line}, column {column}: the validation text has the character {text[first]!r}, which "
            f"the training text (the first {train_fraction:.0%}) never has, so the model has no id for it "
            f"({len(unseen)} such characters: {sorted(unseen)!r}). Remove them or use a text whose training part has "
            "every character.")
    encode = lambda part: torch.tensor([index[c] for c in part], dtype=torch.long)  # noqa: E731
    return CharData(str(path), hashlib.sha256(raw).hexdigest(), vocabulary, encode(train), encode(validation))


def examples_sha256(examples: list[dict]) -> str:
    """A fingerprint of evaluation examples (inputs and labels): equal across cells means scored on the same data."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(example["input_ids"].numpy().tobytes() + example["labels"].numpy().tobytes())
    return digest.hexdigest()


def unigram_loss(data: CharData) -> float:
    """Cross-entropy (nats) on the validation text of the training text's character frequencies."""
    import torch

    counts = torch.bincount(data.train_ids, minlength=data.vocab_size).double()
    log_probability = (counts / counts.sum()).log()
    return float(-log_probability[data.validation_ids].mean())


def corrupt(window, selected, generator, mask_id: int, vocab_size: int):
    """BERT's corruption of the `selected` positions: 80% [MASK], 10% a random character, 10% unchanged. Returns the
    model input and the labels (-100 where not selected)."""
    import torch

    labels = torch.where(selected, window, torch.full_like(window, -100))
    draw = torch.rand(window.shape, generator=generator)
    random_ids = torch.randint(vocab_size, window.shape, generator=generator)
    inputs = torch.where(selected & (draw < 0.8), torch.full_like(window, mask_id), window)
    inputs = torch.where(selected & (draw >= 0.8) & (draw < 0.9), random_ids, inputs)
    return inputs, labels


class TrainWindows:
    """A map-style dataset of `length` training examples; item k is the window at a position drawn from a generator
    seeded by (seed, k), and for MLM its mask from the same generator: an item is the same whatever order it is read
    in, so Trainer's sampling and a resumed run change nothing."""

    def __init__(self, ids, length: int, context: int, seed: int, objective: str, mask_probability: float,
                 vocab_size: int):
        self.ids, self.length, self.context, self.seed = ids, length, context, seed
        self.objective, self.mask_probability, self.vocab_size = objective, mask_probability, vocab_size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, k: int) -> dict:
        import torch

        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + k)  # distinct per (seed, k) for k < 1e6
        if self.objective == "clm":  # nanoGPT's get_batch: x = data[i:i+T], y = data[i+1:i+1+T]
            start = int(torch.randint(len(self.ids) - self.context, (1,), generator=generator))
            return {"input_ids": self.ids[start:start + self.context],
                    "labels": self.ids[start + 1:start + 1 + self.context]}
        start = int(torch.randint(len(self.ids) - self.context + 1, (1,), generator=generator))
        window = self.ids[start:start + self.context]
        selected = torch.rand(self.context, generator=generator) < self.mask_probability
        inputs, labels = corrupt(window, selected, generator, self.vocab_size, self.vocab_size)
        return {"input_ids": inputs, "labels": labels}


# MLM's scored positions, split by what the model sees there: every selected position; `[MASK]`; a character other
# than the target (the 10% random replacement; a random draw of the target itself reads as "unchanged"); the target.
MLM_VIEWS = ("selected", "mask", "random", "unchanged")


def mlm_view_masks(inputs, labels, mask_id: int) -> dict:
    selected = labels != -100
    mask = selected & (inputs == mask_id)
    unchanged = selected & (inputs == labels)
    return {"selected": selected, "mask": mask, "random": selected & ~mask & ~unchanged, "unchanged": unchanged}


def view_means(losses, inputs, labels, mask_id: int) -> dict:
    """Mean of per-position `losses` over each of MLM_VIEWS, and the position counts."""
    masks = mlm_view_masks(inputs, labels, mask_id)
    return {view: float(losses[masks[view]].double().mean()) for view in MLM_VIEWS}, {
        view: int(masks[view].sum()) for view in MLM_VIEWS}


def mlm_nulls(data: CharData, validation: list[dict]) -> dict:
    """What two context-free predictors score on the validation masks, per view: `unigram` predicts the training
    character frequencies u everywhere; `context_free` sees the character at the position and nothing else, and
    predicts the Bayes posterior of BERT's corruption: u under `[MASK]`, and under a visible c (equally likely left
    unchanged or replaced by a uniform draw over V characters) p(t | c) ∝ u(t)·(½·[t = c] + ½/V). A model that learns
    from context scores below `context_free`."""
    import torch

    counts = torch.bincount(data.train_ids, minlength=data.vocab_size).double()
    unigram = counts / counts.sum()
    posterior = unigram[None, :] * (0.5 * torch.eye(data.vocab_size, dtype=torch.double) + 0.5 / data.vocab_size)
    posterior = torch.cat([posterior / posterior.sum(1, keepdim=True), unigram[None, :]])  # row V: under [MASK]
    inputs = torch.stack([example["input_ids"] for example in validation])
    labels = torch.stack([example["labels"] for example in validation])
    targets = labels.clamp(min=0)
    scores = {"unigram": -unigram.log()[targets], "context_free": -posterior.log()[inputs, targets]}
    views = {name: view_means(losses, inputs, labels, data.vocab_size)[0] for name, losses in scores.items()}
    return {**views, "positions": view_means(scores["unigram"], inputs, labels, data.vocab_size)[1]}


def mlm_model_views(model, validation: list[dict], mask_id: int, precision: str, device: str) -> dict:
    """The trained model's validation loss over each of MLM_VIEWS (at the precision it trained and evaluated in)."""
    import torch
    import torch.nn.functional as F

    model.eval()
    losses, inputs, labels = [], [], []
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        for start in range(0, len(validation), 64):
            batch = validation[start:start + 64]
            batch_inputs = torch.stack([example["input_ids"] for example in batch])
            batch_labels = torch.stack([example["labels"] for example in batch])
            logits = model(input_ids=batch_inputs.to(device)).logits.float().cpu()
            losses.append(F.cross_entropy(logits.transpose(1, 2), batch_labels.clamp(min=0), reduction="none"))
            inputs.append(batch_inputs)
            labels.append(batch_labels)
    return view_means(torch.cat(losses), torch.cat(inputs), torch.cat(labels), mask_id)[0]


def validation_windows(ids, context: int, objective: str, mask_probability: float, vocab_size: int) -> list[dict]:
    """Every non-overlapping window of the validation text. CLM: the next character at each of the `context`
    positions. MLM: exactly round(mask_probability * context) positions per window, chosen and corrupted by one
    generator of fixed seed, so every window has the same number of targets (batch means = the token mean) and every
    arm and seed is scored on the same masks."""
    import torch

    examples = []
    if objective == "clm":
        for start in range(0, len(ids) - context, context):
            examples.append({"input_ids": ids[start:start + context], "labels": ids[start + 1:start + 1 + context]})
        return examples
    generator = torch.Generator().manual_seed(VALIDATION_MASK_SEED)
    targets = round(mask_probability * context)
    for start in range(0, len(ids) - context + 1, context):
        window = ids[start:start + context]
        selected = torch.zeros(context, dtype=torch.bool)
        selected[torch.randperm(context, generator=generator)[:targets]] = True
        inputs, labels = corrupt(window, selected, generator, vocab_size, vocab_size)
        examples.append({"input_ids": inputs, "labels": labels})
    return examples


# --------------------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------------------

def model_vocab_size(objective: str, data_vocab_size: int) -> int:
    return data_vocab_size + (1 if objective == "mlm" else 0)


def sharedbert_model(settings: dict, objective: str, recipe: Recipe, vocab_size: int, intermediate_size: int):
    """SharedBertLMHeadModel (CLM) or SharedBertForMaskedLM (MLM) with the config's defaults beyond the sizes."""
    from huggingface_hub.errors import StrictDataclassError

    from sharedbert import SharedBertConfig, SharedBertForMaskedLM, SharedBertLMHeadModel
    from sharedbert.configuration_sharedbert import ATTENTION_TYPES

    fields = config_fields(settings, recipe.width)
    try:
        config = SharedBertConfig(
            is_decoder=objective == "clm", vocab_size=vocab_size, hidden_size=recipe.width,
            num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads, intermediate_size=intermediate_size,
            max_position_embeddings=recipe.context, type_vocab_size=1, hidden_dropout_prob=recipe.dropout,
            attention_probs_dropout_prob=recipe.dropout, **fields)
    except (ValueError, TypeError, StrictDataclassError) as error:  # strict validation wraps the config's ValueError
        raise SystemExit(f"SharedBertConfig refuses the arm's settings {fields}: {error} (self-attention types of "
                         f"the installed package: {list(ATTENTION_TYPES)}).") from error
    return (SharedBertLMHeadModel if objective == "clm" else SharedBertForMaskedLM)(config)


def reference_model(kind: str, recipe: Recipe, vocab_size: int):
    """transformers' own GPT-2 (nanoGPT's architecture) or BERT at the recipe's sizes."""
    if kind == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=vocab_size, n_positions=recipe.context, n_embd=recipe.width,
                            n_layer=recipe.layers, n_head=recipe.heads, n_inner=recipe.ffn,
                            resid_pdrop=recipe.dropout, embd_pdrop=recipe.dropout, attn_pdrop=recipe.dropout,
                            bos_token_id=None, eos_token_id=None, tie_word_embeddings=True)
        return GPT2LMHeadModel(config)
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=vocab_size, hidden_size=recipe.width, num_hidden_layers=recipe.layers,
                        num_attention_heads=recipe.heads, intermediate_size=recipe.ffn,
                        max_position_embeddings=recipe.context, type_vocab_size=1,
                        hidden_dropout_prob=recipe.dropout, attention_probs_dropout_prob=recipe.dropout)
    return BertForMaskedLM(config)


def parameter_count(arm: str, objective: str, recipe: Recipe, vocab_size: int, intermediate_size: int | None = None):
    """Distinct parameters of the arm's model built on the meta device (tied tensors counted once)."""
    import torch

    from sharedbert.parameter_counts import count_model_parameters

    with torch.device("meta"):
        return count_model_parameters(build_model(arm, objective, recipe, vocab_size, intermediate_size)[0])


def matched_intermediate_size(arm: str, objective: str, recipe: Recipe, vocab_size: int) -> tuple[int, int]:
    """The FFN width at which `arm` has the parameter count of the arm it is matched to (counts are linear in the FFN
    width: two meta builds give the slope), and that count. Returns (intermediate_size, target count)."""
    target_arm = ARMS[arm]["match_parameters_of"]
    target = parameter_count(target_arm, objective, recipe, vocab_size)
    base = parameter_count(arm, objective, recipe, vocab_size, recipe.ffn)
    per_unit = parameter_count(arm, objective, recipe, vocab_size, recipe.ffn + 1) - base
    return recipe.ffn + round((target - base) / per_unit), target


def matched_width(arm: str, objective: str, recipe: Recipe, vocab_size: int) -> tuple[int, int]:
    """The model width (a multiple of the head count, FFN 4 × width, the recipe's heads and layers) at which `arm`'s
    parameter count is the closest to the arm it is matched to; ties go to the narrower. Only widths the arm can be
    built at count: with a rank-r query of r = width / divisor, r must be at least 1. Returns (width, target)."""
    target = parameter_count(ARMS[arm]["match_parameters_of"], objective, recipe, vocab_size)
    divisor = ARMS[arm].get("query_rank_divisor", 1)
    candidates = [w for w in range(recipe.heads, 4 * recipe.width + 1, recipe.heads) if w // divisor >= 1]
    width = min(candidates, key=lambda w: (abs(parameter_count(arm, objective, dataclasses.replace(recipe, width=w),
                                                               vocab_size, 4 * w) - target), w))
    return width, target


def build_model(arm: str, objective: str, recipe: Recipe, vocab_size: int, intermediate_size: int | None = None):
    """The arm's model and what sets it apart: (model, details)."""
    settings = ARMS[arm]
    if objective not in settings.get("objectives", OBJECTIVES):
        raise SystemExit(f"The arm {arm!r} is for {'/'.join(settings['objectives'])} only, not {objective}.")
    if "reference" in settings:
        return reference_model(settings["reference"], recipe, vocab_size), {"class": settings["reference"]}
    details = {}
    if intermediate_size is None and "match_parameters_of" in settings:
        if settings.get("match_by", "ffn") == "width":
            width, target = matched_width(arm, objective, recipe, vocab_size)
            recipe, intermediate_size = dataclasses.replace(recipe, width=width), 4 * width
        else:
            intermediate_size, target = matched_intermediate_size(arm, objective, recipe, vocab_size)
        details = {"matched_to": settings["match_parameters_of"], "matched_parameters": target,
                   "matched_by": settings.get("match_by", "ffn")}
    intermediate_size = intermediate_size or recipe.ffn
    model = sharedbert_model(settings, objective, recipe, vocab_size, intermediate_size)
    return model, {**details, "width": recipe.width, "intermediate_size": intermediate_size,
                   "class": type(model).__name__}


def attention_projection_parameters(model) -> int:
    """The self-attention projection parameters the model stores (Wq, Wk, Wv and whatever replaces them; not the
    output projection), a tensor shared across layers counted once: SharedBert's `.attention.N.self.`, BERT's
    `.attention.self.`, GPT-2's `attn.c_attn`."""
    return sum(parameter.numel() for name, parameter in model.named_parameters()
               if ".self." in name and ".attention." in name or ".attn.c_attn." in name)


def describe(arm: str, objective: str, recipe: Recipe, vocab_size: int) -> dict:
    """What an arm's model is, from a meta-device build (no memory, no time): its parameters, the self-attention
    projection parameters it stores, and the FLOPs of one training step per token (forward and backward at the
    recipe's context, torch's FLOP counter: matrix products and attention)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model, details = build_model(arm, objective, recipe, vocab_size)
        with FlopCounterMode(display=False) as counter:
            model(input_ids=torch.zeros(1, recipe.context, dtype=torch.long)).logits.float().sum().backward()
    settings = ARMS[arm]
    config = {} if "reference" in settings else {
        **config_fields(settings, details["width"]),
        **({"hidden_size": details["width"]} if details["width"] != recipe.width else {}),
        **({"intermediate_size": details["intermediate_size"]} if details["intermediate_size"] != recipe.ffn else {})}
    return {"parameters": sum(p.numel() for p in model.parameters()), "model": details,
            "config": config,  # SharedBertConfig keyword arguments beyond the recipe's sizes
            "attention_projection_parameters": attention_projection_parameters(model),
            "training_flops_per_token": counter.get_total_flops() / recipe.context}


# --------------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------------

def learning_rate_factor(step: int, recipe: Recipe) -> float:
    """nanoGPT's get_lr(it) / learning_rate: linear warm-up, cosine decay to min_lr at the last iteration."""
    if step < recipe.warmup_iters:
        return (step + 1) / (recipe.warmup_iters + 1)
    if step > recipe.iters:
        return recipe.min_learning_rate / recipe.learning_rate
    ratio = (step - recipe.warmup_iters) / max(1, recipe.iters - recipe.warmup_iters)
    coefficient = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return (recipe.min_learning_rate + coefficient * (recipe.learning_rate - recipe.min_learning_rate)) / recipe.learning_rate


def optimizer_and_schedule(model, recipe: Recipe):
    """nanoGPT's configure_optimizers: weight decay on tensors of dim >= 2 (matrices, embeddings) only."""
    import torch

    parameters = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": recipe.weight_decay},
              {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=recipe.learning_rate, betas=recipe.betas)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate_factor(step, recipe))
    return optimizer, schedule


def token_mean_cross_entropy(outputs, labels, num_items_in_batch=None):
    """Plain cross-entropy over every labelled position (labels already aligned with the logits: no shift here)."""
    import torch.nn.functional as F

    logits = outputs["logits"]
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def trainer_callbacks(stop_after_checkpoint: int | None):
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState

    class TrainingClock(TrainerCallback, ExportableState):
        """Wall time of the training steps only (evaluation and checkpoints excluded), kept in the checkpoints."""

        def __init__(self, seconds: float = 0.0, steps: int = 0):
            self.seconds, self.steps, self.started = seconds, steps, None

        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds += time.perf_counter() - self.started
            self.steps += 1

        def state(self) -> dict:
            return {"args": {"seconds": self.seconds, "steps": self.steps}, "attributes": {}}

    class KillAfterCheckpoint(TrainerCallback):
        """For the resume test: SIGKILL this process once a checkpoint at or after the step is on disk."""

        def on_save(self, args, state, control, **kwargs):
            if state.global_step >= stop_after_checkpoint:
                os.kill(os.getpid(), signal.SIGKILL)

    return [TrainingClock()] + ([KillAfterCheckpoint()] if stop_after_checkpoint else [])


def latest_complete_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint-N folder Trainer finished writing. Trainer 5.23 writes into checkpoint-N in place, model
    first and trainer_state.json last, so a kill can leave a folder without it (or with it cut short): skipped."""
    complete = []
    for folder in run_dir.glob("checkpoint-*"):
        try:
            step = int(folder.name.removeprefix("checkpoint-"))
            json.loads((folder / "trainer_state.json").read_text())
        except (ValueError, OSError):
            continue
        complete.append((step, folder))
    return max(complete)[1] if complete else None


def remove_incomplete_checkpoints(run_dir: Path, keep: Path | None) -> None:
    for folder in run_dir.glob("checkpoint-*"):
        if keep is None or int(folder.name.removeprefix("checkpoint-")) > int(keep.name.removeprefix("checkpoint-")):
            shutil.rmtree(folder)


def precision_and_device(precision: str) -> tuple[str, str]:
    import torch

    from sharedbert.precision import resolve_precision

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return resolve_precision(precision, device), device


def train_cell(cell: "Cell", data: CharData, run_dir: Path, stop_after_checkpoint: int | None = None) -> dict:
    """Train (or resume) one cell with Trainer; return what its result file records of the run."""
    import torch
    from transformers import Trainer, TrainingArguments, set_seed

    recipe, vocab_size = cell.recipe, model_vocab_size(cell.objective, data.vocab_size)
    set_seed(cell.seed)
    model, details = build_model(cell.arm, cell.objective, recipe, vocab_size)
    train_set = TrainWindows(data.train_ids, recipe.iters * recipe.batch, recipe.context, cell.seed, cell.objective,
                             recipe.mask_probability, data.vocab_size)
    validation = validation_windows(data.validation_ids, recipe.context, cell.objective, recipe.mask_probability,
                                    data.vocab_size)
    resume = latest_complete_checkpoint(run_dir)
    remove_incomplete_checkpoints(run_dir, resume)
    precision, device = precision_and_device(cell.precision)
    arguments = TrainingArguments(
        output_dir=str(run_dir), max_steps=recipe.iters, per_device_train_batch_size=recipe.batch,
        per_device_eval_batch_size=max(recipe.batch, 64), train_sampling_strategy="sequential",
        eval_strategy="steps", eval_steps=recipe.eval_interval, eval_on_start=resume is None,
        save_strategy="steps", save_steps=recipe.eval_interval, save_total_limit=2,
        logging_steps=min(50, recipe.eval_interval), max_grad_norm=recipe.grad_clip, seed=cell.seed,
        bf16=precision == "bf16", use_cpu=device == "cpu", prediction_loss_only=True, restore_callback_states_from_checkpoint=True,
        report_to=[], disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=arguments, train_dataset=train_set, eval_dataset=validation,
                      optimizers=optimizer_and_schedule(model, recipe), compute_loss_func=token_mean_cross_entropy,
                      callbacks=trainer_callbacks(stop_after_checkpoint))
    if resume is not None:
        print(f"{cell.name}: resuming from {resume.name}", flush=True)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if not any(entry.get("step") == recipe.iters and "eval_loss" in entry for entry in trainer.state.log_history):
        trainer.evaluate()
    clock = next(c for c in trainer.callback_handler.callbacks if type(c).__name__ == "TrainingClock")
    curve = learning_curve(trainer.state.log_history, recipe)
    from sharedbert.parameter_counts import count_model_parameters

    views = {}
    if cell.objective == "mlm":
        views = {"validation_views": {"model": mlm_model_views(trainer.model, validation, data.vocab_size,
                                                               precision, device), **mlm_nulls(data, validation)}}
    return {
        **views, "attention_projection_parameters": attention_projection_parameters(model),
        "parameters": count_model_parameters(model), "model": details, "final_validation_loss": curve[-1]["loss"],
        "curve": curve, "validation_windows": len(validation), "validation_sha256": examples_sha256(validation),
        "train_losses": [{"iteration": e["step"], "loss": e["loss"]}
                                         for e in trainer.state.log_history if "loss" in e],
        "train_tokens_per_second": clock.steps * recipe.batch * recipe.context / clock.seconds,
        "train_seconds": clock.seconds,
        "resumed_from": resume.name if resume else None, "device": device, "precision": precision,
        "torch_threads": torch.get_num_threads(),
    }


def learning_curve(log_history: list[dict], recipe: Recipe) -> list[dict]:
    """(iteration, tokens seen, validation loss) per evaluation, one per iteration (the latest if repeated)."""
    points = {entry["step"]: entry["eval_loss"] for entry in log_history if "eval_loss" in entry}
    return [{"iteration": step, "tokens": step * recipe.batch * recipe.context, "loss": loss}
            for step, loss in sorted(points.items())]


# --------------------------------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Cell:
    objective: str
    arm: str
    seed: int
    recipe_name: str
    recipe: Recipe
    overrides: dict
    precision: str

    @property
    def setting(self) -> str:
        """The objective, recipe and overrides: what the arms of one comparison share (e.g. clm-cpu-w256-h8)."""
        tags = "".join(f"-{OVERRIDES[key]}{value}" for key, value in self.overrides.items())
        return f"{self.objective}-{self.recipe_name}{tags}"

    @property
    def name(self) -> str:
        return f"{self.setting}-{self.arm}-seed{self.seed}"


def make_cell(objective: str, arm: str, seed: int, recipe_name: str, overrides: dict, precision: str,
              eval_interval: int | None = None) -> Cell:
    if arm not in ARMS:
        raise SystemExit(f"Unknown arm {arm!r}; the arms are {list(ARMS)} (ARMS in {Path(__file__).name}).")
    overrides = {key: value for key, value in overrides.items() if value is not None}
    recipe = dataclasses.replace(RECIPES[recipe_name], **overrides)
    recipe = dataclasses.replace(recipe, eval_interval=eval_interval or recipe.eval_interval)
    if recipe.width % recipe.heads:
        raise SystemExit(f"--width {recipe.width} is not divisible by --heads {recipe.heads}.")
    return Cell(objective, arm, seed, recipe_name, recipe, overrides, precision)


def machine() -> dict:
    import torch
    import transformers

    from sharedbert.precision import cpu_name

    cpu = cpu_name() or platform.processor() or platform.machine()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "gpu": gpu, "torch": torch.__version__, "transformers": transformers.__version__,
            "git_commit": commit or None}


def identity(cell: Cell, data: CharData) -> dict:
    """What a finished cell must match for a re-run to count it as done."""
    return {"objective": cell.objective, "arm": cell.arm, "seed": cell.seed, "recipe": cell.recipe_name,
            "hyperparameters": dataclasses.asdict(cell.recipe), "overrides": cell.overrides,
            "data_sha256": data.sha256}


@contextlib.contextmanager
def claim(work_dir: Path, name: str):
    """An exclusive, non-blocking lock on the cell (released when the process ends, even killed): True if ours."""
    from sharedbert.atomic import file_lock

    work_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(work_dir / f"{name}.lock", blocking=False) as ours:
        yield ours


def run_cell(cell: Cell, data: CharData, results_dir: Path, work_dir: Path, force: bool = False,
             stop_after_checkpoint: int | None = None) -> dict | None:
    """Train one cell to its result file, resuming its checkpoints; None if skipped (finished, or another process
    has it)."""
    from sharedbert.atomic import atomic_write_text

    result_path = results_dir / f"{cell.name}.json"
    wanted = identity(cell, data)
    if result_path.exists() and not force:
        stored = json.loads(result_path.read_text())
        differing = sorted(key for key, value in wanted.items() if stored.get(key) != json.loads(json.dumps(value)))
        if differing:
            raise SystemExit(f"{result_path} holds a finished cell of another configuration ({differing} differ): "
                             "use --force to replace it, or another --results-dir.")
        print(f"{cell.name}: finished already ({result_path}), skipped; --force re-runs it", flush=True)
        return None
    with claim(work_dir, cell.name) as mine:
        if not mine:
            print(f"{cell.name}: being trained by another process, skipped", flush=True)
            return None
        run_dir = work_dir / cell.name
        if force and run_dir.exists():
            shutil.rmtree(run_dir)
        print(f"{cell.name}: training", flush=True)
        started, where = time.perf_counter(), machine()  # the commit the cell starts from (this process's code)
        measured = train_cell(cell, data, run_dir, stop_after_checkpoint)
        result = {**wanted, "name": cell.name, "setting": cell.setting, "data": os.path.relpath(Path(data.path).resolve(), REPO),  # no machine's absolute path in results
                  "vocab_size": data.vocab_size, "unigram_validation_loss": unigram_loss(data), **measured,
                  "wall_seconds_this_process": time.perf_counter() - started, **where}
        atomic_write_text(result_path, json.dumps(result, indent=1) + "\n")
    print(f"{cell.name}: validation loss {result['final_validation_loss']:.4f}, {result['parameters']:,} parameters, "
          f"{result['train_tokens_per_second']:.0f} training tokens/s ({result['precision']})", flush=True)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objective", choices=OBJECTIVES, required=True)
    parser.add_argument("--arm", help="one cell: this arm (see ARMS)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--grid", action="store_true", help="run the missing cells of --arms x --seeds in order")
    parser.add_argument("--arms", nargs="+", help="with --grid")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5], help="with --grid")
    parser.add_argument("--recipe", choices=list(RECIPES), default="cpu")
    for option in OVERRIDES:
        parser.add_argument(f"--{option}", type=int, help=f"override the recipe's {option} (named in the cell)")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--threads", type=int, help="torch threads (one cell per core: 1)")
    parser.add_argument("--data", type=Path, help="the text (default: tinyshakespeare/input.txt in the shared data)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR, help="checkpoints (runs/ is not committed)")
    parser.add_argument("--eval-interval", type=int, help="evaluate and checkpoint every N iterations (default 250)")
    parser.add_argument("--force", action="store_true", help="re-run a finished cell from scratch")
    parser.add_argument("--describe", action="store_true",
                        help="print each arm's parameters, stored attention projections and training FLOPs per token "
                             "as JSON (with --arms), train nothing")
    parser.add_argument("--stop-after-checkpoint", type=int, help=argparse.SUPPRESS)  # the resume test's SIGKILL
    args = parser.parse_args(argv)
    if args.describe:
        return print_descriptions(args)
    if args.grid == bool(args.arm) or (args.grid and not args.arms):
        parser.error("give --arm ARM for one cell, or --grid with --arms A B ... (and --seeds)")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import sharedbert  # noqa: F401  (registers the Auto classes)

    overrides = {option: getattr(args, option) for option in OVERRIDES}
    plan = [(arm, seed) for seed in args.seeds for arm in args.arms] if args.grid else [(args.arm, args.seed)]
    cells = [make_cell(args.objective, arm, seed, args.recipe, overrides, args.precision, args.eval_interval)
             for arm, seed in plan]  # every name checked before the first cell trains
    with torch.device("meta"):  # a refused arm or objective stops here, before any cell trains
        for cell in cells:
            build_model(cell.arm, cell.objective, cell.recipe, 2 + (cell.objective == "mlm"))
    data = load_data(args.data or default_data_path(), cells[0].recipe.train_fraction)
    for cell in cells:
        run_cell(cell, data, args.results_dir, args.work_dir, args.force, args.stop_after_checkpoint)
    return 0


def print_descriptions(args) -> int:
    overrides = {option: getattr(args, option) for option in OVERRIDES}
    data = load_data(args.data or default_data_path(), RECIPES[args.recipe].train_fraction)
    described = {}
    for arm in args.arms or [args.arm]:
        cell = make_cell(args.objective, arm, 1, args.recipe, overrides, args.precision)
        described[arm] = describe(arm, args.objective, cell.recipe,
                                  model_vocab_size(args.objective, data.vocab_size))
    print(json.dumps({"setting": cell.setting, "arms": described}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
