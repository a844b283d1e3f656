"""Which device to run on, and what mixed precision means there."""
from __future__ import annotations

import os
from typing import Optional

import torch

DEVICE_VARIABLE = "COURSE_DEVICE"


def pick_device(preferred: Optional[str] = None) -> torch.device:
    """The device for the lessons: ``preferred``, else ``$COURSE_DEVICE``, else cuda, mps, cpu in that order."""
    choice = preferred or os.environ.get(DEVICE_VARIABLE)
    if choice:
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def autocast_dtype(device: torch.device) -> torch.dtype:
    """The low-precision dtype ``torch.autocast`` uses here: float16 on GPUs, bfloat16 on the CPU."""
    return torch.bfloat16 if torch.device(device).type == "cpu" else torch.float16


def needs_grad_scaler(device: torch.device) -> bool:
    """True where autocast runs float16, whose small gradients underflow without loss scaling.

    bfloat16 has float32's exponent range, so on the CPU a GradScaler is optional.
    """
    return autocast_dtype(device) == torch.float16


def describe_device(device: torch.device) -> str:
    """One line: the device, its name, and its mixed-precision setup."""
    device = torch.device(device)
    name = device.type
    if device.type == "cuda":
        name = f"cuda ({torch.cuda.get_device_name(device)})"
    dtype = str(autocast_dtype(device)).replace("torch.", "")
    scaler = "GradScaler needed" if needs_grad_scaler(device) else "GradScaler optional"
    return f"{name}; autocast runs {dtype}; {scaler}"
