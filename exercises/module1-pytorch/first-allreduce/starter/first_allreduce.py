"""module1/first-allreduce — your file.

The driver runs this on every rank (one process per GPU, or per CPU rank with gloo) and calls:

    setup(rank, world, backend, device)   once, before anything else
    average(t)                            on tensors of several sizes

See TASK.md for what each function must do.
"""
import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    """Create the default process group for this rank.

    rank, world: this process's rank and the number of ranks.
    backend:     "nccl" on GPUs, "gloo" on CPU.
    device:      this rank's device: cuda:<i> on a GPU machine, cpu otherwise.
    MASTER_ADDR and MASTER_PORT are already in the environment.
    """
    # TODO: initialize the default process group (torch.distributed.init_process_group).
    #       On a GPU, bind it to `device`; on CPU there is nothing to bind.
    pass


def average(t: torch.Tensor) -> torch.Tensor:
    """Replace every element of t, in place, by its mean over all ranks; return t."""
    # TODO: one collective, then scale.
    return t
