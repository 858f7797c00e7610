"""Distillation on `Trainer`: one `compute_loss` that mixes the task's loss with a term comparing the student to a
frozen teacher, the term pluggable.

* `DistillationTrainer`: loss = (1 − w)·task loss + w·distillation term (w = 1: the term alone, the task loss is not
  computed); a `ResumableTrainer`, so its runs checkpoint and resume like every other.
* `LogitDistillation`: fine-tuning's term (Hinton et al. 2015), T²·KL(teacher ‖ student) of the logits at temperature
  T, the teacher a fine-tuned classifier of the same labels and vocabulary.
* `Distiller`: healing's term, for an encoder converted from its teacher: the relative MSE of every layer's output
  and of every attention sublayer's output, 1 − cosine of the pooled sentence embeddings, and the gap between the
  in-batch cosine-similarity matrices, each with its weight.
"""

from __future__ import annotations

import torch

from ..sentence_embeddings import pooling_of
from .trainer import ResumableTrainer


class DistillationTrainer(ResumableTrainer):
    """A `ResumableTrainer` whose loss is (1 − `distill_weight`)·task loss + `distill_weight`·`distillation`(model,
    inputs, outputs), `outputs` the student's outputs when the task loss computed them (else None: the term runs the
    student itself; in evaluation the task loss is computed for its outputs whatever the weight). Without a term, or
    at weight 0, it is the plain `ResumableTrainer`."""

    def __init__(self, *args, distillation=None, distill_weight: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        if not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"distill_weight must be in [0, 1], got {distill_weight}.")
        self.distillation = distillation
        self.distill_weight = distill_weight

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.distillation is None or self.distill_weight == 0:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        loss, outputs = 0.0, None
        if self.distill_weight < 1 or return_outputs:  # evaluation needs the outputs (the predictions) too
            task_loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                                      num_items_in_batch=num_items_in_batch)
            loss = (1 - self.distill_weight) * task_loss
        loss = loss + self.distill_weight * self.distillation(model, inputs, outputs)
        return (loss, outputs) if return_outputs else loss


def _without_labels(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if k != "labels"}


def _follow(teacher, device: torch.device) -> None:
    """Puts the teacher where the student runs: Trainer places the model it trains (on a GPU, say), not the teacher."""
    if teacher.device != device:
        teacher.to(device)


class LogitDistillation:
    """T²·KL(teacher ‖ student) of the logits at temperature T, batch mean (the student's logits from the task loss's
    outputs when given)."""

    def __init__(self, teacher, temperature: float = 2.0):
        if temperature <= 0:
            raise ValueError(f"The distillation temperature must be positive, got {temperature}.")
        self.teacher = teacher.eval()
        self.temperature = temperature

    def __call__(self, model, inputs, outputs=None):
        if outputs is None:
            outputs = model(**_without_labels(inputs))
        _follow(self.teacher, outputs.logits.device)
        with torch.no_grad():
            teacher_logits = self.teacher(**_without_labels(inputs)).logits
        t = self.temperature
        return torch.nn.functional.kl_div(
            torch.log_softmax(outputs.logits.float() / t, dim=-1), torch.log_softmax(teacher_logits.float() / t, dim=-1),
            reduction="batchmean", log_target=True,
        ) * t**2


class _Recorder:
    """Collects the outputs of the given modules in call order (a module reused across depths records each call)."""

    def __init__(self, modules):
        self.outputs = []
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, module, args, output):
        self.outputs.append(output[0] if isinstance(output, tuple) else output)

    def pop(self):
        out, self.outputs = self.outputs, []
        return out

    def remove(self):
        for handle in self.handles:
            handle.remove()


def _relative_mse(student, teacher, mask):
    """Σ‖s − t‖² / Σ‖t‖² over real tokens: every layer counts alike whatever its scale."""
    mask = mask.unsqueeze(-1).to(student.dtype)
    return ((student - teacher).pow(2) * mask).sum() / (teacher.pow(2) * mask).sum().clamp_min(1e-12)


