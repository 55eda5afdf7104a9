"""module1/gradient-buckets — variant padded-to-largest: fills every bucket up to the size of the
largest gradient (over the bucket limit) and pads it with zeros to exactly that size, so every
all_reduce looks like the one an oversized gradient makes by itself."""
import torch
import torch.distributed as dist


def average_gradients(grads, bucket_bytes):
    world = dist.get_world_size()
    sizes = [g.numel() * g.element_size() for g in grads]
    cap = max(sizes)
    buckets, cur, fill = [], [], 0
    for g, b in zip(grads, sizes):
        if cur and fill + b > cap:
            buckets.append(cur)
            cur, fill = [], 0
        cur.append(g)
        fill += b
    if cur:
        buckets.append(cur)
    for bucket in buckets:
        n = sum(g.numel() for g in bucket)
        flat = torch.zeros(cap // bucket[0].element_size(), dtype=bucket[0].dtype,
                           device=bucket[0].device)
        flat[:n].copy_(torch.cat([g.reshape(-1) for g in bucket]))
        dist.all_reduce(flat)
        flat.div_(world)
        off = 0
        for g in bucket:
            g.copy_(flat[off:off + g.numel()].view_as(g))
            off += g.numel()
