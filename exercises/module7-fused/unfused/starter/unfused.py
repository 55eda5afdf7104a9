"""module7/unfused — your file.

Every rank holds a_shard, its m consecutive rows (tokens) of the activations A (world*m x K):
rank 0 rows [0, m), rank 1 rows [m, 2m), ... Every rank is also given the full weight b (K x N)
and owns the columns [rank*N//world, (rank+1)*N//world) of it (tensor-parallel, column split).

gather_then_matmul(a_shard, b) must return A @ b[:, lo:hi]: every row of A, this rank's
columns only, shape (world*m, hi - lo). First all-gather A, then one matmul.
"""
import torch
import torch.distributed as dist


def gather_then_matmul(a_shard: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m, k = a_shard.shape
    n = b.shape[1]
    # TODO: gather every rank's a_shard into one (world*m, K) tensor, in rank order
    #       (dist.all_gather_into_tensor).
    # TODO: this rank's columns [lo, hi) of b, and one matmul.
    lo, hi = 0, n // world
    return torch.zeros(world * m, hi - lo, dtype=a_shard.dtype, device=a_shard.device)
