"""Variant: wraps the model in DistributedDataParallel, which the exercise forbids."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class GradientSync:
    def __init__(self, model: nn.Module, bucket_bytes: int):
        # DDP registers its own hooks on the parameters of the module it wraps.
        self.ddp = DistributedDataParallel(model, bucket_cap_mb=bucket_bytes / 2**20)

    def wait(self) -> None:
        pass
