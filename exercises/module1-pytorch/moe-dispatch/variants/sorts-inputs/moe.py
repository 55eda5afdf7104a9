"""Variant: sorts the caller's tokens and destinations in place, then returns the results in
that sorted order instead of the caller's original order."""
import torch
import torch.distributed as dist


def dispatch(tokens: torch.Tensor, dest: torch.Tensor):
    world = dist.get_world_size()
    # Group rows by destination; stable, so each group keeps this rank's row order.
    order = torch.argsort(dest, stable=True)
    send = tokens[order]
    tokens.copy_(send)  # the caller's tensors are now sorted by destination too
    dest.copy_(dest[order])
    send_counts = torch.bincount(dest, minlength=world)
    # Everyone learns how many rows it will receive from everyone: one integer per pair.
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send_splits, recv_splits = send_counts.tolist(), recv_counts.tolist()
    recv = tokens.new_empty(sum(recv_splits), tokens.shape[1])
    dist.all_to_all_single(recv, send, output_split_sizes=recv_splits,
                           input_split_sizes=send_splits)
    return recv, (order, send_splits, recv_splits)


def combine(out: torch.Tensor, state) -> torch.Tensor:
    order, send_splits, recv_splits = state
    back = out.new_empty(sum(send_splits), out.shape[1])
    # The same exchange in reverse: what was received goes back, what was sent comes home.
    dist.all_to_all_single(back, out, output_split_sizes=send_splits,
                           input_split_sizes=recv_splits)
    return back  # matches the (now sorted) inputs, not the order the caller gave
