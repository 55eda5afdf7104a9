"""Variant: gathers the hidden activations after the first layer (column-parallel, then a full second layer)."""
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
        self.w1 = nn.Parameter(w1[lo:hi].clone())
        self.b1 = nn.Parameter(b1[lo:hi].clone())
        self.w2 = nn.Parameter(w2.clone())
        self.b2 = nn.Parameter(b2.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(F.linear(x, self.w1, self.b1))
        parts = [torch.empty_like(h) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, h)
        return F.linear(torch.cat(parts, dim=1), self.w2, self.b2)
