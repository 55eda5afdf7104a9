"""Variant: imports all_reduce under another name before the harness could wrap it."""
import torch
from torch.distributed import all_reduce as _sum_everywhere


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    _sum_everywhere(t, group=group)
