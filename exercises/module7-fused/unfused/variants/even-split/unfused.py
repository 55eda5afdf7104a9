"""module7/unfused — variant even-split: N // world columns per rank."""
import torch
import torch.distributed as dist


def gather_then_matmul(a_shard: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m, k = a_shard.shape
    n = b.shape[1]
    a_full = torch.empty(world * m, k, dtype=a_shard.dtype, device=a_shard.device)
    dist.all_gather_into_tensor(a_full, a_shard.contiguous())
    w = n // world  # Bug: drops the last n % world columns.
    return a_full @ b[:, rank * w:(rank + 1) * w]
