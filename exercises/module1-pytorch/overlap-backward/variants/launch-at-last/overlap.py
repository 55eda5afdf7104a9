"""module1/overlap-backward — variant launch-at-last: the hooks only count ready gradients; the
last one launches every bucket's all_reduce(async_op=True) at once, at the end of backward:
every byte is launched "during backward", and nothing overlaps."""
import torch
import torch.distributed as dist
import torch.nn as nn


class GradientSync:
    def __init__(self, model: nn.Module, bucket_bytes: int):
        self.world = dist.get_world_size()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buckets = []
        cur, fill = [], 0
        for p in reversed(self.params):
            b = p.numel() * p.element_size()
            if cur and fill + b > bucket_bytes:
                self.buckets.append(cur)
                cur, fill = [], 0
            cur.append(p)
            fill += b
        if cur:
            self.buckets.append(cur)
        self.seen = 0
        self.pending = []
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, p):
        self.seen += 1
        if self.seen < len(self.params):
            return
        # backward is over but for this hook: now launch everything
        for bucket in self.buckets:
            flat = torch.cat([q.grad.reshape(-1) for q in bucket])
            self.pending.append((dist.all_reduce(flat, async_op=True), flat, bucket))

    def wait(self):
        for work, flat, bucket in self.pending:
            work.wait()
            flat.div_(self.world)
            off = 0
            for p in bucket:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p.grad))
                off += p.numel()
        self.pending = []
        self.seen = 0
