"""Variant (red team): no buckets and no all-reduce. Each gradient is gathered from every rank
with dist.all_gather_into_tensor and the mean is taken locally: the values are right, and a
driver that counts only all-reduce calls sees none, which is never more than the buckets allow.
The driver counts every collective, so the all_gather calls fail the case."""
import torch
import torch.distributed as dist


def average_gradients(grads, bucket_bytes):
    world = dist.get_world_size()
    for g in grads:
        rows = torch.empty(world * g.numel(), dtype=g.dtype, device=g.device)
        dist.all_gather_into_tensor(rows, g.reshape(-1).contiguous())
        g.copy_(rows.view(world, -1).sum(dim=0).div_(world).view_as(g))
