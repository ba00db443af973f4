# Warm kernel driver: one resident interpreter serving cells over the box's stdin/stdout.
#
# Frames both ways are a kind byte, a little-endian u32 length and the payload.
#   host -> box:  c <cell source, UTF-8>
#   box -> host:  R (ready)  o/e <stdout/stderr bytes>  r <result JSON>  x <error JSON>  d <exit status>
# The control fds are private: user fd 0 is /dev/null, fd 1/2 are pipes this driver drains, so raw
# writes, C extensions and subprocesses land in the cell's output and cannot desync the protocol.
# An interrupt is SIGINT sent by the host to this main thread; it is blocked outside cells.
import io
import os
import select
import signal
import struct
import threading

_HDR = struct.Struct("<BI")
_ctrl_in = os.dup(0)
_ctrl_out = os.dup(1)
os.set_inheritable(_ctrl_in, False)
os.set_inheritable(_ctrl_out, False)
_fd = os.open(os.devnull, os.O_RDONLY)
os.dup2(_fd, 0)
os.close(_fd)
_pipes = {}
for _n, _kind in ((1, ord("o")), (2, ord("e"))):
    _r, _w = os.pipe()
    os.dup2(_w, _n)
    os.close(_w)
    os.set_blocking(_r, False)
    os.set_inheritable(_r, False)
    _pipes[_r] = _kind
_wlock = threading.Lock()  # one frame at a time on the control channel
_rlock = threading.Lock()  # one reader of the raw-output pipes at a time
_forked = False  # set in the child of a fork (_after_fork_child): cheaper than getpid() per frame
_SIGINT = {signal.SIGINT}
_sent = 0  # frames sent so far, to tell a compile that wrote a warning


def _send(kind, payload=b""):
    global _sent
    if _forked:
        return
    _sent += 1
    view = memoryview(_HDR.pack(kind, len(payload)) + payload)
    # A frame of at most PIPE_BUF bytes goes out in one write, whole; a larger one takes several,
    # and a KeyboardInterrupt between them would leave half a frame: SIGINT waits until it is out.
    whole = len(view) <= 4096
    with _wlock:
        if not whole:
            old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        try:
            while view:
                view = view[os.write(_ctrl_out, view):]
        finally:
            if not whole:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _FrameWriter(io.RawIOBase):
    """sys.stdout/sys.stderr: each write goes out as a frame at once (live, no extra hop)."""

    def __init__(self, kind, fd):
        self.kind, self.fd = kind, fd

    def writable(self):
        return True

    def fileno(self):
        return self.fd

    def write(self, b):
        n = len(b)
        if n:
            if not _forked:
                with _rlock:  # raw output written before this write goes out first
                    _drain_pipes()
                    _send(self.kind, bytes(b))
            else:  # a forked child: its output goes through the pipe like any subprocess's
                os.write(self.fd, b)
        return n


def _text(kind, fd):
    return io.TextIOWrapper(_FrameWriter(kind, fd), encoding="utf-8", errors="backslashreplace",
                            line_buffering=False, write_through=True)


_waiting = select.poll()
for _r in _pipes:
    _waiting.register(_r, select.POLLIN)


