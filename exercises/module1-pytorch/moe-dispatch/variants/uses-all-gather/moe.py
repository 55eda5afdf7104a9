"""Variant: sends every token to every rank with all_gather, which the exercise forbids."""
import torch
import torch.distributed as dist


def dispatch(tokens: torch.Tensor, dest: torch.Tensor):
    world, rank = dist.get_world_size(), dist.get_rank()
    counts = [torch.zeros(1, dtype=torch.int64, device=tokens.device) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([tokens.shape[0]], device=tokens.device))
    raise NotImplementedError("never reached: all_gather is forbidden")


def combine(out: torch.Tensor, state) -> torch.Tensor:
    raise NotImplementedError
