"""Real architectures, built in code (no downloads), for trying the tools on more than the course's toy models.

- DCGAN's generator and discriminator at their real sizes (nz=100, ngf=ndf=64, 64x64 RGB), as in PyTorch's DCGAN
  example. Both keep their layers in ``self.main``, so their parameter names collide (``main.0.weight``).
- A CycleGAN-style ResNet generator: residual blocks ``x + block(x)``, instance norm, in-place ReLUs.
- A small text-conditioned UNet: a text encoder (embedding + transformer layer, LayerNorm), and a UNet with
  GroupNorm, skip connections, and cross-attention from the image features to the text encoder's output.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

NZ, NGF, NDF, NC = 100, 64, 64, 3


def _seeded(seed: int) -> torch.Generator:
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


class DCGANGenerator(nn.Module):
    """DCGAN's generator: noise [N, 100, 1, 1] -> image [N, 3, 64, 64]."""

    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 8), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 8, NGF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
            nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False), nn.Tanh(),
        )

    def forward(self, noise: torch.Tensor) -> torch.Tensor:
        return self.main(noise)


class DCGANDiscriminator(nn.Module):
    """DCGAN's discriminator: image [N, 3, 64, 64] -> probability of "real" [N]."""

    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, NDF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 4, NDF * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.main(image).view(-1)


def make_dcgan(seed: int = 0, batch: int = 2) -> Tuple[DCGANGenerator, DCGANDiscriminator, torch.Tensor, torch.Tensor]:
    """Generator, discriminator, a noise batch and a "real" image batch."""
    generator = _seeded(seed)
    netg, netd = DCGANGenerator(), DCGANDiscriminator()
    noise = torch.randn(batch, NZ, 1, 1, generator=generator)
    real = torch.rand(batch, NC, 64, 64, generator=generator) * 2 - 1
    return netg, netd, noise, real


