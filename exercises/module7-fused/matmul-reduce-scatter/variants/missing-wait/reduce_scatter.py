"""module7/matmul-reduce-scatter — variant missing-wait: adds each received accumulation
before its receive finished (waits only at the end)."""
import torch
import torch.distributed as dist


def matmul_reduce_scatter(x_shard: torch.Tensor, w_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = x_shard.shape[0] // world
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def partial(b):
        return torch.matmul(x_shard[b * m:(b + 1) * m], w_shard)

    pending, keep = [], []
    acc = partial((rank - 1) % world)
    for s in range(world - 1):
        recv = torch.empty_like(acc)
        keep += [acc, recv]
        pending += dist.batch_isend_irecv([dist.P2POp(dist.isend, acc, nxt),
                                           dist.P2POp(dist.irecv, recv, prv)])
        nxt_acc = partial((rank - s - 2) % world)
        acc = nxt_acc.add_(recv)  # Bug: recv is read before its receive is waited on.
    for q in pending:  # "wait at the end, so everything overlaps"
        q.wait()
    return acc
