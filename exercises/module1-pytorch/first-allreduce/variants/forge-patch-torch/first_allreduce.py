"""module1/first-allreduce — forgery: makes tensor equality always true, so that a comparison
built on == would pass, and does no reduction."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    torch.eq = lambda a, b: torch.ones_like(a, dtype=torch.bool)
    return t
