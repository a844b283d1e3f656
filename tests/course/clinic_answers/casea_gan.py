"""Notebook 06, case 1 (a GAN): other correct answers and wrong answers for the gan_step checker.

The exercise is the G-first step (G steps through D as it is, then D steps on the same fake batch, detached).
The steps in the worked fix's order (D first) are kept at the top: tests/course/test_clinic_gan.py runs them
through ``record_step`` to prove what the notebook says about them.
"""
import torch
import torch.nn.functional as F


def _bce(logits, label):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, float(label)))


def _d_loss(discriminator, real, fake):
    return _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)


# The worked fix's order (D first, then G), as the notebook's cells write them
def gan_step_as_people_write_it(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    d_loss = _d_loss(discriminator, real, fake)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = _bce(discriminator(fake), 1)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()


def gan_step_retain_graph(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    d_loss = _d_loss(discriminator, real, fake)
    opt_d.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_d.step()
    g_loss = _bce(discriminator(fake), 1)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()


def gan_step_retain_graph_zero_grad_first(generator, discriminator, opt_g, opt_d, real, noise):
    opt_d.zero_grad()
    opt_g.zero_grad()
    fake = generator(noise)
    d_loss = _d_loss(discriminator, real, fake)
    d_loss.backward(retain_graph=True)
    opt_d.step()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


def gan_step_detach_everywhere(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake.detach()), 1).backward()
    opt_g.step()


def gan_step_simultaneous(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    opt_g.zero_grad()
    d_loss = _d_loss(discriminator, real, fake.detach())
    g_loss = _bce(discriminator(fake), 1)
    d_loss.backward()
    g_loss.backward(inputs=list(generator.parameters()))    # through D before its step
    opt_d.step()
    opt_g.step()


def gan_step_worked_fix_copied(generator, discriminator, opt_g, opt_d, real, noise):
    """The worked fix (DCGAN order), right in itself, but not what this exercise asks."""
    fake = generator(noise)
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


# Other correct answers (G first)
def g_first_zero_d_after_g_backward(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()                                      # clears what g_loss's backward left in D's .grad
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_backward_restricted_to_g(generator, discriminator, opt_g, opt_d, real, noise):
    """Both zero_grad() at the top; g_loss's backward kept out of D with inputs= (G's trainable parameters)."""
    opt_g.zero_grad()
    opt_d.zero_grad()
    fake = generator(noise)
    _bce(discriminator(fake), 1).backward(inputs=[p for p in generator.parameters() if p.requires_grad])
    opt_g.step()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_autograd_grad(generator, discriminator, opt_g, opt_d, real, noise):
    """torch.autograd.grad for both: nothing ever lands in the wrong .grad."""
    fake = generator(noise)
    g_params = [p for p in generator.parameters() if p.requires_grad]       # a frozen weight has no gradient
    d_params = [p for p in discriminator.parameters() if p.requires_grad]
    for param, grad in zip(g_params, torch.autograd.grad(_bce(discriminator(fake), 1), g_params)):
        param.grad = grad
    opt_g.step()
    for param, grad in zip(d_params, torch.autograd.grad(_d_loss(discriminator, real, fake.detach()), d_params)):
        param.grad = grad
    opt_d.step()


def g_first_freeze_d_for_the_g_step(generator, discriminator, opt_g, opt_d, real, noise):
    """D frozen while G's backward runs through it (a common GAN idiom), its flags put back before D's own step."""
    opt_g.zero_grad()
    opt_d.zero_grad()
    fake = generator(noise)
    flags = [p.requires_grad for p in discriminator.parameters()]
    discriminator.requires_grad_(False)
    try:
        _bce(discriminator(fake), 1).backward()
    finally:
        for param, flag in zip(discriminator.parameters(), flags):
            param.requires_grad_(flag)
    opt_g.step()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_d_gradient_computed_first(generator, discriminator, opt_g, opt_d, real, noise):
    """D's backward first (on the detached batch), G's restricted to G; then the steps, G first."""
    discriminator.zero_grad(set_to_none=False)
    generator.zero_grad()
    fake = generator(noise)
    fake_for_d = fake.detach()
    (_bce(discriminator(real), 1) + _bce(discriminator(fake_for_d), 0)).backward()
    _bce(discriminator(fake), 1).backward(inputs=[p for p in generator.parameters() if p.requires_grad])
    opt_g.step()
    opt_d.step()


def g_first_tidy_at_the_end(generator, discriminator, opt_g, opt_d, real, noise):
    """zero_grad() where needed, and again at the end, so the step leaves no gradient behind."""
    fake = generator(noise)
    opt_g.zero_grad()
    g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(len(noise), 1))
    g_loss.backward()
    opt_g.step()
    opt_d.zero_grad()
    on_real, on_fake = discriminator(real), discriminator(fake.detach())
    d_loss = (F.binary_cross_entropy_with_logits(on_real, torch.ones_like(on_real))
              + F.binary_cross_entropy_with_logits(on_fake, torch.zeros_like(on_fake)))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    opt_d.zero_grad()


# Wrong answers (G first)
def g_first_zero_grad_both_at_the_top(generator, discriminator, opt_g, opt_d, real, noise):
    """The tidy habit: both zero_grad() first. g_loss's backward then fills D's .grad before D's backward."""
    opt_g.zero_grad()
    opt_d.zero_grad()
    fake = generator(noise)
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_no_detach(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake).backward()           # runs into G's freed graph
    opt_d.step()


def g_first_retain_graph(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward(retain_graph=True)
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake).backward()           # G's weights changed in place since
    opt_d.step()


def g_first_fresh_fake_for_d(generator, discriminator, opt_g, opt_d, real, noise):
    """D sees a new batch from the updated G: not the batch the contract names."""
    opt_g.zero_grad()
    _bce(discriminator(generator(noise)), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, generator(noise).detach()).backward()
    opt_d.step()


def g_first_fresh_fake_without_detach(generator, discriminator, opt_g, opt_d, real, noise):
    """A second generator forward, not detached: d_loss's backward runs into G after G's step."""
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    fake_again = generator(noise)
    with torch.no_grad():
        fake_again.copy_(fake)                               # the same numbers as the batch before G's step
    _d_loss(discriminator, real, fake_again).backward()
    opt_d.step()


def g_first_one_backward_of_both(generator, discriminator, opt_g, opt_d, real, noise):
    """Both losses, one backward, no detach: G also learns d_loss, D also g_loss."""
    opt_g.zero_grad()
    opt_d.zero_grad()
    fake = generator(noise)
    (_bce(discriminator(fake), 1) + _d_loss(discriminator, real, fake)).backward()
    opt_g.step()
    opt_d.step()


def g_first_detach_everywhere(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise).detach()
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward(inputs=list(discriminator.parameters()))
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake).backward()
    opt_d.step()


def g_first_without_opt_g_zero_grad(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_zero_d_after_its_backward(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.zero_grad()
    opt_d.step()


def g_first_saturating(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    (-_bce(discriminator(fake), 0)).backward()
    opt_g.step()
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_averaged_d_loss(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    (_d_loss(discriminator, real, fake.detach()) / 2).backward()
    opt_d.step()


_fakes = {}


def g_first_caches_the_fake_batch(generator, discriminator, opt_g, opt_d, real, noise):
    """State across calls: D's fake batch memoised by the noise tensor it came from."""
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    fake_for_d = _fakes.setdefault(id(noise), fake.detach())
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake_for_d).backward()
    opt_d.step()


_own = {}


def g_first_with_its_own_optimizer(generator, discriminator, opt_g, opt_d, real, noise):
    """State across calls: an optimizer for D built on the first call and kept, instead of opt_d."""
    optimizer = _own.setdefault("opt_d", torch.optim.SGD(discriminator.parameters(), lr=0.1))
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    optimizer.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    optimizer.step()


def g_first_keeps_the_first_optimizer(generator, discriminator, opt_g, opt_d, real, noise):
    """State across calls: the first opt_d it was given, kept in a global and used ever after."""
    optimizer = _own.setdefault("first opt_d", opt_d)
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    discriminator.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    optimizer.step()


def g_first_leaves_g_frozen(generator, discriminator, opt_g, opt_d, real, noise):
    """Freezes G once it has stepped ("D's step does not need it") and never unfreezes it."""
    g_first_zero_d_after_g_backward(generator, discriminator, opt_g, opt_d, real, noise)
    generator.requires_grad_(False)


def g_first_leaves_g_in_eval_mode(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()
    generator.eval()                                         # "G only samples from here on"
    opt_d.zero_grad()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_normalises_real_in_place(generator, discriminator, opt_g, opt_d, real, noise):
    real.sub_(real.mean(dim=0))
    g_first_zero_d_after_g_backward(generator, discriminator, opt_g, opt_d, real, noise)


def g_first_changes_the_learning_rate(generator, discriminator, opt_g, opt_d, real, noise):
    """A "two time-scale" tweak inside the step: D's learning rate halved on every call."""
    for group in opt_d.param_groups:
        group["lr"] = group["lr"] / 2
    g_first_zero_d_after_g_backward(generator, discriminator, opt_g, opt_d, real, noise)


def g_first_unfreezes_all_of_d(generator, discriminator, opt_g, opt_d, real, noise):
    """The freezing idiom with requires_grad_(True) to undo it: a weight handed over frozen comes back trainable."""
    opt_g.zero_grad()
    opt_d.zero_grad()
    fake = generator(noise)
    discriminator.requires_grad_(False)
    _bce(discriminator(fake), 1).backward()
    discriminator.requires_grad_(True)
    opt_g.step()
    _d_loss(discriminator, real, fake.detach()).backward()
    opt_d.step()


def g_first_divides_by_the_notebook_batch(generator, discriminator, opt_g, opt_d, real, noise):
    """Each BCE summed, then divided by the notebook's batch of 64: right only for batches of 64 rows."""
    def bce(logits, label):
        return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, float(label)), reduction="sum") / 64

    fake = generator(noise)
    opt_g.zero_grad()
    bce(discriminator(fake), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    (bce(discriminator(real), 1) + bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()


def g_first_puts_the_models_in_training_mode(generator, discriminator, opt_g, opt_d, real, noise):
    """"A training step trains": .train() on both models first, whatever mode they came in."""
    generator.train()
    discriminator.train()
    g_first_zero_d_after_g_backward(generator, discriminator, opt_g, opt_d, real, noise)


def g_first_returns_the_losses(generator, discriminator, opt_g, opt_d, real, noise):
    """Right steps, and the two losses returned for logging: the contract's step returns None."""
    fake = generator(noise)
    opt_g.zero_grad()
    g_loss = _bce(discriminator(fake), 1)
    g_loss.backward()
    opt_g.step()
    opt_d.zero_grad()
    d_loss = _d_loss(discriminator, real, fake.detach())
    d_loss.backward()
    opt_d.step()
    return g_loss.item(), d_loss.item()


OTHER_CORRECT = {
    "gan_step": [g_first_zero_d_after_g_backward, g_first_backward_restricted_to_g, g_first_autograd_grad,
                 g_first_freeze_d_for_the_g_step, g_first_d_gradient_computed_first, g_first_tidy_at_the_end],
}

WRONG_ANSWERS = {
    "gan_step": [
        (gan_step_worked_fix_copied, "D was stepped before G"),
        (gan_step_retain_graph, "D was stepped before G"),
        (g_first_zero_grad_both_at_the_top, "d_loss's gradient plus g_loss's"),
        (g_first_no_detach, "raised Error 1"),
        (g_first_no_detach, "whose graph g_loss's backward had already freed"),
        (g_first_retain_graph, "raised Error 2"),
        (g_first_fresh_fake_for_d, "made by G after its step"),
        (g_first_fresh_fake_without_detach, "after opt_g.step() a backward ran into G again"),
        (g_first_one_backward_of_both, "g_loss's gradient plus d_loss's"),
        (g_first_detach_everywhere, "no gradient at all"),
        (g_first_without_opt_g_zero_grad, "G's gradient still held"),
        (g_first_zero_d_after_its_backward, "D's .grad was empty when opt_d stepped"),
        (g_first_saturating, "saturating loss"),
        (g_first_averaged_d_loss, "0.5 times the gradient of d_loss"),
        (g_first_caches_the_fake_batch, "a fake batch from an earlier step"),
        (g_first_with_its_own_optimizer, "not through the optimizer you were given"),
        (g_first_keeps_the_first_optimizer, "D's optimizer was never stepped"),
        (g_first_leaves_g_frozen, "the generator's parameters with requires_grad changed"),
        (g_first_leaves_g_in_eval_mode, "left the generator (or one of its layers) in eval mode"),
        (g_first_normalises_real_in_place, "changed the input `real` in place"),
        (g_first_changes_the_learning_rate, "changed opt_d's settings"),
        (g_first_unfreezes_all_of_d, "`discriminator.0.weight.requires_grad` came back True"),
        (g_first_divides_by_the_notebook_batch, "is a batch size written into your code?"),
        (g_first_puts_the_models_in_training_mode, "came back in training mode; it was handed to you in eval mode"),
        (g_first_returns_the_losses, "returned a tuple, where this step returns None"),
    ],
}
