"""Variant: starts each bucket's all-reduce with async_op=True, then waits for it inside the
hook through the handle's future (work.get_future().wait()), not handle.wait(): backward stops
at every bucket, so nothing overlaps."""
import torch
import torch.distributed as dist
import torch.nn as nn


class GradientSync:
    def __init__(self, model: nn.Module, bucket_bytes: int):
        self.world = dist.get_world_size()
        params = [p for p in model.parameters() if p.requires_grad]
        # Gradients arrive roughly last layer first, so buckets are cut in reverse order: the
        # first bucket fills (and its all-reduce starts) while earlier layers still compute.
        self.buckets: list[list[nn.Parameter]] = []
        cur, fill = [], 0
        for p in reversed(params):
            b = p.numel() * p.element_size()
            if cur and fill + b > bucket_bytes:
                self.buckets.append(cur)
                cur, fill = [], 0
            cur.append(p)
            fill += b
        if cur:
            self.buckets.append(cur)
        self.bucket_of = {}
        for i, bucket in enumerate(self.buckets):
            for p in bucket:
                self.bucket_of[p] = i
        self.ready = [0] * len(self.buckets)
        self.pending = {}  # bucket index -> (work handle, flat buffer)
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, p: nn.Parameter) -> None:
        i = self.bucket_of[p]
        self.ready[i] += 1
        if self.ready[i] == len(self.buckets[i]):
            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]])
            work = dist.all_reduce(flat, async_op=True)
            work.get_future().wait()  # backward stops here until the bucket is reduced
            self.pending[i] = (work, flat)

    def wait(self) -> None:
        for i, (work, flat) in sorted(self.pending.items()):
            work.wait()
            flat.div_(self.world)
            offset = 0
            for p in self.buckets[i]:
                n = p.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        missing = [i for i in range(len(self.buckets)) if i not in self.pending]
        if missing:
            raise RuntimeError(f"buckets {missing} never became ready: does every parameter "
                               "get a gradient in each backward?")
        self.pending.clear()
        self.ready = [0] * len(self.buckets)