def _similarity_gap(student, teacher):
    """Mean squared difference of the in-batch cosine-similarity matrices (zero for a batch of one)."""
    student, teacher = (torch.nn.functional.normalize(x.float(), dim=-1) for x in (student, teacher))
    return (student @ student.T - teacher @ teacher.T).pow(2).mean()


class Distiller:
    """Healing's distillation term: the loss of a student encoder against the teacher encoder it was converted from
    on one tokenised batch. `weights` is any object with `hidden_weight`, `attention_weight`, `embedding_weight` and
    `similarity_weight` (a `healing_arguments.HealConfig`); `pooling` the sentence-transformers Pooling the model is used with
    (mean pooling by default). Call `close` to remove its hooks and put the teacher back on its own device (the term
    moves it to the student's)."""

    def __init__(self, student, teacher, weights, pooling=None):
        self.student = getattr(student, "base_model", student)
        self.teacher = getattr(teacher, "base_model", teacher)
        self.teacher_device = self.teacher.device
        self.weights = weights
        self.pooling = pooling if pooling is not None else pooling_of(hidden_size=self.teacher.config.hidden_size)
        self.student_attention = _Recorder(self.student.encoder.attention)
        self.teacher_attention = _Recorder([layer.attention for layer in self.teacher.encoder.layer])
        self.parts: dict = {}

    def __call__(self, model, inputs, outputs=None):
        """The term for `DistillationTrainer` (the student is the one this Distiller hooks; `outputs` unused)."""
        loss, self.parts = self.loss(inputs)
        return loss

    def loss(self, batch) -> tuple[torch.Tensor, dict]:
        """(weighted total, {part name: float}) on `batch` (input_ids, attention_mask, token_type_ids)."""
        device = self.student.device
        _follow(self.teacher, device)
        batch = {name: tensor.to(device) for name, tensor in batch.items()}
        mask = batch["attention_mask"]
        with torch.no_grad():
            teacher_out = self.teacher(**batch, output_hidden_states=True)
        teacher_att = self.teacher_attention.pop()
        student_out = self.student(**batch, output_hidden_states=True)
        student_att = self.student_attention.pop()
        t_hidden, s_hidden = teacher_out.hidden_states[1:], student_out.hidden_states[1:]
        if len(t_hidden) != len(s_hidden) or len(teacher_att) != len(student_att):
            raise ValueError(
                f"Teacher and student differ in depth ({len(t_hidden)} vs {len(s_hidden)} layers): heal a model "
                "converted from this teacher."
            )
        parts = {}
        parts["hidden"] = sum(_relative_mse(s, t, mask) for s, t in zip(s_hidden, t_hidden)) / len(t_hidden)
        parts["attention"] = sum(_relative_mse(s, t, mask) for s, t in zip(student_att, teacher_att)) / len(teacher_att)
        t_pooled = self.pool(teacher_out.last_hidden_state, mask)
        s_pooled = self.pool(student_out.last_hidden_state, mask)
        cosine = torch.nn.functional.cosine_similarity(s_pooled, t_pooled, dim=-1)
        self.last_cosines = cosine.detach()  # per sequence, for reports (build_minilm.length_agreement)
        parts["embedding"] = (1 - cosine).mean()
        parts["similarity"] = _similarity_gap(s_pooled, t_pooled)
        w = self.weights
        total = (w.hidden_weight * parts["hidden"] + w.attention_weight * parts["attention"]
                 + w.embedding_weight * parts["embedding"] + w.similarity_weight * parts["similarity"])
        return total, {k: float(v.detach()) for k, v in parts.items()}

    def pool(self, token_embeddings, attention_mask):
        return self.pooling({"token_embeddings": token_embeddings, "attention_mask": attention_mask})[
            "sentence_embedding"]

    def close(self):
        self.student_attention.remove()
        self.teacher_attention.remove()
        _follow(self.teacher, self.teacher_device)


__all__ = ["DistillationTrainer", "Distiller", "LogitDistillation"]
