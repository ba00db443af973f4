# IPython-style cells, for the warm kernels of the E2B entry (the driver's `ipython:net` or
# `ipython:offline` argument turns them on; other kernels never call into this file):
#   !cmd / var = !cmd      a shell command, its output in the cell's stdout (or as a list of lines)
#   %cd, %pwd, %env, %pip, %time, the shell aliases (%ls, %cat, ...), and the notebook setup
#   magics as no-ops (%matplotlib, %config, ...); an unknown one is a UsageError
#   %%bash / %%sh, %%writefile, %%html, %%time   the whole cell
# plus what E2B's image adds: an image saved with PIL's Image.save(path) is also shown as a
# result, a pandas DataFrame's result carries its columns as "e2b/data" JSON, and a figure shown
# at the end of a cell carries its repr as text/plain (Jupyter's display_data).
# A cell is rewritten line for line, so tracebacks keep their line numbers, and only when it does
# not compile as Python: a `!` or `%` inside a string literal is never touched.


class UsageError(Exception):
    """A magic used wrongly, or one this kernel does not have (IPython's name for it)."""


_ipy_offline = False
_ipy_envs_next = None  # the environment a hidden `#%kern-envs` cell set for the next cell


def _ipython(mode):
    """Turns IPython-style cells on; returns the driver's per-cell hook: src -> (src, after)."""
    global _ipy_offline
    _ipy_offline = mode == "ipython:offline"
    for name in ("_ipy_system", "_ipy_getoutput", "_ipy_magic", "_ipy_cell_magic", "_ipy_bash"):
        setattr(builtins, name, globals()[name])
    _PIL_PATCHES.append(_ipy_patch_pil)  # core.py's PIL import hook applies it
    _ipy_wrap_bundle()
    _ipy_wrap_shown_figure()
    return _ipy_cell


def _ipy_cell(src):
    global _ipy_envs_next
    if src.startswith("#%kern-envs "):
        # Hidden cell: the E2B entry's per-execution `envs`, applied to the next cell only.
        import json

        try:
            envs = json.loads(src[len("#%kern-envs "):])
            _ipy_envs_next = envs if isinstance(envs, dict) else None
        except ValueError:
            pass
        return "", None
    after = None
    if _ipy_envs_next is not None:
        after = _ipy_apply_envs(_ipy_envs_next)
        _ipy_envs_next = None
    try:
        return _ipy_rewrite(src), after
    except Exception:  # never let a rewrite failure reach the driver: run the cell as given
        return src, after


def _ipy_apply_envs(envs):
    import os

    saved = {k: os.environ.get(k) for k in envs}
    os.environ.update({str(k): str(v) for k, v in envs.items()})

    def restore():
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    return restore


def _ipy_candidate(line):
    s = line.lstrip()
    return s[:1] in ("!", "%") or "= !" in s or "=!" in s or s.split(" ", 1)[0] in _ipy_AUTOMAGIC


# Magics IPython also takes without their `%` (automagic): `pip install x`, `cd /tmp`, `ls -la`.
_ipy_AUTOMAGIC = frozenset(("pip", "cd", "env", "ls", "cat", "mkdir", "rm", "cp", "mv"))


def _ipy_automagic(body):
    """`%body` when `body` is an automagic line, else None: its first word names a magic, the
    cell's namespace has no such name, and the rest is an argument, not `= …`, `(…)`, `.x`, `[…]`."""
    name, _, rest = body.partition(" ")
    if name not in _ipy_AUTOMAGIC or not rest.strip():
        return None
    if name in sys.modules["__main__"].__dict__ or hasattr(builtins, name):
        return None
    r = rest.lstrip()
    if r[:1] in ("(", "[", ".", ",", ":", ";") or (r[:1] == "=" and r[:2] != "=="):
        return None
    if r[:2] in ("+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=") or r[:3] in ("//=", "**=", ">>=", "<<="):
        return None
    return "%" + body


