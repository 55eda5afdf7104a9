"""mgpu-learn's warm rank zygote (docs/runtime.md, "Warm Python ranks").

A Python rank spends most of its start importing torch. This program imports the modules named
on its command line (torch, torch.distributed, torch._dynamo) once, then forks a rank for every
request mgpu-learn sends, so the rank starts with torch already loaded. It never runs course or learner
code itself, never initializes CUDA (a forked CUDA context is unusable), and every rank is a
fresh fork of a process that did nothing but those imports.

    python mgpu_zygote.py <fd> <module>...

A module named "?name" is optional: imported if it can be, skipped if its import fails.

<fd> is one end of a SOCK_SEQPACKET socket pair that mgpu-learn (the parent) made. Messages
are JSON, one per datagram:

  zygote -> mgpu-learn
    {"t": "hello", "pid", "python", "executable", "files", "threads", "error"}   once, first
    {"t": "forked", "id", "pid"}            the rank runs (its setup succeeded)
    {"t": "refused", "id", "msg"}           no rank was started for this request
    {"t": "exit", "pid", "status"}          a rank ended; status is the raw wait status
  mgpu-learn -> zygote
    {"t": "fork", "id", "argv", "env", "cwd"} with one descriptor (SCM_RIGHTS): the rank's
                                            stdout and stderr

argv is ["python", "/path/driver.py", args...]; env is the rank's whole environment; the
rank leads a process group of its own, like a rank mgpu-learn starts itself. When the socket
closes, the zygote kills the ranks it still has and exits.
"""

import os
import sys


def _serve():
    """Imports the preloads and serves fork requests. Returns only in a forked rank, with the
    path of the script that rank must run."""
    import ctypes
    import importlib
    import json
    import select
    import signal
    import socket
    import struct
    import warnings

    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    # The socket pair was made by mgpu-learn, our parent; refuse to serve anyone else.
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    peer = struct.unpack("3i", creds)[0]
    if peer != os.getppid():
        os._exit(3)

    # The zygote's own directory is never on a rank's path.
    script_dir = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == script_dir:
        del sys.path[0]
    base_path = list(sys.path)

    def send(msg):
        sock.send(json.dumps(msg).encode())

    error = ""
    files = []
    for name in sys.argv[2:]:
        # "?name": imported where it can be (a module torch imports on first use, such as
        # torch._dynamo on an optimizer's creation); one that fails is left to the rank.
        optional = name.startswith("?")
        name = name.lstrip("?")
        try:
            mod = importlib.import_module(name)
            f = getattr(mod, "__file__", None)
            if f:
                files.append(os.path.abspath(f))
        except Exception as e:  # noqa: BLE001 - reported, then we exit
            if optional:
                continue
            error = f"import {name}: {type(e).__name__}: {e}"
            break
        except BaseException as e:  # noqa: BLE001 - reported, then we exit
            error = f"import {name}: {type(e).__name__}: {e}"
            break
    if not error:
        error = _unfit()
    send({"t": "hello", "pid": os.getpid(), "python": sys.version, "executable": sys.executable,
          "files": files, "threads": _os_threads(), "error": error})
    if error:
        os._exit(0)

    libc = ctypes.CDLL(None, use_errno=True)
    me = os.getpid()
    children = set()

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)

    def reap():
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                return
            if pid == 0:
                return
            children.discard(pid)
            try:
                send({"t": "exit", "pid": pid, "status": status})
            except OSError:
                pass

    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        readable = False
        for rfd, _ in poller.poll():
            if rfd == wake_r:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
            else:
                readable = True
        reap()
        if not readable:
            continue
        try:
            msg, fds = _recv(sock)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            msg, fds = b"", []
        if not msg:
            break  # mgpu-learn closed its end
        try:
            req = json.loads(msg)
        except ValueError:
            for f in fds:
                os.close(f)
            continue
        rid = req.get("id")
        why = _unfit()
        if len(fds) != 1:
            why = why or f"{len(fds)} descriptors came with the request, want 1"
        if why:
            for f in fds:
                os.close(f)
            send({"t": "refused", "id": rid, "msg": why})
            continue
        out = fds[0]
        sys.stdout.flush()
        sys.stderr.flush()
        status_r, status_w = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12 warns about fork() with native threads (OpenBLAS's pool, which
            # shuts itself down around fork); the warning would only reach our own stderr.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            # The rank. Nothing of the zygote may survive into it but the imports.
            try:
                os.close(status_r)
                script = _become(req, out, status_w, sock, wake_r, wake_w, base_path, libc, me)
                os.write(status_w, b"ok")
                os.close(status_w)
            except BaseException as e:  # noqa: BLE001
                try:
                    os.write(status_w, f"{type(e).__name__}: {e}".encode()[:4000])
                finally:
                    os._exit(127)
            return script
        os.close(status_w)
        os.close(out)
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        except OSError:
            pass
        children.add(pid)
        said = b""
        while True:
            chunk = os.read(status_r, 4096)
            if not chunk:
                break
            said += chunk
        os.close(status_r)
        if said == b"ok":
            send({"t": "forked", "id": rid, "pid": pid})
        else:
            send({"t": "refused", "id": rid,
                  "msg": "the rank's set-up failed: " + (said.decode(errors="replace") or "it died")})
    # mgpu-learn is gone or done with us: so are the ranks.
    for pid in list(children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in list(children):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    os._exit(0)


def _recv(sock):
    """One request and its descriptors, without blocking (socket.recv_fds ignores its flags
    before Python 3.13)."""
    import array
    import socket
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize), socket.MSG_DONTWAIT)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return msg, list(fds)


