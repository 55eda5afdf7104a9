"""module1/first-allreduce — forgery: does no reduction; copies the mean the driver computed
before calling average() out of the driver's own module, reached through torch's reference to
the sys module."""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    driver = torch.sys.modules["__main__"]
    t.copy_(driver.want)
    return t
