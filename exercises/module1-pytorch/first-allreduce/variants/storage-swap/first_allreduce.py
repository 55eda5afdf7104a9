"""Variant: puts the mean into new memory with t.data = ..., so the caller's memory keeps the sum."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    t.data = t.data / dist.get_world_size()
    return t
