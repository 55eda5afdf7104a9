"""mgpu_policy — the static policy for a learner's Python files (docs/protocol.md §4).

    python3 mgpu_policy.py file.py ...

prints one JSON object per finding ({"file", "line", "what", "why"}) and exits 0 (1 on a file it
cannot read or parse; the build stage has already reported syntax errors).

A learner's module runs in the same interpreter as the driver and the harness, so anything it
can reach it can change. This check refuses the routes by which Python code reaches past its
own objects: the harness module, the interpreter's internals (frames, code objects, globals,
the garbage collector, ctypes), the operating system's processes, files and sockets, dynamic
evaluation, and rebinding a library's functions. None of it is needed to solve an exercise.
It is a denylist, and a determined author can still find a way it does not list; the harness's
run-time checks (learner frames on the stack of a record, rebound functions) are the second
line, and docs/protocol.md says what stays undefended.
"""

import ast
import json
import os
import string
import sys

WHY_REACH = "reaches into the checking machinery or the interpreter, which an exercise never needs"
WHY_OS = "works on processes, files or sockets directly; the exercise needs none of that"

# Modules a learner's file may not import at all (with the reason it is told).
MODULES = {
    "mgpu_harness": "is the course's harness: only the driver uses it",
    "mgpu_policy": "is the course's policy check",
    "__main__": "is the course's driver: only the harness talks to it",
    "ctypes": WHY_REACH, "_ctypes": WHY_REACH, "cffi": WHY_REACH, "gc": WHY_REACH,
    "inspect": WHY_REACH, "importlib": WHY_REACH, "builtins": WHY_REACH,
    "__builtin__": WHY_REACH, "code": WHY_REACH, "codeop": WHY_REACH, "runpy": WHY_REACH,
    "marshal": WHY_REACH, "dis": WHY_REACH, "traceback": WHY_REACH, "sysconfig": WHY_REACH,
    "site": WHY_REACH, "atexit": WHY_REACH, "faulthandler": WHY_REACH, "tracemalloc": WHY_REACH,
    "pickle": WHY_REACH, "_pickle": WHY_REACH, "types": WHY_REACH, "weakref": WHY_REACH,
    "threading": WHY_REACH, "_thread": WHY_REACH,
    "subprocess": WHY_OS, "socket": WHY_OS, "_socket": WHY_OS, "signal": WHY_OS,
    "multiprocessing": WHY_OS, "posix": WHY_OS, "_posixsubprocess": WHY_OS, "pty": WHY_OS,
    "io": WHY_OS, "_io": WHY_OS, "pathlib": WHY_OS, "mmap": WHY_OS, "shutil": WHY_OS,
    "tempfile": WHY_OS, "fcntl": WHY_OS, "resource": WHY_OS, "select": WHY_OS,
    "selectors": WHY_OS, "asyncio": WHY_OS, "http": WHY_OS, "urllib": WHY_OS,
}

# The only modules a learner's file may import: what the exercises need and a few harmless
# helpers. Everything else is refused, since the list of modules with a way into the
# interpreter (pickle, typing's evaluators, operator.attrgetter, ...) has no end. The
# exercise's own other files may be imported too.
ALLOWED = {"torch", "triton", "math", "cmath", "time", "typing", "dataclasses",
           "functools", "itertools", "collections", "enum", "contextlib", "abc", "statistics",
           "random", "numbers", "heapq", "bisect", "copy", "operator", "warnings", "__future__",
           "os", "sys"}
WHY_NOT_ALLOWED = ("is not among the modules an exercise may import (" +
                   ", ".join(sorted(ALLOWED - {"__future__"})) + ", and the exercise's own "
                   "files): the others are not needed, and some reach into the checking")

WHY_PROFILER = ("drives torch's profiler, which the checks use (module1/tensor-parallel-mlp "
                "counts allocations with it); profile your code outside the exercise's files")
# Parts of allowed packages that load native code, run code from files or unpickle data, or
# reach the interpreter, refused in imports and in attribute chains alike.
SUBMODULES = {"cpp_extension": WHY_REACH, "hub": WHY_REACH, "package": WHY_REACH,
              "serialization": WHY_REACH, "multiprocessing": WHY_OS, "library": WHY_REACH,
              "runtime": WHY_REACH, "compiler": WHY_REACH, "backends": WHY_REACH,
              "tools": WHY_REACH, "profiler": WHY_PROFILER}

