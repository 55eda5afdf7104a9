"""mgpu_harness — the Python twin of csrc/mgpu.h, for torch exercises.

The course-owned driver (driver.py) owns the process; the learner writes a module the driver
imports. The harness reads the run's environment (docs/protocol.md §1), writes the JSON-lines
records of §2 to $MGPU_RUN_DIR/rank-<r>.jsonl, and gives drivers exact data, poisoned outputs,
element-wise comparisons, forbidden-call policing and ABAB timing. docs/python-harness.md is the
author's guide.

    import mgpu_harness
    h = mgpu_harness.init()
    learner = h.import_learner("ring")       # the learner's ring.py, policed while it runs
    h.init_process_group()
    for name, n in h.cases.items():
        ...
        with h.forbid():
            learner.ring_all_reduce(t)
        h.check_equal(name, t, want)
    sys.exit(h.finish())
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import functools
import hashlib
import hmac
import importlib
import importlib.util
import inspect
import json
import math
import os
import socket
import statistics
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

import mgpu_policy

__all__ = ["init", "Harness", "Result", "Call", "Collective", "Unreadable", "PolicyViolation",
           "HARNESS_VERSION"]

HARNESS_VERSION = "py/1"

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_CHUNK = 1 << 24  # elements per step in exact()/check_equal(), bounds temporary memory
# On the CPU (gloo runs, the verifier) smaller steps keep the temporaries in cache: generating
# 64 Mi exact values took 7.1 s in steps of 16 Mi and 1.3 s in steps of 1 Mi on a 2-core CI
# machine (torch 2.11).
_CHUNK_CPU = 1 << 20


def _chunk(device):
    return _CHUNK if torch.device(device).type == "cuda" else _CHUNK_CPU
_MAX_FIRST = 8
_MAX_MSG = 2000


class PolicyViolation(BaseException):
    """Raised when the learner's code calls a forbidden function.

    A BaseException, so that a learner's `except Exception:` cannot swallow it."""


# ---------------------------------------------------------------------------------------------
# The records channel (docs/protocol.md §4)


def _undumpable():
    """The verifier is about to receive the seed: not dumpable (prctl PR_SET_DUMPABLE 0), so no
    process of the user's without CAP_SYS_PTRACE (a rank, where the kernel lets a user's
    processes trace each other) can read or write its memory through ptrace or
    /proc/<pid>/mem (docs/protocol.md §4). Linux only; elsewhere nothing to do."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) in the verifier")


class _Channel:
    """This rank's end of the checker's records channel: the handshake gives a per-run key and
    the seed (neither is in the environment); every record goes out signed with
    HMAC-SHA256(key, "<seq> <json>")."""

    def __init__(self, addr, rank):
        if not addr.startswith("unix:"):
            raise ValueError(f"MGPU_RECORDS={addr!r} is not unix:<socket path>")
        # A rank's verifier (docs/protocol.md §4, "The verifier") says "verify"; the checker
        # accepts that only from the process it started for the rank.
        self.verifier = os.environ.get("MGPU_ROLE") == "verifier"
        if self.verifier:
            _undumpable()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(addr[len("unix:"):])
        verb = "verify" if self.verifier else "hello"
        sock.sendall(f"{verb} {rank} {os.getpid()} {HARNESS_VERSION}\n".encode())
        self._sock = sock
        self._buf = b""
        reply = self._line()
        if reply is None:
            raise ConnectionError("the checker closed the records channel during the handshake")
        parts = reply.split()
        self.split = False
        self.seed = None
        self.rank_seed = None
        if len(parts) == 5 and parts[0] == "ok" and parts[2] == "split":
            # A split rank: the key of its own inputs, never the run's seed.
            self.split = True
            self.rank_seed = int(parts[3]) & _MASK64
        elif len(parts) == 3 and parts[0] == "ok":
            self.seed = int(parts[2]) & _MASK64
        else:
            raise ConnectionError("the checker refused this process: " + reply.strip())
        self._key = bytes.fromhex(parts[1])
        self._seq = 0
        self._sub = None
        self.learner_paths = set()  # the harness's set of learner files, shared
        if self.split:
            sub = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sub.connect(addr[len("unix:"):])
            sub.sendall(f"submit {rank} {os.getpid()}\n".encode())
            ok = b""
            while not ok.endswith(b"\n"):
                chunk = sub.recv(1)
                if not chunk:
                    break
                ok += chunk
            if ok != b"ok\n":
                raise ConnectionError("the checker refused the outputs connection: " +
                                      ok.decode(errors="replace").strip())
            self._sub = sub
        if self.verifier:
            self.split = True

    def _line(self):
        """The next line from the checker (None at the end), keeping what follows it."""
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")

    def submit(self, tag, parts):
        """A split rank: one output to its verifier, sent from its parts without joining."""
        size = sum(len(p) for p in parts)
        self._sub.sendall(f"{tag} {size}\n".encode())
        for p in parts:
            if len(p):
                self._sub.sendall(p)

    def drain(self, timeout_s=120.0):
        """A split rank, before it times anything: asks that its verifier finish every output
        sent so far, and waits for the answer, so that the verifier's work (on this GPU) never
        runs beside timed calls. False when no answer came (the verifier is gone, or slow):
        timing goes on, and the verifier's failure is reported by itself."""
        try:
            self._sub.sendall(b"!drain 0\n")
            self._sub.settimeout(timeout_s)
            got = b""
            while not got.endswith(b"\n"):
                chunk = self._sub.recv(64)
                if not chunk:
                    return False
                got += chunk
            return got == b"drained\n"
        except OSError:
            return False
        finally:
            self._sub.settimeout(None)

    def next_output(self):
        """The verifier: the rank's next output as (tag, object), an object being a CPU tensor
        (its bytes read straight into its memory) or a JSON value; None at the end of the
        stream; (header, None) when it is malformed."""
        head = self._line()
        if head is None:
            return None
        if head == "!drain 0":
            return ("!drain", None)
        tag, _, size = head.rpartition(" ")
        if not tag or not size.isdigit():
            return (head, None)
        size = int(size)
        meta_line = self._line()
        if meta_line is None:
            return None
        left = size - len(meta_line.encode()) - 1
        try:
            meta = json.loads(meta_line)
            if meta["k"] != "t":
                if left != 0:
                    return (tag, None)
                if meta["k"] == "v":
                    return (tag, ("v", meta["v"]))
                if meta["k"] == "x":
                    return (tag, ("v", Unreadable(meta["why"])))
                # Neither a tensor nor a value: an object of a class of the same name.
                kind = type(str(meta["name"]), (), {"__module__": str(meta["module"])})
                return (tag, ("v", kind()))
            dtype = getattr(torch, str(meta["dtype"]))
            if not isinstance(dtype, torch.dtype):
                return (tag, None)
            t = torch.empty([int(d) for d in meta["shape"]], dtype=dtype)
        except (ValueError, KeyError, TypeError, AttributeError, RuntimeError):
            return (tag, None)
        if left != t.numel() * t.element_size():
            return (tag, None)
        if left and not self._exactly_into(_memory(t)):
            return None
        return (tag, ("v", t))

    def _exactly_into(self, mv):
        """Fills mv from the checker (False when the stream ends first)."""
        n = len(mv)
        k = min(n, len(self._buf))
        mv[:k] = self._buf[:k]
        self._buf = self._buf[k:]
        while k < n:
            got = self._sock.recv_into(mv[k:], min(1 << 22, n - k))
            if not got:
                return False
            k += got
        return True

    def send(self, line):
        # Records come from the driver and the harness only. A learner that reached this object
        # (by a route the policy and the audit hook missed) and calls it directly ends the rank
        # here, with nothing sent: the checker then has no done record from it.
        # Error records may go out from under learner code: policy errors are reported there.
        f = None if line.startswith('{"t": "error"') else sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename in self.learner_paths:
                print("mgpu: learner code called the records channel itself; the rank ends",
                      file=sys.stderr, flush=True)
                os._exit(1)
            f = f.f_back
        self._seq += 1
        body = line.encode()
        mac = hmac.new(self._key, f"{self._seq} ".encode() + body, hashlib.sha256).hexdigest()
        self._sock.sendall(mac.encode() + b" " + body + b"\n")


def _static(obj, name):
    """obj.name as stored (a class's attribute from the class dicts along its MRO, so that a
    classmethod is the same object each time), or None."""
    if isinstance(obj, type):
        for c in obj.__mro__:
            if name in vars(c):
                return vars(c)[name]
        return None
    return getattr(obj, name, None)


class _Guard:
    """Best-effort tamper detection: who the harness's own functions, the torch functions its
    comparisons use, and the builtins are at init, checked again before every record. Code in
    the same process can defeat it (docs/protocol.md §4 says what is not defended); it is there
    to catch the straightforward rebinding of a function the verdict depends on."""

    # What of torch the comparisons, exact data and timing use (torch rebinds other top-level
    # functions itself as it loads parts lazily, so the whole namespace cannot be pinned).
    _TORCH = ("isnan", "isfinite", "nonzero", "equal", "eq", "ne", "abs", "where", "zeros",
              "empty", "arange", "tensor", "full", "zeros_like", "empty_like", "stack", "cat")
    _TENSOR = ("to", "abs", "sum", "any", "all", "max", "min", "reshape", "view", "detach",
               "numel", "item", "tolist", "fill_", "eq", "ne", "copy_", "clone", "contiguous",
               "cpu", "float", "double", "int", "long", "dim", "size", "shape", "dtype",
               "device", "is_floating_point", "__eq__", "__ne__", "__and__", "__or__",
               "__invert__", "__sub__", "__add__", "__le__", "__lt__", "__ge__", "__gt__",
               "__truediv__", "__mul__", "__getitem__", "__setitem__", "__bool__", "__int__",
               "__float__", "__len__", "__torch_function__", "__setattr__", "__delattr__")
    _CUDA = ("synchronize", "Event", "current_stream", "is_available")
    _OS = ("_exit", "getpid", "write")

    def __init__(self, harness):
        self._h = harness
        self._snap = []
        mod = sys.modules[__name__]
        spaces = [("mgpu_harness", vars(mod)), ("builtins", vars(builtins)), ("json", vars(json)),
                  ("hmac", vars(hmac)), ("hashlib", vars(hashlib)),
                  ("socket.socket", vars(socket.socket)), ("time", vars(time)),
                  ("math", vars(math))]
        for cls in (Harness, Result, _Channel, _Guard):
            spaces.append((f"mgpu_harness.{cls.__name__}", vars(cls)))
        for owner, ns in spaces:
            for name, obj in list(ns.items()):
                if isinstance(obj, types.ModuleType) or not (
                        callable(obj) or isinstance(obj, (staticmethod, classmethod, property))):
                    continue
                self._snap.append((owner, ns, name, obj, getattr(obj, "__code__", None)))
        for owner, obj_ns, names in (("torch", torch, self._TORCH),
                                     ("torch.Tensor", torch.Tensor, self._TENSOR),
                                     ("torch.cuda", torch.cuda, self._CUDA), ("os", os, self._OS)):
            for name in names:
                obj = _static(obj_ns, name)
                if obj is not None:
                    self._snap.append((owner, obj_ns, name, obj, getattr(obj, "__code__", None)))
        self._fields = {k: getattr(harness, k) for k in ("_chan", "seed", "rank", "world", "cases",
                                                        "_learner_files", "_records")}
        self._methods = {n for n, o in vars(Harness).items() if callable(o)}

    def changed(self):
        """What was changed since init, or None."""
        for owner, ns, name, obj, code in self._snap:
            now = ns.get(name) if isinstance(ns, (dict, types.MappingProxyType)) else _static(ns, name)
            if now is not obj:
                return f"{owner}.{name} was replaced"
            if code is not None and getattr(now, "__code__", None) is not code:
                return f"the code of {owner}.{name} was replaced"
        h = self._h
        for k, v in self._fields.items():
            if getattr(h, k, None) is not v:
                return f"the harness's {k} was replaced"
        shadow = self._methods & set(vars(h))
        if shadow:
            return f"the harness's method {sorted(shadow)[0]} was shadowed"
        return None


