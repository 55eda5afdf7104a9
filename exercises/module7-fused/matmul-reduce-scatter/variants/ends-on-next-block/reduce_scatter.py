"""module7/matmul-reduce-scatter — variant ends-on-next-block: works on block (rank - s) at
step s, as the all-gather ring of module7/chunked-overlap indexes its chunks, so the ring ends
on block rank + 1 instead of this rank's own."""
import torch
import torch.distributed as dist


def matmul_reduce_scatter(x_shard: torch.Tensor, w_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = x_shard.shape[0] // world
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def partial(b):
        return torch.matmul(x_shard[b * m:(b + 1) * m], w_shard)

    acc = partial(rank % world)  # Bug: starts on its own block, so it ends on rank + 1's.
    for s in range(world - 1):
        recv = torch.empty_like(acc)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, acc, nxt),
                                       dist.P2POp(dist.irecv, recv, prv)])
        nxt_acc = partial((rank - s - 1) % world)
        for q in reqs:
            q.wait()
        acc = nxt_acc.add_(recv)
    return acc
