"""module1/first-allreduce — forgery: reaches into the course's harness so that every
comparison says "ok", and does no reduction at all."""
import torch
import torch.distributed as dist

import mgpu_harness


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    mgpu_harness.Result.ok = lambda self: True
    return t
