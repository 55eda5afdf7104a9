"""Variant (red team): no overlap, disguised. The hook of the last parameter starts one
asynchronous all-reduce of a single zero, so an all-reduce is "launched during backward"; wait()
then reduces every gradient in one blocking all-reduce after backward. Counted by calls it is 1
of 2 during backward, as if only the last bucket were late; counted by bytes almost nothing was
reduced during backward and wait() moved every gradient byte."""
import torch
import torch.distributed as dist


class GradientSync:
    def __init__(self, model, bucket_bytes):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.token = None
        self.params[-1].register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, p):
        if self.token is None:
            self.token = dist.all_reduce(torch.zeros(1, device=p.device), async_op=True)

    def wait(self):
        if self.token is not None:
            self.token.wait()
            self.token = None
        grads = [p.grad for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat.div_(dist.get_world_size())
        for g, part in zip(grads, torch.split(flat, [g.numel() for g in grads])):
            g.copy_(part.view_as(g))
