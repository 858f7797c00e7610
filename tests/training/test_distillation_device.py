"""The distillation teacher follows the student to its device (Trainer places only the model it trains: on a GPU
the teacher stayed on the CPU, found by the suite's first CUDA run), and healing puts it back afterwards. CPU-only
machines have one real device, so the teacher here reports another ("meta") and records where it is sent."""

from types import SimpleNamespace

import torch
from torch import nn

from sharedbert.training.distillation import LogitDistillation, _follow


class FarAwayTeacher(nn.Module):
    """A teacher whose `.device` (as a transformers model has) is another device; `.to` records the move."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(2, device="meta"))
        self.moves = []

    @property
    def device(self):
        return self.weight.device

    def to(self, device):
        self.moves.append(torch.device(device))
        return self

    def forward(self, **inputs):
        return SimpleNamespace(logits=torch.zeros(2, 3))


def test_the_logit_teacher_is_sent_to_the_students_device():
    teacher = FarAwayTeacher()
    student_outputs = SimpleNamespace(logits=torch.zeros(2, 3, requires_grad=True))
    loss = LogitDistillation(teacher)(None, {"input_ids": torch.zeros(2, 4, dtype=torch.long)}, student_outputs)
    assert teacher.moves == [torch.device("cpu")] and loss.item() >= 0


def test_a_teacher_already_there_is_left_alone():
    teacher = FarAwayTeacher()
    _follow(teacher, torch.device("meta"))
    assert teacher.moves == []
