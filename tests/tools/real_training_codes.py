"""Ten real training codes, written small (random weights) but with the originals' structure and step code.

Each family is a step written as a generator: it builds its models, runs the forward, yields ``FORWARD_DONE``
(where a record of the parameters belongs), then yields each backward or ``torch.autograd.grad`` call *about to
happen* as a ``Call``, and carries on with what the call returned. A test drives it up to the call it wants, asks
the tools, then runs the call. ``Context`` lets the same code run as its own *untouched copy* (``reference=True``):
no change between a forward and the call that needs it (``ctx.between``), no checkpoint, no compile; the gradient
PyTorch would give if nothing had changed behind autograd's back.

Families: WGAN-GP (gradient penalty with ``create_graph``), SNGAN (spectral norm), SAC (twin Q, Polyak targets),
VQGAN (straight-through codebook, adaptive weight), BYOL (EMA target), pix2pix (U-Net and PatchGAN), activation
checkpointing of both kinds, ``torch.compile``, LoRA adapters on a frozen base, GradNorm.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm
from torch.utils.checkpoint import checkpoint

FORWARD_DONE = "forward done"  # what a step yields once the forward pass is done: a record is taken here
RUNS, WRONG_VALUES = "runs", "wrong-values"  # outcomes that are no error kind


def cdist_differentiates_twice() -> bool:
    """Whether this build has a backward for ``torch.cdist``'s backward (torch 2.13 has none; 2.15 has one)."""
    x = torch.randn(3, 2, requires_grad=True)
    (gradient,) = torch.autograd.grad(torch.cdist(x, torch.randn(2, 2)).sum(), x, create_graph=True)
    try:
        gradient.sum().backward()
    except RuntimeError:
        return False
    return True
REENTRANT, NON_REENTRANT, COMPILED = ("checkpoint (use_reentrant=True)", "checkpoint (use_reentrant=False)",
                                      "torch.compile region")  # as helpers.tools.regions labels them


@dataclass
class Call:
    """One ``backward`` or ``torch.autograd.grad`` call, with exactly the arguments the real code passes."""

    name: str
    outputs: Any
    inputs: Any = None
    autograd_grad: bool = False
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def run(self) -> Any:
        """Make the call; ``autograd.grad``'s result, or None for ``backward``."""
        if self.autograd_grad:
            return torch.autograd.grad(self.outputs, self.inputs, **self.kwargs)
        extra = {} if self.inputs is None else {"inputs": self.inputs}
        self.outputs.backward(**extra, **self.kwargs)
        return None


def backward(name: str, loss: torch.Tensor, inputs: Any = None, **kwargs: Any) -> Call:
    return Call(name, loss, inputs, False, kwargs)


def grad(name: str, outputs: Any, inputs: Any, **kwargs: Any) -> Call:
    return Call(name, outputs, inputs, True, kwargs)


