"""Variant: calls the process group object's own allreduce method."""
import torch
import torch.distributed as dist


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    pg = group if group is not None else dist.group.WORLD
    pg.allreduce([t]).wait()
