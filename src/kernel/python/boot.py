# One-shot bootstrap, the file `python3` runs: the runner (core.py + runner.py) rides below as a
# string. Python compiles a script's code on every start; marshal loads the same code several
# times faster. So the runner is loaded from the code the host hands back beside this file
# (.run-<id>.bin: this interpreter's sys.version, a newline, the marshalled code), or, when there
# is none or it was made by another interpreter, compiled from the string and left there for the
# host to keep for the session's later calls.
import sys


def _kern_runner(src):
    import marshal
    import os

    here = sys.argv[0]
    cache = here[: here.rindex(".")] + ".bin"
    tag = (sys.version + "\n").encode()
    try:
        with open(cache, "rb") as f:
            data = f.read()
        if data.startswith(tag):
            return marshal.loads(memoryview(data)[len(tag) :])
    except Exception:
        pass
    code = compile(src, here, "exec")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(cache, flags, 0o600)
        try:
            os.write(fd, tag + marshal.dumps(code))
        finally:
            os.close(fd)
    except Exception:
        pass
    return code


