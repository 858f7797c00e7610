"""Calibrate a converted SharedBert on real text, in closed form: no gradient steps, a minute of CPU.

`fitting.fit_attention` fits the attention from the weights alone, so it treats every input direction alike. BERT's
hidden states are far from isotropic (a few LayerNorm channels dominate), so a fitting error along a direction the
inputs never take costs nothing, and one along a dominant direction costs much. Calibration runs text through the
teacher (the BERT the student was converted from) and the student, one attention set at a time, in depth order:

1. **Whitened attention fit.** With Σ = E[x̃x̃ᵀ] the second moment of the student's own inputs to the layer (x̃ = [x,1],
   so biases count), the fit is redone on Q·Σ^½, K·Σ^½, V·Σ^½ and its rows mapped back by Σ^-½. The invariant fit's
   Frobenius error then equals the expected error of the scores and value paths on this text
   (E[(x̃ᵀ(B − B′)ỹ)²] = ‖Σ^½(B − B′)Σ^½‖² for independent x̃, ỹ).
2. **Output refit.** The attention output projection is refitted by (ridge) least squares from the student's attention
   context, which already carries the errors of the layers below, onto the teacher's attention output at that depth.

What it recovers on all-MiniLM-L6-v2 before any healing, per attention type: experiments/healing/README.md.
Healing then starts from there.

Covers encoders (any head) of every attention type but standard (whose conversion is exact), without cross-layer
sharing of attention (one set cannot match several different teacher layers; heal those instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from .fitting import fit_attention


@dataclass
class CalibrationFit:
    """One layer's attention set: the output projection's mean squared error on the calibration text before and
    after."""

    attention_set: int
    depth: int
    output_mse_before: float
    output_mse_after: float


class _Stop(Exception):
    """Raised by a hook once everything a pass needs is captured: the rest of the forward is not run."""


class _Capture:
    """A hook target that keeps the one tensor a pass needs (a module's first input) and stops the forward there."""

    def __init__(self):
        self.tensor = None

    def input(self, module, args):
        self.tensor = args[0]
        raise _Stop


class _LayerByLayer:
    """A model's stack run one depth at a time over the calibration batches. One forward pass records how the stack
    calls each layer on each batch (the attention mask, the sublayers a SharedBert stack lends the depth, ...); each
    depth then runs alone on the states the depth below left. That is L layer passes in all, where rerunning the model
    from its embeddings for every depth costs L²/2, and the student's states are those of its layers as refitted."""

    def __init__(self, model, layers, batches):
        self.layers, self.calls, self.states = layers, [], []
        hooks = [layer.register_forward_pre_hook(self._record, with_kwargs=True) for layer in layers]
        try:
            for batch in batches:
                self.calls.append([])
                _run(model, batch)
        finally:
            for hook in hooks:
                hook.remove()

    def _record(self, layer, args, kwargs):
        calls = self.calls[-1]
        if not calls:
            self.states.append(args[0])  # the embeddings' output: the first layer's input
        calls.append((args[1:], kwargs))
        if len(calls) == len(self.layers):
            raise _Stop  # the last layer runs later, on the refitted states

    def run(self, depth: int, batch_index: int) -> torch.Tensor:
        """Layer `depth` on batch `batch_index`'s states: its output states (a SharedBert layer returns them first in
        a tuple, transformers' BertLayer alone)."""
        args, kwargs = self.calls[batch_index][depth]
        output = self.layers[depth](self.states[batch_index], *args, **kwargs)
        return output[0] if isinstance(output, tuple) else output

    def advance(self, depth: int) -> None:
        """The states become layer `depth`'s outputs, run with its weights as they are now."""
        self.states = [self.run(depth, index) for index in range(len(self.states))]

    def input_of(self, module, depth: int, batch_index: int, mask) -> torch.Tensor:
        """`module`'s first input over the real tokens (`mask`) while layer `depth` runs on a batch, stopped there."""
        capture = _Capture()
        hook = module.register_forward_pre_hook(capture.input)
        try:
            self.run(depth, batch_index)
        except _Stop:
            pass
        finally:
            hook.remove()
        return capture.tensor[mask.to(capture.tensor.device)]

    def advance_capturing(self, module, depth: int, batch_index: int, mask) -> torch.Tensor:
        """Batch `batch_index`'s states moved on through layer `depth` (as `advance` does for every batch); returns
        `module`'s output over the real tokens (`mask`) on the way."""
        outputs = []
        hook = module.register_forward_hook(lambda module, args, output: outputs.append(output))
        try:
            self.states[batch_index] = self.run(depth, batch_index)
        finally:
            hook.remove()
        return outputs[0][mask.to(outputs[0].device)]


def unsupported(config) -> str | None:
    """Why `calibrate` cannot handle a SharedBert of this config, or None when it can (standard attention it can: it
    has nothing to do)."""
    if config.is_decoder or config.add_cross_attention:
        return "calibration covers encoders; this SharedBert is a decoder (is_decoder/add_cross_attention)"
    if len(set(config.attention_layer_map)) != len(config.attention_layer_map):
        # On a tiny random BERT shared three ways it made the end-to-end error worse (experiments/healing/README.md).
        # One set cannot match three different teacher layers, and the averaged feed-forward leaves nothing to
        # compensate.
        return (f"attention is shared across layers (layer_sharing={config.layer_sharing!r}): calibration matches "
                "each attention set to one teacher layer, and one set cannot match several")
    return None


def calibration_batches(tokenizer, texts: list[str], batch_size: int = 32, max_length: int = 256) -> list[dict]:
    """`texts` tokenised into padded batches (kept: calibration runs over them once per attention set)."""
    if not texts:
        raise ValueError("Calibration needs text: got no sentences.")
    batches = []
    for start in range(0, len(texts), batch_size):
        encoded = tokenizer(texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length,
                            return_tensors="pt")
        batches.append({k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    return batches


@torch.no_grad()
def calibrate(student, teacher, batches: list[dict], ridge: float = 1e-3) -> list[CalibrationFit]:
    """Calibrate `student` (a SharedBert encoder or any head on one, converted from `teacher`) in place on `batches`
    (from `calibration_batches`). Returns one `CalibrationFit` per layer; an empty list for standard attention, which
    the conversion already reproduces exactly. Raises ValueError for what `unsupported` names.

    `ridge` regularises Σ (towards a multiple of the identity) and the output refit (towards the current projection),
    relative to the mean diagonal of the matrices."""
    base = getattr(student, "base_model", student)
    bert = getattr(teacher, "base_model", teacher)
    config = base.config
    reason = unsupported(config)
    if reason is not None:
        raise ValueError(f"Cannot calibrate: {reason}. Heal instead (`sharedbert convert ... --heal`).")
    if config.attention_type == "standard":
        return []
    teacher_layers = bert.encoder.layer
    if len(teacher_layers) != config.num_hidden_layers:
        raise ValueError(f"The teacher has {len(teacher_layers)} layers and the student {config.num_hidden_layers}: "
                         "calibrate against the BERT the student was converted from.")
    was_training = (student.training, teacher.training)
    student.eval()
    teacher.eval()
    try:
        students = _LayerByLayer(student, base.encoder.layer, batches)
        teachers = _LayerByLayer(teacher, teacher_layers, batches)
        masks = [batch["attention_mask"].bool() for batch in batches]
        fits = []
        for depth, unique in enumerate(config.attention_layer_map):
            attention, teacher_attention = base.encoder.attention[unique], teacher_layers[depth].attention
            _refit_attention(attention, teacher_attention, config, _input_moment(students.states, masks), ridge)
            dense, teacher_dense = attention.output.dense, teacher_attention.output.dense
            # The student's attention contexts against the teacher's attention outputs; the teacher, never refitted,
            # moves on to the next depth in the same pass, the student once its output projection is refitted.
            before, after = _refit_output(dense, (
                (students.input_of(dense, depth, index, mask),
                 teachers.advance_capturing(teacher_dense, depth, index, mask))
                for index, mask in enumerate(masks)), ridge)
            students.advance(depth)
            fits.append(CalibrationFit(attention_set=unique, depth=depth, output_mse_before=before,
                                       output_mse_after=after))
        return fits
    finally:
        student.train(was_training[0])
        teacher.train(was_training[1])


def _augmented(x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    return torch.cat([x, torch.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)], -1)


def _run(model, batch) -> None:
    try:  # the batch where the model is (the tokenizer makes it on the CPU)
        model(**{name: tensor.to(model.device) for name, tensor in batch.items()})
    except _Stop:
        pass


def _input_moment(states: list[torch.Tensor], masks: list[torch.Tensor]) -> torch.Tensor:
    """Σ = E[x̃x̃ᵀ] over the real tokens of the student's inputs to a layer (one tensor a batch)."""
    total, count = 0.0, 0
    for hidden_states, mask in zip(states, masks):
        x = _augmented(hidden_states[mask.to(hidden_states.device)])
        total, count = total + x.T @ x, count + len(x)
    return total / count


def _sqrt_and_inverse(moment: torch.Tensor, ridge: float) -> tuple[torch.Tensor, torch.Tensor]:
    identity = torch.eye(len(moment), dtype=moment.dtype, device=moment.device)
    moment = moment + ridge * moment.diagonal().mean() * identity
    values, vectors = torch.linalg.eigh(moment)
    values = values.clamp_min(1e-12 * float(values.max()))
    return (vectors * values.sqrt()) @ vectors.T, (vectors / values.sqrt()) @ vectors.T


def _refit_attention(attention, teacher_attention, config, moment, ridge) -> None:
    """The invariant fit of the teacher layer's projections, weighted by the input moment."""
    root, inverse_root = (t.float() for t in _sqrt_and_inverse(moment, ridge))

    def rows(name):
        linear = getattr(teacher_attention.self, name)
        return torch.cat([linear.weight, linear.bias[:, None]], 1).float()

    fitted, _ = fit_attention(config.attention_type, rows("query") @ root, rows("key") @ root, rows("value") @ root,
                              config.num_attention_heads, o=teacher_attention.output.dense.weight.float(),
                              rank=config.effective_attention_rank, num_key_value_heads=config.num_key_value_heads,
                              query_rank=config.query_rank)
    # Linear layers that read the (whitened) input, those fitted with a bias, map back by Σ^-½. The output projection
    # reads the context instead, and `shared_lowrank_query`'s `query_up` (no bias) the rank-r code of `query_down`.
    reading_input = [key.removesuffix(".weight") for key in fitted
                     if key.endswith(".weight") and key.removesuffix(".weight") + ".bias" in fitted]
    for name in reading_input:
        whitened = torch.cat([fitted.pop(f"{name}.weight"), fitted.pop(f"{name}.bias")[:, None]], 1)
        fitted[f"{name}.weight"], fitted[f"{name}.bias"] = (whitened @ inverse_root)[:, :-1], (
            whitened @ inverse_root)[:, -1]
    for key, value in fitted.items():
        target = attention.output.dense.weight if key == "output.dense.weight" else attention.self.get_parameter(key)
        target.copy_(value.to(target.dtype))


def _refit_output(dense: nn.Linear, pairs: Iterable[tuple[torch.Tensor, torch.Tensor]],
                  ridge: float) -> tuple[float, float]:
    """Least squares from the student's attention contexts (the input of `dense`) onto the teacher's attention outputs
    at that depth, `pairs` of them over the real tokens of each batch; `dense` is replaced by the solution. Returns the
    mean squared error before and after."""
    hidden = dense.weight.shape[0]
    gram = torch.zeros(hidden + 1, hidden + 1, dtype=torch.float64, device=dense.weight.device)
    cross = torch.zeros(hidden + 1, hidden, dtype=torch.float64, device=dense.weight.device)
    target_energy, error_before, count = 0.0, 0.0, 0
    weights_before = torch.cat([dense.weight.double().T, dense.bias.double()[None]])
    for context, target in pairs:
        x, y = _augmented(context.to(gram.device)), target.to(gram.device).double()
        gram += x.T @ x
        cross += x.T @ y
        error_before += float((x @ weights_before - y).pow(2).sum())
        target_energy += float(y.pow(2).sum())
        count += y.numel()
    # Ridge towards the current projection (not towards zero): directions the text barely excites keep the fit.
    strength = ridge * gram.diagonal().mean()
    solution = torch.linalg.solve(gram + strength * torch.eye(len(gram), dtype=gram.dtype, device=gram.device),
                                  cross + strength * weights_before)
    # ‖XW − Y‖² = tr(WᵀGW) − 2·tr(WᵀC) + ‖Y‖², from the accumulated sums.
    error_after = float((solution * (gram @ solution)).sum() - 2 * (solution * cross).sum()) + target_energy
    dense.weight.copy_(solution[:-1].T.to(dense.weight.dtype))
    dense.bias.copy_(solution[-1].to(dense.bias.dtype))
    return error_before / count, max(error_after, 0.0) / count


__all__ = ["CalibrationFit", "calibrate", "calibration_batches", "unsupported"]