# ---------------------------------------------------------------------------------------------
# Environment


def _env_int(names, default):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"environment variable {n}={v!r} is not an integer") from None
    return default


def _env_flag(name):
    return os.environ.get(name, "") not in ("", "0")


def _parse_cases(text, var):
    """Parses "name=n;name=n" into an ordered dict."""
    cases = {}
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, n = part.partition("=")
        name = name.strip()
        try:
            cases[name] = int(n)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ValueError(f"{var}: bad entry {part!r}: expected name=integer")
    return cases


def _num(x):
    """A float JSON can carry: NaN becomes null, infinities the largest finite double."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return math.copysign(sys.float_info.max, x)
    return x


def _fmt(v):
    """A value as a string for the 'first' mismatches (so NaN survives JSON)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if abs(v) < 1e15 and v == int(v):
            return str(int(v))
        return repr(v)
    return str(v)


# ---------------------------------------------------------------------------------------------
# Exact data: integer-valued numbers in [-64, 64], a function of (seed, rank, iter, index).


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _rank_key(seed, rank):
    """The key of one rank's inputs: what a split rank is sent instead of the seed. One-way
    (the first 8 bytes of a SHA-256), so that a rank's key says nothing of the seed or of
    another rank's key (docs/harness.md, "Exact data")."""
    msg = b"mgpu python rank" + (seed & _MASK64).to_bytes(8, "little") + \
        (rank & _MASK64).to_bytes(8, "little")
    return int.from_bytes(hashlib.sha256(msg).digest()[:8], "little")


def _key32_from(rank_key, it, salt=0):
    k = rank_key
    for v in (it, salt):
        k = _splitmix64(k ^ (v & _MASK64))
    return k & _MASK32


def _key32(seed, rank, it, salt=0):
    return _key32_from(_rank_key(seed, rank), it, salt)


def _mul32(x, c):
    """(x * c) mod 2^32 for an int64 tensor x in [0, 2^32), without int64 overflow."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _MASK32


def _exact_chunk(start, count, key, device, fine=False):
    i = torch.arange(start, start + count, dtype=torch.int64, device=device) & _MASK32
    x = (_mul32(i, 0x9E3779B1) + key) & _MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x85EBCA6B)
    x = x ^ (x >> 13)
    x = _mul32(x, 0xC2B2AE35)
    x = x ^ (x >> 16)
    v = (x % 129 - 64).to(torch.float32)
    if fine:
        # A multiple of 1/64 from the hash's top bits: up to 13 significant bits, more than
        # half (11) or bfloat16 (8) hold; sums of up to 4000 stay exact in float32.
        v += ((x >> 26) & 63).to(torch.float32) * 0.015625
    return v


# ---------------------------------------------------------------------------------------------
# Call interception (forbidden calls and call counting)

# Extra places that do the same work as a public torch.distributed function: the process
# group's own methods, the methods of its backend object (pg._get_backend(device), whose
# ProcessGroupNCCL / ProcessGroupGloo inherit them from Backend) and the functional-collective
# ops with their overloads. A forbidden name forbids these too.
_EQUIVALENTS = {
    "torch.distributed.all_reduce": [
        "ProcessGroup.allreduce", "ProcessGroup.allreduce_coalesced",
        "torch.distributed._functional_collectives.all_reduce",
        "torch.distributed._functional_collectives.all_reduce_coalesced",
        "torch.ops._c10d_functional.all_reduce", "torch.ops._c10d_functional.all_reduce_",
        "torch.ops.c10d.allreduce_", "Backend.allreduce", "Backend.allreduce_coalesced"],
    "torch.distributed.all_reduce_coalesced": [
        "ProcessGroup.allreduce_coalesced", "Backend.allreduce_coalesced"],
    "torch.distributed.reduce": ["ProcessGroup.reduce", "torch.ops.c10d.reduce_", "Backend.reduce"],
    "torch.distributed.broadcast": [
        "ProcessGroup.broadcast", "torch.ops.c10d.broadcast_", "Backend.broadcast"],
    "torch.distributed.reduce_scatter": [
        "ProcessGroup.reduce_scatter", "torch.ops.c10d.reduce_scatter_", "Backend.reduce_scatter"],
    "torch.distributed.reduce_scatter_tensor": [
        "ProcessGroup._reduce_scatter_base", "ProcessGroup.reduce_scatter_tensor_coalesced",
        "torch.distributed._functional_collectives.reduce_scatter_tensor",
        "torch.ops._c10d_functional.reduce_scatter_tensor",
        "torch.ops.c10d._reduce_scatter_base_", "Backend._reduce_scatter_base"],
    "torch.distributed.all_gather": [
        "ProcessGroup.allgather", "ProcessGroup.allgather_coalesced",
        "torch.ops.c10d.allgather_", "Backend.allgather", "Backend.allgather_coalesced"],
    "torch.distributed.all_gather_into_tensor": [
        "ProcessGroup._allgather_base", "ProcessGroup.allgather_into_tensor_coalesced",
        "torch.distributed._functional_collectives.all_gather_tensor",
        "torch.ops._c10d_functional.all_gather_into_tensor",
        "torch.ops.c10d._allgather_base_", "Backend._allgather_base"],
    "torch.distributed.all_to_all_single": ["ProcessGroup.alltoall_base", "Backend.alltoall_base"],
    "torch.distributed.all_to_all": ["ProcessGroup.alltoall", "Backend.alltoall"],
    "torch.distributed.gather": ["ProcessGroup.gather", "Backend.gather"],
    "torch.distributed.scatter": ["ProcessGroup.scatter", "Backend.scatter"],
    "torch.nn.parallel.DistributedDataParallel": [],
}


@dataclass
class Call:
    """One intercepted call, as recorded by Harness.count_calls."""

    name: str
    args: tuple
    kwargs: dict
    t: float = field(default_factory=time.perf_counter)

    def arg(self, i, key, default=None):
        """The argument at position i or keyword key."""
        if key in self.kwargs:
            return self.kwargs[key]
        return self.args[i] if len(self.args) > i else default


def _resolve(dotted):
    """(owner object, attribute) for a dotted name; None when it does not exist here."""
    if dotted.startswith("ProcessGroup."):
        return torch._C._distributed_c10d.ProcessGroup, dotted.split(".", 1)[1]
    if dotted.startswith("Backend."):
        owner, attr = torch._C._distributed_c10d.Backend, dotted.split(".", 1)[1]
        return (owner, attr) if hasattr(owner, attr) else None
    if dotted.startswith("torch.ops."):
        parts = dotted.split(".")
        try:
            ns = getattr(torch.ops, parts[2])
            getattr(ns, parts[3])  # materialize the op packet in the namespace
            return ns, parts[3]
        except (AttributeError, RuntimeError):
            return None
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            mod = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        obj = mod
        try:
            for p in parts[cut:-1]:
                obj = getattr(obj, p)
            getattr(obj, parts[-1])
        except AttributeError:
            return None
        return obj, parts[-1]
    return None


class _Proxy:
    """Stands in for a callable object that is not a plain function (a torch.ops packet):
    calls are intercepted, attributes come from the original."""

    def __init__(self, orig, before):
        object.__setattr__(self, "_orig", orig)
        object.__setattr__(self, "_before", before)

    def __call__(self, *args, **kwargs):
        self._before(args, kwargs)
        return self._orig(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._orig, name)
        # An op packet's overloads (torch.ops.c10d.allreduce_.default) are the same op.
        if isinstance(attr, torch._ops.OpOverload):
            return _Proxy(attr, self._before)
        return attr

    def __setattr__(self, name, value):
        setattr(self._orig, name, value)


class _Interceptor:
    """Wraps named callables in place. Wrappers stay installed once made; what they do is
    decided per call by the harness's state (policing on or off, counters active)."""

    def __init__(self, harness):
        self.h = harness
        self.originals = {}   # dotted -> original object
        self.wrappers = {}    # dotted -> wrapper
        self.alias_of = {}    # id(original) -> dotted (for rebinding aliases)
        self.policed = set()  # dotted names (and equivalents) currently forbidden
        # The dispatcher's collective ops forbidden with them ("c10d::allreduce_" -> the
        # forbidden name): policed by a dispatch mode (_police_mode_class), not replaced.
        self.policed_ops = {}
        self.counters = []    # list of (set of names, list of Call)
        self.late = set()     # collective methods no learner code may call outside forbid()
        self.own = threading.local()  # .n > 0: this thread is in one of the driver's own calls
        self.depth = 0        # forbid() nesting
        self.lock = threading.Lock()
        self.scanned_torch = False

    def install(self, dotted, root=None):
        if dotted in self.wrappers:
            return True
        loc = _resolve(dotted)
        if loc is None:
            return False
        owner, attr = loc
        orig = target = getattr(owner, attr)
        root = root or dotted
        icpt = self
        if isinstance(orig, type):
            # A class (DistributedDataParallel): police its construction. The class itself
            # stays as it is, so isinstance checks in torch keep working.
            owner, attr, orig = orig, "__init__", orig.__init__

        if isinstance(owner, type) or callable(orig) and isinstance(
                orig, (types.FunctionType, types.BuiltinFunctionType)):
            def wrapper(*args, **kwargs):
                icpt.on_call(dotted, root, args, kwargs)
                return orig(*args, **kwargs)
            # Its name and documentation, not the original: no __wrapped__ (or any attribute)
            # leads from the wrapper to what it wraps (a red-team pass took the original back
            # from an attribute and called it past the policing). The signature is given as
            # such, for code that inspects it.
            functools.update_wrapper(wrapper, orig, updated=())
            del wrapper.__wrapped__
            try:
                wrapper.__signature__ = inspect.signature(orig)
            except (TypeError, ValueError):
                pass
        else:
            wrapper = _Proxy(orig, lambda args, kwargs: icpt.on_call(dotted, root, args, kwargs))
        try:
            setattr(owner, attr, wrapper)
        except (AttributeError, TypeError):
            return False
        self.originals[dotted] = target
        self.wrappers[dotted] = wrapper
        if isinstance(wrapper, types.FunctionType) and attr != "__init__" \
                and not isinstance(owner, type):
            # Module-level functions may have been imported elsewhere under other names.
            self.alias_of[id(orig)] = dotted
            self.scanned_torch = False
            # The module that defines the function gets the wrapper at once, not only at the
            # first forbid(): torch compares with its own global (P2POp accepts only the isend
            # and irecv that distributed_c10d holds), so the two must never differ.
            home = sys.modules.get(getattr(orig, "__module__", None) or "")
            if home is not None and home is not owner and getattr(home, attr, None) is orig:
                try:
                    setattr(home, attr, wrapper)
                except (AttributeError, TypeError):
                    pass
        return True

    def rebind_aliases(self, modules):
        """Points module globals that hold an original (from-imports made before the wrapper
        was installed) at its wrapper."""
        for mod in modules:
            d = getattr(mod, "__dict__", None)
            if not d:
                continue
            for k, v in list(d.items()):
                dotted = self.alias_of.get(id(v))
                if dotted is not None and v is self.originals[dotted]:
                    try:
                        setattr(mod, k, self.wrappers[dotted])
                    except (AttributeError, TypeError):
                        pass

    def rebind_torch(self):
        if self.scanned_torch:
            return
        mods = [m for n, m in list(sys.modules.items())
                if m is not None and (n == "torch" or n.startswith("torch."))]
        self.rebind_aliases(mods)
        self.scanned_torch = True

    def on_call(self, dotted, root, args, kwargs):
        # Inside forbid() every call is the learner's. Outside it, a call is the learner's
        # when learner code is on the stack: learner code can run after the driver's call has
        # returned (a method the learner's code put on the driver's tensor as an instance
        # attribute, a callback it registered), and what it calls then is its own. Such code
        # may not communicate at all: the driver's censuses and checks of the call are over.
        # The driver's own calls (through h.real) are neither: no stack is walked in its timed
        # baselines.
        if getattr(self.own, "n", 0):
            pass
        elif self.depth > 0:
            if dotted in self.policed:
                self.h._violation(root, dotted)
        elif (dotted in self.policed or dotted in self.late) and self.h._learner_on_stack():
            if dotted in self.policed:
                self.h._violation(root, dotted)
            self.h._late_call(dotted)
        if self.counters:
            with self.lock:
                for names, calls in self.counters:
                    if dotted in names:
                        call = Call(dotted, args, kwargs)
                        if callable(calls):  # a sink that decides what to keep
                            calls(call)
                        else:
                            calls.append(call)

    def original(self, dotted):
        if dotted in self.originals:
            return self.originals[dotted]
        loc = _resolve(dotted)
        return getattr(*loc) if loc else None