def _os_threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _unfit():
    """Why forking now would not give a clean rank, or ""."""
    import threading
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads are running in the zygote"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialized in the zygote"
    return ""


def _become(req, out, status_w, sock, wake_r, wake_w, base_path, libc, zygote):
    """Turns the forked child into the rank `python <script> <args>` would have started."""
    import ctypes
    import signal

    os.setpgid(0, 0)
    # Die with the zygote (PR_SET_PDEATHSIG = 1), and if it is already gone, now.
    if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != zygote:
        raise OSError("the zygote died while the rank started")
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    sock.close()
    os.close(wake_r)
    os.close(wake_w)
    os.dup2(out, 1)
    os.dup2(out, 2)
    if out > 2:
        os.close(out)
    # Every other descriptor the zygote had (none should be open) goes.
    os.closerange(3, status_w)
    os.closerange(status_w + 1, 1 << 20)

    argv = [str(a) for a in req["argv"]]
    if len(argv) < 2:
        raise ValueError("argv names no script")
    env = {}
    for kv in req["env"]:
        k, sep, v = kv.partition("=")
        if sep and k:
            env[k] = v
    # The environment is replaced whole, in Python's view and the C library's.
    os.environ.clear()
    libc.clearenv()
    os.environ.update(env)
    os.chdir(req["cwd"])

    script = argv[1]
    real = script
    for _ in range(40):  # CPython resolves a symlinked script before taking its directory
        if not os.path.islink(real):
            break
        target = os.readlink(real)
        real = target if os.path.isabs(target) else os.path.join(os.path.dirname(real), target)
    path = [os.path.dirname(os.path.abspath(real))]
    for p in env.get("PYTHONPATH", "").split(os.pathsep):
        if p:
            path.append(os.path.abspath(p))
    seen = set()
    sys.path[:] = [p for p in path + base_path if not (p in seen or seen.add(p))]
    sys.path_importer_cache.clear()
    import importlib
    importlib.invalidate_caches()
    sys.argv[:] = argv[1:]
    sys.orig_argv = list(argv)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))

    # Per-process secrets a fresh interpreter draws at import, which a fork would share
    # (random reseeds itself at fork).
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()
    mp_process = sys.modules.get("multiprocessing.process")
    if mp_process is not None:
        mp_process.current_process().authkey = os.urandom(32)
    return script


if __name__ == "__main__":
    _script = _serve()
    del _serve, _become, _unfit, _os_threads, _recv
    import runpy
    runpy.run_path(_script, run_name="__main__")
