# One-shot runner: runs /workspace/.cell-<id>.py as `python3 cell.py` would (same stdout, stderr
# and exit status), and writes its rich results to /workspace/.res-<id>.json, one JSON per line.
def _run():
    run_path = sys.argv[0]
    base = run_path[: run_path.rfind("/") + 1]
    uid = run_path[len(base) + len(".run-"): -len(".py")]
    cell = base + ".cell-" + uid + ".py"
    res = base + ".res-" + uid + ".json"
    lines = []
    cap = _Capture(lines.append)
    builtins.display = cap.display
    main = type(sys)("__main__")
    main.__file__ = cell
    main.__builtins__ = builtins
    main.display = cap.display
    sys.modules["__main__"] = main
    sys.argv = [cell]
    _private_dirs()
    exit_with = None
    try:
        with open(cell, "r", encoding="utf-8") as f:
            src = f.read()
        body, tail = _split_tail(src, cell)
        del src
        exec(body, main.__dict__)
        if tail is not None:
            value = eval(tail, main.__dict__)
            if value is not None:
                cap.add(_bundle(value), main=True)
    except SystemExit as e:
        exit_with = e
    except BaseException as e:
        err, text = _error(e, _trimmed_tb(e.__traceback__, cell))
        lines.append('{"error":' + err + "}")
        try:
            sys.stderr.write(text)
        except Exception:
            pass
        exit_with = SystemExit(1)
    cap.figures()
    try:
        import os

        # Never through a link or into a FIFO the cell planted at our path.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with open(os.open(res, flags, 0o600), "w", encoding="utf-8", errors="replace") as f:
            f.write("\n".join(lines))
    except Exception:
        pass
    if exit_with is not None:
        raise exit_with


_run()