# Private names of libraries an exercise may use (everything else starting with _ is refused
# on a library's objects: private parts have no promises and lead into internals).
# torch.distributed._symmetric_memory is not among them: the drivers that need symmetric memory
# allocate it and hand it over, and in a learner's file it lets ranks read each other's
# buffers past the messages an exercise counts (a ring all-reduce with zeros sent around).
PRIVATE_OK = ("torch._foreach_", "torch.ops.")

# The dispatcher's collective ops and the functional collectives built on them: the same
# collectives as torch.distributed's, under names an exercise's forbidden list does not
# follow one by one (a red-team pass reached a forbidden all-reduce through
# torch.ops._c10d_functional.all_reduce_coalesced). No exercise needs them: refused, with every
# name below them.
WHY_OPS = ("calls collectives through torch's internal op namespaces, past what the exercise "
           "forbids; use torch.distributed's public functions")
COLLECTIVE_OPS = ("torch.ops.c10d", "torch.ops._c10d_functional", "torch.ops.c10d_functional",
                  "torch.distributed._functional_collectives")

# Ways to move data between ranks outside the collectives an exercise checks: key-value stores
# (a red-team pass summed ring-allreduce's tensors through a TCPStore of its own, with garbage
# sent around the ring) and the RPC framework. No exercise needs them; refused on torch's
# objects wherever they appear in a chain (torch.distributed.TCPStore,
# torch.distributed.distributed_c10d.FileStore, torch.distributed.rpc.rpc_sync, ...).
WHY_SIDE = ("moves data between ranks outside the collectives and messages the exercise "
            "checks; use torch.distributed's collectives and point-to-point calls")
SIDE_CHANNELS = {"TCPStore", "FileStore", "HashStore", "PrefixStore", "Store", "rpc",
                 # a store from a URL (tcp://, file://): a red-team pass summed ring-allreduce
                 # through next(dist.rendezvous(url))
                 "rendezvous", "register_rendezvous_handler"}

# Hooks that torch runs for every module, or for every tensor autograd saves, in the process:
# learner code they register runs inside the driver's and the harness's own work, after the
# learner's call has returned (docs/protocol.md §4). Hooks on the learner's own objects
# (module.register_forward_hook, tensor.register_hook) are fine.
WHY_GLOBAL_HOOK = ("registers a hook for every module or every saved tensor in the process, so "
                   "your code would run inside the driver's own work; put hooks on your own "
                   "objects (module.register_forward_hook, tensor.register_hook)")
GLOBAL_HOOKS = {"register_module_forward_pre_hook", "register_module_forward_hook",
                "register_module_backward_hook", "register_module_full_backward_pre_hook",
                "register_module_full_backward_hook", "register_module_buffer_registration_hook",
                "register_module_module_registration_hook",
                "register_module_parameter_registration_hook", "saved_tensors_hooks",
                "save_on_cpu", "register_saved_tensors_default_hooks"}

# What of `sys` and `os` a learner may use (everything else of theirs is refused).
SYS_OK = {"stdout", "stderr", "version", "version_info", "platform", "maxsize", "float_info",
          "byteorder"}
OS_OK = {"environ", "getenv", "getpid", "cpu_count", "sep", "linesep", "path", "name"}
OS_PATH_OK = {"join", "basename", "dirname", "exists", "splitext"}

# Builtins that evaluate code, reach namespaces or open files.
BUILTINS = {
    "eval": WHY_REACH, "exec": WHY_REACH, "compile": WHY_REACH, "__import__": WHY_REACH,
    "globals": WHY_REACH, "locals": WHY_REACH, "vars": WHY_REACH, "breakpoint": WHY_REACH,
    "setattr": "changes attributes by name, which hides what it changes",
    "delattr": "removes attributes by name, which hides what it changes",
    "open": WHY_OS, "input": WHY_OS, "exit": "ends the process before the driver's checks",
    "quit": "ends the process before the driver's checks", "__builtins__": WHY_REACH,
    "__loader__": WHY_REACH, "__spec__": WHY_REACH,
}
# Builtins that are fine to call as written but not to pass around: called through another
# name, the check cannot see what they reach.
CALL_ONLY = {"getattr", "hasattr", "type"}

