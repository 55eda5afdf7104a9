"""Variant: starts a new bucket without checking that the current one holds anything, so an
oversized first gradient leaves an empty bucket in front of it (torch.cat of nothing)."""
import torch
import torch.distributed as dist


def average_gradients(grads, bucket_bytes):
    buckets, cur, fill = [], [], 0
    for g in grads:
        b = g.numel() * g.element_size()
        if fill + b > bucket_bytes:   # forgets that cur may be empty
            buckets.append(cur)
            cur, fill = [], 0
        cur.append(g)
        fill += b
    buckets.append(cur)
    for bucket in buckets:
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat)
        flat.div_(dist.get_world_size())
        off = 0
        for g in bucket:
            g.copy_(flat[off:off + g.numel()].view_as(g))
            off += g.numel()
