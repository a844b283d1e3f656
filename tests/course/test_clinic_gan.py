"""helpers.course.lesson06_bug_clinic.gan: the GAN case's models, reference step, recording and the claims notebook 06
makes; and the exercise's G-first step (gan_exercise)."""
import pytest
import torch

from helpers.course.lesson06_bug_clinic.gan import (
    BATCH,
    DATA_DIM,
    NOISE_DIM,
    RecordingSGD,
    discriminator_loss,
    generator_loss,
    log_backward_passes,
    make_batch,
    make_gan,
    record_step,
    reference_gan_step,
    reference_gradients,
    relative_error,
    same_gradients,
)
from helpers.tools.errors import KINDS
from helpers.tools.saved import State, saved_tensors
from tests.course.clinic_answers.casea_gan import (
    gan_step_as_people_write_it,
    gan_step_detach_everywhere,
    gan_step_retain_graph,
    gan_step_retain_graph_zero_grad_first,
    gan_step_simultaneous,
)


def test_models_and_batch_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    (g1, d1), (g2, d2) = make_gan(3), make_gan(3)
    real, noise = make_batch(3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip([*g1.parameters(), *d1.parameters()],
                                                  [*g2.parameters(), *d2.parameters()]))
    assert real.shape == (BATCH, DATA_DIM) and noise.shape == (BATCH, NOISE_DIM)
    assert torch.equal(real, make_batch(3)[0]) and not torch.equal(real, make_batch(4)[0])
    assert g1(noise).shape == (BATCH, DATA_DIM) and d1(real).shape == (BATCH, 1)


def test_the_step_as_people_write_it_raises_error_1_at_the_g_step():
    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    log = []
    opt_g = RecordingSGD(generator.parameters(), name="G", log=log)
    opt_d = RecordingSGD(discriminator.parameters(), name="D", log=log)
    with pytest.raises(RuntimeError) as raised:
        gan_step_as_people_write_it(generator, discriminator, opt_g, opt_d, real, noise)
    assert KINDS["backward-twice"].matches(raised.value)
    assert log == ["D: step"], "D stepped, then G's backward failed"


def test_d_loss_backward_without_detach_frees_every_tensor_g_saved():
    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    fake = generator(noise)
    assert all(s.state is State.ALIVE for s in saved_tensors(fake))
    discriminator_loss(discriminator(real), discriminator(fake)).backward()
    saved = saved_tensors(fake)
    assert saved and all(s.state is State.FREED for s in saved)


def test_the_reference_step_is_stepped_with_the_reference_gradients():
    record = record_step(reference_gan_step, seed=5)
    assert record.matches_reference("D") and record.matches_reference("G")
    assert record.log == ["D: backward", "D: step", "D: backward", "G: backward", "G: step"]
    assert record.relative_error("G") < 1e-6


def test_the_alternatives_really_differ_from_the_reference():
    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    ref = reference_gradients(generator, discriminator, real, noise)
    assert not same_gradients(ref["G via pre-step D"], ref["G"]), "the updated D gives G another gradient"
    assert not same_gradients(ref["saturating->G"], ref["G"])
    assert relative_error(ref["d_loss->G"], [torch.zeros_like(g) for g in ref["G"]]) > 0
    assert all(p.grad is None for p in [*generator.parameters(), *discriminator.parameters()]), "copies only"


def test_retain_graph_gives_g_the_reference_gradient_but_runs_d_loss_backward_through_g():
    record = record_step(gan_step_retain_graph)
    assert record.matches_reference("D") and record.matches_reference("G")
    assert record.before("G: backward", "D: step") == 1 and record.count("G: backward") == 2


def test_retain_graph_with_zero_grad_first_trains_g_on_g_loss_plus_d_loss():
    record = record_step(gan_step_retain_graph_zero_grad_first)
    assert record.matches_reference("D") and not record.matches_reference("G")
    with_d_loss = [g + d for g, d in zip(record.reference["G"], record.reference["d_loss->G"])]
    assert same_gradients(record.grads["G"], with_d_loss)


