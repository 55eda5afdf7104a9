"""Variant: shards and all-reduces like the solution, then returns a meta tensor of the right
shape and dtype (no data at all). The harness cannot read it: a wrong result, not a crash of
the driver."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ParallelMLP(nn.Module):
    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        hidden = w1.shape[0]
        lo, hi = rank * hidden // world, (rank + 1) * hidden // world
        # Column-parallel: this rank computes hidden units [lo, hi) in full.
        self.w1 = nn.Parameter(w1[lo:hi].clone())
        self.b1 = nn.Parameter(b1[lo:hi].clone())
        # Row-parallel: the second layer's inputs [lo, hi) are exactly those hidden units, so no
        # communication is needed between the layers. .contiguous() keeps a compact copy.
        self.w2 = nn.Parameter(w2[:, lo:hi].contiguous())
        self.b2 = nn.Parameter(b2.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(F.linear(x, self.w1, self.b1))
        y = F.linear(h, self.w2)  # this rank's partial sum over its hidden units
        dist.all_reduce(y)
        # The shape and dtype of the answer without its values: a meta tensor has no data.
        return torch.empty_like(y, device="meta")
