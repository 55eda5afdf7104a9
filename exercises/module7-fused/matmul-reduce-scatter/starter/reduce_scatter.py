"""module7/matmul-reduce-scatter — your file.

Row-parallel: x_shard is this rank's M x k_r column shard of the activations X, w_shard its
k_r x N row shard of the weight (the shards may differ in k_r from rank to rank). Y = X @ W is
the sum over ranks of the partials x_shard @ w_shard. matmul_reduce_scatter(x_shard, w_shard)
must return this rank's row block of Y, rows [rank*m, (rank+1)*m) with m = M / world, shape
(m, N), like a matmul followed by reduce_scatter_tensor, but without waiting for the whole
partial first:

    pass accumulations around a ring: at step s this rank computes its partial of row block
    (rank - s - 1) % world (only those m rows of x_shard), adds the accumulation of that block
    received from rank - 1 (none at step 0), and, unless it is the last step, sends the sum to
    rank + 1 while receiving the next block's accumulation from rank - 1
    (dist.batch_isend_irecv with dist.P2POp(dist.isend, ...) and dist.P2POp(dist.irecv, ...)).
    Compute the next block's partial while that transfer runs, and wait on the transfer's
    handles before adding the received buffer.
"""
import torch
import torch.distributed as dist


def matmul_reduce_scatter(x_shard: torch.Tensor, w_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = x_shard.shape[0] // world
    y = torch.zeros(m, w_shard.shape[1], dtype=x_shard.dtype, device=x_shard.device)
    # TODO: world steps; at step s compute the partial of block (rank - s - 1) % world, add
    #       the accumulation received for it (from step 1 on), and send the sum on (not on the
    #       last step), computing the next block's partial while it travels.
    return y
