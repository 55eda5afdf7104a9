"""module7/chunked-overlap — your file.

Same data as module7/unfused, with this rank's column shard of the weight given directly:
a_shard is this rank's m rows of A (world*m x K, rank 0's rows first), b_shard its K x n
columns of the weight. overlapped(a_shard, b_shard) must return A @ b_shard, shape
(world*m, n), like all-gather + matmul, but without waiting for the whole gather first:

    pass chunks around a ring: at step k this rank holds the rows of rank (rank - k) % world,
    sends them to rank + 1 and receives the next chunk from rank - 1 (dist.batch_isend_irecv
    with dist.P2POp(dist.isend, ...) and dist.P2POp(dist.irecv, ...)), and while that
    transfer runs, multiplies the chunk it holds into the matching rows of the result.
    Wait on the transfer's handles before using the received chunk.
"""
import torch
import torch.distributed as dist


def overlapped(a_shard: torch.Tensor, b_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = a_shard.shape[0]
    y = torch.zeros(world * m, b_shard.shape[1], dtype=a_shard.dtype, device=a_shard.device)
    # TODO: for each of the world steps: start the transfer of the next chunk (not on the
    #       last step), multiply the chunk you hold into its rows of y (torch.matmul with
    #       out=y[rows]), then wait on the transfer's handles.
    return y