def _ipy_rewrite(src):
    lines = src.splitlines(True)
    if not any(_ipy_candidate(l) for l in lines):
        return src
    try:
        compile(src, "<cell>", "exec")
    except SyntaxError:
        pass
    else:  # valid Python as it is: only its automagic lines (`cd /tmp` compiles, as a division)
        if not any(_ipy_automagic(l.strip()) for l in lines):
            return src
        inside = _ipy_string_lines(src)
        return "".join(l if i in inside else _ipy_line(l, automagic_only=True) for i, l in enumerate(lines, 1))
    first = lines[0].strip()
    if first.startswith("%%"):
        body = "".join(lines[1:])
        return "_ipy_cell_magic(%r, %r)\n" % (first[2:].strip(), body) + "\n" * (len(lines) - 1)
    inside = _ipy_string_lines(src)
    return "".join(l if i in inside else _ipy_line(l) for i, l in enumerate(lines, 1))


def _ipy_string_lines(src):
    """The lines (1-based) that continue a multi-line string literal: never rewritten."""
    import io
    import tokenize

    inside = set()
    opened = []  # start rows of the f-strings being read (3.12 tokenizes them in parts)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            name = tokenize.tok_name[tok.type]
            if name == "FSTRING_START":
                opened.append(tok.start[0])
            elif name == "FSTRING_END" and opened:
                inside.update(range(opened.pop() + 1, tok.end[0] + 1))
            elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # what was read so far stands
    return inside


def _ipy_line(line, automagic_only=False):
    import re

    end = line[len(line.rstrip("\r\n")):]
    text = line[: len(line) - len(end)]
    body = text.lstrip()
    pad = text[: len(text) - len(body)]
    magic = _ipy_automagic(body)
    if automagic_only and magic is None:
        return line
    body = magic or body
    if body.startswith("!"):
        return "%s_ipy_system(%r)%s" % (pad, body[1:], end)
    if body.startswith("%") and not body.startswith("%%"):
        name, _, arg = body[1:].partition(" ")
        return "%s_ipy_magic(%r, %r)%s" % (pad, name, arg.strip(), end)
    m = re.match(r"([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*!(.*)$", body)
    if m:
        return "%s%s = _ipy_getoutput(%r)%s" % (pad, m.group(1), m.group(2), end)
    return line


def _ipy_expand(cmd):
    """IPython's expansion of `{expr}` and `$name` from the user's namespace (`$$` is `$`)."""
    import re

    ns = sys.modules["__main__"].__dict__

    def expr(m):
        try:
            return str(eval(m.group(1), ns))
        except Exception:
            return m.group(0)

    def var(m):
        if m.group(0) == "$$":
            return "$"
        return str(ns[m.group(1)]) if m.group(1) in ns else m.group(0)

    cmd = re.sub(r"\{([^{}]+)\}", expr, cmd)
    return re.sub(r"\$\$|\$([A-Za-z_]\w*)", var, cmd)


def _ipy_shell():
    import os

    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def _ipy_system(cmd):
    """`!cmd`: runs in a shell; its output goes straight to the cell's stdout and stderr."""
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    subprocess.call(_ipy_expand(cmd), shell=True, executable=_ipy_shell())


