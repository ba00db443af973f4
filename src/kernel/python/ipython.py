# IPython-style cells, for the warm kernels of the E2B entry (the driver's `ipython:net` or
# `ipython:offline` argument turns them on; other kernels never call into this file):
#   !cmd / var = !cmd      a shell command, its output in the cell's stdout (or as a list of lines)
#   %cd, %pwd, %env, %pip  the line magics agents use; an unknown one is a UsageError
#   %%bash / %%sh          the whole cell as a shell script
# plus what E2B's image adds: an image saved with PIL's Image.save(path) is also shown as a
# result, and a pandas DataFrame's result carries its columns as "e2b/data" JSON.
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
    for name in ("_ipy_system", "_ipy_getoutput", "_ipy_magic", "_ipy_cell_magic"):
        setattr(builtins, name, globals()[name])
    sys.meta_path.insert(0, _IpyPilFinder())
    _ipy_wrap_bundle()
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
    return s[:1] in ("!", "%") or "= !" in s or "=!" in s


def _ipy_rewrite(src):
    lines = src.splitlines(True)
    if not any(_ipy_candidate(l) for l in lines):
        return src
    try:
        compile(src, "<cell>", "exec")
        return src  # valid Python as it is
    except SyntaxError:
        pass
    first = lines[0].strip()
    if first.startswith("%%"):
        name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        body = "".join(lines[1:])
        return "_ipy_cell_magic(%r, %r)\n" % (name, body) + "\n" * (len(lines) - 1)
    return "".join(_ipy_line(l) for l in lines)


def _ipy_line(line):
    import re

    end = line[len(line.rstrip("\r\n")):]
    text = line[: len(line) - len(end)]
    body = text.lstrip()
    pad = text[: len(text) - len(body)]
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


def _ipy_cell_magic(name, body):
    if name not in ("bash", "sh"):
        raise UsageError("Cell magic `%%" + name + "` not found.")
    import subprocess

    sys.stdout.flush()
    rc = subprocess.call([_ipy_shell() if name == "bash" else "/bin/sh", "-c", body])
    if rc != 0:  # as IPython's script magics do
        raise subprocess.CalledProcessError(rc, name)


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
    raise UsageError("Line magic function `%" + name + "` not found.")


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


class _IpyPilFinder:
    """Shows every image PIL saves to a path: patches Image.save when PIL.Image is first
    imported, so a kernel that never uses PIL never pays for importing it."""

    def find_spec(self, name, path=None, target=None):
        if name != "PIL.Image":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _ipy_patch_pil(module)

        spec.loader.exec_module = exec_module
        return spec


def _ipy_patch_pil(module):
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
