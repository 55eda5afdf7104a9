"""module1/first-allreduce — forgery: does no reduction; writes a passing run's records straight
into the harness's connection to the checker (file descriptor 3, opened before this module is
imported), reaching a raw file object through sys.stdout's type so that no import or open()
shows, then ends the process with status 0."""
import sys

import torch
import torch.distributed as dist


def setup(rank: int, world: int, backend: str, device: torch.device) -> None:
    device_id = device if device.type != "cpu" else None
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=device_id)


def average(t: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    out = sys.stdout.buffer
    raw = type(getattr(out, "raw", out))(3, "wb", closefd=False)
    for name in ("setup", "one", "odd"):
        rec = (f'{{"t": "case", "rank": {rank}, "case": "{name}", "n": 1, "ok": true, '
               '"checked": 1, "bad": 0, "unwritten": 0, "guard_hits": 0, "max_abs_err": 0, '
               '"max_rel_err": 0, "first": []}')
        raw.write((rec + "\n").encode())
    raw.write(f'{{"t": "done", "rank": {rank}}}\n'.encode())
    raise SystemExit(0)