# ---------------------------------------------------------------------------------------------
# Collective census: every collective this process launches, whatever route starts it


# Methods of a process group (and of its backend object) that move data between ranks.
_COLLECTIVE_METHODS = ("allreduce", "allreduce_coalesced", "reduce", "broadcast", "allgather",
                       "allgather_coalesced", "_allgather_base", "allgather_into_tensor_coalesced",
                       "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced",
                       "alltoall", "alltoall_base", "gather", "scatter", "send", "recv",
                       "recv_anysource", "barrier", "monitored_barrier")
# The dispatcher's namespaces of collective ops: every ProcessGroup method, the functional
# collectives and DTensor's redistributions end in one of their ops.
_COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional")
_CENSUS_SKIP = ("wraptensorautograd", "aretracing")


@dataclass
class Collective:
    """One collective seen by Harness.count_collectives.

    kind: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather,
    scatter, send, recv, barrier, wait (a functional collective's wait_tensor), or the op's own
    name for one not in this list. via: the op or method it was seen as. bytes: the largest
    total size of one of its tensor arguments (a list of tensors counts as their sum), read when
    the call was made. received: the bytes the call writes into this rank's tensors, its
    outputs (the first argument of every c10d op and ProcessGroup method, the result of a
    functional collective); 0 for send, barrier and wait. An all-reduce or a broadcast counts
    its whole tensor, whatever the algorithm moves."""

    kind: str
    via: str
    bytes: int
    received: int = 0
    t: float = field(default_factory=time.perf_counter)


def _collective_kind(name):
    """The kind of a collective from an op or method name (allreduce_, _allgather_base_, ...)."""
    s = name.rsplit(".", 1)[-1].replace("_", "").lower()
    if s.startswith("allreduce"):
        return "all_reduce"
    if "reducescatter" in s:
        return "reduce_scatter"
    for prefix, kind in (("allgather", "all_gather"), ("alltoall", "all_to_all"),
                         ("broadcast", "broadcast"), ("reduce", "reduce"), ("gather", "gather"),
                         ("scatter", "scatter"), ("send", "send"), ("recv", "recv"),
                         ("wait", "wait")):
        if s.startswith(prefix):
            return kind
    if "barrier" in s:
        return "barrier"
    return s


def _tensor_bytes(x):
    """Bytes of a tensor, or of the tensors in a (nested) list or tuple; 0 for anything else."""
    if isinstance(x, torch.Tensor):
        try:
            return x.numel() * x.element_size()
        except (RuntimeError, TypeError, NotImplementedError):
            return 0
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    return 0


def _arg_bytes(args, kwargs):
    return max([_tensor_bytes(a) for a in list(args) + list(kwargs.values())], default=0)


_NOTHING_RECEIVED = ("send", "barrier", "wait")


def collectives_besides(census, kinds):
    """{kind: [calls, bytes received]} of the collectives in a census (Harness.count_collectives)
    whose kind is not among kinds; barriers and waits carry no data and never count. What a
    rank hands its verifier where an exercise names the collectives that may carry the data
    (module7: the ring's sends and receives, the one all-gather)."""
    out = {}
    for c in census:
        if c.kind not in kinds and c.kind not in ("barrier", "wait"):
            e = out.setdefault(c.kind, [0, 0])
            e[0] += 1
            e[1] += c.received
    return out


def describe_collectives(found):
    """"all_reduce x2 (4096 bytes received), ..." for collectives_besides's result."""
    return ", ".join(f"{k} x{v[0]} ({v[1]} bytes received)" for k, v in sorted(found.items()))


def _received_bytes(kind, args, result=None, functional=False):
    """Bytes a collective writes into this rank's tensors: the result of a functional
    collective, the first argument (the output, or the tensors reduced in place) of a c10d op or
    a ProcessGroup method (every one of their schemas puts it first)."""
    if kind in _NOTHING_RECEIVED:
        return 0
    if functional:
        return _tensor_bytes(result)
    return _tensor_bytes(args[0]) if args else 0


_python_dispatch = None

# The dispatcher's namespaces of collective ops, as forbidden names spell them: policed by
# _police_mode_class, never replaced.
_DISPATCHED = ("torch.ops.c10d.", "torch.ops._c10d_functional.", "torch.ops.c10d_functional.")
_police_mode = None


def _police_mode_class():
    """A TorchDispatchMode that raises the harness's policy violation when a forbidden
    collective's op is dispatched, from Python or C++, on this thread or one autograd runs
    (made on first use)."""
    global _police_mode
    if _police_mode is None:
        dispatch = importlib.import_module("torch.utils._python_dispatch")

        class _PoliceMode(dispatch.TorchDispatchMode):
            def __init__(self, icpt):
                super().__init__()
                self.icpt = icpt

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                schema = getattr(func, "_schema", None)
                root = self.icpt.policed_ops.get(getattr(schema, "name", ""))
                if root is not None and self.icpt.depth > 0:
                    self.icpt.h._violation(root, "torch.ops." + schema.name.replace("::", "."))
                return func(*args, **(kwargs or {}))

        _police_mode = _PoliceMode
    return _police_mode


def _census_mode_class():
    """A TorchDispatchMode that records the collective ops dispatched while it is active (made
    on first use: torch.utils._python_dispatch is torch's, imported by torch itself)."""
    global _python_dispatch
    if _python_dispatch is None:
        _python_dispatch = importlib.import_module("torch.utils._python_dispatch")

        class _CensusMode(_python_dispatch.TorchDispatchMode):
            def __init__(self, sink):
                super().__init__()
                self.sink = sink

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                namespace = getattr(func, "namespace", "")
                name = str(func)
                if namespace not in _COLLECTIVE_NAMESPACES or \
                        name.split(".")[1].replace("_", "") in _CENSUS_SKIP:
                    return func(*args, **kwargs)
                kind = _collective_kind(name.split(".")[1])
                sent = _arg_bytes(args, kwargs)
                if namespace == "c10d":
                    # Recorded before the call, as the collective is launched.
                    self.sink(Collective(kind, name, sent, _received_bytes(kind, args)))
                    return func(*args, **kwargs)
                t = time.perf_counter()  # when it was launched; its size is known after
                result = func(*args, **kwargs)
                self.sink(Collective(kind, name, sent,
                                     _received_bytes(kind, args, result, functional=True), t))
                return result

        _python_dispatch.census_mode = _CensusMode
    return _python_dispatch.census_mode


# ---------------------------------------------------------------------------------------------
# The harness


# ---------------------------------------------------------------------------------------------
# Run-time policy: audit events (PEP 578) the learner's own code may not cause


# Modules the learner's code may import at run time: the static policy's own allowlist (the
# checker puts mgpu_policy.py beside this file for every Python exercise).
_IMPORT_OK = mgpu_policy.ALLOWED
# Events refused when the learner's code raised them itself (its frame is the innermost Python
# frame: a library it calls may open files, compile and import as it likes).
_AUDIT_EVENTS = {"exec", "compile", "builtins.input", "builtins.breakpoint", "pickle.find_class",
                 "sys._getframe", "sys._getframemodulename", "sys._current_frames",
                 "sys._current_exceptions", "sys.settrace", "sys.setprofile",
                 "sys.addaudithook", "sys.excepthook", "sys.unraisablehook",
                 "object.__getattr__", "object.__setattr__", "object.__delattr__",
                 "function.__new__", "code.__new__", "open", "import"}
_AUDIT_PREFIXES = ("marshal.", "gc.", "ctypes.", "os.", "subprocess.", "socket.", "shutil.",
                   "tempfile.", "mmap.", "pty.", "cpython.", "sys.monitoring", "_thread.",
                   "fcntl.", "resource.", "signal.", "glob.", "sqlite3.", "urllib.", "http.",
                   "webbrowser.", "syslog.", "winreg.", "_winapi.", "msvcrt.")
# Starting a process with the learner's code anywhere on the stack (a library asked to do it:
# torch.distributed.run starts a shell) is refused but for the tools Triton runs to compile a
# kernel the learner's call launches for the first time.
_SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                 "os.fork", "os.forkpty", "pty.spawn", "os.startfile"}
# (platform.architecture runs `file`, ctypes.util.find_library `objdump`; torch's symmetric
# memory reached the first while Triton compiled, seen on an H100.)
_SPAWN_OK = {"ptxas", "cuobjdump", "nvdisasm", "ldconfig", "ldconfig.real", "cc", "gcc", "clang",
             "g++", "c++", "x86_64-linux-gnu-gcc", "nvcc", "fatbinary", "nvlink", "ld", "file",
             "objdump", "uname"}

