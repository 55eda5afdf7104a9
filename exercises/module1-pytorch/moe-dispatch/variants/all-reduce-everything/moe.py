"""module1/moe-dispatch — variant all-reduce-everything: every rank writes its rows at its offset
in a buffer of every rank's rows, zeros elsewhere, and all_reduce makes the whole buffer
everywhere; each rank keeps the rows meant for it. The values are right; every token reached
every rank."""
import torch
import torch.distributed as dist


def dispatch(tokens: torch.Tensor, dest: torch.Tensor):
    world, me = dist.get_world_size(), dist.get_rank()
    counts = torch.zeros(world, dtype=torch.int64, device=tokens.device)
    counts[me] = tokens.shape[0]
    dist.all_reduce(counts)
    sizes = counts.tolist()
    start = sum(sizes[:me])
    everything = tokens.new_zeros(sum(sizes), tokens.shape[1])
    everything[start:start + tokens.shape[0]] = tokens
    dist.all_reduce(everything)
    where = torch.zeros(sum(sizes), dtype=torch.int64, device=tokens.device)
    where[start:start + tokens.shape[0]] = dest
    dist.all_reduce(where)
    keep = where == me
    recv_splits = [int(k.sum()) for k in torch.split(keep, sizes)]
    order = torch.argsort(dest, stable=True)
    send_splits = torch.bincount(dest, minlength=world).tolist()
    return everything[keep], (order, send_splits, recv_splits)


def combine(out: torch.Tensor, state) -> torch.Tensor:
    order, send_splits, recv_splits = state
    back = out.new_empty(sum(send_splits), out.shape[1])
    dist.all_to_all_single(back, out, output_split_sizes=send_splits,
                           input_split_sizes=recv_splits)
    result = torch.empty_like(back)
    result[order] = back
    return result