@dataclass
class Context:
    """How a step runs: for real, or as its untouched reference; and the models it built, by name."""

    reference: bool = False
    models: Dict[str, nn.Module] = field(default_factory=dict)

    def between(self, action: Callable[[], Any]) -> None:
        """A change made between a forward pass and a call that needs its values (the mistake): skipped in the
        reference."""
        if not self.reference:
            action()

    def checkpoint(self, function: Callable[..., Any], *args: Any, use_reentrant: bool) -> Any:
        """``torch.utils.checkpoint.checkpoint``; a plain call in the reference."""
        if self.reference:
            return function(*args)
        return checkpoint(function, *args, use_reentrant=use_reentrant)

    def compile(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.compile(backend="aot_eager")``; the function itself in the reference."""
        if self.reference:
            return function
        torch._dynamo.reset()  # a fresh build each case: no recompile limit, no graph of an earlier case
        return torch.compile(function, backend="aot_eager")


Step = Generator[Any, Any, None]


@dataclass(frozen=True)
class Variant:
    """One way a family's step is written: correct, or with a usual mistake.

    Attributes:
        family, name: for test ids.
        step: the generator function, called with a ``Context``.
        calls: the names of the calls it makes, in order; the last is the one the variant is about.
        expected: what PyTorch does at the last call: an error kind, ``RUNS``, ``WRONG_VALUES``, or ``"message: ..."``
            (part of the message of an error whose kind depends on ``helpers.tools.errors.KINDS``); earlier calls
            run.
        record: take ``record_parameters`` right after the forward (the variant may change weights silently).
        opaque: the opaque region every call runs through, as ``helpers.tools.regions`` labels it, or None.
    """

    family: str
    name: str
    step: Callable[[Context], Step]
    calls: Tuple[str, ...]
    expected: str
    record: bool = False
    opaque: Optional[str] = None

    def expected_at(self, index: int) -> str:
        return self.expected if index == len(self.calls) - 1 else RUNS


def drive(variant: Variant, index: int, reference: bool = False,
          at_forward: Optional[Callable[[Context], None]] = None) -> Tuple[Context, Call]:
    """Build fresh (seed 0), run the step up to call ``index`` (running the calls before it), and return it unrun."""
    torch.manual_seed(0)
    ctx = Context(reference=reference)
    steps = variant.step(ctx)
    sent: Any = None
    made = 0
    while True:
        event = steps.send(sent)
        sent = None
        if event is FORWARD_DONE:
            if at_forward is not None:
                at_forward(ctx)
            continue
        assert isinstance(event, Call), event
        assert event.name == variant.calls[made], f"{variant.name}: call {made} is {event.name!r}"
        if made == index:
            return ctx, event
        sent = event.run()
        made += 1


def leaf_parameters(ctx: Context) -> List[torch.Tensor]:
    """Every parameter of the context's models, once each."""
    seen: Dict[int, torch.Tensor] = {}
    for model in ctx.models.values():
        for parameter in model.parameters():
            seen.setdefault(id(parameter), parameter)
    return list(seen.values())


def gradients(ctx: Context, call: Call, result: Any) -> List[Optional[torch.Tensor]]:
    """What a call computed: ``autograd.grad``'s tensors, or every parameter's ``.grad`` after a backward."""
    if call.autograd_grad:
        return [None if g is None else g.detach().clone() for g in result]
    return [None if p.grad is None else p.grad.detach().clone() for p in leaf_parameters(ctx)]


# ====================================================================== shared building blocks


def drift(model: nn.Module, scale: float = 0.1) -> None:
    """Move ``model``'s weights a little, as some training would have: an online network away from its copy."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn_like(parameter))


class ConvGenerator(nn.Module):
    """DCGAN's generator, 16x16: z -> ConvTranspose/BatchNorm/ReLU x2 -> ConvTranspose -> Tanh."""

    def __init__(self, nz: int = 8, width: int = 8, channels: int = 3) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, 4 * width, 4, 1, 0, bias=False), nn.BatchNorm2d(4 * width), nn.ReLU(True),
            nn.ConvTranspose2d(4 * width, 2 * width, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(True),
            nn.ConvTranspose2d(2 * width, channels, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class NLayerDiscriminator(nn.Module):
    """pix2pix's PatchGAN (junyanz/pytorch-CycleGAN-and-pix2pix): one logit per overlapping patch."""

    def __init__(self, input_nc: int = 6, ndf: int = 8, n_layers: int = 2) -> None:
        super().__init__()
        layers: List[nn.Module] = [nn.Conv2d(input_nc, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)]
        mult = 1
        for n in range(1, n_layers):
            previous, mult = mult, min(2 ** n, 8)
            layers += [nn.Conv2d(ndf * previous, ndf * mult, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * mult),
                       nn.LeakyReLU(0.2, True)]
        previous, mult = mult, min(2 ** n_layers, 8)
        layers += [nn.Conv2d(ndf * previous, ndf * mult, 4, 1, 1, bias=False), nn.BatchNorm2d(ndf * mult),
                   nn.LeakyReLU(0.2, True), nn.Conv2d(ndf * mult, 1, 4, 1, 1)]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


# ====================================================================== WGAN-GP


class Critic(nn.Module):
    """WGAN-GP's critic: no BatchNorm (the penalty is per sample), LayerNorm instead."""

    def __init__(self, width: int = 8, channels: int = 3) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(channels, width, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(width, 2 * width, 4, 2, 1), nn.LayerNorm([2 * width, 4, 4]), nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 1, 4, 1, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x).view(-1, 1)


class MinibatchCritic(Critic):
    """The critic with Salimans et al.'s minibatch discrimination: each sample's features gain its L1 closeness to
    the rest of the batch. ``by_hand``: the distances written out; else ``torch.cdist``, whose backward has no
    backward of its own up to some release before torch 2.15, so a gradient penalty through it cannot be
    differentiated there."""

    def __init__(self, by_hand: bool, kernels: int = 4, dims: int = 3) -> None:
        super().__init__()
        self.by_hand, self.kernels, self.dims = by_hand, kernels, dims
        self.features = nn.Linear(2 * 8 * 4 * 4, kernels * dims)
        self.head = nn.Linear(2 * 8 * 4 * 4 + kernels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.main[:-1](x).flatten(1)
        m = self.features(h).view(-1, self.kernels, self.dims).transpose(0, 1)  # kernels x batch x dims
        if self.by_hand:
            distances = (m[:, :, None] - m[:, None]).abs().sum(-1)
        else:
            distances = torch.cdist(m, m, p=1)
        closeness = torch.exp(-distances).sum(-1).t()  # batch x kernels
        return self.head(torch.cat([h, closeness], 1))


def wgan_gp(ctx: Context, mistake: str = "") -> Step:
    """Gulrajani et al.'s Algorithm 1: critic loss with the gradient penalty at interpolates, then the generator."""
    netg = ConvGenerator()
    netd = MinibatchCritic(by_hand="by hand" in mistake) if "minibatch" in mistake else Critic()
    ctx.models = {"G": netg, "D": netd}
    opt_d = torch.optim.Adam(netd.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_g = torch.optim.Adam(netg.parameters(), lr=1e-4, betas=(0.0, 0.9))
    real, z = torch.randn(4, 3, 16, 16), torch.randn(4, 8, 1, 1)
    fake = netg(z)
    alpha = torch.rand(4, 1, 1, 1)
    interpolates = alpha * real + (1 - alpha) * fake.detach()
    if mistake != "forgotten requires_grad_":
        interpolates.requires_grad_(True)
    d_interpolates = netd(interpolates)
    d_loss_wo_gp = netd(fake.detach()).mean() - netd(real).mean()
    yield FORWARD_DONE
    options: Dict[str, Any] = {"grad_outputs": torch.ones_like(d_interpolates), "create_graph": True,
                               "retain_graph": True}
    if mistake == "no grad_outputs":
        del options["grad_outputs"]
    if mistake == "grad_outputs of the wrong shape":
        options["grad_outputs"] = torch.ones(4)
    if mistake == "create_graph without retain_graph":
        options["retain_graph"] = False
    gradients_ = (yield grad("gradient penalty", d_interpolates, interpolates, **options))[0]
    penalty = ((gradients_.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    d_loss = d_loss_wo_gp + 10 * penalty
    yield backward("critic backward", d_loss)
    opt_d.step()
    opt_g.zero_grad()
    g_loss = -netd(netg(z)).mean()
    yield backward("generator backward", g_loss)
    opt_g.step()


def wgan_gp_one_mone(ctx: Context, old_one: bool = False) -> Step:
    """The same critic step as caogang/wgan-gp writes it: ``backward(mone)``, ``backward(one)``, then the penalty.

    ``old_one``: its ``one = torch.FloatTensor([1])``, of shape [1], written when ``.mean()`` returned shape [1];
    today's ``.mean()`` is 0-dim, and PyTorch refuses the [1] gradient.
    """
    netg, netd = ConvGenerator(), Critic()
    ctx.models = {"G": netg, "D": netd}
    one = torch.tensor([1.0]) if old_one else torch.tensor(1.0)
    mone = one * -1
    real, z = torch.randn(4, 3, 16, 16), torch.randn(4, 8, 1, 1)
    d_real = netd(real).mean()
    fake = netg(z).detach()
    d_fake = netd(fake).mean()
    alpha = torch.rand(4, 1, 1, 1)
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    disc_interpolates = netd(interpolates)
    yield FORWARD_DONE
    yield backward("real backward(mone)", d_real, gradient=mone)
    yield backward("fake backward(one)", d_fake, gradient=one)
    gradients_ = (yield grad("gradient penalty", disc_interpolates, interpolates,
                             grad_outputs=torch.ones(disc_interpolates.size()), create_graph=True,
                             retain_graph=True, only_inputs=True))[0]
    penalty = ((gradients_.flatten(1).norm(2, dim=1) - 1) ** 2).mean() * 10
    yield backward("penalty backward", penalty)


# ====================================================================== SNGAN


class SNDiscriminator(nn.Module):
    """Miyato et al.'s CNN discriminator, 16x16, every layer spectrally normalised (parametrizations)."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.main = nn.Sequential(
            spectral_norm(nn.Conv2d(3, width, 3, 1, 1)), nn.LeakyReLU(0.1),
            spectral_norm(nn.Conv2d(width, 2 * width, 4, 2, 1)), nn.LeakyReLU(0.1),
            spectral_norm(nn.Conv2d(2 * width, 2 * width, 3, 1, 1)), nn.LeakyReLU(0.1),
            spectral_norm(nn.Conv2d(2 * width, 4 * width, 4, 2, 1)), nn.LeakyReLU(0.1))
        self.linear = spectral_norm(nn.Linear(4 * width * 4 * 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.main(x).flatten(1))


def sngan(ctx: Context, mistake: str = "") -> Step:
    """Hinge-loss SNGAN: the discriminator step on fake.detach(), then the generator's own D(G(z))."""
    netg, netd = ConvGenerator(), SNDiscriminator()
    ctx.models = {"G": netg, "D": netd}
    fused = mistake == "one D(fake) for both, fused Adam step before the generator backward"
    opt_d = torch.optim.Adam(netd.parameters(), lr=0.05, betas=(0.0, 0.9), fused=fused)
    opt_g = torch.optim.Adam(netg.parameters(), lr=2e-4, betas=(0.0, 0.9))
    real, z = torch.randn(4, 3, 16, 16), torch.randn(4, 8, 1, 1)
    fake = netg(z)
    shared = mistake.startswith("one D(fake) for both")
    d_on_fake = netd(fake if mistake == "no detach" or shared else fake.detach())
    d_loss = F.relu(1.0 - netd(real)).mean() + F.relu(1.0 + d_on_fake).mean()
    yield FORWARD_DONE
    yield backward("discriminator backward", d_loss, **({"retain_graph": True} if shared else {}))
    if shared:
        ctx.between(opt_d.step)
        g_loss = -d_on_fake.mean()
    else:
        opt_d.step()
        g_loss = -netd(fake).mean()
    opt_g.zero_grad()
    yield backward("generator backward", g_loss)
    opt_g.step()


# ====================================================================== SAC


class SquashedGaussianActor(nn.Module):
    """Spinning Up's SAC actor: a Gaussian through tanh, with the change-of-variables log-probability."""

    def __init__(self, obs_dim: int = 5, act_dim: int = 2, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mu_layer, self.log_std_layer = nn.Linear(hidden, act_dim), nn.Linear(hidden, act_dim)

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        out = self.net(obs)
        mu, log_std = self.mu_layer(out), torch.clamp(self.log_std_layer(out), -20, 2)
        dist = torch.distributions.Normal(mu, log_std.exp())
        action = dist.rsample()
        logp = dist.log_prob(action).sum(-1) - (2 * (torch.log(torch.tensor(2.0)) - action
                                                      - F.softplus(-2 * action))).sum(-1)
        return torch.tanh(action), logp


class QFunction(nn.Module):
    def __init__(self, obs_dim: int = 5, act_dim: int = 2, hidden: int = 16) -> None:
        super().__init__()
        self.q = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                               nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.q(torch.cat([obs, act], dim=-1)).squeeze(-1)


class ActorCritic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pi, self.q1, self.q2 = SquashedGaussianActor(), QFunction(), QFunction()


def sac(ctx: Context, mistake: str = "") -> Step:
    """Spinning Up's ``sac.update``: the twin-Q loss against a Polyak-averaged target, then the policy, then the
    temperature (automatic entropy tuning), then the Polyak update ``p_targ.data.mul_(polyak)``,
    ``p_targ.data.add_((1 - polyak) * p.data)``."""
    ac = ActorCritic()
    ac_targ = copy.deepcopy(ac)
    for p in ac_targ.parameters():
        p.requires_grad = False
    drift(ac)  # some updates later: the online networks are no longer their targets
    log_alpha = nn.Parameter(torch.zeros(1))
    temperature = nn.ParameterDict({"log_alpha": log_alpha})
    ctx.models = {"ac": ac, "ac_targ": ac_targ, "alpha": temperature}
    q_params = [*ac.q1.parameters(), *ac.q2.parameters()]
    q_optimizer = torch.optim.Adam(q_params, lr=0.05, fused=mistake.startswith("fused Q step"))
    pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=1e-3)
    alpha_optimizer = torch.optim.Adam([log_alpha], lr=1e-3)
    gamma, polyak, target_entropy = 0.99, 0.995, -2.0
    o, a, r, o2, d = torch.randn(8, 5), torch.rand(8, 2) * 2 - 1, torch.randn(8), torch.randn(8, 5), torch.zeros(8)

    def polyak_update(through_data: bool) -> None:
        with torch.no_grad():
            for p, p_targ in zip(ac.parameters(), ac_targ.parameters(), strict=True):
                target = p_targ.data if through_data else p_targ
                target.mul_(polyak)
                target.add_((1 - polyak) * p.data)

    alpha = log_alpha.exp().detach()
    q1, q2 = ac.q1(o, a), ac.q2(o, a)
    backup_with_grad = mistake.startswith("backup with grad")
    with torch.set_grad_enabled(backup_with_grad):
        a2, logp_a2 = ac.pi(o2)
        q_pi_targ = torch.min(ac_targ.q1(o2, a2), ac_targ.q2(o2, a2))
        backup = r + gamma * (1 - d) * (q_pi_targ - alpha * logp_a2)
    loss_q = ((q1 - backup) ** 2).mean() + ((q2 - backup) ** 2).mean()
    early_pi = mistake.startswith("policy loss from the first forward") or mistake.startswith("fused Q step")
    if early_pi:
        pi, logp_pi = ac.pi(o)
        loss_pi = (alpha * logp_pi - torch.min(ac.q1(o, pi), ac.q2(o, pi))).mean()
    yield FORWARD_DONE
    if backup_with_grad:
        ctx.between(partial(polyak_update, through_data=mistake.endswith("through .data")))
    q_optimizer.zero_grad()
    yield backward("Q backward", loss_q)
    if early_pi:
        ctx.between(q_optimizer.step)
    else:
        q_optimizer.step()
    for p in q_params:
        p.requires_grad = False
    if not early_pi:
        pi, logp_pi = ac.pi(o)
        loss_pi = (alpha * logp_pi - torch.min(ac.q1(o, pi), ac.q2(o, pi))).mean()
    pi_optimizer.zero_grad()
    yield backward("policy backward", loss_pi)
    pi_optimizer.step()
    for p in q_params:
        p.requires_grad = True
    entropy_term = logp_pi + target_entropy
    alpha_loss = -(log_alpha * (entropy_term if mistake == "alpha loss without detach" else
                                entropy_term.detach())).mean()
    alpha_optimizer.zero_grad()
    yield backward("temperature backward", alpha_loss)
    alpha_optimizer.step()
    polyak_update(through_data=True)


# ====================================================================== VQGAN


class VectorQuantizer(nn.Module):
    """taming-transformers' VectorQuantizer: nearest code, codebook + commitment loss, straight-through copy.

    ``ema=True``: a VQ-VAE EMA codebook (a buffer updated in place inside the forward, as sonnet's
    VectorQuantizerEMA does), with the commitment loss only.
    """

    def __init__(self, n_e: int = 16, e_dim: int = 8, beta: float = 0.25, ema: bool = False,
                 straight_through: str = "z + (z_q - z).detach()") -> None:
        super().__init__()
        self.beta, self.ema, self.straight_through = beta, ema, straight_through
        self.embedding = nn.Embedding(n_e, e_dim)
        if ema:
            self.embedding.weight.requires_grad_(False)

    def forward(self, z: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        z = z.permute(0, 2, 3, 1).contiguous()
        z_flattened = z.view(-1, z.shape[-1])
        codes = self.embedding.weight
        d = (z_flattened ** 2).sum(1, keepdim=True) + (codes ** 2).sum(1) - 2 * z_flattened @ codes.t()
        indices = torch.argmin(d, dim=1)
        z_q = self.embedding(indices).view(z.shape)
        if self.ema:
            with torch.no_grad():
                onehot = F.one_hot(indices, codes.shape[0]).type_as(z_flattened)
                counts = onehot.sum(0, keepdim=True).t() + 1e-5
                codes.mul_(0.99).add_(0.01 * (onehot.t() @ z_flattened) / counts)
            loss = self.beta * ((z_q.detach() - z) ** 2).mean()
        else:
            loss = self.beta * ((z_q.detach() - z) ** 2).mean() + ((z_q - z.detach()) ** 2).mean()
        if self.straight_through == "z + (z_q - z).detach()":
            z_q = z + (z_q - z).detach()
        else:  # "z_q + (z - z_q).detach()": the wrong tensor detached, the value is z and the gradient goes to z_q
            z_q = z_q + (z - z_q).detach()
        return z_q.permute(0, 3, 1, 2).contiguous(), loss


class VQModel(nn.Module):
    def __init__(self, width: int = 8, e_dim: int = 8, **quantizer: Any) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, width, 4, 2, 1), nn.ReLU(), nn.Conv2d(width, 2 * width, 4, 2, 1),
                                     nn.ReLU(), nn.Conv2d(2 * width, e_dim, 1))
        self.quantize = VectorQuantizer(e_dim=e_dim, **quantizer)
        self.decoder = nn.Sequential(nn.Conv2d(e_dim, 2 * width, 3, 1, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(2 * width, width, 4, 2, 1), nn.ReLU())
        self.conv_out = nn.ConvTranspose2d(width, 3, 4, 2, 1)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        quant, qloss = self.quantize(self.encoder(x))
        return self.conv_out(self.decoder(quant)), qloss


def vqgan(ctx: Context, mistake: str = "") -> Step:
    """taming-transformers' VQLPIPSWithDiscriminator (LPIPS left out): the adaptive weight from two
    ``autograd.grad`` calls at the last layer, the generator loss, then the hinge discriminator step."""
    straight = "z_q + (z - z_q).detach()" if mistake.startswith("straight-through detaching") else \
        "z + (z_q - z).detach()"
    model = VQModel(ema=mistake == "EMA codebook updated inside the forward", straight_through=straight)
    disc = NLayerDiscriminator(input_nc=3)
    ctx.models = {"vq": model, "D": disc}
    opt_ae = torch.optim.Adam(model.parameters(), lr=4.5e-6, betas=(0.5, 0.9))
    opt_disc = torch.optim.Adam(disc.parameters(), lr=4.5e-6, betas=(0.5, 0.9))
    x = torch.rand(2, 3, 16, 16) * 2 - 1
    xrec, qloss = model(x)
    nll_loss = (x - xrec).abs().mean()
    logits_fake = disc(xrec)
    g_loss = -logits_fake.mean()
    yield FORWARD_DONE
    if mistake.startswith("straight-through detaching"):
        encoder = [p for p in model.encoder.parameters()]
        options = {"allow_unused": True, "materialize_grads": True} if mistake.endswith("allow_unused") else {}
        yield grad("does the encoder get the reconstruction gradient", nll_loss, encoder, retain_graph=True,
                   **options)
    last_layer = model.conv_out.weight
    retain = {} if mistake == "nll grad without retain_graph" else {"retain_graph": True}
    nll_grads = (yield grad("adaptive weight: nll grad", nll_loss, last_layer, **retain))[0]
    g_grads = (yield grad("adaptive weight: g grad", g_loss, last_layer, retain_graph=True))[0]
    d_weight = torch.clamp(torch.norm(nll_grads) / (torch.norm(g_grads) + 1e-4), 0.0, 1e4).detach()
    loss = nll_loss + d_weight * 1.0 * g_loss + 1.0 * qloss.mean()
    opt_ae.zero_grad()
    yield backward("autoencoder backward", loss)
    opt_ae.step()
    logits_real, logits_fake = disc(x.detach()), disc(xrec.detach())
    d_loss = 0.5 * (F.relu(1.0 - logits_real).mean() + F.relu(1.0 + logits_fake).mean())
    opt_disc.zero_grad()
    yield backward("discriminator backward", d_loss)
    opt_disc.step()


# ====================================================================== BYOL


def mlp_head(dim: int, hidden: int, out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, out))


class OnlineNetwork(nn.Module):
    def __init__(self, width: int = 8, hidden: int = 32, out: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projector = mlp_head(width, hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projector(self.encoder(x))


def byol_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 2 - 2 * (F.normalize(x, dim=-1) * F.normalize(y, dim=-1)).sum(dim=-1)


def byol(ctx: Context, mistake: str = "") -> Step:
    """lucidrains/byol-pytorch's step: both views in one batch (for BatchNorm), the target under no_grad, the loss
    backward, the step, then the EMA update ``ma_params.data = beta * old + (1 - beta) * new``."""
    online = OnlineNetwork()
    predictor = mlp_head(16, 32, 16)
    target = copy.deepcopy(online)
    if not mistake.startswith("target with grad"):
        target.requires_grad_(False)
    drift(online)  # some steps later: the online network is no longer its target
    ctx.models = {"online": online, "predictor": predictor, "target": target}
    opt = torch.optim.Adam([*online.parameters(), *predictor.parameters()], lr=3e-4)
    beta = 0.99

    def ema_update(in_place_on_the_tensor: bool) -> None:
        with torch.no_grad():
            for current, ma in zip(online.parameters(), target.parameters(), strict=True):
                if in_place_on_the_tensor:
                    ma.mul_(beta).add_(current, alpha=1 - beta)
                else:
                    ma.data = ma.data * beta + (1 - beta) * current.data

    x = torch.randn(4, 3, 8, 8)
    image_one, image_two = x + 0.1 * torch.randn_like(x), torch.flip(x, dims=[3])
    images = torch.cat((image_one, image_two), dim=0)
    online_predictions = predictor(online(images))
    pred_one, pred_two = online_predictions.chunk(2, dim=0)
    with torch.set_grad_enabled(mistake.startswith("target with grad")):
        target_proj_one, target_proj_two = target(images).chunk(2, dim=0)
    if not mistake.startswith("target with grad"):
        target_proj_one, target_proj_two = target_proj_one.detach(), target_proj_two.detach()
    loss_one, loss_two = byol_loss(pred_one, target_proj_two), byol_loss(pred_two, target_proj_one)
    yield FORWARD_DONE
    if mistake.startswith("target with grad"):
        ctx.between(partial(ema_update, in_place_on_the_tensor=not mistake.endswith(".data")))
    opt.zero_grad()
    if mistake == "the two losses backward one by one":
        yield backward("first loss backward", loss_one.mean())
        yield backward("second loss backward", loss_two.mean())
    else:
        yield backward("loss backward", (loss_one + loss_two).mean())
    opt.step()
    ema_update(in_place_on_the_tensor=False)


# ====================================================================== pix2pix


class UnetSkipConnectionBlock(nn.Module):
    """junyanz's block: down (LeakyReLU in place, conv, norm), the submodule, up (ReLU in place, deconv, norm), and
    ``torch.cat([x, self.model(x)], 1)``."""

    def __init__(self, outer_nc: int, inner_nc: int, input_nc: Optional[int] = None,
                 submodule: Optional[nn.Module] = None, outermost: bool = False, innermost: bool = False) -> None:
        super().__init__()
        self.outermost = outermost
        input_nc = outer_nc if input_nc is None else input_nc
        downconv = nn.Conv2d(input_nc, inner_nc, kernel_size=4, stride=2, padding=1, bias=False)
        downrelu, downnorm = nn.LeakyReLU(0.2, True), nn.BatchNorm2d(inner_nc)
        uprelu, upnorm = nn.ReLU(True), nn.BatchNorm2d(outer_nc)
        if outermost:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1)
            model = [downconv, submodule, uprelu, upconv, nn.Tanh()]
        elif innermost:
            upconv = nn.ConvTranspose2d(inner_nc, outer_nc, kernel_size=4, stride=2, padding=1, bias=False)
            model = [downrelu, downconv, uprelu, upconv, upnorm]
        else:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1, bias=False)
            model = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
        self.model = nn.Sequential(*model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


class UnetGenerator(nn.Module):
    """pix2pix's U-Net, built from the innermost block out (num_downs=4: 16x16 -> 1x1)."""

    def __init__(self, input_nc: int = 3, output_nc: int = 3, ngf: int = 8) -> None:
        super().__init__()
        block = UnetSkipConnectionBlock(ngf * 4, ngf * 4, innermost=True)
        block = UnetSkipConnectionBlock(ngf * 2, ngf * 4, submodule=block)
        block = UnetSkipConnectionBlock(ngf, ngf * 2, submodule=block)
        self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc, submodule=block, outermost=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def gan_loss(prediction: torch.Tensor, target_is_real: bool) -> torch.Tensor:
    target = torch.tensor(1.0 if target_is_real else 0.0).expand_as(prediction)
    return F.binary_cross_entropy_with_logits(prediction, target)


def set_requires_grad(net: nn.Module, requires_grad: bool) -> None:
    for param in net.parameters():
        param.requires_grad = requires_grad


def pix2pix(ctx: Context, mistake: str = "") -> Step:
    """Pix2PixModel.optimize_parameters: backward_D on cat(real_A, fake_B).detach(), step, then backward_G with
    D frozen (GAN loss + 100 x L1)."""
    net_g, net_d = UnetGenerator(), NLayerDiscriminator()
    ctx.models = {"G": net_g, "D": net_d}
    fused = mistake.endswith("fused Adam")
    optimizer_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_d = torch.optim.Adam(net_d.parameters(), lr=0.05, betas=(0.5, 0.999), fused=fused)
    real_a, real_b = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
    fake_b = net_g(real_a)
    set_requires_grad(net_d, True)
    optimizer_d.zero_grad()
    if mistake == "detached real_A instead of fake_B":
        fake_ab = torch.cat((real_a.detach(), fake_b), 1)
        pred_fake = net_d(fake_ab)
    else:
        fake_ab = torch.cat((real_a, fake_b), 1)
        shared = mistake == "no detach" or mistake.startswith("one D(fake)")
        pred_fake = net_d(fake_ab if shared else fake_ab.detach())
    loss_d = (gan_loss(pred_fake, False) + gan_loss(net_d(torch.cat((real_a, real_b), 1)), True)) * 0.5
    yield FORWARD_DONE
    reuse = mistake.startswith("one D(fake)")
    yield backward("D backward", loss_d, **({"retain_graph": True} if reuse else {}))
    if reuse:
        ctx.between(optimizer_d.step)
    else:
        optimizer_d.step()
    set_requires_grad(net_d, False)
    optimizer_g.zero_grad()
    pred_fake_g = pred_fake if reuse else net_d(fake_ab)
    loss_g = gan_loss(pred_fake_g, True) + F.l1_loss(fake_b, real_b) * 100.0
    yield backward("G backward", loss_g)
    optimizer_g.step()


# ====================================================================== activation checkpointing


class Block(nn.Module):
    """A pre-norm residual MLP block, as in a transformer: x + fc2(gelu(fc1(norm(x))))."""

    def __init__(self, dim: int = 16, batch_norm: bool = False) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(dim) if batch_norm else nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class CheckpointedNet(nn.Module):
    """An embedding outside the checkpoints, then each block and the head each under their own checkpoint."""

    def __init__(self, depth: int = 3, dim: int = 16, classes: int = 5, batch_norm: bool = False) -> None:
        super().__init__()
        self.embed = nn.Linear(10, dim)
        self.blocks = nn.ModuleList(Block(dim, batch_norm) for _ in range(depth))
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))

    def forward(self, x: torch.Tensor, ctx: Context, use_reentrant: bool) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = ctx.checkpoint(block, h, use_reentrant=use_reentrant)
        return ctx.checkpoint(self.head, h, use_reentrant=use_reentrant)


def checkpointed(ctx: Context, use_reentrant: bool, mistake: str = "", batch_norm: bool = False) -> Step:
    """Activation checkpointing per block (as Megatron or HF's gradient_checkpointing_enable do), cross-entropy."""
    net = CheckpointedNet(batch_norm=batch_norm)
    ctx.models = {"net": net}
    opt = torch.optim.Adam(net.parameters(), lr=0.05, fused=mistake.startswith("fused"))
    x, y = torch.randn(8, 10), torch.randint(0, 5, (8,))
    logits = net(x, ctx, use_reentrant)
    loss = F.cross_entropy(logits, y)
    yield FORWARD_DONE
    parameters = list(net.parameters())
    if mistake.endswith("step between the two losses' backward"):
        z_loss = 1e-1 * torch.logsumexp(logits, dim=-1).pow(2).mean()  # PaLM's z-loss, from the same forward
        yield backward("cross-entropy backward", loss, retain_graph=True)
        ctx.between(opt.step)
        yield backward("z-loss backward", z_loss)
    elif mistake == "backward twice without retain_graph":
        yield backward("loss backward", loss)
        yield backward("second backward", loss)
    elif mistake == "backward(inputs=parameters)":
        yield backward("loss backward", loss, inputs=parameters)
    elif mistake == "autograd.grad over the parameters":
        yield grad("loss grad", loss, parameters)
    else:
        yield backward("loss backward", loss)
    opt.step()


# ====================================================================== torch.compile


class SmallConvNet(nn.Module):
    def __init__(self, width: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1), nn.ReLU(), nn.Conv2d(width, width, 3, 2, 1),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def compiled(ctx: Context, mistake: str = "") -> Step:
    """A compiled training forward (the model and its loss in one compiled function), then backward and an
    optimizer step."""
    model = SmallConvNet()
    ctx.models = {"model": model}
    opt = torch.optim.Adam(model.parameters(), lr=0.05, fused=mistake.startswith("fused"))

    def forward_loss(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(images), labels)

    step_forward = ctx.compile(forward_loss)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    loss = step_forward(x, y)
    yield FORWARD_DONE
    if mistake.endswith("step between the two backward passes"):
        yield backward("loss backward", loss, retain_graph=True)  # say, for a second loss from the same forward
        ctx.between(opt.step)
        yield backward("second backward", loss)
    elif mistake == "backward twice without retain_graph":
        yield backward("loss backward", loss)
        yield backward("second backward", loss)
    elif mistake == "retain_graph=True, then backward again":
        yield backward("loss backward", loss, retain_graph=True)
        yield backward("second backward", loss)
    elif mistake == "autograd.grad over the parameters":
        yield grad("loss grad", loss, list(model.parameters()))
    else:
        yield backward("loss backward", loss)
    opt.step()


# ====================================================================== LoRA


class LoRALinear(nn.Module):
    """Hu et al.'s adapter: ``base(x) + dropout(x) @ A.T @ B.T * alpha / r`` on a frozen ``base``.

    B starts random here (not zero, as in the paper) so every gradient in the tests is non-trivial.
    """

    def __init__(self, base: nn.Linear, r: int = 4, alpha: float = 8.0) -> None:
        super().__init__()
        self.base, self.scaling = base, alpha / r
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / r)
        self.lora_B = nn.Parameter(torch.randn(base.out_features, r) / r)
        self.lora_dropout = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (self.lora_dropout(x) @ self.lora_A.t() @ self.lora_B.t()) * self.scaling

    def merge(self, through_data: bool) -> None:
        """peft's ``merge``: ``base.weight += B @ A * scaling``."""
        with torch.no_grad():
            delta = self.lora_B @ self.lora_A * self.scaling
            (self.base.weight.data if through_data else self.base.weight).add_(delta)


class EncoderLayer(nn.Module):
    """A small post-norm transformer encoder layer with its own q, k, v, o projections."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim) for _ in range(4))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, dim = x.shape
        q, k, v = (proj(x).view(b, t, self.heads, dim // self.heads).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        attention = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, dim)
        x = self.norm1(x + self.o_proj(attention))
        return self.norm2(x + self.ff(x))


class TinyClassifier(nn.Module):
    def __init__(self, vocab: int = 20, dim: int = 16, depth: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(EncoderLayer(dim) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor, ctx: Optional[Context] = None,
                checkpointing: bool = False, input_require_grads: bool = False) -> torch.Tensor:
        h = self.embed(tokens)
        if input_require_grads:  # HF's enable_input_require_grads: a hook on the embedding's output
            h.requires_grad_(True)
        for layer in self.layers:
            h = ctx.checkpoint(layer, h, use_reentrant=True) if checkpointing and ctx is not None else layer(h)
        return self.head(h.mean(dim=1))


def add_lora(model: TinyClassifier) -> List[LoRALinear]:
    """Wrap every layer's q_proj and v_proj (the paper's choice) in a LoRALinear."""
    adapters = []
    for layer in model.layers:
        layer.q_proj, layer.v_proj = LoRALinear(layer.q_proj), LoRALinear(layer.v_proj)
        adapters += [layer.q_proj, layer.v_proj]
    return adapters


def merge_all(adapters: Sequence[LoRALinear], through_data: bool) -> None:
    for adapter in adapters:
        adapter.merge(through_data)


def lora(ctx: Context, mistake: str = "") -> Step:
    """Fine-tuning adapters only: freeze the base, add adapters, train the adapters (and nothing else)."""
    model = TinyClassifier()
    ctx.models = {"model": model}
    if mistake != "frozen after adding the adapters":
        model.requires_grad_(False)
    adapters = add_lora(model)
    if mistake == "frozen after adding the adapters":
        model.requires_grad_(False)
    adapter_params = [p for adapter in adapters for p in (adapter.lora_A, adapter.lora_B)]
    opt = torch.optim.AdamW(adapter_params, lr=1e-3)
    tokens, labels = torch.randint(0, 20, (2, 6)), torch.randint(0, 3, (2,))
    checkpointing = mistake.startswith("reentrant checkpointing")
    logits = model(tokens, ctx, checkpointing=checkpointing,
                   input_require_grads=mistake.endswith("with enable_input_require_grads"))
    loss = F.cross_entropy(logits, labels)
    yield FORWARD_DONE
    if mistake.startswith("merged the adapters before the backward"):
        ctx.between(partial(merge_all, adapters, through_data=mistake.endswith(".data")))
    if mistake == "autograd.grad over model.parameters()":
        yield grad("adapter grad", loss, list(model.parameters()))
    elif mistake == "backward(inputs=model.parameters())":
        yield backward("loss backward", loss, inputs=list(model.parameters()))
    else:
        yield backward("loss backward", loss)
    opt.step()


# ====================================================================== GradNorm


class MultiTaskNet(nn.Module):
    def __init__(self, dim: int = 6, hidden: int = 16, tasks: int = 2) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(hidden, 1) for _ in range(tasks))

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        shared = self.trunk(x)
        return [head(shared).squeeze(-1) for head in self.heads]


def gradnorm(ctx: Context, mistake: str = "") -> Step:
    """Chen et al.'s GradNorm: the weighted loss backward (kept), each task's gradient norm at the last shared
    layer (with create_graph), the GradNorm loss's gradient for the task weights only, the step, renormalising."""
    model = MultiTaskNet()
    task_weights = nn.Parameter(torch.ones(2))
    weights_holder = nn.ParameterDict({"task_weights": task_weights})
    ctx.models = {"model": model, "weights": weights_holder}
    opt = torch.optim.Adam([*model.parameters(), task_weights], lr=1e-3)
    alpha = 1.5
    x, ys = torch.randn(8, 6), [torch.randn(8), torch.randn(8)]
    task_losses = torch.stack([F.mse_loss(out, y) for out, y in zip(model(x), ys, strict=True)])
    initial_losses = task_losses.detach() * 1.25
    weighted = (task_weights * task_losses).sum()
    yield FORWARD_DONE
    opt.zero_grad()
    yield backward("weighted loss backward", weighted,
                   **({} if mistake == "weighted backward without retain_graph" else {"retain_graph": True}))
    if mistake == "optimizer step before the task gradients":
        ctx.between(opt.step)
    shared_weight = model.trunk[2].weight
    create = mistake != "task gradients without create_graph"
    if mistake == "batched task gradients (is_grads_batched)":
        batched = (yield grad("task gradients", task_weights * task_losses, shared_weight,
                              grad_outputs=torch.eye(2), retain_graph=True, create_graph=True,
                              is_grads_batched=True))[0]
        norms = batched.flatten(1).norm(dim=1)
    else:
        norms_list = []
        for task in range(2):
            task_grad = (yield grad(f"task {task} gradient", task_weights[task] * task_losses[task], shared_weight,
                                    retain_graph=True, create_graph=create))[0]
            norms_list.append(torch.norm(task_grad))
        norms = torch.stack(norms_list)
    loss_ratio = task_losses.detach() / initial_losses
    inverse_rate = loss_ratio / loss_ratio.mean()
    target = (norms.mean() * inverse_rate ** alpha).detach()
    gradnorm_loss = (norms - target).abs().sum()
    task_weights.grad = (yield grad("GradNorm loss grad", gradnorm_loss, task_weights))[0]
    opt.step()
    with torch.no_grad():
        task_weights.mul_(2 / task_weights.sum())


# ====================================================================== the variants


def _variants() -> List[Variant]:
    v = Variant
    wgan_calls = ("gradient penalty", "critic backward", "generator backward")
    sac_calls = ("Q backward", "policy backward", "temperature backward")
    vq_calls = ("adaptive weight: nll grad", "adaptive weight: g grad", "autoencoder backward",
                "discriminator backward")
    gn_calls = ("weighted loss backward", "task 0 gradient", "task 1 gradient", "GradNorm loss grad")
    found = [
        v("wgan_gp", "correct", wgan_gp, wgan_calls, RUNS),
        v("wgan_gp", "forgotten requires_grad_", partial(wgan_gp, mistake="forgotten requires_grad_"),
          wgan_calls[:1], "input-needs-no-grad"),
        v("wgan_gp", "no grad_outputs", partial(wgan_gp, mistake="no grad_outputs"), wgan_calls[:1],
          "non-scalar-output"),
        v("wgan_gp", "grad_outputs of the wrong shape", partial(wgan_gp, mistake="grad_outputs of the wrong shape"),
          wgan_calls[:1], "message: Mismatch in shape"),
        v("wgan_gp", "create_graph without retain_graph",
          partial(wgan_gp, mistake="create_graph without retain_graph"), wgan_calls[:2], "backward-twice"),
        v("wgan_gp", "minibatch discrimination with torch.cdist",
          partial(wgan_gp, mistake="minibatch discrimination with torch.cdist"), wgan_calls[:2],
          RUNS if cdist_differentiates_twice() else "no-derivative"),
        v("wgan_gp", "minibatch discrimination, distances by hand",
          partial(wgan_gp, mistake="minibatch discrimination, distances by hand"), wgan_calls, RUNS),
        v("wgan_gp", "backward(mone), backward(one)", wgan_gp_one_mone,
          ("real backward(mone)", "fake backward(one)", "gradient penalty", "penalty backward"), RUNS),
        v("wgan_gp", "backward(mone) with one = FloatTensor([1]) on a 0-dim output",
          partial(wgan_gp_one_mone, old_one=True), ("real backward(mone)",), "message: Mismatch in shape"),
        v("sngan", "correct", sngan, ("discriminator backward", "generator backward"), RUNS),
        v("sngan", "no detach", partial(sngan, mistake="no detach"), ("discriminator backward", "generator backward"),
          "backward-twice"),
        v("sngan", "one D(fake) for both, Adam step before the generator backward",
          partial(sngan, mistake="one D(fake) for both, Adam step before the generator backward"),
          ("discriminator backward", "generator backward"), "inplace-version", record=True),
        v("sngan", "one D(fake) for both, fused Adam step before the generator backward",
          partial(sngan, mistake="one D(fake) for both, fused Adam step before the generator backward"),
          ("discriminator backward", "generator backward"), WRONG_VALUES, record=True),
        v("sac", "correct", sac, sac_calls, RUNS),
        v("sac", "policy loss from the first forward, Q step before its backward",
          partial(sac, mistake="policy loss from the first forward, Q step before its backward"), sac_calls[:2],
          "inplace-version", record=True),
        v("sac", "fused Q step before the policy backward", partial(sac, mistake="fused Q step"), sac_calls[:2],
          WRONG_VALUES, record=True),
        v("sac", "alpha loss without detach", partial(sac, mistake="alpha loss without detach"), sac_calls,
          "backward-twice"),
        v("sac", "backup with grad, Polyak update in place before the Q backward",
          partial(sac, mistake="backup with grad, Polyak in place"), sac_calls[:1], "inplace-version", record=True),
        v("sac", "backup with grad, Polyak update through .data before the Q backward",
          partial(sac, mistake="backup with grad, Polyak through .data"), sac_calls[:1], WRONG_VALUES, record=True),
        v("vqgan", "correct", vqgan, vq_calls, RUNS),
        v("vqgan", "nll grad without retain_graph", partial(vqgan, mistake="nll grad without retain_graph"),
          vq_calls[:2], "backward-twice"),
        v("vqgan", "EMA codebook updated inside the forward",
          partial(vqgan, mistake="EMA codebook updated inside the forward"), vq_calls[:3], RUNS),
        v("vqgan", "straight-through detaching the wrong tensor",
          partial(vqgan, mistake="straight-through detaching the wrong tensor"),
          ("does the encoder get the reconstruction gradient",), "unused-input"),
        v("vqgan", "straight-through detaching the wrong tensor, allow_unused",
          partial(vqgan, mistake="straight-through detaching the wrong tensor, allow_unused"),
          ("does the encoder get the reconstruction gradient",), RUNS),
        v("byol", "correct", byol, ("loss backward",), RUNS),
        v("byol", "the two losses backward one by one", partial(byol, mistake="the two losses backward one by one"),
          ("first loss backward", "second loss backward"), "backward-twice"),
        v("byol", "target with grad, EMA in place before the backward",
          partial(byol, mistake="target with grad, EMA in place"), ("loss backward",), "inplace-version",
          record=True),
        v("byol", "target with grad, EMA through .data before the backward",
          partial(byol, mistake="target with grad, EMA through .data"), ("loss backward",), WRONG_VALUES,
          record=True),
        v("pix2pix", "correct", pix2pix, ("D backward", "G backward"), RUNS),
        v("pix2pix", "no detach", partial(pix2pix, mistake="no detach"), ("D backward", "G backward"),
          "backward-twice"),
        v("pix2pix", "detached real_A instead of fake_B", partial(pix2pix, mistake="detached real_A instead of fake_B"),
          ("D backward", "G backward"), "backward-twice"),
        v("pix2pix", "one D(fake) for both, D stepped before the G backward",
          partial(pix2pix, mistake="one D(fake) for both"), ("D backward", "G backward"), "inplace-version",
          record=True),
        v("pix2pix", "one D(fake) for both, D stepped before the G backward, fused Adam",
          partial(pix2pix, mistake="one D(fake) for both, fused Adam"), ("D backward", "G backward"), WRONG_VALUES,
          record=True),
    ]
    for reentrant, label in ((True, REENTRANT), (False, NON_REENTRANT)):
        kind = "reentrant" if reentrant else "non-reentrant"
        one, two_losses = ("loss backward",), ("cross-entropy backward", "z-loss backward")
        refused = "message: incompatible with .grad() or passing an `inputs` parameter to .backward()"
        inputs_outcome, grad_outcome = (refused, refused) if reentrant else (RUNS, RUNS)
        for name, calls, expected, record, extra in (
                ("correct", one, RUNS, False, {}),
                ("correct, BatchNorm inside", one, RUNS, False, {"batch_norm": True}),
                ("Adam step between the two losses' backward", two_losses, WRONG_VALUES, True, {}),
                ("fused Adam step between the two losses' backward", two_losses, WRONG_VALUES, True, {}),
                ("backward twice without retain_graph", ("loss backward", "second backward"), "backward-twice",
                 False, {}),
                ("backward(inputs=parameters)", one, inputs_outcome, False, {}),
                ("autograd.grad over the parameters", ("loss grad",), grad_outcome, False, {})):
            mistake = "" if name.startswith("correct") else name.replace("Adam step", "step")
            found.append(v(f"checkpoint_{kind}", name,
                           partial(checkpointed, use_reentrant=reentrant, mistake=mistake, **extra), calls, expected,
                           record=record, opaque=label))
    for name, calls, expected, record in (
            ("correct", ("loss backward",), RUNS, False),
            ("backward twice without retain_graph", ("loss backward", "second backward"), "backward-twice", False),
            ("retain_graph=True, then backward again", ("loss backward", "second backward"), RUNS, False),
            ("Adam step between the two backward passes", ("loss backward", "second backward"), "inplace-version",
             True),
            ("fused Adam step between the two backward passes", ("loss backward", "second backward"), WRONG_VALUES,
             True),
            ("autograd.grad over the parameters", ("loss grad",), RUNS, False)):
        mistake = "" if name == "correct" else name.replace("Adam step", "step")
        found.append(v("compile", name, partial(compiled, mistake=mistake), calls, expected, record=record,
                       opaque=COMPILED))
    lora_one = ("loss backward",)
    found += [
        v("lora", "correct", lora, lora_one, RUNS),
        v("lora", "frozen after adding the adapters", partial(lora, mistake="frozen after adding the adapters"),
          lora_one, "no-grad-fn"),
        v("lora", "autograd.grad over model.parameters()",
          partial(lora, mistake="autograd.grad over model.parameters()"), ("adapter grad",), "input-needs-no-grad"),
        v("lora", "backward(inputs=model.parameters())", partial(lora, mistake="backward(inputs=model.parameters())"),
          lora_one, "input-needs-no-grad"),
        v("lora", "merged the adapters before the backward, in place",
          partial(lora, mistake="merged the adapters before the backward, in place"), lora_one, "inplace-version",
          record=True),
        v("lora", "merged the adapters before the backward, through .data",
          partial(lora, mistake="merged the adapters before the backward, through .data"), lora_one, WRONG_VALUES,
          record=True),
        v("lora", "reentrant checkpointing on the frozen base",
          partial(lora, mistake="reentrant checkpointing on the frozen base"), lora_one, "no-grad-fn"),
        v("lora", "reentrant checkpointing on the frozen base, with enable_input_require_grads",
          partial(lora, mistake="reentrant checkpointing on the frozen base, with enable_input_require_grads"),
          lora_one, RUNS, opaque=REENTRANT),
        v("gradnorm", "correct", gradnorm, gn_calls, RUNS),
        v("gradnorm", "weighted backward without retain_graph",
          partial(gradnorm, mistake="weighted backward without retain_graph"), gn_calls[:2], "backward-twice"),
        v("gradnorm", "task gradients without create_graph",
          partial(gradnorm, mistake="task gradients without create_graph"), gn_calls, "no-grad-fn"),
        v("gradnorm", "optimizer step before the task gradients",
          partial(gradnorm, mistake="optimizer step before the task gradients"), gn_calls[:2], "inplace-version"),
        v("gradnorm", "batched task gradients (is_grads_batched)",
          partial(gradnorm, mistake="batched task gradients (is_grads_batched)"),
          ("weighted loss backward", "task gradients", "GradNorm loss grad"), RUNS),
    ]
    return found


def variants() -> List[Variant]:
    """Every variant of every family (built on call: nothing happens on import)."""
    return _variants()


def cases() -> List[Tuple[Variant, int]]:
    """(variant, index of the call) for every call of every variant."""
    return [(variant, index) for variant in variants() for index in range(len(variant.calls))]


def case_id(case: Tuple[Variant, int]) -> str:
    variant, index = case
    return f"{variant.family}: {variant.name}: {variant.calls[index]}"

