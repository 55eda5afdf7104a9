"""module7/unfused — variant rotated-order: puts its own shard first."""
import torch
import torch.distributed as dist


def gather_then_matmul(a_shard: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m, k = a_shard.shape
    n = b.shape[1]
    parts = [torch.empty_like(a_shard) for _ in range(world)]
    dist.all_gather(parts, a_shard.contiguous())
    # Bug: "my rows first", then the next ranks around the ring.
    a_full = torch.cat([parts[(rank + i) % world] for i in range(world)])
    lo, hi = rank * n // world, (rank + 1) * n // world
    return a_full @ b[:, lo:hi]
