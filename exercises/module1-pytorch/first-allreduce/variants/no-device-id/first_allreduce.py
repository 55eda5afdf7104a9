"""Variant: initializes NCCL without device_id, so the group is not bound to the rank's GPU."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    dist.init_process_group(backend=backend, rank=rank, world_size=world)


def average(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    t.div_(dist.get_world_size())
    return t
