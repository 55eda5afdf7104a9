"""module7/chunked-overlap — variant missing-wait: multiplies chunks before they arrived."""
import torch
import torch.distributed as dist


def overlapped(a_shard: torch.Tensor, b_shard: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    m = a_shard.shape[0]
    y = torch.empty(world * m, b_shard.shape[1], dtype=a_shard.dtype, device=a_shard.device)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    cur = a_shard.contiguous()
    pending, chunks = [], []
    for step in range(world):
        src = (rank - step) % world
        if step < world - 1:
            nxt_chunk = torch.empty_like(cur)
            chunks.append(nxt_chunk)
            pending += dist.batch_isend_irecv([dist.P2POp(dist.isend, cur, nxt),
                                               dist.P2POp(dist.irecv, nxt_chunk, prv)])
        torch.matmul(cur, b_shard, out=y[src * m:(src + 1) * m])
        if step < world - 1:
            cur = nxt_chunk  # Bug: used by the next GEMM before its receive is waited on.
    for q in pending:  # "wait at the end, so everything overlaps"
        q.wait()
    return y