# Attribute names that lead to frames, code objects, globals or class internals, or to a module
# a learner may not import (torch.sys, torch.fx.node.operator, ...), wherever they appear.
ATTRS = {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next",
         "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "co_code", "py_impl",
         "py_kernels", "_getframe", "library", "sys", "os", "builtins", "importlib", "gc",
         "inspect", "ctypes", "_ctypes", "cffi", "pickle", "_pickle", "marshal", "subprocess",
         "_posixsubprocess", "socket", "_socket", "multiprocessing", "threading", "_thread",
         "types", "weakref", "copyreg", "shelve", "dill", "cloudpickle", "pkgutil", "zipimport",
         "runpy", "sysconfig", "traceback", "linecache", "atexit", "faulthandler", "mmap",
         "posix", "fcntl", "shutil", "tempfile", "pathlib", "operator", "attrgetter",
         "methodcaller", "cpp_extension", "load_inline", "load_library", "CUDAPluggableAllocator",
         "get_type_hints", "ForwardRef", "evaluate_forward_ref", "compile_module_from_src",
         "from_file", "excepthook", "unraisablehook", "cell_contents", "numpy", "tofile",
         "dump", "dumps",
         # other modules' names and builtins, as torch and the stdlib bind them (enum.bltns is
         # builtins, torch.export.logging is logging, torch.storage.io is io, ...)
         "bltns", "getattr", "setattr", "delattr", "currentframe", "logging", "io", "mp",
         "concurrent", "queue", "dis", "ast", "zipfile", "glob", "open",
         # attributes named by strings: update_wrapper/wraps copy the ones their arguments
         # name onto another object (a red-team pass read a harness wrapper's __dict__ and
         # __globals__ that way), make_dataclass makes fields, hence a class pattern's
         # positional attributes, from strings
         "update_wrapper", "wraps", "make_dataclass"}
# On a library's objects also: loading from files runs code (pickle); the rest of SUBMODULES.
# (torch.distributed.run and .launch start processes, .elastic too; torch.utils.benchmark and
# collect_env compile or run programs.)
MODULE_ATTRS = {"load", "save", "load_state_dict_from_url", "run", "launch", "elastic", "benchmark",
                "collect_env"} | set(SUBMODULES)
# Builtin types whose class pattern takes one positional part, matched against the subject
# itself (case int(n)).
SELF_MATCHING = {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set",
                 "str", "tuple"}
DUNDER_OK = {"__init__", "__name__", "__class__", "__qualname__", "__doc__", "__len__",
             "__call__", "__enter__", "__exit__", "__iter__", "__next__", "__repr__", "__str__",
             "__getitem__", "__setitem__", "__contains__", "__version__", "__file__"}
# Methods a learner's class may define: others change how comparisons, conversions and torch
# dispatch see an object.
DEF_OK = {"__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
          "__enter__", "__exit__", "__getitem__", "__setitem__", "__contains__", "__hash__"}


