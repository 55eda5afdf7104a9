"""Variant: hands the whole list to all_reduce_coalesced, which the exercise forbids."""
import torch
import torch.distributed as dist


def average_gradients(grads: list[torch.Tensor], bucket_bytes: int) -> None:
    dist.all_reduce_coalesced(grads)
    for g in grads:
        g.div_(dist.get_world_size())
