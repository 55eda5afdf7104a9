"""module1/first-allreduce — forgery: does no reduction; takes a frame from logging's
currentframe and getattr from builtins, both reached through attributes of allowed modules
(torch.export.logging, enum.bltns), and copies the driver's expected mean out of the driver's
frame (found by a red-team pass: it once got past every check)."""
import enum

import torch
import torch.distributed as dist


def setup(rank, world, backend, device):
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t):
    ga = enum.bltns.getattr
    here = torch.export.logging.currentframe()
    g = ga(ga(here, "f_back"), "f_globals")
    t.copy_(g["want"])
    return t
