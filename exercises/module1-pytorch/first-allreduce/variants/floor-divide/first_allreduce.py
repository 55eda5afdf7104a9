"""Variant: divides the sum with //, which rounds the mean down to a whole number."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    t //= dist.get_world_size()
    return t
