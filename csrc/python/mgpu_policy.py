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
import sys

WHY_REACH = "reaches into the checking machinery or the interpreter, which an exercise never needs"
WHY_OS = "works on processes, files or sockets directly; the exercise needs none of that"

# Modules a learner's file may not import at all.
MODULES = {
    "mgpu_harness": "is the course's harness: only the driver uses it",
    "mgpu_policy": "is the course's policy check",
    "ctypes": WHY_REACH, "_ctypes": WHY_REACH, "cffi": WHY_REACH, "gc": WHY_REACH,
    "inspect": WHY_REACH, "importlib": WHY_REACH, "builtins": WHY_REACH,
    "__builtin__": WHY_REACH, "code": WHY_REACH, "codeop": WHY_REACH, "runpy": WHY_REACH,
    "marshal": WHY_REACH, "dis": WHY_REACH, "traceback": WHY_REACH, "sysconfig": WHY_REACH,
    "site": WHY_REACH, "atexit": WHY_REACH, "faulthandler": WHY_REACH, "tracemalloc": WHY_REACH,
    "subprocess": WHY_OS, "socket": WHY_OS, "_socket": WHY_OS, "signal": WHY_OS,
    "multiprocessing": WHY_OS, "posix": WHY_OS, "_posixsubprocess": WHY_OS, "pty": WHY_OS,
    "io": WHY_OS, "_io": WHY_OS, "pathlib": WHY_OS, "mmap": WHY_OS, "shutil": WHY_OS,
    "tempfile": WHY_OS, "fcntl": WHY_OS, "resource": WHY_OS, "select": WHY_OS,
    "selectors": WHY_OS, "asyncio": WHY_OS, "http": WHY_OS, "urllib": WHY_OS,
}

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

# Attribute names that lead to frames, code objects, globals or class internals.
ATTRS = {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next",
         "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "co_code", "py_impl",
         "py_kernels", "_getframe", "library"}
DUNDER_OK = {"__init__", "__name__", "__class__", "__qualname__", "__doc__", "__len__",
             "__call__", "__enter__", "__exit__", "__iter__", "__next__", "__repr__", "__str__",
             "__getitem__", "__setitem__", "__contains__", "__version__", "__file__"}
# Methods a learner's class may define: others change how comparisons, conversions and torch
# dispatch see an object.
DEF_OK = {"__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
          "__enter__", "__exit__", "__getitem__", "__setitem__", "__contains__", "__hash__"}


class Checker(ast.NodeVisitor):
    def __init__(self, path):
        self.path = path
        self.found = []
        self.modules = {}  # local name -> imported module's dotted name

    def flag(self, node, what, why):
        self.found.append({"file": self.path, "line": getattr(node, "lineno", 0), "what": what,
                           "why": why})

    def root_module(self, node):
        """The dotted module an attribute chain starts from, or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.modules:
            return self.modules[node.id], list(reversed(parts))
        return None, None

    def check_module(self, node, name):
        top = name.split(".")[0]
        if top in MODULES:
            self.flag(node, f"import {name}", MODULES[top])
            return False
        return True

    def visit_Import(self, node):
        for a in node.names:
            if self.check_module(node, a.name):
                local = a.asname or a.name.split(".")[0]
                self.modules[local] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level:
            self.flag(node, f"from {'.' * node.level}{mod} import ...",
                      "relative imports reach outside the learner's own file")
            return
        if not self.check_module(node, mod):
            return
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.flag(node, f"from {mod} import *", "a star import hides what is used")
            elif mod == "sys" and a.name not in SYS_OK or mod == "os" and a.name not in OS_OK:
                self.flag(node, f"from {mod} import {a.name}", WHY_REACH if mod == "sys" else WHY_OS)
            elif a.name in MODULES or full in MODULES:
                self.flag(node, f"from {mod} import {a.name}", MODULES.get(a.name, WHY_REACH))
            elif a.name.startswith("__") or a.name in ATTRS:
                self.flag(node, f"from {mod} import {a.name}", WHY_REACH)
            else:
                self.modules[a.asname or a.name] = full
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in BUILTINS and node.id not in self.modules:
            self.flag(node, node.id, BUILTINS[node.id])
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
            if mod == "sys" and parts[0] not in SYS_OK:
                self.flag(node, f"sys.{parts[0]}", WHY_REACH)
            elif mod == "os" and parts[0] not in OS_OK:
                self.flag(node, f"os.{parts[0]}", WHY_OS)
            elif mod == "os" and parts[0] == "path" and len(parts) > 1 and parts[1] not in OS_PATH_OK:
                self.flag(node, f"os.path.{parts[1]}", WHY_OS)
        self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant)
                                          and isinstance(node.args[1].value, str)):
                self.flag(node, node.func.id + "(..., <computed name>)",
                          "looks an attribute up by a computed name, which hides what it reaches")
            elif node.args[1].value.startswith("__") or node.args[1].value in ATTRS:
                self.flag(node, f"{node.func.id}(..., {node.args[1].value!r})", WHY_REACH)
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


def check(path):
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    c = Checker(path)
    c.visit(tree)
    return c.found


def main(argv):
    status = 0
    for path in argv[1:]:
        try:
            found = check(path)
        except (OSError, SyntaxError, ValueError) as e:
            print(json.dumps({"file": path, "line": 0, "what": "unreadable", "why": str(e)}))
            status = 1
            continue
        for f in found:
            print(json.dumps(f))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
