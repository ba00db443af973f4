# One-shot runner: runs /workspace/.cell-<id>.py as `python3 cell.py` would (same stdout, stderr
# and exit status), and writes its rich results to /workspace/.res-<id>.json, one JSON per line.
# What few cells need is in /workspace/.cap-<id>.py: rare.py's helpers first, read and compiled
# when one is called; after _CAP_MARK the capture code, compiled only when a cell has something
# to capture. A plain cell pays for core.py and this file alone.
from _imp import _fix_co_filename

_CAP_MARK = "\n#:kern-capture:\n"
_cap_ns = None
_cap_rest = None
_cap_path = None


class _Got(BaseException):
    """Raised by _try_compile's tracer at the compiled code's first frame, before it runs."""


def _try_compile(src, filename, mode):
    """compile(src, filename, mode), without compile(): CPython's first compile() in a process
    creates the `ast` module's node types (~1 ms in a box) before it compiles anything, and a
    one-shot runner compiles a cell or two. exec/eval of a string compile it the same way without
    that, under the name "<string>"; a tracer takes the code at its first frame, before anything
    runs, and the code (nested ones too) gets the cell's name. A SyntaxError it raises names
    "<string>": fine where it only means "not split here"."""
    got = []

    def take(frame, event, arg):
        got.append(frame.f_code)
        raise _Got

    was = sys.gettrace()
    sys.settrace(take)
    try:
        (eval if mode == "eval" else exec)(src, {"__builtins__": builtins})
    except _Got:
        pass
    finally:
        sys.settrace(was)
    if not got:  # no frame was traced (a tracer we cannot displace): the plain way
        return compile(src, filename, mode)
    code = got[0]
    _fix_co_filename(code, filename)
    return code


def _compile(src, filename, mode):
    """_try_compile, with a SyntaxError as compile() words it for the cell."""
    try:
        return _try_compile(src, filename, mode)
    except SyntaxError:
        pass
    return compile(src, filename, mode)  # raised here, not chained to the first one


def _rare():
    global _cap_ns, _cap_rest
    if _cap_ns is None:
        with open(_cap_path, "r", encoding="utf-8") as f:
            head, _, _cap_rest = f.read().partition(_CAP_MARK)
        ns = {"__name__": "kern_capture", "__builtins__": builtins}
        exec(compile(head, "<kern-capture>", "exec"), ns)
        _cap_ns = ns
    return _cap_ns


def _capture():
    ns = _rare()
    if "cap" not in ns:
        exec(compile(_cap_rest, "<kern-capture>", "exec"), ns)
        ns["cap"] = ns["_Capture"](_lines.append)
    return ns


def _dedent(src):
    return _rare()["_dedent"](src)


def _split_tail_ast(src, filename, quiet=False):
    return _rare()["_split_tail_ast"](src, filename, quiet)


def _trimmed_tb(tb, filename):
    return _rare()["_trimmed_tb"](tb, filename)


def _pil_spec(hook, name, path, target):
    return _rare()["_pil_spec"](hook, name, path, target)


def display(*objs, **kwargs):
    _capture()["cap"].display(*objs, **kwargs)


_lines = []


def _run():
    global _cap_path
    run_path = sys.argv[0]
    base = run_path[: run_path.rfind("/") + 1]
    uid = run_path[len(base) + len(".run-"): -len(".py")]
    cell = base + ".cell-" + uid + ".py"
    res = base + ".res-" + uid + ".json"
    _cap_path = base + ".cap-" + uid + ".py"
    builtins.display = display
    main = type(sys)("__main__")
    main.__file__ = cell
    main.__builtins__ = builtins
    main.display = display
    sys.modules["__main__"] = main
    sys.argv = [cell]
    _private_dirs()
    _show_images_with(display)
    exit_with = None
    try:
        with open(cell, "r", encoding="utf-8") as f:
            src = f.read()
        body, tail = _split_tail(src, cell)
        del src
        # What the interpreter made before the cell (site, the stdlib, this runner) goes to the
        # collector's permanent generation, so the collection of a normal exit skips it: ~1.4 ms
        # of a call in a box. What the cell makes is collected as ever.
        import gc

        gc.freeze()
        exec(body, main.__dict__)
        if tail is not None:
            value = eval(tail, main.__dict__)
            if value is not None:
                _capture()["cap"].value(value, main=True)
    except SystemExit as e:
        exit_with = e
    except BaseException as e:
        tb = _trimmed_tb(e.__traceback__, cell)
        err, text = _capture()["_error"](e, tb)
        _lines.append('{"error":' + err + "}")
        try:
            sys.stderr.write(text)
        except Exception:
            pass
        # Python dies of an uncaught KeyboardInterrupt by SIGINT: 130 as a shell reports it.
        exit_with = SystemExit(130 if isinstance(e, KeyboardInterrupt) else 1)
    if "matplotlib.pyplot" in sys.modules:
        _capture()["cap"].figures()
    if _lines:  # with nothing to hand back, no file: the host reads a missing one as no results
        _write(res)
    if exit_with is not None:
        raise exit_with


def _write(res):
    """The results, one JSON per line, written never through a link or into a FIFO the cell
    planted at our path."""
    try:
        import os

        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(res, flags, 0o600)
        try:
            data = "\n".join(_lines).encode("utf-8", "replace")
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except Exception:
        pass


_run()
