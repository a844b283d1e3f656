"""What the tools accept (losses and parameters in every form real code has), and the forward-time record."""
from __future__ import annotations

import torch
from torch import nn

from helpers.tools import expect_error, record_parameters
from helpers.tools.arguments import read_inputs, read_outputs, read_parameters
from helpers.tools.fingerprint import fingerprint


class Net(nn.Module):
    """Two models of this class have colliding parameter names: main.0.weight, main.0.bias."""

    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(nn.Linear(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x)


def test_parameters_read_from_every_form_keep_colliding_names_apart() -> None:
    first, second = Net(), Net()
    by_module = read_parameters({"G": first, "D": second}).tensors
    assert list(by_module) == ["G.main.0.weight", "G.main.0.bias", "D.main.0.weight", "D.main.0.bias"]
    pairs = read_parameters([*first.named_parameters(), *second.named_parameters()]).tensors
    assert list(pairs) == ["main.0.weight", "main.0.bias", "main.0.weight#2", "main.0.bias#2"]
    assert pairs["main.0.weight#2"] is second.main[0].weight
    modules = read_parameters([first, second]).tensors
    assert list(modules) == ["Net.main.0.weight", "Net.main.0.bias", "Net#2.main.0.weight", "Net#2.main.0.bias"]
    assert list(read_parameters(first).tensors) == ["main.0.weight", "main.0.bias"]
    assert list(read_parameters(first.named_parameters()).tensors) == ["main.0.weight", "main.0.bias"]
    assert list(read_parameters(list(first.parameters())).tensors) == ["param 0", "param 1"]


def test_a_shared_parameter_keeps_its_first_name_and_odd_items_become_notes() -> None:
    net = Net()
    read = read_parameters({"net": net, "again": net.main[0].weight, "odd": 3})
    assert list(read.tensors) == ["net.main.0.weight", "net.main.0.bias"]
    assert len(read.notes) == 1 and "int 3" in read.notes[0]


def test_outputs_keep_their_names_and_say_what_is_not_a_tensor() -> None:
    loss = torch.ones(1, requires_grad=True).sum()
    assert list(read_outputs({"d_loss": loss, "g_loss": loss * 2}).tensors) == ["d_loss", "g_loss"]
    assert list(read_outputs([loss, loss * 2]).tensors) == ["output 1", "output 2"]
    odd = read_outputs({"loss": 0.5})
    assert not odd.tensors and "not a tensor" in odd.notes[0]


def test_inputs_may_be_a_module_a_tensor_or_named_pairs() -> None:
    net = Net()
    assert read_inputs(net)[0] == list(net.parameters())
    assert read_inputs(net.main[0].weight)[0] == [net.main[0].weight]
    assert read_inputs(net.named_parameters())[0] == list(net.parameters())
    assert read_inputs(None)[0] is None


def test_a_fingerprint_tells_equal_values_from_changed_ones_in_every_dtype() -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool):
        tensor = torch.arange(6).reshape(2, 3).to(dtype)
        assert fingerprint(tensor) == fingerprint(tensor.clone())
        changed = tensor.clone()
        changed.view(-1)[-1] = 0
        assert fingerprint(changed) != fingerprint(tensor), dtype
    assert fingerprint(torch.zeros(2, 3)) != fingerprint(torch.zeros(3, 2)), "the shape is part of it"
    assert fingerprint(torch.tensor(1.0)) == fingerprint(torch.tensor(1.0))


def test_the_record_sees_a_data_write_and_a_fused_step_but_not_a_bumped_change() -> None:
    net = Net()
    record = record_parameters(net)
    with torch.no_grad():
        net.main[0].bias.add_(1.0)  # bumps the version: a change autograd sees, not a silent one
    net.main[0].weight.data.mul_(0.5)  # no bump
    assert record.changed_without_a_bump() == ["main.0.weight"]
    fused_net = Net()
    record = record_parameters(fused_net)
    fused_net(torch.ones(1, 2)).sum().backward()
    torch.optim.AdamW(fused_net.parameters(), lr=0.1, fused=True).step()
    bumped = fused_net.main[0].weight._version != record.entries["main.0.weight"][1]
    assert record.changed_without_a_bump() == ([] if bumped else ["main.0.weight", "main.0.bias"])


def test_an_error_of_the_call_shows_its_card_without_a_notebook() -> None:
    weight = torch.ones(3, requires_grad=True)
    with expect_error("non-scalar-output", show=False) as caught:
        (weight * 2).backward()
    text = str(caught.report)
    assert "Reduce the output first" in text and "Covered in notebook" not in text
    assert "Covered in notebook" not in caught.report._repr_html_()
