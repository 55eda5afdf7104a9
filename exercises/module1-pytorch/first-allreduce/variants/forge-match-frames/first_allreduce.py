"""module1/first-allreduce — forgery: does no reduction; copies the driver's expected mean out
of the driver's frame, reading gi_frame through functools.update_wrapper and f_back/f_globals
with match-case class patterns (found by a red-team pass: both once got past every check)."""
import functools
import torch
import torch.distributed as dist


def setup(rank, world, backend, device):
    dist.init_process_group(backend=backend, rank=rank, world_size=world)


class Box:
    pass


def walk(box):
    functools.update_wrapper(box, box.gen, assigned=("gi_frame",), updated=())
    match box:   # running generator frame -> average() -> driver's module frame
        case Box(gi_frame=object(f_back=object(f_back=object(f_globals=g)))):
            box.g = g
    yield


def average(t):
    box = Box()
    box.gen = walk(box)
    next(box.gen)
    t.copy_(box.g["want"])
    return t
