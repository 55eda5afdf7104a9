"""module1/first-allreduce — forgery: does no reduction and ends the process with status 0
before the driver can check anything."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    raise SystemExit(0)
