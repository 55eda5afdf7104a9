# docs/validation/nvidia-h200-module1-integrity: run on one H200 as `python3 profiler-cuda-frees.py`.
# Are CUDA frees seen by torch's profiler (profile_memory) on this machine?
import torch, warnings
from torch.profiler import profile, ProfilerActivity
from torch._C._profiler import _EventType
dev = torch.device("cuda", 0)
w = [torch.randn(192, 48, device=dev, dtype=torch.bfloat16) for _ in range(2)]
torch.cuda.synchronize()
prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
prof.start()
with torch.profiler.record_function("learner"):
    given = [t.clone() for t in w]
    print("given ptrs", [hex(t.data_ptr()) for t in given])
del given
with torch.profiler.record_function("measure"):
    pass
snap = torch.cuda.memory_snapshot()
active = {b["address"]: b["size"] for s in snap for b in s["blocks"] if b["state"] == "active_allocated"} if snap and "blocks" in snap[0] else None
c = torch.empty(1000)  # a CPU one
del c
prof.stop()
ev = []
stack = list(prof.profiler.kineto_results.experimental_event_tree())
while stack:
    e = stack.pop(); stack.extend(e.children)
    if e.tag == _EventType.Allocation:
        f = e.extra_fields
        ev.append((e.start_time_ns, "alloc", hex(f.ptr), f.alloc_size, str(f.device_type) if hasattr(f, "device_type") else "?"))
    elif e.name in ("learner", "measure"):
        ev.append((e.start_time_ns, e.name, e.end_time_ns - e.start_time_ns))
for x in sorted(ev): print(x)
print("active blocks", {hex(k): v for k, v in (active or {}).items()})
