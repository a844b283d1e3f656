"""helpers.course.lesson06_bug_clinic.mutual_learning: the broken step fails, the tempting fixes mislead, the reference
is right; and the exercise's K-peer checker (mutual_learning_exercise)."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from helpers.course.lesson06_bug_clinic.mutual_learning import (
    CE_ONLY,
    MIXED,
    REFERENCE,
    REVERSED_KL,
    candidate_gradients,
    make_batch,
    make_peers,
    peer_losses,
    received,
    reference_gradients,
    reference_step,
    relative_error,
    same_gradients,
)
from helpers.tools.errors import KINDS

OPTIMIZERS = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1),
    "SGD with momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "Adam": lambda params: torch.optim.Adam(params, lr=1e-2),
}


def fresh(make_optimizer):
    peer1, peer2 = make_peers(seed=0)
    return peer1, peer2, make_optimizer(peer1.parameters()), make_optimizer(peer2.parameters())


def step_as_written(peer1, peer2, opt1, opt2, x, y, retain_graph=False):
    loss1, loss2 = peer_losses(peer1(x), peer2(x), y, detach_targets=False)
    opt1.zero_grad()
    loss1.backward(retain_graph=retain_graph)
    opt1.step()
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def grads(peer):
    return [p.grad for p in peer.parameters()]


def test_peers_and_batch_are_seeded_and_the_peers_differ():
    a1, a2 = make_peers(seed=3)
    b1, _ = make_peers(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a1.parameters(), b1.parameters()))
    assert not torch.equal(a1[0].weight, a2[0].weight)
    x, y = make_batch(seed=1)
    assert torch.equal(x, make_batch(seed=1)[0]) and torch.equal(y, make_batch(seed=1)[1])
    assert y.dtype == torch.long and int(y.max()) < a1[-1].out_features


@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=str)
def test_the_step_as_written_raises_error_1(optimizer):
    x, y = make_batch()
    with pytest.raises(RuntimeError) as caught:
        step_as_written(*fresh(OPTIMIZERS[optimizer]), x, y)
    assert KINDS["backward-twice"].matches(caught.value)


@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=str)
def test_retain_graph_trades_it_for_error_2(optimizer):
    x, y = make_batch()
    with pytest.raises(RuntimeError) as caught:
        step_as_written(*fresh(OPTIMIZERS[optimizer]), x, y, retain_graph=True)
    assert KINDS["inplace-version"].matches(caught.value)


def test_steps_moved_last_runs_but_gives_each_peer_loss1_plus_loss2():
    x, y = make_batch()
    peer1, peer2, opt1, opt2 = fresh(OPTIMIZERS["SGD"])
    candidates = candidate_gradients(peer1, peer2, x, y)
    loss1, loss2 = peer_losses(peer1(x), peer2(x), y, detach_targets=False)
    loss1.backward(retain_graph=True)
    loss2.backward()
    assert received(grads(peer1), candidates, 0) == received(grads(peer2), candidates, 1) == MIXED
    assert relative_error(grads(peer1), candidates[REFERENCE][0]) > 0.01


def test_candidates_are_all_different_and_leave_grad_alone():
    x, y = make_batch()
    peer1, peer2 = make_peers()
    candidates = candidate_gradients(peer1, peer2, x, y)
    assert all(p.grad is None for p in [*peer1.parameters(), *peer2.parameters()])
    for index in (0, 1):
        for first, second in itertools.combinations(candidates, 2):
            assert not same_gradients(candidates[first][index], candidates[second][index]), (first, second)
    assert set(candidates) == {REFERENCE, MIXED, CE_ONLY, REVERSED_KL}


def test_reference_is_the_gradient_of_the_own_loss_with_the_other_prediction_as_a_constant():
    x, y = make_batch()
    peer1, peer2 = make_peers()
    target2 = F.softmax(peer2(x), dim=1).detach().clone()   # a plain tensor: nothing connects it to peer 2
    logits1 = peer1(x)
    loss1 = F.cross_entropy(logits1, y) + (target2 * (target2.log() - F.log_softmax(logits1, dim=1))).sum(1).mean()
    by_hand = torch.autograd.grad(loss1, list(peer1.parameters()))
    assert same_gradients(reference_gradients(peer1, peer2, x, y)[0], by_hand)


@pytest.mark.parametrize("peer2_first", [False, True])
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_the_reference_step_gives_each_peer_its_own_gradient_in_either_order(optimizer, peer2_first):
    x, y = make_batch()
    peer1, peer2, opt1, opt2 = fresh(OPTIMIZERS[optimizer])
    expected = reference_gradients(peer1, peer2, x, y)
    reference_step(peer1, peer2, opt1, opt2, x, y, peer2_first=peer2_first)
    assert same_gradients(grads(peer1), expected[0]) and same_gradients(grads(peer2), expected[1])
    assert relative_error(grads(peer1), expected[0]) < 1e-5


def test_received_names_something_else_for_a_foreign_gradient():
    x, y = make_batch()
    peer1, peer2 = make_peers()
    candidates = candidate_gradients(peer1, peer2, x, y)
    assert received([2 * g for g in candidates[REFERENCE][0]], candidates, 0) == "something else"


# The exercise: K peers (helpers.course.lesson06_bug_clinic.mutual_learning_exercise)
def test_with_two_peers_the_sum_and_the_mean_over_the_others_agree_so_the_checker_also_uses_three():
    from helpers.course.lesson06_bug_clinic.mutual_learning import make_peer
    from helpers.course.lesson06_bug_clinic.mutual_learning_exercise import (
        SESSIONS,
        candidate_gradients,
    )

    assert {len(session.kinds) for session in SESSIONS} == {2, 3}
    x, y = make_batch()
    for k in (2, 3):
        cand = candidate_gradients([make_peer(seed) for seed in range(k)], x, y)
        summed = [c + sum(cand["kl"][0][j][n] for j in range(1, k)) for n, c in enumerate(cand["ce"][0])]
        assert same_gradients(summed, cand["right"][0]) == (k == 2)


def test_the_k_peer_reference_for_two_peers_is_the_worked_fix_reference():
    from helpers.course.lesson06_bug_clinic.mutual_learning_exercise import (
        candidate_gradients as k_peer_candidates,
    )

    x, y = make_batch()
    peer1, peer2 = make_peers()
    cand = k_peer_candidates([peer1, peer2], x, y)
    expected = reference_gradients(peer1, peer2, x, y)
    assert same_gradients(cand["right"][0], expected[0]) and same_gradients(cand["right"][1], expected[1])
    two = candidate_gradients(peer1, peer2, x, y)
    assert same_gradients(cand["mixed"][0], two[MIXED][0]) and same_gradients(cand["reversed"][1], two[REVERSED_KL][1])


def test_the_fit_names_the_weight_of_each_other_peer():
    from helpers.course.lesson06_bug_clinic.mutual_learning import make_peer
    from helpers.course.lesson06_bug_clinic.mutual_learning_exercise import (
        candidate_gradients,
        fit,
    )

    x, y = make_batch()
    cand = candidate_gradients([make_peer(seed) for seed in range(3)], x, y)
    mixture = [c + 0.25 * a + 2.0 * b for c, a, b in zip(cand["ce"][1], cand["kl"][1][0], cand["kl"][1][2])]
    weights = fit(mixture, cand, 1)
    assert weights["ce"] == pytest.approx(1) and weights[0] == pytest.approx(0.25, rel=1e-4)
    assert weights[2] == pytest.approx(2.0, rel=1e-4)
    assert fit(cand["reversed"][1], cand, 1) is None
