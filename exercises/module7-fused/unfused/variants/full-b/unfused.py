"""module7/unfused — variant full-b: multiplies by every column of b."""
import torch
import torch.distributed as dist


def gather_then_matmul(a_shard: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    m, k = a_shard.shape
    a_full = torch.empty(world * m, k, dtype=a_shard.dtype, device=a_shard.device)
    dist.all_gather_into_tensor(a_full, a_shard.contiguous())
    return a_full @ b  # Bug: the whole weight, not this rank's columns.
