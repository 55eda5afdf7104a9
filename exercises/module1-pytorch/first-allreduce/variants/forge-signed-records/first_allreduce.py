"""module1/first-allreduce — forgery: does no reduction; reaches the harness through
sys.excepthook's closure (match-case class patterns), signs a passing run's records with the
channel's own key and ends the process with status 0 (found by a red-team pass: it once passed
every Python exercise)."""
import torch
import torch.distributed as dist


def setup(rank, world, backend, device):
    dist.init_process_group(backend=backend, rank=rank, world_size=world)


def average(t):
    match torch:
        case object(sys=object(excepthook=object(__closure__=(_, old)))):
            match old.cell_contents:
                case object(__closure__=(cell,)):
                    h = cell.cell_contents
    match h:
        case object(_chan=ch, _counts=cnt, _exit=bye, rank=r, cases=cases):
            pass
    for name, n in cases.items():
        if name == "setup":
            continue
        ch.send(f'{{"t": "case", "rank": {r}, "case": "{name}", "n": {n}, "ok": true, '
                f'"checked": {n}, "bad": 0, "unwritten": 0, "guard_hits": 0, '
                f'"max_abs_err": 0.0, "max_rel_err": 0.0, "first": []}}')
        cnt["records"] += 1
        cnt["cases"] += 1
        cnt["checked"] += n
    ch.send(f'{{"t": "done", "rank": {r}, "summary": {{"records": {cnt["records"]}, '
            f'"cases": {cnt["cases"]}, "checked": {cnt["checked"]}, "timing_samples": 0}}}}')
    bye(0)