def _drain_pipes():
    """Forwards what raw fd 1/2 writes are waiting; called under _rlock. One poll(0) when
    nothing waits, which is the common case."""
    for r, _ in _waiting.poll(0):
        kind = _pipes[r]
        while True:
            try:
                chunk = os.read(r, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            _send(kind, chunk)


def _pump():
    poll = select.poll()
    for r in _pipes:
        poll.register(r, select.POLLIN)
    while True:
        try:
            poll.poll()
        except InterruptedError:
            continue
        with _rlock:
            _drain_pipes()


def _after_fork_child():
    # The child of a cell's fork: never touch the control channel; print through the pipes.
    global _forked
    _forked = True
    try:
        os.close(_ctrl_in)
        os.close(_ctrl_out)
    except OSError:
        pass


os.register_at_fork(after_in_child=_after_fork_child)


# Given to _split_tail (core.py) as its test for lines that are plainly assignments: a failed eval
# attempt costs a SyntaxError, most of a small cell's compile time. The one-shot runner goes
# without: it compiles its code on every call, and the test would cost it more than it saves.
def _assigns(line):
    """True for `name = …`, `a.b += …`, `a[i] = …`: an assignment, never an expression. False
    when unsure (`a, b = …`, `x: int = …`, `==`, `<=`): the eval attempt then decides."""
    i = line.find("=")
    if i <= 0 or line[i + 1:i + 2] == "=":
        return False
    target = line[:i].rstrip()
    if target[-2:] in ("<<", ">>", "**", "//"):
        target = target[:-2]
    elif target[-1:] in ("<", ">", "!"):
        return False
    elif target[-1:] and target[-1] in "+-*/%&|^@":
        target = target[:-1]
    target = target.rstrip()
    if target.endswith("]"):
        target = target[:target.find("[")] if "[" in target else ""
    return target.replace(".", "").isidentifier()


# Compiled cells by their source: a notebook runs a cell again, an agent retries or polls with the
# same code, and compiling is most of what a small cell costs the driver. A cell found here is only
# renamed to its own <cell-N>, so tracebacks, linecache and warnings read as if it was compiled
# anew.
_compiled = {}
_COMPILED_ENTRIES = 64
_COMPILED_SOURCE_MAX = 16 * 1024
_CodeType = type(_empty())


def _renamed(code, name):
    """code, and every code object nested in it, with the file name `name`."""
    consts = code.co_consts
    if any(type(c) is _CodeType for c in consts):
        consts = tuple(_renamed(c, name) if type(c) is _CodeType else c for c in consts)
        return code.replace(co_filename=name, co_consts=consts)
    return code.replace(co_filename=name)


def _compile_cell(src, name):
    """_split_tail's (code, tail) for a cell, from the cells compiled before when it is one of
    them. A compile that wrote anything (a SyntaxWarning) is not kept, so the cell run again warns
    again."""
    got = _compiled.get(src)
    if got is not None:
        code, tail = got
        return _renamed(code, name), None if tail is None else _renamed(tail, name)
    sent = _sent
    got = _split_tail(src, name, _assigns)
    if len(src) <= _COMPILED_SOURCE_MAX and _sent == sent:
        if len(_compiled) >= _COMPILED_ENTRIES:
            del _compiled[next(iter(_compiled))]
        _compiled[src] = got
    return got


_inbuf = bytearray()


def _read_exact(n):
    """n bytes of the control channel, read in large chunks (a cell is usually one read)."""
    while len(_inbuf) < n:
        try:
            chunk = os.read(_ctrl_in, max(1 << 16, n - len(_inbuf)))
        except InterruptedError:
            continue
        if not chunk:
            return None
        _inbuf.extend(chunk)
    data = bytes(_inbuf[:n])
    del _inbuf[:n]
    return data


def _serve():
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    threading.Thread(target=_pump, daemon=True).start()  # inherits the blocked SIGINT
    sys.stdout = _text(ord("o"), 1)
    sys.stderr = _text(ord("e"), 2)
    sys.stdin = open(os.devnull, "r")
    _private_dirs()
    mode = sys.argv[1] if len(sys.argv) > 2 else ""  # argv: -c [mode] <marker>
    hook = _ipython(mode) if mode.startswith("ipython:") else None  # the E2B entry's cells
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [""]
    sys.path[0] = os.getcwd()
    emit = lambda s: _send(ord("r"), s.encode("utf-8", "replace"))
    cap = _Capture(emit)
    builtins.display = cap.display
    main.display = cap.display
    _show_images_with(cap.display)
    import linecache

    _send(ord("R"))
    count = 0
    while True:
        head = _read_exact(_HDR.size)
        if head is None:
            return
        kind, n = _HDR.unpack(head)
        body = _read_exact(n)
        if body is None or kind != ord("c"):
            return
        count += 1
        name = "<cell-%d>" % count
        src = body.decode("utf-8", "replace")
        after = None
        if hook is not None:
            src, after = hook(src)
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        rc = 0
        if signal.SIGINT in signal.sigpending():
            signal.sigtimedwait(_SIGINT, 0)  # a late interrupt meant for the previous cell
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
        try:
            try:
                code, tail = _compile_cell(src, name)
                exec(code, main.__dict__)
                if tail is not None:
                    value = eval(tail, main.__dict__)
                    if value is not None:
                        main.__dict__["_"] = value
                        cap.value(value, main=True)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        except SystemExit as e:
            c = e.code
            rc = c if isinstance(c, int) else 0 if c is None else 1
            if not isinstance(c, (int, type(None))):
                sys.stderr.write(str(c) + "\n")
        except BaseException as e:
            err, text = _error(e, _trimmed_tb(e.__traceback__, name))
            if hook is None:  # IPython-style cells report it as the error only, as Jupyter does
                sys.stderr.write(text)
            _send(ord("x"), err.encode("utf-8", "replace"))
            rc = 1
        if _forked:
            os._exit(rc)  # a forked child that fell out of the cell must not serve
        if after is not None:
            after()
        cap.figures()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        with _rlock:
            _drain_pipes()
        _send(ord("d"), str(rc).encode())


_serve()
