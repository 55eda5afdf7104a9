"""module7/matmul-reduce-scatter — variant no-own-partial: returns the accumulation that
arrives last as the result, without adding this rank's own partial of its block."""
import torch
import torch.distributed as dist


def matmul_reduce_scatter(x_shard: torch.Tensor, w_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = x_shard.shape[0] // world
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def partial(b):
        return torch.matmul(x_shard[b * m:(b + 1) * m], w_shard)

    acc = partial((rank - 1) % world)
    for s in range(world - 1):
        recv = torch.empty_like(acc)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, acc, nxt),
                                       dist.P2POp(dist.irecv, recv, prv)])
        last = s == world - 2
        if not last:
            nxt_acc = partial((rank - s - 2) % world)
        for q in reqs:
            q.wait()
        # Bug: "the last accumulation to arrive is the answer"; this rank's own partial of its
        # block is never computed.
        acc = recv if last else nxt_acc.add_(recv)
    return acc