def _ipy_getoutput(cmd):
    """`var = !cmd`: the command's stdout as a list of lines."""
    import subprocess

    r = subprocess.run(_ipy_expand(cmd), shell=True, executable=_ipy_shell(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return r.stdout.decode("utf-8", "replace").splitlines()


def _ipy_cell_magic(line, body):
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    if name in ("bash", "sh"):
        import subprocess

        sys.stdout.flush()
        rc = subprocess.call([_ipy_shell() if name == "bash" else "/bin/sh", "-c", body])
        if rc != 0:  # as IPython's script magics do
            raise subprocess.CalledProcessError(rc, name)
        return None
    if name == "writefile":
        append = arg.startswith("-a ")
        path = _ipy_expand(arg[3:].strip() if append else arg)
        import os

        existed = os.path.exists(path)
        with open(os.path.expanduser(path), "a" if append else "w") as f:
            f.write(body)
        print("%s %s" % ("Appending to" if append else "Overwriting" if existed else "Writing", path))
        return None
    if name == "html":
        builtins.display({"text/html": body, "text/plain": "<IPython.core.display.HTML object>"}, raw=True)
        return None
    if name == "time":
        return _ipy_time(body, "exec")
    raise UsageError("Cell magic `%%" + name + "` not found.")


class _IpyBash:
    """The shell of a bash context: one bash for all its cells, so variables, functions and the
    working directory carry from cell to cell. Its output goes straight to the cell's stdout and
    stderr; it reports each cell's exit status on a private pipe."""

    def __init__(self):
        self.proc = None
        self.status = None

    def start(self):
        import os
        import subprocess

        r, w = os.pipe()
        self.proc = subprocess.Popen([_ipy_shell()], stdin=subprocess.PIPE, pass_fds=(w,), start_new_session=True)
        os.close(w)
        self.status = os.fdopen(r, "rb", buffering=0)
        self.fd = w

    def run(self, body, envs):
        import os
        import shlex
        import subprocess

        if self.proc is None or self.proc.poll() is not None:
            self.start()
        end = "KERN_CELL_" + os.urandom(8).hex()
        # This cell's envs: set around it, then the shell's own values put back.
        names = [k for k in envs if k.isidentifier()]
        before = "".join('__kern_%d="${%s-%s}"; export %s=%s; ' % (i, k, end, k, shlex.quote(str(envs[k])))
                         for i, k in enumerate(names))
        after = "".join('if [ "$__kern_%d" = %s ]; then unset %s; else export %s="$__kern_%d"; fi; unset __kern_%d; '
                        % (i, end, k, k, i, i) for i, k in enumerate(names))
        script = "%seval \"$(cat <<'%s'\n%s\n%s\n)\" </dev/null; __kern_rc=$?; %secho $__kern_rc >&%d\n" % (
            before, end, body, end, after, self.fd)
        sys.stdout.flush()
        try:
            self.proc.stdin.write(script.encode("utf-8", "surrogateescape"))
            self.proc.stdin.flush()
            line = b""
            while not line.endswith(b"\n"):
                chunk = self.status.read(1)
                if not chunk:  # the shell exited (`exit` in the cell)
                    rc = self.proc.wait()
                    self.proc = None
                    break
                line += chunk
            else:
                rc = int(line)
        except KeyboardInterrupt:
            self.stop()
            raise
        if rc != 0:
            raise subprocess.CalledProcessError(rc, "bash")

    def stop(self):
        import os
        import signal

        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None


_ipy_bash_shell = _IpyBash()


def _ipy_bash(body, envs=None):
    """A bash context's cell, in its one long-lived shell, with this cell's `envs`."""
    _ipy_bash_shell.run(body, envs or {})


def _ipy_time(src, mode):
    """`%time` / `%%time`: runs the code in the user's namespace and prints how long it took."""
    import time

    ns = sys.modules["__main__"].__dict__
    code = compile(src, "<timed>", mode)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        return eval(code, ns) if mode == "eval" else exec(code, ns)
    finally:
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print("CPU times: total: %.3g s\nWall time: %.3g s" % (cpu, wall))


def _ipy_magic(name, arg):
    import os

    if name == "cd":
        target = os.path.expanduser(_ipy_expand(arg)) if arg else _ipy_home
        os.chdir(target)
        print(os.getcwd())
        return None
    if name == "pwd":
        return os.getcwd()
    if name == "env":
        return _ipy_env(_ipy_expand(arg))
    if name == "pip":
        return _ipy_pip(_ipy_expand(arg))
    if name == "time":
        try:
            compile(arg, "<timed>", "eval")
            return _ipy_time(arg, "eval")
        except SyntaxError:
            return _ipy_time(arg, "exec")
    if name in _ipy_NOOP:
        return None  # figures are captured at the end of every cell whatever the backend
    if name in _ipy_ALIASES:
        return _ipy_system(name + (" " + arg if arg else ""))
    raise UsageError("Line magic function `%" + name + "` not found.")


# Notebook setup magics that change nothing here.
_ipy_NOOP = frozenset(("matplotlib", "config", "load_ext", "reload_ext", "autoreload"))
# IPython's default shell aliases on Linux.
_ipy_ALIASES = frozenset(("ls", "cat", "cp", "mv", "rm", "rmdir", "mkdir", "ln", "lf", "ll", "lk", "lx", "ldir", "clear", "less", "man"))


def _ipy_env(arg):
    import os

    if not arg:
        return dict(os.environ)
    if "=" in arg or " " in arg.strip():
        key, _, value = arg.partition("=") if "=" in arg else arg.partition(" ")
        key, value = key.strip(), value.strip()
        os.environ[key] = value
        print("env: %s=%s" % (key, value))
        return None
    if arg not in os.environ:
        raise UsageError("Environment does not have key: " + arg)
    return os.environ[arg]


def _ipy_pip(arg):
    """`%pip install …` into the workspace's .deps (on sys.path); needs the network."""
    import os
    import shlex
    import subprocess

    words = shlex.split(arg)
    if words[:1] == ["install"] and _ipy_offline:
        sys.stderr.write(
            "ERROR: %pip install needs network access, and this sandbox has none "
            "(it was created with allowInternetAccess: false).\n")
        return None
    if words[:1] == ["install"]:
        deps = _ipy_deps_dir()
        os.makedirs(deps, exist_ok=True)
        words = ["install", "--target", deps, "--disable-pip-version-check", "--no-cache-dir"] + words[1:]
    sys.stdout.flush()
    subprocess.call([sys.executable, "-m", "pip"] + words)
    import importlib

    importlib.invalidate_caches()
    print("Note: you may need to restart the kernel to use updated packages.")
    return None


def _ipy_deps_dir():
    import os

    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p.endswith("/.deps"):
            return p
    return os.path.join(_ipy_home, ".deps")


_ipy_home = __import__("os").getcwd()  # the workspace: `%cd` with no argument goes back here


def _ipy_patch_pil(module):
    """Shows every image PIL saves to a path: Image.save patched once PIL.Image is first
    imported, so a kernel that never uses PIL never pays for importing it."""
    import os

    plain = module.Image.save

    def save(self, fp, format=None, **params):
        out = plain(self, fp, format, **params)
        if isinstance(fp, (str, bytes, os.PathLike)):
            try:
                builtins.display(self)
            except Exception:
                pass
        return out

    save.__doc__ = plain.__doc__
    module.Image.save = save


def _ipy_wrap_shown_figure():
    """A figure shown at the end of a cell carries its repr as text/plain too, as Jupyter's
    display_data does (E2B's Result.text: "<Figure size 640x480 with 1 Axes>")."""
    global _shown_figure
    plain = _shown_figure

    def shown(fig, png):
        data = plain(fig, png)
        try:
            data["text/plain"] = repr(fig)
        except Exception:
            pass
        return data

    _shown_figure = shown


def _ipy_wrap_bundle():
    """A pandas DataFrame's bundle also carries its columns (E2B's `data`) as "e2b/data"."""
    global _bundle
    plain = _bundle

    def bundle(o, include=None, exclude=None):
        data = plain(o, include, exclude)
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(o, pd.DataFrame):
            try:
                data["e2b/data"] = _ipy_frame_json(o, pd)
            except Exception:
                pass
        return data

    _bundle = bundle


def _ipy_frame_json(df, pd):
    import json
    import math

    def cell(v):
        if isinstance(v, pd.Timestamp):
            return v.isoformat()
        if hasattr(v, "item"):  # numpy scalars
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v if isinstance(v, (str, int, float, bool, type(None))) else str(v)

    cols = {str(k): [cell(v) for v in vs] for k, vs in df.to_dict(orient="list").items()}
    return json.dumps(cols, allow_nan=False)
