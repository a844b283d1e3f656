"""Answers to notebook 08's exercise, right and wrong, as a learner could write them in the notebook.

The test sends them by value (cloudpickle), as the checker sends a notebook's function: the workers never import
this module.
"""
import torch

from helpers.course.models import own_term, shared_term, two_losses


def right_inputs(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def right_detach(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    (shared_term(o1, o2.detach()) + own_term(o1) + shared_term(o1.detach(), o2) + own_term(o2)).backward()
    opt1.step()
    opt2.step()


def right_manual_allreduce(m1, m2, opt1, opt2, x1, x2):
    import torch.distributed as dist
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    for p, g in zip(p1 + p2, torch.autograd.grad(l1, p1, retain_graph=True) + torch.autograd.grad(l2, p2)):
        dist.all_reduce(g)
        p.grad = g / dist.get_world_size()
    opt1.step()
    opt2.step()


def seed_fix(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True)
    l2.backward()
    opt1.step()
    opt2.step()


def sum_backward(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    (l1 + l2).backward()
    opt1.step()
    opt2.step()


def agrad(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    for p, g in zip(p1 + p2, torch.autograd.grad(l1, p1, retain_graph=True) + torch.autograd.grad(l2, p2)):
        p.grad = g
    opt1.step()
    opt2.step()


def swapped(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True, inputs=list(m1.parameters()))
    l1.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def no_zero(m1, m2, opt1, opt2, x1, x2):
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_between(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    opt1.step()
    l2.backward(inputs=list(m2.parameters()))
    opt2.step()


def full_second_backward(m1, m2, opt1, opt2, x1, x2):
    """Wrong: L1 restricted to M1, then a full backward of L2, which reaches M1 after M1's wrapper has averaged."""
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward()
    opt1.step()
    opt2.step()


def module_bypass(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1.module(x1), m2.module(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def halved(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    (l1 / 2).backward(retain_graph=True, inputs=list(m1.parameters()))
    (l2 / 2).backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def only_head(m1, m2, opt1, opt2, x1, x2):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.module[2].parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def stub(m1, m2, opt1, opt2, x1, x2):
    raise NotImplementedError


def two_forwards_detached(m1, m2, opt1, opt2, x1, x2):
    """Right, another way: each loss from its own forward pass, the other model's output detached."""
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    (shared_term(o1, o2.detach()) + own_term(o1)).backward()
    o1, o2 = m1(x1), m2(x2)
    (shared_term(o1.detach(), o2) + own_term(o2)).backward()
    opt1.step()
    opt2.step()


def doubled_by_world_size(m1, m2, opt1, opt2, x1, x2):
    """Wrong: the losses multiplied by the world size, as if DDP summed the ranks' gradients."""
    import torch.distributed as dist
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    (l1 * dist.get_world_size()).backward(retain_graph=True, inputs=list(m1.parameters()))
    (l2 * dist.get_world_size()).backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def steps_twice(m1, m2, opt1, opt2, x1, x2):
    """Wrong: opt1 steps after each backward."""
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    opt1.step()
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def raises_unfinished_reduction(m1, m2, opt1, opt2, x1, x2):
    """Wrong: L1's backward reaches only M1's head; the next forward raises DDP's error."""
    only_head(m1, m2, opt1, opt2, x1, x2)


def stub_as_generated(m1, m2, opt1, opt2, x1, x2):
    """The student copy's stub."""
    # YOUR CODE HERE
    raise NotImplementedError("your code here")


def code_then_stub(m1, m2, opt1, opt2, x1, x2):
    """Started, not finished: runs its forward, then the stub's raise (found not attempted by the processes)."""
    two_losses(m1(x1), m2(x2))
    raise NotImplementedError("your code here")


# Written by a reviewer who read only the student notebook; their first diagnoses pointed the wrong way.

def allreduce_sum_no_divide(m1, m2, opt1, opt2, x1, x2):
    """Wrong: autograd.grad, all_reduce (a sum), no division by the world size."""
    import torch.distributed as dist
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    grads = list(torch.autograd.grad(l1, p1, retain_graph=True)) + list(torch.autograd.grad(l2, p2))
    for p, g in zip(p1 + p2, grads):
        g = g.clone()
        dist.all_reduce(g)
        p.grad = g
    opt1.step()
    opt2.step()


def step_before_backward(m1, m2, opt1, opt2, x1, x2):
    """Wrong: both optimizers step before the backward passes."""
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(m1(x1), m2(x2))
    opt1.step()
    opt2.step()
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))


def both_outputs_detached(m1, m2, opt1, opt2, x1, x2):
    """Wrong: both outputs detached in the shared term, so it trains nobody."""
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1 = shared_term(o1.detach(), o2.detach()) + own_term(o1)
    l2 = shared_term(o1.detach(), o2.detach()) + own_term(o2)
    (l1 + l2).backward()
    opt1.step()
    opt2.step()