def test_retain_graph_keeps_d_loss_saved_tensors_alive_after_the_step():
    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    fake = generator(noise)
    d_loss = discriminator_loss(discriminator(real), discriminator(fake))
    d_loss.backward(retain_graph=True)
    generator_loss(discriminator(fake)).backward()
    in_d_loss_only = saved_tensors(d_loss, inputs=list(discriminator.parameters()))
    assert in_d_loss_only and all(s.state is State.ALIVE for s in in_d_loss_only)
    assert all(s.state is State.FREED for s in saved_tensors(fake)), "g_loss's backward freed G's part"


def test_detaching_in_both_losses_leaves_g_without_a_gradient():
    record = record_step(gan_step_detach_everywhere)
    assert record.matches_reference("D")
    assert record.count("G: backward") == 0 and all(g is None for g in record.grads["G"])
    assert record.relative_error("G") == pytest.approx(1.0)


def test_g_loss_through_the_pre_step_d_is_not_the_reference():
    record = record_step(gan_step_simultaneous)
    assert record.matches_reference("D") and not record.matches_reference("G")
    assert same_gradients(record.grads["G"], record.reference["G via pre-step D"])


def test_the_backward_log_hooks_are_removed_on_exit():
    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    log = []
    with log_backward_passes({"G": generator, "D": discriminator}, log):
        generator_loss(discriminator(generator(noise))).backward()
    assert log == ["D: backward", "G: backward"]
    generator_loss(discriminator(generator(noise))).backward()
    assert len(log) == 2


def test_record_step_runs_on_the_chosen_device():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    record = record_step(reference_gan_step, device=device)
    assert record.grads["G"][0].device.type == device.type
    assert record.matches_reference("G")


# The exercise: the G-first step (helpers.course.lesson06_bug_clinic.gan_exercise)
def test_in_the_g_first_order_g_loss_backward_writes_into_d_grad():
    """What the exercise hinges on: G's backward passes through D, so D's .grad is not empty before D's step."""
    from helpers.course.lesson06_bug_clinic.gan_exercise import candidate_gradients

    generator, discriminator = make_gan(0)
    real, noise = make_batch(0)
    cand = candidate_gradients(generator, discriminator, real, noise)
    generator_loss(discriminator(generator(noise))).backward()
    assert same_gradients([p.grad for p in discriminator.parameters()], cand["g_loss->D"])
    assert relative_error(cand["g_loss->D"], [torch.zeros_like(g) for g in cand["D"]]) > 0
    assert not same_gradients(cand["D"], [d + g for d, g in zip(cand["D"], cand["g_loss->D"])])


def test_the_g_first_checker_varies_optimizer_kinds_and_how_data_arrives():
    from helpers.course.lesson06_bug_clinic.gan_exercise import SESSIONS

    kinds = {kind for session in SESSIONS for kind in (session.kind_g, session.kind_d)}
    assert {"SGD", "AdamW"} <= kinds and any("Adam" in kind for kind in kinds) and any("fused" in k for k in kinds)
    assert {session.refill_in_place for session in SESSIONS} == {True, False}
    assert len({session.seed for session in SESSIONS}) == len(SESSIONS)


def test_the_g_first_checker_leaves_the_global_rng_and_grad_mode_alone():
    from helpers import exercises
    from tests.course.clinic_answers.casea_gan import g_first_zero_d_after_g_backward

    state = torch.random.get_rng_state()
    assert exercises.evaluate("gan_step", g_first_zero_d_after_g_backward).passed
    assert torch.equal(torch.random.get_rng_state(), state) and torch.is_grad_enabled()


def test_the_gan_contract_takes_gradients_cleared_at_the_end_but_no_other_leftover():
    """step_contract.Twins: after a step, .grad is the reference's or cleared; anything else is a difference."""
    from helpers.course.exercises.engine.judge import judge
    from helpers.course.lesson06_bug_clinic.gan_contract import CONTRACT
    from tests.course.clinic_answers.casea_gan import g_first_fresh_fake_without_detach, g_first_tidy_at_the_end

    assert judge(CONTRACT, g_first_tidy_at_the_end) is None
    leftover = judge(CONTRACT, g_first_fresh_fake_without_detach)
    assert "`generator.0.weight.grad` differs from the reference's" in leftover
