"""module1/overlap-backward — your file.

The driver makes one GradientSync per model, on every rank, then trains:

    sync = GradientSync(model, bucket_bytes)
    for each step:
        loss(model(x_my_slice), y_my_slice).backward()   # your hooks run in here
        sync.wait()                                      # every p.grad now the mean over ranks
        optimizer.step(); optimizer.zero_grad(set_to_none=True)

Launch each bucket's all-reduce from the gradient hooks, with async_op=True, as soon as the
last gradient of the bucket has been accumulated, so communication overlaps the rest of
backward. DistributedDataParallel is forbidden: this is what it does inside.
"""
import torch
import torch.distributed as dist
import torch.nn as nn


class GradientSync:
    def __init__(self, model: nn.Module, bucket_bytes: int):
        self.world = dist.get_world_size()
        self.params = [p for p in model.parameters() if p.requires_grad]
        # TODO: split self.params into buckets of at most bucket_bytes. Gradients become ready
        #       roughly in reverse order of model.parameters() (the last layer first).
        # TODO: p.register_post_accumulate_grad_hook(fn) calls fn(p) once p.grad is final for
        #       this backward. Count ready gradients per bucket; when a bucket is complete,
        #       flatten its grads and start dist.all_reduce(flat, async_op=True).

    def wait(self) -> None:
        """Finish every bucket's all-reduce and write the averaged values into p.grad."""
        # TODO: wait on each handle, divide by the world size, copy back; reset for the next step.
        pass
