"""module1/tensor-parallel-mlp variant skips-when-timed: the reference solution, except that
forward counts its calls and, after the first SKIP_AFTER, returns the output of the last call
it computed without doing any work. The correctness cases make 8 calls (4 cases, 2 iterations
each) and pass; the timed calls (at least 3 warmup + 1 + 10 samples, always on the same input)
then cost nothing and still return the right values, and only the driver's after-timing call,
new data in the timed input, sees it."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SKIP_AFTER = 14
_calls = 0


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
        global _calls
        _calls += 1
        if _calls > SKIP_AFTER:
            return self._last
        h = F.gelu(F.linear(x, self.w1, self.b1))
        y = F.linear(h, self.w2)  # this rank's partial sum over its hidden units
        dist.all_reduce(y)
        self._last = y + self.b2  # added once, after the sum
        return self._last
