"""Variant: calls the library all-reduce instead of building the ring."""
import torch
import torch.distributed as dist


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    dist.all_reduce(t, group=group)
