"""Variant (red team): keeps the full weights as plain Python lists of floats (no tensor at
all), computes the whole MLP on every rank from them and makes the one all_reduce on the
output divided by the world size. It also allocates a large pad when imported and frees it
while the module is built, so a measure of memory growth would see no growth; the census of
allocations counts only what was allocated while the module was built and is still alive."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

_PAD = [torch.zeros(1 << 22)]  # 16 MiB, dropped in __init__
_LISTS = []


class ParallelMLP(nn.Module):
    def __init__(self, w1, b1, w2, b2):
        super().__init__()
        _PAD.clear()
        self.slot = len(_LISTS)
        _LISTS.append([(t.tolist(), t.dtype) for t in (w1, b1, w2, b2)])

    def forward(self, x):
        w1, b1, w2, b2 = (torch.tensor(v, dtype=dt, device=x.device) for v, dt in _LISTS[self.slot])
        y = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2) / dist.get_world_size()
        dist.all_reduce(y)
        return y
