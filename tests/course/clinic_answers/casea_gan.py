"""Notebook 06, case 1 (a GAN): other correct answers and wrong answers for the gan_step checker."""
import torch
import torch.nn.functional as F


def _bce(logits, label):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, float(label)))


# Other correct answers
def gan_step_autograd_grad(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)   # no detach: autograd.grad stops at D
    d_params = list(discriminator.parameters())
    for param, grad in zip(d_params, torch.autograd.grad(d_loss, d_params)):
        param.grad = grad
    opt_d.step()
    g_params = list(generator.parameters())
    for param, grad in zip(g_params, torch.autograd.grad(_bce(discriminator(fake), 1), g_params)):
        param.grad = grad
    opt_g.step()


def gan_step_second_forward_and_inputs(generator, discriminator, opt_g, opt_d, real, noise):
    opt_d.zero_grad()
    opt_g.zero_grad()
    with torch.no_grad():
        fake_for_d = generator(noise)
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake_for_d), 0)
    d_loss.backward()
    opt_d.step()
    g_loss = _bce(discriminator(generator(noise)), 1)
    g_loss.backward(inputs=list(generator.parameters()))
    opt_g.step()


def gan_step_restricted_to_d(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)
    d_loss.backward(inputs=list(discriminator.parameters()))   # never runs G's part: nothing freed, nothing wasted
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


def gan_step_dcgan_style(generator, discriminator, opt_g, opt_d, real, noise):
    discriminator.zero_grad()
    _bce(discriminator(real), 1).backward()
    fake = generator(noise)
    _bce(discriminator(fake.detach()), 0).backward()     # the two terms' gradients add up in .grad
    opt_d.step()
    generator.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


# Wrong answers
def gan_step_as_people_write_it(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = _bce(discriminator(fake), 1)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()


def gan_step_retain_graph(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)
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
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake), 0)
    d_loss.backward(retain_graph=True)
    opt_d.step()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


def gan_step_second_forward_without_detach(generator, discriminator, opt_g, opt_d, real, noise):
    opt_d.zero_grad()
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(generator(noise)), 0)
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(generator(noise)), 1).backward()
    opt_g.step()


def gan_step_detach_everywhere(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake.detach()), 1).backward()
    opt_g.step()


def gan_step_simultaneous(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    opt_g.zero_grad()
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)
    g_loss = _bce(discriminator(fake), 1)
    d_loss.backward()
    g_loss.backward(inputs=list(generator.parameters()))    # through D before its step
    opt_d.step()
    opt_g.step()


def gan_step_one_d_output_for_both_losses(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    on_fake = discriminator(fake)
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(on_fake, 0)).backward(retain_graph=True)
    opt_d.step()
    opt_g.zero_grad()
    _bce(on_fake, 1).backward()      # needs D's old weights: opt_d.step() changed them
    opt_g.step()


def gan_step_summed_backward(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    opt_g.zero_grad()
    d_loss = _bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)
    g_loss = _bce(discriminator(fake), 1)
    (d_loss + g_loss).backward()
    opt_d.step()
    opt_g.step()


def gan_step_without_opt_d_zero_grad(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


def gan_step_without_opt_g_zero_grad(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()
    _bce(discriminator(fake), 1).backward(inputs=list(generator.parameters()))
    opt_g.step()


def gan_step_saturating(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()
    opt_g.zero_grad()
    (-_bce(discriminator(fake), 0)).backward()       # minimise log(1 - D(fake))
    opt_g.step()


def gan_step_g_first(generator, discriminator, opt_g, opt_d, real, noise):
    opt_g.zero_grad()
    _bce(discriminator(generator(noise)), 1).backward()
    opt_g.step()
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(generator(noise).detach()), 0)).backward()
    opt_d.step()


def gan_step_averaged_d_loss(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    (0.5 * (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0))).backward()
    opt_d.step()
    opt_g.zero_grad()
    _bce(discriminator(fake), 1).backward()
    opt_g.step()


def gan_step_zero_grad_after_backward(generator, discriminator, opt_g, opt_d, real, noise):
    fake = generator(noise)
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(fake.detach()), 0)).backward()
    opt_d.step()
    _bce(discriminator(fake), 1).backward()
    opt_g.zero_grad()
    opt_g.step()


def gan_step_forgets_g(generator, discriminator, opt_g, opt_d, real, noise):
    opt_d.zero_grad()
    (_bce(discriminator(real), 1) + _bce(discriminator(generator(noise).detach()), 0)).backward()
    opt_d.step()


OTHER_CORRECT = {
    "gan_step": [gan_step_autograd_grad, gan_step_second_forward_and_inputs, gan_step_restricted_to_d,
                 gan_step_dcgan_style],
}

WRONG_ANSWERS = {
    "gan_step": [
        (gan_step_as_people_write_it, "Detach the fake batch in D's loss"),
        (gan_step_retain_graph, "d_loss's backward also ran through the generator"),
        (gan_step_second_forward_without_detach, "d_loss's backward also ran through the generator"),
        (gan_step_retain_graph_zero_grad_first, "g_loss's gradient plus d_loss's"),
        (gan_step_detach_everywhere, "no gradient at all"),
        (gan_step_simultaneous, "through D as it was before opt_d.step()"),
        (gan_step_one_d_output_for_both_losses, "raised Error 2"),
        (gan_step_summed_backward, "gradient of d_loss + g_loss"),
        (gan_step_without_opt_d_zero_grad, "The previous G step's backward passes through D"),
        (gan_step_without_opt_g_zero_grad, "G's gradient still held"),
        (gan_step_saturating, "saturating loss"),
        (gan_step_g_first, "G was stepped before D"),
        (gan_step_averaged_d_loss, "0.5 times the gradient of d_loss"),
        (gan_step_zero_grad_after_backward, "G's .grad was empty when opt_g stepped"),
        (gan_step_forgets_g, "G's optimizer was never stepped"),
    ],
}
