"""Variant: keeps the full weights and computes the whole MLP on every rank."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ParallelMLP(nn.Module):
    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor):
        super().__init__()
        self.w1, self.b1 = nn.Parameter(w1.clone()), nn.Parameter(b1.clone())
        self.w2, self.b2 = nn.Parameter(w2.clone()), nn.Parameter(b2.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.gelu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)