class Checker(ast.NodeVisitor):
    def __init__(self, path, own=()):
        self.path = path
        self.found = []
        self.modules = {}  # local name -> imported module's dotted name
        self.own = set(own)  # module names of the exercise's own files
        self.calls = set()  # id() of Name nodes that are the function of a call
        self.inner = set()  # id() of attribute nodes inside a chain already checked
        self.chains = []  # (line, dotted name) of every chain rooted at a module, for run time

    def flag(self, node, what, why):
        self.found.append({"file": self.path, "line": getattr(node, "lineno", 0), "what": what,
                           "why": why})

    def visit_Module(self, node):
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                self.calls.add(id(n.func))
        self.generic_visit(node)

    def root_module(self, node):
        """The dotted module an attribute chain starts from, or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.modules:
            return self.modules[node.id], list(reversed(parts))
        return None, None

    def check_dotted(self, node, dotted, what, attrs=True):
        """A module path or a chain of a module's attributes: False (and flagged) when refused.
        attrs: also refuse the names of ATTRS (an attribute chain's own nodes do that)."""
        parts = dotted.split(".")
        top = parts[0]
        if top in MODULES:
            self.flag(node, what, MODULES[top])
            return False
        if top not in ALLOWED and top not in self.own:
            self.flag(node, what, WHY_NOT_ALLOWED)
            return False
        if top in self.own:
            return True
        for i in range(2, len(parts) + 1):
            if ".".join(parts[:i]) in COLLECTIVE_OPS:
                self.flag(node, what, WHY_OPS)
                return False
        for i, p in enumerate(parts[1:], 1):
            if p in SIDE_CHANNELS and top == "torch":
                self.flag(node, what, WHY_SIDE)
                return False
            if p in GLOBAL_HOOKS and top == "torch":
                self.flag(node, what, WHY_GLOBAL_HOOK)
                return False
            if p in SUBMODULES or p in MODULE_ATTRS and top == "torch":
                self.flag(node, what, SUBMODULES.get(p, "loads pickled data, which runs code "
                                                       "while it loads"))
                return False
            if attrs and (p in ATTRS or p.startswith("__") and p not in DUNDER_OK):
                self.flag(node, what, WHY_REACH)
                return False
            if p.startswith("_") and not (p.startswith("__") and p.endswith("__")):
                if not ".".join(parts[:i + 1]).startswith(PRIVATE_OK):
                    self.flag(node, what, "uses a library's private part, which leads into its "
                                          "internals; use its public functions")
                    return False
        return True

    def visit_Import(self, node):
        for a in node.names:
            if self.check_dotted(node, a.name, f"import {a.name}"):
                local = a.asname or a.name.split(".")[0]
                self.modules[local] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level:
            self.flag(node, f"from {'.' * node.level}{mod} import ...",
                      "relative imports reach outside the learner's own file")
            return
        if not self.check_dotted(node, mod, f"from {mod} import ..."):
            return
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.flag(node, f"from {mod} import *", "a star import hides what is used")
            elif mod == "sys" and a.name not in SYS_OK or mod == "os" and a.name not in OS_OK:
                self.flag(node, f"from {mod} import {a.name}", WHY_REACH if mod == "sys" else WHY_OS)
            elif a.name.startswith("__") or a.name in ATTRS:
                self.flag(node, f"from {mod} import {a.name}", WHY_REACH)
            elif self.check_dotted(node, full, f"from {mod} import {a.name}"):
                self.modules[a.asname or a.name] = full
                self.chains.append((node.lineno, full))
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in BUILTINS and node.id not in self.modules:
            self.flag(node, node.id, BUILTINS[node.id])
        elif node.id in CALL_ONLY and id(node) not in self.calls and node.id not in self.modules:
            self.flag(node, node.id, f"passes {node.id} around under another name, which hides "
                                     "what it reaches; call it directly")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ("__name__", "__file__"):
            self.flag(node, node.id, WHY_REACH)

    def visit_Attribute(self, node):
        name = node.attr
        mod, parts = self.root_module(node)
        if name.startswith("__") and name.endswith("__") and name not in DUNDER_OK:
            self.flag(node, "." + name, WHY_REACH)
        elif name in ATTRS:
            self.flag(node, "." + name, WHY_REACH)
        elif mod is not None and parts:
            top = mod.split(".")[0]
            if top == "sys" and parts[0] not in SYS_OK:
                self.flag(node, f"sys.{parts[0]}", WHY_REACH)
            elif top == "os" and mod == "os" and parts[0] not in OS_OK:
                self.flag(node, f"os.{parts[0]}", WHY_OS)
            elif mod == "os" and parts[0] == "path" and len(parts) > 1 and parts[1] not in OS_PATH_OK:
                self.flag(node, f"os.path.{parts[1]}", WHY_OS)
            elif top not in ("sys", "os") and id(node) not in self.inner:
                inner = node.value
                while isinstance(inner, ast.Attribute):
                    self.inner.add(id(inner))
                    inner = inner.value
                self.check_dotted(node, ".".join([mod] + parts), ".".join([mod] + parts),
                                  attrs=False)
                self.chains.append((node.lineno, ".".join([mod] + parts)))
        elif name.startswith("_") and not name.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            self.flag(node, "." + name, "uses a private attribute of something other than self "
                                        "or cls, which leads into another's internals")
        self.generic_visit(node)

    def visit_MatchClass(self, node):
        # case C(p): the positional parts read the attributes C.__match_args__ names, strings
        # the check cannot follow (a class registered as a virtual base of any type reads what
        # it likes). Only the builtin types that match their subject itself may take one.
        if node.patterns and not (isinstance(node.cls, ast.Name)
                                  and node.cls.id in SELF_MATCHING
                                  and node.cls.id not in self.modules):
            self.flag(node, "case C(<positional pattern>)",
                      "a class pattern with positional parts reads the attributes its class's "
                      "__match_args__ names, which the check cannot see; name them "
                      "(case C(x=...))")
        # case C(name=pattern) reads obj.name: the same rules as an attribute written out.
        for name in node.kwd_attrs:
            if name.startswith("__") and name.endswith("__") and name not in DUNDER_OK:
                self.flag(node, f"case ...({name}=...)", WHY_REACH)
            elif name in ATTRS or name in MODULE_ATTRS:
                self.flag(node, f"case ...({name}=...)", WHY_REACH)
            elif name.startswith("_"):
                self.flag(node, f"case ...({name}=...)", "a class pattern that reads a private "
                                                        "attribute leads into another's internals")
        self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant)
                                          and isinstance(node.args[1].value, str)):
                self.flag(node, node.func.id + "(..., <computed name>)",
                          "looks an attribute up by a computed name, which hides what it reaches")
            elif node.args[1].value.startswith("_") or node.args[1].value in ATTRS:
                self.flag(node, f"{node.func.id}(..., {node.args[1].value!r})", WHY_REACH)
        elif isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) > 1:
            self.flag(node, "type(name, bases, dict)",
                      "makes a class out of a dictionary, which hides the methods it defines")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "format_map"):
            recv = node.func.value
            if not (isinstance(recv, ast.Constant) and isinstance(recv.value, str)):
                self.flag(node, f".{node.func.attr}(...)",
                          "formats with a template the check cannot read (a template's fields "
                          "can look attributes up); use an f-string")
            else:
                for field in _format_fields(recv.value):
                    if "." in field or "[" in field:
                        self.flag(node, f"{{{field}}}",
                                  "a format field that looks attributes or items up hides what "
                                  "it reaches; use an f-string")
                        break
        self.generic_visit(node)

    def assign_target(self, node, target):
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.assign_target(node, t)
            return
        if isinstance(target, ast.Starred):
            self.assign_target(node, target.value)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            base = target.value if isinstance(target, ast.Subscript) else target
            mod, parts = self.root_module(base)
            if mod is not None:
                shown = ".".join([mod] + (parts or []))
                self.flag(node, f"{shown} = ...",
                          "changes a library's own functions or state; the driver and the "
                          "harness rely on them being what they are")

    def visit_Assign(self, node):
        for t in node.targets:
            self.assign_target(node, t)
        # m = torch (or torch.distributed): m is that module from here on, for every rule.
        mod, parts = self.root_module(node.value)
        if mod is not None:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.modules[t.id] = ".".join([mod] + (parts or []))
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self.assign_target(node, node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for t in node.targets:
            self.assign_target(node, t)
        self.generic_visit(node)

    def visit_Global(self, node):
        for n in node.names:
            if n in self.modules:
                self.flag(node, f"global {n}", "rebinds an imported module")
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if node.name.startswith("__") and node.name.endswith("__") and node.name not in DEF_OK:
            self.flag(node, f"def {node.name}",
                      "changes how torch, comparisons or conversions treat an object; return "
                      "plain tensors")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for b in node.bases:
            mod, parts = self.root_module(b)
            if mod is not None and parts and parts[-1] in ("Tensor", "TorchFunctionMode",
                                                           "TorchDispatchMode"):
                self.flag(node, f"class {node.name}({'.'.join([mod] + parts)})",
                          "makes a tensor subclass or mode: that changes what the driver's "
                          "comparisons see")
            elif isinstance(b, ast.Name) and self.modules.get(b.id, "").endswith(
                    (".Tensor", "Mode")):
                self.flag(node, f"class {node.name}({b.id})",
                          "makes a tensor subclass or mode: that changes what the driver's "
                          "comparisons see")
        self.generic_visit(node)


def _visited(path, own):
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    c = Checker(path, own)
    c.visit(tree)
    return c


def chains(path, own=()):
    """(line, dotted name) of every attribute chain and from-import of path rooted at a module
    (aliases resolved): the harness resolves them against the real objects at run time."""
    return _visited(path, own).chains


def _format_fields(template):
    """The field names of a str.format template ("0.x", "a[1]", ...), or [] if it is not one."""
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f]
    except ValueError:
        return []


def check(path, own=()):
    """The findings of the policy for one file."""
    return _visited(path, own).found


def main(argv):
    status = 0
    # The exercise's files may import each other.
    own = {os.path.splitext(os.path.basename(p))[0] for p in argv[1:]}
    for path in argv[1:]:
        try:
            found = check(path, own)
        except (OSError, SyntaxError, ValueError) as e:
            print(json.dumps({"file": path, "line": 0, "what": "unreadable", "why": str(e)}))
            status = 1
            continue
        for f in found:
            print(json.dumps(f))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