# Library frames that stand for their caller: what they do, the frame that called them did.
_TRANSPARENT = (os.sep + "functools.py", os.sep + "contextlib.py", os.sep + "operator.py")
_STDLIB = os.path.dirname(os.__file__) + os.sep


def _transparent(filename):
    """Whether a frame of this file stands for its caller: functools, contextlib, operator, or
    any standard-library module outside the learner's allowlist (site-packages excluded)."""
    if filename.endswith(_TRANSPARENT):
        return True
    if not filename.startswith(_STDLIB) or "site-packages" in filename:
        return False
    top = filename[len(_STDLIB):].split(os.sep, 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return top not in _IMPORT_OK


# C accelerators and platform modules of allowed modules: their objects count as the module's.
_MODULE_OF = {"posix": "os", "posixpath": "os", "genericpath": "os", "nt": "os", "ntpath": "os"}
_BUILTINS_PAST = {"getattr", "setattr", "delattr", "open", "eval", "exec", "compile",
                  "__import__", "vars", "globals", "locals", "breakpoint", "input"}


def _allowed_module(name):
    top = (name or "").split(".")[0]
    top = _MODULE_OF.get(top, top)
    if top.startswith("_") and top.lstrip("_") in _IMPORT_OK:
        top = top.lstrip("_")  # _operator, _functools, _heapq, _warnings ...
    return top in _IMPORT_OK


def _foreign(obj):
    """Why obj, reached through an attribute chain, is outside what a learner may use, or ""."""
    if isinstance(obj, types.ModuleType):
        return "" if _allowed_module(obj.__name__) else f"the module {obj.__name__}"
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        mod = getattr(obj, "__module__", None)
        if not isinstance(mod, str):
            return ""
        if mod == "builtins":
            return f"the builtin {obj.__name__}" if obj.__name__ in _BUILTINS_PAST else ""
        if not _allowed_module(mod):
            return f"{mod}.{getattr(obj, '__qualname__', '?')}, from a module outside the allowlist"
    return ""


# Events no library needs while the learner's code runs: judged with a learner frame anywhere
# on the stack, not only innermost.
# (Not unpickling, marshal or making functions: importing a module loads its bytecode with
# marshal, torch.distributed's object collectives unpickle, torch.fx makes functions.)
_AUDIT_ANYWHERE = {"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                   "sys._current_frames", "sys._current_exceptions", "sys.settrace",
                   "sys.setprofile", "sys.addaudithook", "builtins.input"}

# How each kind of event is told to the learner (first matching prefix).
_AUDIT_WHAT = (("open", "opened a file or a descriptor itself"), ("exec", "evaluated code"),
               ("compile", "compiled code"), ("pickle.", "unpickled data, which can run any code"),
               ("marshal.", "loaded marshalled code"), ("gc.", "walked the garbage collector"),
               ("sys._getframe", "reached the interpreter's frames"),
               ("sys._current", "reached the interpreter's frames"),
               ("sys.", "changed how the interpreter runs"),
               ("object.__getattr__", "read a frame's or a code object's internals"),
               ("function.__new__", "made a function out of a code object"),
               ("code.__new__", "made a code object"), ("ctypes.", "loaded native code"),
               ("builtins.", "asked for input"))

# os events that are plain environment edits (os.environ[...] = ...).
_AUDIT_OS_OK = {"os.putenv", "os.unsetenv"}


class _Audit:
    """An audit hook (sys.addaudithook: it cannot be removed) that ends the rank with a policy
    error when the learner's code itself opens a file, imports a module outside the allowed
    list, unpickles, evaluates code, walks frames or the garbage collector, loads native code or
    works on processes and sockets: the run-time twin of mgpu_policy.py, for routes the static
    check did not see. Only events whose innermost Python frame is a learner file (or code
    evaluated from one) count, so torch, Triton and the driver work as usual."""

    def __init__(self, harness):
        self._h = harness
        self._busy = threading.local()
        sys.addaudithook(self)

    def __call__(self, event, args):
        if event in _SPAWN_EVENTS:
            if not getattr(self._busy, "on", False):
                self._busy.on = True
                try:
                    self._spawn(event, args)
                finally:
                    self._busy.on = False
            return
        if event not in _AUDIT_EVENTS and not event.startswith(_AUDIT_PREFIXES):
            return
        if event in _AUDIT_OS_OK or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self._judge(event, args)
        finally:
            self._busy.on = False

    def _spawn(self, event, args):
        """A process started while the learner's code is on the stack, by whatever library:
        only the compilers and tools Triton runs as it compiles a kernel may start; anything
        else (torch.distributed.run's shell, a benchmark's compiler) would run unwatched."""
        h = self._h
        paths = h._learner_paths
        if not paths:
            return
        f = sys._getframe(2)
        site = None
        while f is not None:
            if f.f_code.co_filename in paths:
                site = f
                break
            f = f.f_back
        if site is None:
            return
        exe = None
        if event == "subprocess.Popen" and args:
            exe, argv = args[0], args[1] if len(args) > 1 else None
            if isinstance(argv, (str, bytes)):
                exe = "sh"  # a command line: a shell runs it, whatever it starts with
            elif exe is None and argv:
                exe = argv[0]
        elif event in ("os.posix_spawn", "os.exec") and args:
            exe = args[0]  # (path, argv, env): subprocess itself may start its program so
        elif event == "os.spawn" and len(args) > 1:
            exe = args[1]  # (mode, path, argv, env)
        try:
            prog = os.path.basename(os.fsdecode(exe)) if exe is not None else ""
        except TypeError:
            prog = ""
        if prog in _SPAWN_OK:
            return
        if not h._violated:
            h._policy_error(event, site.f_code.co_filename, site.f_lineno,
                            f"your code started a process ({prog or event}) while it ran "
                            f"(audit event {event!r}): the run-time policy refuses that, since "
                            "a process of its own runs outside the checking")
        os._exit(1)

    def _judge(self, event, args):
        h = self._h
        try:
            f = sys._getframe(2)  # 0: _judge, 1: __call__, 2: where the event was raised
        except ValueError:  # raised with no Python frame beneath the hook
            return
        paths = h._learner_paths
        # Frames of the allowed stdlib modules that only call what they are given
        # (functools.singledispatch, contextlib), and of stdlib modules a learner may not import
        # at all (logging.currentframe, logging.FileHandler reached through torch's attributes),
        # act for the frame that called them.
        while f is not None and _transparent(f.f_code.co_filename):
            f = f.f_back
        if f is None:
            return
        fname = f.f_code.co_filename
        learner = fname in paths
        if not learner and event in _AUDIT_ANYWHERE:
            g = f.f_back
            while g is not None and not learner:
                if g.f_code.co_filename in paths:
                    learner, f, fname = True, g, g.f_code.co_filename
                g = g.f_back
        if not learner and fname == "<string>":  # code a learner's frame evaluated
            g = f.f_back
            while g is not None and not learner:
                learner = g.f_code.co_filename in paths
                g = g.f_back
        if not learner:
            return
        if event == "import":
            mod = str(args[0]) if args else ""
            top = mod.split(".")[0]
            if top in _IMPORT_OK or top in h._learner_names:
                return
            what = f"imported {mod}, which is not among the modules an exercise may import"
        elif event in ("object.__setattr__", "object.__delattr__"):
            obj = args[0] if args else None
            if getattr(obj, "__module__", None) in h._learner_names:
                return  # its own class's attributes
            name = getattr(obj, "__qualname__", type(obj).__name__)
            what = f"changed {name}.{args[1] if len(args) > 1 else '?'}, a library's class"
        else:
            what = next((w for p, w in _AUDIT_WHAT if event.startswith(p)),
                        "did something the exercise never needs")
        if not h._violated:
            h._policy_error(event, fname, f.f_lineno,
                            f"your code {what} (audit event {event!r}): the run-time policy "
                            "refuses it, since it reaches the interpreter, files, processes or "
                            "the checking")
        os._exit(1)


def _memory(t):
    """A writable view of a contiguous CPU tensor's bytes (no copy)."""
    nbytes = t.numel() * t.element_size()
    return memoryview((ctypes.c_char * nbytes).from_address(t.data_ptr())).cast("B")


class Unreadable:
    """An output whose values cannot be read (a meta or sparse tensor, a quantized one...): what
    the verifier receives in its place, and what a driver may hand over when reading the
    learner's result failed. compare() reports it as a wrong result, saying why."""

    def __init__(self, why):
        self.why = str(why)[:400]

    def __repr__(self):
        return f"Unreadable({self.why!r})"

    @classmethod
    def reading(cls, fn, what):
        """fn(), which reads the learner's outputs back (a flat copy of its gradients, say), or
        an Unreadable saying "<what> that cannot be read (<error>)" when reading them raises
        (tensors the learner's code made sparse or meta through .data)."""
        try:
            return fn()
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
            return cls(f"{what} that cannot be read ({type(e).__name__}: {e})")


def _unreadable(obj):
    """Why a tensor's values cannot be read as a dense array of numbers (None when they can)."""
    if isinstance(obj, Unreadable):
        return obj.why
    if type(obj) not in (torch.Tensor, torch.nn.Parameter):
        return None
    try:
        if obj.is_meta:
            return "a meta tensor: it has a shape and a dtype but no data"
        if obj.layout != torch.strided:
            return (f"a tensor of layout {obj.layout} (sparse or packed), not a dense one: "
                    "return a dense tensor (to_dense())")
        if obj.is_quantized:
            return f"a quantized tensor ({obj.dtype}), not the values themselves"
        if obj.is_nested:
            return "a nested tensor, not a dense one"
        if obj.device.type not in ("cpu", "cuda"):
            return f"a tensor on device {obj.device}, which the check cannot read"
        dt = obj.dtype
        if not (dt.is_floating_point or dt.is_complex or dt == torch.bool):
            torch.iinfo(dt)  # an integer type, or TypeError
    except (TypeError, ValueError):
        return f"a tensor of dtype {obj.dtype}, which holds no numbers the check can read"
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        return f"a tensor that cannot be read ({type(e).__name__}: {e})"
    return None


def _pack(obj):
    """An output for the verifier: a JSON line saying what it is, then, for a tensor, its bytes
    (a view of its memory, not a copy). Returns the parts to send. A tensor whose values
    cannot be read (meta, sparse, quantized, ...) goes as an Unreadable, with the reason."""
    why = _unreadable(obj)
    if why is None and type(obj) in (torch.Tensor, torch.nn.Parameter):
        try:
            t = obj.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
            meta = {"k": "t", "dtype": str(t.dtype).removeprefix("torch."),
                    "shape": list(t.shape)}
            head = json.dumps(meta).encode() + b"\n"
            return [head, _memory(t) if t.numel() else b""], t  # t keeps the memory alive
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
            why = f"a tensor that cannot be read ({type(e).__name__}: {e})"
    if why is not None:
        return [json.dumps({"k": "x", "why": why}).encode() + b"\n"], None
    try:
        return [json.dumps({"k": "v", "v": obj}, allow_nan=True).encode() + b"\n"], None
    except (TypeError, ValueError):
        kind = type(obj)
        return [json.dumps({"k": "o", "module": kind.__module__,
                            "name": kind.__qualname__}).encode() + b"\n"], None


class Harness:
    """One rank's harness. Make it with mgpu_harness.init()."""

    def __init__(self, default_cases=None, default_perf_cases=None):
        self.rank = _env_int(["MGPU_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"], 0)
        self.world = _env_int(["MGPU_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                               "WORLD_SIZE"], 1)
        self.local_rank = _env_int(["MGPU_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "LOCAL_RANK"], self.rank)
        self.local_world = _env_int(["MGPU_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                     "LOCAL_WORLD_SIZE"], self.world)
        self.exercise = os.environ.get("MGPU_EXERCISE", "")
        self.run_dir = os.environ.get("MGPU_RUN_DIR") or os.path.abspath("mgpu-results")
        self.rdzv_dir = os.environ.get("MGPU_RDZV_DIR") or os.path.join(self.run_dir, "rdzv")
        self.fault = os.environ.get("MGPU_FAULT") or None
        self._records = None
        self._chan = None
        self._guard = None
        self._counts = {"records": 0, "cases": 0, "checked": 0, "timing_samples": 0, "handed": 0}
        self._finished = False
        self._violated = False
        self._learner_files = set()
        self._learner_modules = []
        self._learner_names = set()
        self._learner_paths = set()  # the imported learner files' code paths, exactly
        self._frame_globals = {}  # id(a module's globals) -> (globals, its code is the learner's)
        self._decoy = None
        self.split = False     # outputs checked by a verifier process (docs/protocol.md §4)
        self.verifier = False  # this process is a rank's verifier
        for f in (os.environ.get("MGPU_LEARNER_FILES") or "").split(","):
            if f.strip():
                self._learner_files.add(os.path.basename(f.strip()))
        self._icpt = _Interceptor(self)

        addr = os.environ.get("MGPU_RECORDS")
        if addr:
            try:
                self._chan = _Channel(addr, self.rank)
            except (OSError, ValueError) as e:
                print(f"mgpu: rank {self.rank}: records channel: {e}", file=sys.stderr, flush=True)
                os._exit(1)
            self.seed = self._chan.seed  # only the channel carries it (None in a split rank)
            self._chan.learner_paths = self._learner_paths
            self.split = self._chan.split
            self.verifier = self._chan.verifier
        else:
            seed = os.environ.get("MGPU_SEED")
            self.seed = int(seed) & _MASK64 if seed else 0x6D677075  # fixed when standalone
            os.makedirs(self.run_dir, exist_ok=True)
            self._records = open(os.path.join(self.run_dir, f"rank-{self.rank}.jsonl"), "a",
                                 encoding="utf-8")
        self._install_hooks()
        try:
            self.cases = _parse_cases(os.environ.get("MGPU_CASES"), "MGPU_CASES")
            self.perf_cases = _parse_cases(os.environ.get("MGPU_PERF_CASES"), "MGPU_PERF_CASES")
            if "MGPU_CASES" not in os.environ and default_cases:
                self.cases = dict(default_cases)
            if "MGPU_PERF_CASES" not in os.environ and default_perf_cases:
                self.perf_cases = dict(default_perf_cases)
        except ValueError as e:
            self._write_start("", -1)
            self.fail("harness", "init", str(e))

        self.on_gpu = torch.cuda.is_available()
        gpu = ""
        if self.on_gpu:
            idx = self.local_rank % torch.cuda.device_count()
            torch.cuda.set_device(idx)
            self.device = torch.device("cuda", idx)
            gpu = torch.cuda.get_device_name(idx)
            self.backend = "nccl"
        else:
            idx = -1
            self.device = torch.device("cpu")
            self.backend = "gloo"
        want_perf = _env_flag("MGPU_PERF")
        # perf: the performance stage is judged (GPU only). timing: time_pair() does work
        # (on CPU only when MGPU_PERF=1, with the host clock: for testing drivers).
        self.perf = want_perf and self.on_gpu
        self.timing = want_perf
        self.perf_budget_ms = float(os.environ.get("MGPU_PERF_BUDGET_MS") or 20000)
        self._timing_spent_ms = 0.0  # over every time_pair of the run: the budget is shared
        self.min_reps = max(1, _env_int(["MGPU_PERF_MIN_REPS"], 10))
        self.max_reps = max(self.min_reps, _env_int(["MGPU_PERF_MAX_REPS"], 50))
        self._write_start(gpu, idx)

        forbid = [s.strip() for s in (os.environ.get("MGPU_FORBID") or "").split(",")
                  if s.strip()]
        self.forbidden = forbid
        for name in forbid:
            self._police(name)
        self._watch_late()
        self._guard_tensor_attributes()
        self._guard = _Guard(self)
        self._audit = _Audit(self)

    # ---- records ---------------------------------------------------------------------------

    def _write(self, rec):
        t = rec.pop("t")
        if t != "error":
            self._vouch(t)
        if t == "case" and self.split and not self.verifier:
            self.fail("driver", "record", "a rank whose outputs a verifier checks records no "
                      "cases: the driver's check belongs behind h.verifies")
        rec = {"t": t, "rank": self.rank, **rec}
        if t == "done":
            rec["summary"] = dict(self._counts)
        else:
            c = self._counts
            c["records"] += 1
            if t == "case":
                c["cases"] += 1
                c["checked"] += int(rec.get("checked", 0))
            elif t == "timing":
                c["timing_samples"] += len(rec.get("us", ()))
        line = json.dumps(rec, allow_nan=False, default=str)
        if self._chan is not None:
            try:
                self._chan.send(line)
            except OSError:
                os._exit(1)  # the checker is gone: nobody reads what follows
        else:
            self._records.write(line + "\n")
            self._records.flush()

    def _vouch(self, t):
        """Before a record other than an error: no learner code on the stack (only the driver
        records results) and nothing the verdict depends on was rebound."""
        f = sys._getframe(2)
        while f is not None:
            if self._is_learner_file(f.f_code.co_filename):
                self._policy_error("harness recording", f.f_code.co_filename, f.f_lineno,
                                   f"learner code asked the harness to write a {t!r} record: "
                                   "only the course's driver reports results")
            f = f.f_back
        what = self._guard.changed() if self._guard is not None else None
        if what:
            self._policy_error("harness integrity", "", 0,
                               f"{what} while the exercise ran: the verdict depends on it, so "
                               "the run is not trusted. Leave the harness, torch and the "
                               "builtins as they are")

    def _policy_error(self, call, file, line, msg):
        self._violated = True
        self._error("policy", call, msg, os.path.basename(file) if file else "", line, 1)
        self._exit(1)

    def _write_start(self, gpu, idx):
        self._write({"t": "start", "world": self.world, "local_rank": self.local_rank,
                     "device": idx, "gpu": gpu, "pid": os.getpid(),
                     "harness": HARNESS_VERSION, "exercise": self.exercise})

    def note(self, msg):
        """A free-text note shown in the report."""
        self._write({"t": "note", "msg": str(msg)[:_MAX_MSG]})

    def value(self, name, v, unit=""):
        """A figure the learner's code produced or the driver measured."""
        self._write({"t": "value", "name": name, "value": _num(v), "unit": unit})

    def fail(self, where, call, msg, file="", line=0, code=1):
        """Writes an error record (where: learner, driver, harness, policy) and exits 1."""
        self._error(where, call, msg, file, line, code)
        self._exit(1)

    def _error(self, where, call, msg, file="", line=0, code=1):
        print(f"mgpu: rank {self.rank}: {where} error in {call}"
              f"{f' at {file}:{line}' if file else ''}: {msg}", file=sys.stderr, flush=True)
        self._write({"t": "error", "where": where, "call": call, "file": file, "line": line,
                     "code": code, "msg": str(msg)[:_MAX_MSG]})

    def _exit(self, status):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            if self._records is not None:
                self._records.flush()
        finally:
            os._exit(status)

    def finish(self):
        """Waits for every rank at a barrier, writes the done record and ends the process with
        status 0 (verdicts are the checker's job). Never returns.

        The process ends with os._exit: the process group is not destroyed, since tearing down
        gloo's and NCCL's threads at interpreter exit can abort a rank whose work is done (seen
        with gloo: "terminate called without an active exception"). The barrier first makes
        sure no peer still needs this rank for a collective."""
        if self._violated:
            self._exit(1)
        if self.verifier:
            # The rank may still ask the verifier to catch up (it times after its last output):
            # answer until its stream ends. Any output past the driver's last is not the
            # driver's.
            got = self._next_output()
            if got is not None:
                self.fail("verifier", "finish", f"the rank handed over {got[0][:120]!r} after "
                          "its driver's last output: something other than the driver wrote to "
                          "the outputs connection")
        if dist.is_available() and dist.is_initialized() and self.world > 1:
            self.real("torch.distributed.barrier")()
            if self.on_gpu:
                torch.cuda.synchronize()
        self._finished = True
        self._write({"t": "done"})
        self._exit(0)

    # ---- process group and learner code ---------------------------------------------------

    def init_process_group(self, timeout_s=120):
        """Initializes the default process group for this rank: NCCL bound to this rank's GPU,
        or gloo on CPU. Rendezvous through MASTER_ADDR/MASTER_PORT."""
        import datetime

        if self.verifier:
            self.fail("driver", "init_process_group", "the driver reached a process group in "
                      "the verifier (it belongs behind h.computes)")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        kw = {}
        if self.on_gpu:
            kw["device_id"] = self.device
        dist.init_process_group(backend=self.backend, rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(seconds=timeout_s), **kw)

    def import_learner(self, name):
        """Imports the learner's module (its file is <name>.py on PYTHONPATH) and marks its
        file as the learner's: errors there are the learner's, and aliases of forbidden
        functions it imports are policed. The verifier never imports it: None there."""
        if self.verifier:
            return None
        self._hide()
        self._learner_names.add(name)
        # Its file is the learner's before its first line runs: top-level code is judged too.
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            self._learner_paths.update({spec.origin, os.path.abspath(spec.origin)})
            self._resolve_chains(spec.origin)
        # Its top-level code runs as a call of the driver's: policed, and free to communicate.
        self._icpt.depth += 1
        try:
            mod = importlib.import_module(name)
        finally:
            self._icpt.depth -= 1
        self._learner_modules.append(mod)
        f = getattr(mod, "__file__", None)
        if f:
            self._learner_files.add(os.path.basename(f))
            self._learner_files.add(os.path.abspath(f))
            self._learner_paths.update({f, os.path.abspath(f)})
        self._icpt.rebind_aliases([mod])
        return mod

    def _hide(self):
        """Takes the driver (__main__) and the harness out of sys.modules before learner code
        runs: their code keeps its own globals, and a learner's module that reaches
        sys.modules by a route the policy missed finds an empty __main__ and no harness."""
        mods = sys.modules
        if mods.get("__main__") is not None and mods.get("__main__") is not self._decoy:
            self._decoy = types.ModuleType("__main__")
            mods["__main__"] = self._decoy
        for n in ("mgpu_harness", "mgpu_policy", "mgpu_zygote"):
            mods.pop(n, None)

    def _resolve_chains(self, path):
        """The static policy judges names; here every attribute chain of the learner's file
        rooted at a module (torch.export.logging.FileHandler, enum.bltns.getattr) is resolved
        against the real objects, and one that reaches a module outside the allowlist, or a
        function or class of one, or a builtin that reaches past the policy, is a policy error
        naming the file and line, whatever names torch binds it under."""
        try:
            found = mgpu_policy.chains(path, self._learner_names)
        except (OSError, SyntaxError, ValueError):  # the import below reports these as usual
            return
        for line, dotted in found:
            parts = dotted.split(".")
            if parts[0] in self._learner_names:
                continue
            try:
                obj = importlib.import_module(parts[0])
            except Exception:  # noqa: BLE001
                continue
            for i, p in enumerate(parts[1:], 2):
                try:
                    obj = getattr(obj, p)
                except Exception:  # noqa: BLE001 - a submodule not imported yet
                    try:
                        obj = importlib.import_module(".".join(parts[:i]))
                    except Exception:  # noqa: BLE001
                        break
                why = _foreign(obj)
                if why:
                    self._policy_error(".".join(parts[:i]), path, line,
                                       f"{'.'.join(parts[:i])} is {why}: an exercise never "
                                       "needs it, whatever name a library binds it under")

    def _is_learner_file(self, filename):
        if not filename:
            return False
        return (filename in self._learner_files or os.path.abspath(filename) in self._learner_files
                or os.path.basename(filename) in self._learner_files)

    def _learner_on_stack(self):
        """Whether a frame of the learner's files is on this thread's stack. Every frame of one
        module shares its globals, and no learner code can run with another's (no exec, no
        FunctionType), so a module's verdict is made once, from its code's file name, and kept
        by its globals. The harness's own frame reads are not judged by its audit hook."""
        audit = getattr(self, "_audit", None)
        busy = audit._busy if audit is not None else None
        was = getattr(busy, "on", False) if busy is not None else False
        if busy is not None:
            busy.on = True
        try:
            seen = self._frame_globals
            f = sys._getframe(1)
            while f is not None:
                g = f.f_globals
                hit = seen.get(id(g))
                if hit is None or hit[0] is not g:
                    hit = seen[id(g)] = (g, self._is_learner_file(f.f_code.co_filename))
                if hit[1]:
                    return True
                f = f.f_back
            return False
        finally:
            if busy is not None:
                busy.on = was

    def _learner_site(self, frames):
        """(file, line) of the innermost learner frame among frames (outermost first)."""
        for fname, lineno in reversed(frames):
            if self._is_learner_file(fname):
                return os.path.basename(fname), lineno
        return None

    # ---- policing ---------------------------------------------------------------------------

    def _police(self, name):
        ok = self._icpt.install(name)
        self._icpt.policed.add(name)
        for eq in _EQUIVALENTS.get(name, []):
            if eq.startswith(_DISPATCHED):
                # Not replaced: torch looks these op packets up when C++ code (DDP's reducer,
                # a ProcessGroup method) hands a collective to a Python dispatch mode, and a
                # stand-in there crashed the process (SIGSEGV with the census active).
                self._icpt.policed_ops[eq[len("torch.ops."):].replace(".", "::", 1)] = name
            elif self._icpt.install(eq, root=name):
                self._icpt.policed.add(eq)
        if not ok:
            self.note(f"forbid: {name} does not exist in this torch; nothing to police")

    def _guard_tensor_attributes(self):
        """Refuses, with learner code on the stack, an instance attribute on a tensor that hides
        a method or other non-data attribute of its class (t.numel = ..., t.detach = ...): the
        driver's and the harness's reads of a tensor (its size in a census of bytes sent, its
        values on the way to the verifier) would run the learner's code instead of torch's,
        after the learner's call had returned. Data attributes (t.grad = ...) are set as
        before."""
        base_set, base_del = torch.Tensor.__setattr__, torch.Tensor.__delattr__
        h = self
        hiding = {}  # class -> the names an instance attribute would hide (one lookup a set)

        def hides(obj, name):
            cls = type(obj)
            names = hiding.get(cls)
            if names is None:
                first = {}
                for c in cls.__mro__:
                    for k, v in vars(c).items():
                        first.setdefault(k, v)
                names = hiding[cls] = frozenset(
                    k for k, v in first.items() if not hasattr(type(v), "__set__"))
            return name in names

        def __setattr__(obj, name, value):
            if hides(obj, name) and h._learner_on_stack():
                h._shadowed(obj, name)
            base_set(obj, name, value)

        def __delattr__(obj, name):
            if hides(obj, name) and h._learner_on_stack():
                h._shadowed(obj, name)
            base_del(obj, name)

        torch.Tensor.__setattr__ = __setattr__
        torch.Tensor.__delattr__ = __delattr__

    def _shadowed(self, obj, name):
        stack = [(f.filename, f.lineno) for f in traceback.extract_stack()]
        site = self._learner_site(stack) or ("", 0)
        self._policy_error(
            "tensor attribute", site[0], site[1],
            f"your code set an attribute {name!r} on a tensor ({type(obj).__name__}), where "
            f"torch has a method or attribute of that name: whoever uses the tensor next (the "
            f"driver counting bytes sent, the harness reading its values) would run your code "
            f"instead of torch's. Keep your own state in your own objects")

    def _watch_late(self):
        """Wraps every collective method of a process group and of its backend object (where
        every torch.distributed function ends, whatever route a Python caller takes), so that
        one started by learner code the driver is not calling is refused (_late_call)."""
        if not dist.is_available():
            return
        for owner in ("ProcessGroup", "Backend"):
            for m in _COLLECTIVE_METHODS:
                if self._icpt.install(f"{owner}.{m}"):
                    self._icpt.late.add(f"{owner}.{m}")

    def _late_call(self, dotted):
        """A collective started by learner code while no call of the driver's to the learner's
        code was running: code that ran after its call returned (a method put on a driver's
        object, a callback), past the censuses and checks of the call."""
        stack = [(f.filename, f.lineno) for f in traceback.extract_stack()]
        site = self._learner_site(stack) or ("", 0)
        what = dotted.split(".", 1)[1] if "." in dotted else dotted
        msg = (f"your code started a collective ({what}) while the driver was not calling it"
               + (f" (at {site[0]}:{site[1]})" if site[0] else "")
               + ": it ran after the driver's call to your function had returned (a method put "
               "on one of the driver's objects, a callback), where the check of that call "
               "cannot see it. Do all of the work inside the function the driver calls")
        if not self._violated:
            self._violated = True
            self._error("policy", "late call", msg, site[0], site[1], 0)
        raise PolicyViolation(msg)

    @contextlib.contextmanager
    def forbid(self, names=None, ops=True):
        """While the block runs (the learner's code), a call to a forbidden function writes an
        error record (where "policy") and raises PolicyViolation, so the rank exits 1.
        names: extra dotted names to forbid on top of MGPU_FORBID. ops: also watch the
        dispatcher for the forbidden collectives' ops, whoever launches them (C++ code such as
        DDP's reducer calls no Python function): a dispatch mode, which costs every tensor op
        some Python, so the timed calls go without it."""
        for n in names or ():
            if n not in self._icpt.policed:
                self._police(n)
        self._icpt.rebind_torch()
        self._icpt.rebind_aliases(self._learner_modules)
        mode = None
        if ops and self._icpt.policed_ops:
            mode = _police_mode_class()(self._icpt)
        self._icpt.depth += 1
        try:
            if mode is None:
                yield
            else:
                with mode:
                    yield
        finally:
            self._icpt.depth -= 1

    def _violation(self, call, via):
        stack = [(f.filename, f.lineno) for f in traceback.extract_stack()]
        site = self._learner_site(stack) or ("", 0)
        how = call if via == call else f"{call} (through {via})"
        msg = (f"your code called {how}, which this exercise forbids"
               + (f" (at {site[0]}:{site[1]})" if site[0] else ""))
        if not self._violated:
            self._violated = True
            self._error("policy", call, msg, site[0], site[1], 0)
        raise PolicyViolation(msg)

    @contextlib.contextmanager
    def count_calls(self, names):
        """Records every call of the named functions (dotted names, e.g.
        "torch.distributed.all_reduce") made while the block runs, by anyone. Yields the list
        of Call objects, filled as calls happen."""
        names = set(names)
        for n in names:
            if not self._icpt.install(n):
                raise ValueError(f"count_calls: no such function {n}")
        self._icpt.rebind_torch()
        self._icpt.rebind_aliases(self._learner_modules)
        calls = []
        entry = (names, calls)
        with self._icpt.lock:
            self._icpt.counters.append(entry)
        try:
            yield calls
        finally:
            with self._icpt.lock:
                self._icpt.counters.remove(entry)

    @contextlib.contextmanager
    def count_collectives(self):
        """Records every collective launched while the block runs, by anyone in this process,
        whatever route started it, and yields the list of Collective records, filled as calls
        happen. Every ProcessGroup method, the functional collectives, DTensor and the object
        collectives end in an op of the dispatcher's c10d namespaces, which a TorchDispatchMode
        sees (it follows autograd into its worker threads); a process group's methods called
        where that mode is not active (a thread of a Future's callback) and its backend
        object's methods, which bypass the dispatcher, are seen by wrappers. One call is one
        record. Drivers use it to require what an exercise asks (buckets reduced by all-reduce,
        exactly one all-reduce per forward) whatever else the learner's code launches."""
        found = []
        lock = threading.Lock()
        mode_cls = _census_mode_class()

        def add(c):
            with lock:
                found.append(c)

        mode = mode_cls(add)

        def from_wrapper(call):
            if call.name.startswith("ProcessGroup.") and any(
                    m is mode for m in _python_dispatch._get_current_dispatch_mode_stack()):
                return  # the dispatcher shows it to the mode
            method = call.name.split(".", 1)[1]
            kind = _collective_kind(method)
            add(Collective(kind, call.name, _arg_bytes(call.args[1:], call.kwargs),
                           _received_bytes(kind, call.args[1:])))

        routes = set()
        for owner in ("ProcessGroup", "Backend"):
            for m in _COLLECTIVE_METHODS:
                if self._icpt.install(f"{owner}.{m}"):
                    routes.add(f"{owner}.{m}")
        self._icpt.rebind_torch()
        self._icpt.rebind_aliases(self._learner_modules)
        entry = (routes, from_wrapper)
        with self._icpt.lock:
            self._icpt.counters.append(entry)
        try:
            with mode:
                yield found
        finally:
            with self._icpt.lock:
                self._icpt.counters.remove(entry)

    def real(self, dotted):
        """The original (unwrapped) function, for the harness's and drivers' own use. Called
        through the function returned, it is one of the driver's own calls: the collective
        methods it reaches are not policed and walk no stack (its timed baselines pay nothing
        for the learner's policing)."""
        orig = self._icpt.original(dotted)
        if orig is None or not callable(orig):
            return orig
        own = self._icpt.own

        def driver_call(*args, **kwargs):
            own.n = getattr(own, "n", 0) + 1
            try:
                return orig(*args, **kwargs)
            finally:
                own.n -= 1
        return driver_call

    # ---- uncaught exceptions ------------------------------------------------------------

    def _install_hooks(self):
        def hook(etype, value, tb):
            self._on_uncaught(etype, value, tb)

        def thread_hook(args):
            self._on_uncaught(args.exc_type, args.exc_value, args.exc_traceback)

        sys.excepthook = hook
        threading.excepthook = thread_hook

    def _on_uncaught(self, etype, value, tb):
        if isinstance(value, PolicyViolation) or self._violated:
            traceback.print_exception(etype, value, tb, file=sys.stderr)
            self._exit(1)
        if isinstance(value, SystemExit):
            self._exit(value.code if isinstance(value.code, int) else 1)
        frames = [(f.filename, f.lineno) for f in traceback.extract_tb(tb)]
        if isinstance(value, SyntaxError) and value.filename:
            frames.append((value.filename, value.lineno or 0))
        site = self._learner_site(frames)
        if site:
            where, (file, line) = "learner", site
        else:
            here = os.path.abspath(__file__)
            inner = [fr for fr in frames if os.path.abspath(fr[0]) != here]
            file, line = (os.path.basename(inner[-1][0]), inner[-1][1]) if inner else ("", 0)
            where = "driver" if inner else "harness"
        traceback.print_exception(etype, value, tb, file=sys.stderr)
        msg = "".join(traceback.format_exception_only(etype, value)).strip()
        self._error(where, etype.__name__, msg, file, line, 1)
        self._exit(1)

    # ---- the verifier (docs/protocol.md §4, "The verifier") ------------------------------

    @property
    def computes(self):
        """True in the rank (process groups, inputs, the learner's calls, timing); False in
        the verifier, which never imports the learner's module (it compares on its rank's GPU
        when there is one; the rank waits for it to catch up before timing)."""
        return not self.verifier

    @property
    def verifies(self):
        """True where expected values are made and cases recorded: the verifier, and a rank
        run without one (standalone, or an exercise not split)."""
        return self.verifier or not self.split

    def hand_over(self, tag, obj):
        """The rank sends obj (a tensor, or a JSON value such as a list of facts it measured)
        to its verifier and returns it; the verifier returns what the rank sent under the same
        tag, in the same order (a tensor arrives on h.device, with its dtype and shape). Without
        a verifier it returns obj."""
        if not self.split:
            return obj
        self._counts["handed"] += 1
        if not self.verifier:
            parts, _keep = _pack(obj)
            try:
                self._chan.submit(tag, parts)
            except OSError:
                os._exit(1)  # the checker is gone
            return obj
        got = self._next_output()
        if got is None:
            self.fail("verifier", "hand_over", f"the rank's outputs ended before it handed "
                      f"over {tag!r}")
        if got[0] != tag or got[1] is None:
            self.fail("verifier", "hand_over", f"the rank handed over {got[0][:120]!r} where "
                      f"its driver hands over {tag!r} (or sent it malformed): something other "
                      "than the driver wrote to the outputs connection")
        obj = got[1][1]
        if isinstance(obj, torch.Tensor) and self.on_gpu:
            obj = obj.to(self.device)  # the verifier compares on its rank's GPU
        return obj

    def _next_output(self):
        """The verifier: the rank's next output, answering its requests to catch up on the
        way (the rank is about to time: everything before is checked, and it is told so)."""
        got = self._chan.next_output()
        while got is not None and got[0] == "!drain":
            if self.on_gpu:
                torch.cuda.synchronize()
            self._write({"t": "drained"})
            got = self._chan.next_output()
        return got

    def _drain(self):
        """Before timing in a split rank: the verifier catches up first (docs/protocol.md §4)."""
        if self.split and not self.verifier and self._chan is not None:
            if not self._chan.drain():
                self.note("the verifier did not confirm it had caught up before timing; the "
                          "timed samples may share the GPU with its checks")

    # ---- data ----------------------------------------------------------------------------

    def exact(self, shape, rank=None, iter=0, dtype=torch.float32, device=None, salt=0,
              fine=False):
        """Integer-valued numbers in [-64, 64], a function of (seed, rank, iter, salt, index).
        Sums of up to 2^17 of them are exact in float32 in any order. fine=True adds a multiple
        of 1/64 to each (13 significant bits: data moved or summed in half or bfloat16 shows;
        sums of up to 4000 are still exact in float32)."""
        if isinstance(shape, int):
            shape = (shape,)
        rank = self.rank if rank is None else rank
        device = self.device if device is None else torch.device(device)
        n = math.prod(shape)
        if self.split and not self.verifier:
            # A split rank has the key of its own inputs only (docs/protocol.md §4).
            if rank != self.rank:
                self.fail("driver", "exact", f"a rank whose outputs a verifier checks knows its "
                          f"own inputs only, not rank {rank}'s: expected values made of other "
                          "ranks' inputs belong behind h.verifies")
            key = _key32_from(self._chan.rank_seed, iter, salt)
        else:
            key = _key32(self.seed, rank, iter, salt)
        out = torch.empty(n, dtype=dtype, device=device)
        step = _chunk(device)
        for s in range(0, n, step):
            c = min(step, n - s)
            out[s:s + c] = _exact_chunk(s, c, key, device, fine).to(dtype)
        return out.view(shape)

    def exact_sum(self, shape, iter=0, ranks=None, dtype=torch.float32, device=None, salt=0,
                  fine=False):
        """The element-wise sum of exact(shape, r, iter) over ranks (default: all ranks)."""
        ranks = range(self.world) if ranks is None else ranks
        total = None
        for r in ranks:
            x = self.exact(shape, r, iter, torch.float32, device, salt, fine)
            total = x if total is None else total.add_(x)
        if total is None:
            total = torch.zeros(shape, dtype=torch.float32,
                                device=self.device if device is None else device)
        return total.to(dtype)

    @staticmethod
    def poison_value(dtype):
        if dtype.is_floating_point or dtype.is_complex:
            return float("nan")
        if dtype == torch.bool:
            return True
        return torch.iinfo(dtype).max

    def poison(self, t):
        """Fills t with NaN (floats) or the dtype's largest value (integers). Returns t."""
        return t.fill_(self.poison_value(t.dtype))

    # ---- comparisons ---------------------------------------------------------------------

    def compare(self, got, want, tol=0.0, rtol=0.0, n=None):
        """Compares every element of got with want: ok where |got - want| <= tol + rtol*|want|
        (or both NaN); tol may be a tensor of want's shape, a tolerance per element. Elements of
        got that still hold the poison value where want does not are counted apart, as
        unwritten. A got whose values cannot be read (a meta, sparse or quantized tensor, an
        Unreadable from the rank) is one wrong element, with the reason in the message. Returns
        a Result; writes nothing (see record)."""
        plain = (torch.Tensor, torch.nn.Parameter)
        why = _unreadable(got)
        if why is not None:
            res = Result(n if n is not None else 1)
            res.msg_parts.append(f"the result is {why}")
            res.bad = 1
            res.checked = 1
            return res
        res = Result(n if n is not None else got.numel() if type(got) in plain else 1)
        if type(got) not in plain or type(want) not in plain:
            bad = got if type(got) not in plain else want
            res.msg_parts.append(f"the result is a {type(bad).__module__}.{type(bad).__qualname__}, "
                                 "not a torch.Tensor: return the tensors themselves")
            res.bad = 1
            res.checked = 1
            return res
        if tuple(got.shape) != tuple(want.shape):
            res.msg_parts.append(f"shape {tuple(got.shape)} is not the expected "
                                 f"{tuple(want.shape)}")
            res.bad = 1
            res.checked = 1
        else:
            res.compare(got.detach().reshape(-1), want.detach().reshape(-1), tol, rtol)
        return res

    def record(self, case, result, msg=None):
        """Writes the case record of a Result (msg is added when the case failed)."""
        if msg and not result.ok():
            result.msg_parts.append(msg)
        result.n = self.cases.get(case, result.n)
        return self._record_case(case, result)

    def record_after_timing(self, perf_case, last, fresh, n=None):
        """Records the case "after-timing" (docs/harness.md §6): `last` compares the last timed
        call's result (None where the timed calls changed their own inputs), `fresh` one more
        call with new data in the timed buffers. The message says which of the two went wrong."""
        parts = []
        if last is not None and not last.ok():
            parts.append(f"performance case {perf_case}: the last timed call's result is wrong "
                         "(its inputs had not changed since the first call)")
        if not fresh.ok():
            parts.append(f"performance case {perf_case}: after the timed calls, a call with new "
                         "data in the same buffers gave a wrong result")
        res = last.add(fresh) if last is not None else fresh
        if parts:
            res.msg_parts.insert(0, "; ".join(parts) + ": every call must do the whole work, "
                                 "repeated calls with the same buffers included")
        if n is not None:
            res.n = n
        self.record("after-timing", res)

    def check_equal(self, case, got, want, tol=0.0, rtol=0.0, msg=None, n=None):
        """compare() then record(): writes the case record; returns ok."""
        res = self.compare(got, want, tol, rtol, n)
        if n is None:
            res.n = self.cases.get(case, res.n)
        if msg and not res.ok():
            res.msg_parts.append(msg)
        return self._record_case(case, res)

    def record_case(self, case, ok, n=None, msg=None, checked=1):
        """A case record for a check the driver made itself (a property, a call count...)."""
        res = Result(n if n is not None else self.cases.get(case, 0))
        res.checked = checked
        if not ok:
            res.bad = max(1, checked)
            res.forced = True
        if msg:
            res.msg_parts.append(msg)
        return self._record_case(case, res)

    def _record_case(self, case, res):
        ok = res.ok()
        rec = {"t": "case", "case": case, "n": int(res.n), "ok": ok, "checked": int(res.checked),
               "bad": int(res.bad), "unwritten": int(res.unwritten), "guard_hits": 0,
               "max_abs_err": _num(res.max_abs), "max_rel_err": _num(res.max_rel),
               "first": res.first}
        if res.msg_parts:
            rec["msg"] = "; ".join(res.msg_parts)[:_MAX_MSG]
        self._write(rec)
        return ok

    # ---- timing --------------------------------------------------------------------------

    def _sync(self):
        if dist.is_available() and dist.is_initialized():
            self.real("torch.distributed.barrier")()
        if self.on_gpu:
            torch.cuda.synchronize()

    def _agree_max(self, v):
        """The maximum of v over all ranks (a small collective, never policed)."""
        if not (dist.is_available() and dist.is_initialized()) or self.world == 1:
            return v
        t = torch.tensor([float(v)], dtype=torch.float64, device=self.device)
        self.real("torch.distributed.all_reduce")(t, op=dist.ReduceOp.MAX)
        return t.item()

    def max_over_ranks(self, values):
        """The element-wise maximum of a list of numbers over all ranks (same length on every
        rank), as the checker combines timing samples."""
        if not (dist.is_available() and dist.is_initialized()) or self.world == 1:
            return list(values)
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        self.real("torch.distributed.all_reduce")(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def wait_gpu(self, timeout_s):
        """Waits, polling, for the work queued so far on the current stream, at most timeout_s
        seconds. Returns False when it had not finished by then (a hang, which the driver
        reports in its own words); an error of that work surfaces as RuntimeError. GPU only."""
        ev = torch.cuda.Event()
        ev.record()
        deadline = time.monotonic() + timeout_s
        while not ev.query():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)
        torch.cuda.synchronize()
        return True

    def device_time(self, fn, iters=20, samples=5, gated=False):
        """Median over samples of the GPU time of one fn() call (µs, slowest rank), for values
        reported for information (no timing record). Each sample: every rank meets at a
        barrier, then iters calls back to back between CUDA events. gated=True queues the calls
        behind a sleep of the stream longer than the host takes to queue them (as time_pair's
        gated samples), so the figure leaves out the host's launch cost. Every rank must call
        it: it meets the others. GPU only."""
        self._drain()
        for _ in range(2):
            fn()
        gate = 0
        if gated:
            torch.cuda.synchronize()
            w0 = time.perf_counter()
            for _ in range(iters):
                fn()
            host_us = (time.perf_counter() - w0) * 1e6
            gate = int((2 * host_us + 200) * self._sleep_cycles_per_us())
        per = []
        for _ in range(samples):
            self._sync()
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            if gate:
                torch.cuda._sleep(gate)
            e0.record()
            for _ in range(iters):
                fn()
            e1.record()
            e1.synchronize()
            per.append(e0.elapsed_time(e1) * 1e3 / iters)
        return statistics.median(self.max_over_ranks(per))

    def _sleep_cycles_per_us(self):
        """Cycles of torch.cuda._sleep per µs on this GPU, measured once."""
        if getattr(self, "_cycles_per_us", None) is None:
            torch.cuda.synchronize()
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.cuda._sleep(2_000_000)
            e1.record()
            e1.synchronize()
            self._cycles_per_us = 2_000_000 / max(e0.elapsed_time(e1) * 1e3, 1.0)
        return self._cycles_per_us

    def _time_one(self, fn, iters, start_iter, policed, sync, gate_us=0.0):
        """One sample: (device µs per op, wall µs per op). With gate_us > 0 the stream first
        sleeps that long and the calls are queued behind the sleep; the start event follows the
        sleep, so the device time is that of the calls back to back, without the host's launch
        cost (as under a CUDA graph). The device µs is then None when the host took longer to
        queue the calls than the gate lasted (the GPU may have waited for it)."""
        scope = self.forbid(ops=False) if policed else contextlib.nullcontext()
        with scope:
            self._sync()
            if self.on_gpu:
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                w0 = time.perf_counter()
                if gate_us > 0:
                    torch.cuda._sleep(int(gate_us * self._sleep_cycles_per_us()))
                e0.record()
                for k in range(iters):
                    fn(start_iter + k)
                queued = time.perf_counter() - w0
                if sync is not None:
                    sync()
                e1.record()
                torch.cuda.synchronize()
                wall = time.perf_counter() - w0
                dev = e0.elapsed_time(e1) / 1e3
                if gate_us > 0 and queued * 1e6 > 0.8 * gate_us:
                    return None, wall * 1e6 / iters
            else:
                w0 = time.perf_counter()
                for k in range(iters):
                    fn(start_iter + k)
                if sync is not None:
                    sync()
                wall = time.perf_counter() - w0
                dev = wall
        return dev * 1e6 / iters, wall * 1e6 / iters

    def time_pair(self, case, bytes, factor, metric, yours, baseline, iters=None, warmup=3,
                  sync=None, scale_baseline=1.0, gated=False):
        """Times yours(i) and baseline(i) alternately (ABBA order, so neither always goes first).

        Each sample: every rank meets at a barrier, the device is synchronized, then `iters`
        calls run back to back, timed with CUDA events on the current stream (µs per op) and
        with the host clock up to torch.cuda.synchronize() (wall µs per op). yours runs inside
        forbid(). `sync`, when given, runs after the calls of a sample, inside the timed
        region (e.g. waits on outstanding work). scale_baseline multiplies the baseline's
        samples (e.g. 1/N to compare with perfect N-way scaling). gated=True (GPU only) times
        the device's work without the host's launch cost: each sample's calls are queued behind
        a sleep of the stream long enough for the host to queue them all (_time_one), grown and
        retried when it was not. Writes two timing records; returns (yours_us, baseline_us)
        lists, or None when timing is off."""
        if not self.timing:
            return None
        self._drain()
        gate = {"yours": 0.0, "baseline": 0.0}

        def sample(who, fn, n, start):
            if not (gated and self.on_gpu):
                return self._time_one(fn, n, start, who == "yours", sync)
            for _ in range(6):
                g = gate[who] or 200.0 + 2 * wall_guess[who] * n
                us, wall = self._time_one(fn, n, start, who == "yours", sync, g)
                # Every rank repeats the sample or none does: the calls may be collective.
                if self._agree_max(1.0 if us is None else 0.0) == 0:
                    gate[who] = g
                    return us, wall
                gate[who] = 2 * g
            self.fail("harness", "time_pair", f"case {case}: the host could not queue {n} calls "
                      f"of {who} within a {gate[who]:.0f} us gate; timing gave up")

        wall_guess = {"yours": 50.0, "baseline": 50.0}
        it = 0
        for _ in range(warmup):
            with self.forbid():
                yours(it)
            baseline(it)
            it += 1
        if iters is None or gated:
            ty, wy = self._time_one(yours, 1, it, True, sync)
            tb, wb = self._time_one(baseline, 1, it + 1, False, sync)
            it += 2
            wall_guess = {"yours": wy, "baseline": wb}
        if iters is None:
            iters = int(min(1000, max(1, math.ceil(1000.0 / max(min(ty, tb), 1e-3)))))
        iters = int(self._agree_max(iters))
        samples = {"yours": ([], []), "baseline": ([], [])}
        t_start = time.perf_counter()
        rep = 0
        while True:
            order = ("yours", "baseline") if rep % 2 == 0 else ("baseline", "yours")
            for who in order:
                fn = yours if who == "yours" else baseline
                us, wall = sample(who, fn, iters, it)
                it += iters
                if who == "baseline":
                    us, wall = us * scale_baseline, wall * scale_baseline
                samples[who][0].append(us)
                samples[who][1].append(wall)
            rep += 1
            stop = 0.0
            if rep >= self.max_reps:
                stop = 1.0
            elif rep >= self.min_reps:
                spent = (self._timing_spent_ms + (time.perf_counter() - t_start) * 1e3
                         >= self.perf_budget_ms)
                stable = all(_spread(samples[w][0]) < 0.02 for w in samples)
                stop = 1.0 if (spent or stable) else 0.0
            if self._agree_max(stop) > 0:
                break
        self._timing_spent_ms += (time.perf_counter() - t_start) * 1e3
        for who in ("yours", "baseline"):
            us, wall = samples[who]
            self._write({"t": "timing", "case": case, "who": who, "bytes": float(bytes),
                         "factor": float(factor), "metric": metric,
                         "us": [_num(x) for x in us], "wall_us": [_num(x) for x in wall]})
        return samples["yours"][0], samples["baseline"][0]


def _spread(xs):
    """Interquartile range over median (0 for fewer than 4 samples: not yet stable)."""
    if len(xs) < 4:
        return 1.0
    q = statistics.quantiles(xs, n=4)
    med = statistics.median(xs)
    return (q[2] - q[0]) / med if med > 0 else 1.0


class Result:
    """The outcome of one comparison: what a case record holds. msg_parts are joined into the
    record's msg; drivers may append their own explanation before recording."""

    def __init__(self, n):
        self.n = n
        self.checked = 0
        self.bad = 0
        self.unwritten = 0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.first = []
        self.msg_parts = []
        self.forced = False

    def ok(self):
        return self.bad == 0 and self.unwritten == 0 and not self.forced

    def add(self, other):
        """Folds another comparison of the same case into this one (its element indices are
        shifted past this one's). Returns self."""
        base = self.checked
        self.checked += other.checked
        self.bad += other.bad
        self.unwritten += other.unwritten
        self.forced = self.forced or other.forced
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)
        for f in other.first[: _MAX_FIRST - len(self.first)]:
            self.first.append(dict(f, i=base + f["i"]))
        self.msg_parts += other.msg_parts
        return self

    def compare(self, got, want, tol, rtol):
        want = want.to(got.device)
        if isinstance(tol, torch.Tensor):  # a tolerance per element, flat like got
            tol = tol.detach().reshape(-1).to(got.device, torch.float64)
        n = got.numel()
        self.checked = n
        integer = not (got.dtype.is_floating_point or want.dtype.is_floating_point)
        poison = Harness.poison_value(got.dtype)
        step = _chunk(got.device)
        for s in range(0, n, step):
            g = got[s:s + step]
            w = want[s:s + step]
            t = tol[s:s + step] if isinstance(tol, torch.Tensor) else tol
            if integer:
                unwritten = (g == poison) & (w != poison)
                gd, wd = g.to(torch.float64), w.to(torch.float64)
                diff = (gd - wd).abs()
                badm = (g != w) & ~unwritten
                if isinstance(t, torch.Tensor) or t > 0 or rtol > 0:
                    badm &= diff > t + rtol * wd.abs()
                finite = ~unwritten
            else:
                gd, wd = g.to(torch.float64), w.to(torch.float64)
                gn, wn = torch.isnan(gd), torch.isnan(wd)
                unwritten = gn & ~wn
                diff = (gd - wd).abs()
                close = (gd == wd) | (gn & wn) | (diff <= t + rtol * wd.abs())
                badm = ~close & ~unwritten
                finite = ~unwritten & ~(gn & wn) & torch.isfinite(diff)
            self.unwritten += int(unwritten.sum())
            self.bad += int(badm.sum())
            if bool(finite.any()):
                d = diff[finite]
                self.max_abs = max(self.max_abs, float(d.max()))
                denom = wd[finite].abs()
                nz = denom > 0
                if bool(nz.any()):
                    self.max_rel = max(self.max_rel, float((d[nz] / denom[nz]).max()))
            if len(self.first) < _MAX_FIRST:
                idx = torch.nonzero(badm | unwritten).reshape(-1)[: _MAX_FIRST - len(self.first)]
                for i in idx.tolist():
                    gv, wv = g[i].item(), w[i].item()
                    self.first.append({"i": s + i, "got": _fmt(gv), "want": _fmt(wv)})


def init(default_cases=None, default_perf_cases=None):
    """Reads the environment, opens this rank's record file, writes the start record and
    returns the Harness. default_cases / default_perf_cases ({name: n}) apply when the run's
    environment names none (a driver run by hand)."""
    return Harness(default_cases, default_perf_cases)
