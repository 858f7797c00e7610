"""What fine-tuning can do beyond the plain recipe, for a converted model whose attention was refitted: layer-wise
learning-rate decay, a first stretch with the attention projections frozen, a pull toward the starting weights
(L2-SP, Li et al. 2018) and distillation from a fine-tuned teacher (Hinton et al. 2015; `distillation`'s
`LogitDistillation`, in the `DistillationTrainer` healing runs on too). `FinetuneTrainer` applies whichever
`FinetuneArguments` turn on; with none, it is the package's `ResumableTrainer`.
"""

from __future__ import annotations

import logging
import re

from transformers import TrainerCallback

from .distillation import DistillationTrainer, LogitDistillation

logger = logging.getLogger(__name__)

# Parameters of the attention projections: what a conversion refits and the frozen-attention warm-up holds still.
_ATTENTION_PROJECTION = re.compile(
    r"(\.attention\.\d+\.self\.|\.attention\.self\.)(shared_proj|query|key|value|query_scale|key_scale|value_scale|"
    r"head_bilinear)\b"
)


def is_attention_projection(name: str) -> bool:
    return _ATTENTION_PROJECTION.search(name) is not None


def parameter_depths(model) -> dict[str, int]:
    """Each parameter's depth for layer-wise learning rates: 0 for the embeddings, 1..L for the layers (a sublayer
    shared by several depths takes the highest), L + 1 for everything above (pooler, task head)."""
    config = model.config
    layers = config.num_hidden_layers
    maps = {"attention": getattr(config, "attention_layer_map", None),
            "crossattention": getattr(config, "attention_layer_map", None),
            "feed_forward": getattr(config, "ffn_layer_map", None)}
    depths = {}
    for name, _ in model.named_parameters():
        if ".embeddings." in f".{name}":
            depths[name] = 0
            continue
        stored = re.search(r"encoder\.(attention|crossattention|feed_forward)\.(\d+)\.", name)  # SharedBert
        plain = re.search(r"encoder\.layer\.(\d+)\.", name)  # BERT
        if stored and maps[stored.group(1)] is not None:
            index = int(stored.group(2))
            depths[name] = 1 + max(depth for depth, unique in enumerate(maps[stored.group(1)]) if unique == index)
        elif plain:
            depths[name] = 1 + int(plain.group(1))
        else:
            depths[name] = layers + 1
    return depths


class FreezeAttentionCallback(TrainerCallback):
    """Holds the attention projections still (no gradient, so AdamW neither moves nor decays them) for the first
    `fraction` of the steps, then lets them train. Decided from the step, so a resumed run freezes as the first did."""

    def __init__(self, model, fraction: float):
        self.parameters = [p for name, p in model.named_parameters() if is_attention_projection(name)]
        if not self.parameters:
            raise ValueError("freeze_attention_fraction: this model has no attention projections to hold still.")
        self.fraction = fraction
        self.until_step = 0

    def _set(self, step: int) -> None:
        frozen = step < self.until_step
        for parameter in self.parameters:
            parameter.requires_grad_(not frozen)

    def on_train_begin(self, args, state, control, **kwargs):
        self.until_step = round(self.fraction * state.max_steps)
        self._set(state.global_step)

    def on_step_begin(self, args, state, control, **kwargs):
        self._set(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self._set(self.until_step)


class FinetuneTrainer(DistillationTrainer):
    """`ResumableTrainer` with the recipe options for converted models (all off by default):

    * `layerwise_lr_decay` < 1: depth d of L + 1 trains at lr·decay^(L + 1 − d) (`parameter_depths`);
    * `pull_to_start` α > 0: adds α/2·Σ‖w − w₀‖² over the weights the model started with (not the new task head);
    * `teacher` with `distill_weight` w > 0: the loss becomes (1 − w)·cross-entropy + w·T²·KL(teacher ‖ student)
      at temperature `distill_temperature` T, the teacher a fine-tuned classifier of the same labels and vocabulary.
    (The frozen-attention warm-up is `FreezeAttentionCallback`.)"""

    def __init__(self, *args, layerwise_lr_decay: float = 1.0, pull_to_start: float = 0.0, teacher=None,
                 distill_weight: float = 0.0, distill_temperature: float = 2.0, **kwargs):
        distillation = LogitDistillation(teacher, distill_temperature) if teacher is not None else None
        super().__init__(*args, distillation=distillation, distill_weight=distill_weight, **kwargs)
        self.layerwise_lr_decay = layerwise_lr_decay
        self.pull_to_start = pull_to_start
        # The starting weights, taken before `train` can load a checkpoint: a resumed run pulls toward the same ones.
        self.start_weights = (
            {name: p.detach().clone() for name, p in self.model.named_parameters() if not name.startswith(
                ("classifier.", "score."))}
            if pull_to_start > 0 else {}
        )

    def create_optimizer(self, model=None):
        if self.layerwise_lr_decay == 1.0 or self.optimizer is not None:
            return super().create_optimizer(model)
        model = self.model if model is None else model
        decay_names = set(self.get_decay_parameter_names(model))
        depths = parameter_depths(model)
        top = max(depths.values())
        groups = {}
        for name, parameter in model.named_parameters():
            key = (depths[name], name in decay_names)
            groups.setdefault(key, []).append(parameter)
        optimizer_cls, optimizer_kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
        self.optimizer = optimizer_cls([
            {"params": params, "weight_decay": self.args.weight_decay if decays else 0.0,
             "lr": self.args.learning_rate * self.layerwise_lr_decay ** (top - depth)}
            for (depth, decays), params in sorted(groups.items(), key=lambda item: item[0])
        ], **optimizer_kwargs)
        return self.optimizer

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if self.start_weights:
            unwrapped = self.accelerator.unwrap_model(model)
            pull = sum((p - self.start_weights[name]).pow(2).sum()
                       for name, p in unwrapped.named_parameters() if name in self.start_weights)
            loss = loss + 0.5 * self.pull_to_start * pull
        return (loss, outputs) if return_outputs else loss


__all__ = ["FinetuneTrainer", "FreezeAttentionCallback", "is_attention_projection", "parameter_depths"]