class ResnetBlock(nn.Module):
    """CycleGAN's residual block; ``inplace_residual=True`` writes ``x += block(x)``, a classic bug."""

    def __init__(self, channels: int, inplace_residual: bool = False) -> None:
        super().__init__()
        self.inplace_residual = inplace_residual
        self.conv_block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), nn.InstanceNorm2d(channels), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), nn.InstanceNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inplace_residual:
            x += self.conv_block(x)
            return x
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    """CycleGAN's ResNet generator (image -> image), with ``blocks`` residual blocks and ``ngf`` base channels."""

    def __init__(self, ngf: int = 32, blocks: int = 6, inplace_residual: bool = False) -> None:
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(NC, ngf, 7), nn.InstanceNorm2d(ngf), nn.ReLU(True)]
        for factor in (1, 2):
            layers += [nn.Conv2d(ngf * factor, ngf * factor * 2, 3, 2, 1), nn.InstanceNorm2d(ngf * factor * 2),
                       nn.ReLU(True)]
        layers += [ResnetBlock(ngf * 4, inplace_residual) for _ in range(blocks)]
        for factor in (4, 2):
            layers += [nn.ConvTranspose2d(ngf * factor, ngf * factor // 2, 3, 2, 1, output_padding=1),
                       nn.InstanceNorm2d(ngf * factor // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, NC, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model(image)


class TextEncoder(nn.Module):
    """A CLIP-style text encoder, small: token embedding + position embedding, one transformer layer, LayerNorm."""

    def __init__(self, vocabulary: int = 100, width: int = 32, length: int = 8) -> None:
        super().__init__()
        self.token = nn.Embedding(vocabulary, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.02)
        self.layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.final_norm = nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.final_norm(self.layer(self.token(tokens) + self.position))


class CrossAttention(nn.Module):
    """Image features attend to the text: queries from the image, keys and values from the text."""

    def __init__(self, channels: int, text_width: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(8, channels)
        self.attention = nn.MultiheadAttention(channels, 4, kdim=text_width, vdim=text_width, batch_first=True)

    def forward(self, features: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = features.shape
        queries = self.norm(features).flatten(2).transpose(1, 2)
        attended, _ = self.attention(queries, text, text, need_weights=False)
        return features + attended.transpose(1, 2).reshape(batch, channels, height, width)


class SmallUNet(nn.Module):
    """A UNet: two down levels with GroupNorm and SiLU, cross-attention at the bottom, skip connections up."""

    def __init__(self, channels: int = 32, text_width: int = 32, inplace_bias: bool = False,
                 inplace_skip_activation: bool = False) -> None:
        super().__init__()
        self.inplace_bias = inplace_bias
        self.inplace_skip_activation = inplace_skip_activation
        self.stem = nn.Conv2d(NC, channels, 3, padding=1)
        self.down1 = nn.Sequential(nn.GroupNorm(8, channels), nn.SiLU(), nn.Conv2d(channels, channels, 3, 2, 1))
        self.down2 = nn.Sequential(nn.GroupNorm(8, channels), nn.SiLU(), nn.Conv2d(channels, channels * 2, 3, 2, 1))
        self.text_bias = nn.Linear(text_width, channels * 2)
        self.middle = CrossAttention(channels * 2, text_width)
        self.up2 = nn.Sequential(nn.GroupNorm(8, channels * 4), nn.SiLU(),
                                 nn.ConvTranspose2d(channels * 4, channels, 4, 2, 1))
        self.up1 = nn.Sequential(nn.GroupNorm(8, channels * 2), nn.SiLU(),
                                 nn.ConvTranspose2d(channels * 2, channels, 4, 2, 1))
        self.out = nn.Sequential(nn.GroupNorm(8, channels * 2), nn.SiLU(), nn.Conv2d(channels * 2, NC, 3, padding=1))

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        skip0 = self.stem(image)
        skip1 = self.down1(skip0)
        bottom = self.down2(skip1).relu()
        bias = self.text_bias(text.mean(1))[:, :, None, None]
        if self.inplace_bias:
            bottom += bias  # the relu saved ``bottom``: changing it in place breaks relu's backward
        else:
            bottom = bottom + bias
        middle = self.middle(bottom, text)
        up = self.up2(torch.cat([middle, bottom], 1))
        if self.inplace_skip_activation:
            skip1 = F.relu(skip1, inplace=True)  # down2's GroupNorm saved skip1: this rewrites it
        up = self.up1(torch.cat([up, skip1], 1))
        return self.out(torch.cat([up, skip0], 1))


def make_text_unet(seed: int = 0, batch: int = 2, inplace_bias: bool = False, inplace_skip_activation: bool = False
                   ) -> Tuple[TextEncoder, SmallUNet, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Text encoder, UNet, token batch, noisy images and their noise target."""
    generator = _seeded(seed)
    tenc = TextEncoder()
    unet = SmallUNet(inplace_bias=inplace_bias, inplace_skip_activation=inplace_skip_activation)
    tokens = torch.randint(0, 100, (batch, 8), generator=generator)
    images = torch.randn(batch, NC, 16, 16, generator=generator)
    noise = torch.randn(batch, NC, 16, 16, generator=generator)
    return tenc, unet, tokens, images, noise


def diffusion_losses(tenc: nn.Module, unet: nn.Module, tokens: torch.Tensor, images: torch.Tensor,
                     noise: torch.Tensor, device_type: Optional[str] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Seed 2's two losses: one for the text encoder (all pixels), one for the UNet (masked, half the pixels)."""
    context = torch.autocast(device_type) if device_type else torch.autocast("cpu", enabled=False)
    with context:
        prediction = unet(images, tenc(tokens))
    per_pixel = F.mse_loss(prediction.float(), noise, reduction="none")
    mask = torch.zeros_like(per_pixel)
    mask[..., ::2] = 1.0
    return per_pixel.mean(), (per_pixel * mask).mean()
