"""module1/gradient-buckets — your file.

The driver calls, on every rank,

    average_gradients(grads, bucket_bytes)

with the gradients of a model (a list of float32 tensors of many shapes: a few large, many
tiny). On return each gradient must hold, in place, its mean over all ranks, and you may make
at most one dist.all_reduce per bucket: a run of consecutive gradients whose sizes add up to
at most bucket_bytes (a gradient larger than bucket_bytes is a bucket by itself).
"""
import torch
import torch.distributed as dist


def average_gradients(grads: list[torch.Tensor], bucket_bytes: int) -> None:
    # TODO: group consecutive gradients into buckets of at most bucket_bytes.
    # TODO: per bucket: flatten into one contiguous buffer (torch.cat of .view(-1)),
    #       one dist.all_reduce, divide by the world size,
    #       then copy each slice back into its gradient (same offsets, .view_as()).
    pass
