"""module1/moe-dispatch — your file.

dispatch(tokens, dest) -> (received, state)
    tokens: (T, D) rows on this rank (T differs between ranks, may be 0);
    dest:   (T,) int64, the rank of the expert each row must go to.
    received: the rows sent to this rank by every rank, grouped by source rank (rank 0's
    first), each group in the sender's row order. state: anything combine() needs.

combine(out, state) -> (T, D)
    out: the expert's output, one row per received row, same order. Send every row back to
    the rank it came from; return them in the original order of this rank's tokens.

Use dist.all_to_all_single with split sizes; the counts themselves must be exchanged first.
"""
import torch
import torch.distributed as dist


def dispatch(tokens: torch.Tensor, dest: torch.Tensor):
    world = dist.get_world_size()
    # TODO: sort rows by destination (stable), count rows per destination,
    #       exchange the counts (an all_to_all_single of `world` integers),
    #       then all_to_all_single the rows with input_split_sizes / output_split_sizes.
    return tokens, None


def combine(out: torch.Tensor, state) -> torch.Tensor:
    # TODO: the reverse all_to_all_single (splits swapped), then undo the sort.
    return out
