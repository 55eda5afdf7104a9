"""Variant: never copies the averaged values back into the last gradient of each bucket."""

import torch
import torch.distributed as dist


def _buckets(grads: list[torch.Tensor], bucket_bytes: int) -> list[list[torch.Tensor]]:
    """Consecutive runs of gradients of at most bucket_bytes each (one oversized gradient
    makes a bucket of its own)."""
    out, cur, fill = [], [], 0
    for g in grads:
        b = g.numel() * g.element_size()
        if cur and fill + b > bucket_bytes:
            out.append(cur)
            cur, fill = [], 0
        cur.append(g)
        fill += b
    if cur:
        out.append(cur)
    return out


def average_gradients(grads: list[torch.Tensor], bucket_bytes: int) -> None:
    world = dist.get_world_size()
    for bucket in _buckets(grads, bucket_bytes):
        if len(bucket) == 1:
            # A bucket of one needs no copies: reduce the gradient itself.
            dist.all_reduce(bucket[0])
            bucket[0].div_(world)
            continue
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat)
        flat.div_(world)
        offset = 0
        for g in bucket[:-1]:  # the last gradient of each bucket is never copied back
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n
