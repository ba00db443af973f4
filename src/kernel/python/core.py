# Shared by the one-shot runner and the warm kernel, and loaded before any user code: how a cell
# is split into its statements and its trailing expression, private config dirs, and the import
# hook that makes PIL's Image.show() a display. A one-shot runner compiles this on every start
# (~0.2 us a byte): what most cells never need is in rare.py, compiled on first use. It imports
# nothing that is not loaded at interpreter start.
import sys
import builtins


def _split_tail(src, filename, assigns=None):
    """Compiles a cell: (code for its statements, code for its trailing expression or None).

    The last top-level statement starts at the last column-0 line where the source splits into
    two parts that both compile; it is the trailing expression when it compiles in eval mode.
    This spares the `_ast` import (~1 ms per one-shot call); a last line with a `;` takes the AST
    path, which sees inside the line. A cell ending in `;` has no trailing value, as in IPython
    (`plt.plot(xs);` gives its figure and no `[<Line2D>]`). `assigns(line)`, when given, tells a
    line that is plainly an assignment, whose eval attempt is then skipped."""
    if src[:1].isspace():
        src = _dedent(src)
    lines = src.splitlines(True)
    last = len(lines) - 1
    while last >= 0 and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    if last < 0:
        return _compile(src, filename, "exec"), None
    if ";" in lines[last]:
        return _split_tail_ast(src, filename, quiet=lines[last].rstrip().endswith(";"))
    for k in range(last, max(-1, last - 64), -1):
        line = lines[k]
        if not line[:1].strip() or line.startswith("#"):
            continue
        pad = "\n" * k
        tail = pad + "".join(lines[k:])
        try:
            body = _try_compile("".join(lines[:k]), filename, "exec") if k else _empty()
        except SyntaxError:
            continue
        word = lines[k].split(None, 1)[0].split("(", 1)[0].rstrip(":")
        if word[:1] != "@" and word not in _STATEMENT_WORDS and not (assigns and assigns(line)):
            try:
                return body, _try_compile(tail, filename, "eval")
            except SyntaxError:
                pass
        try:
            last_stmt = _try_compile(tail, filename, "exec")
        except SyntaxError:
            continue
        # The last statement is no expression; when it is the whole cell it is compiled already.
        return (last_stmt if k == 0 else _compile(src, filename, "exec")), None
    return _split_tail_ast(src, filename)


# A line starting with one of these starts a statement, never an expression: no eval attempt.
_STATEMENT_WORDS = frozenset(
    "import from def class if elif else for while with try except finally return del pass raise"
    " global nonlocal assert break continue async".split()
)


# How the split compiles: `_try_compile` where a SyntaxError only means "not split here", `_compile`
# where it is the cell's own error. The builtin here (the warm kernel's); the one-shot runner
# replaces both with a faster way for a process that compiles only a cell or two.
_try_compile = _compile = compile
_EMPTY = []  # the empty cell's code, compiled on first use


def _empty():
    if not _EMPTY:
        _EMPTY.append(_compile("", "<cell>", "exec"))
    return _EMPTY[0]


def _private_dirs():
    """matplotlib and friends want a writable config/cache dir; a read-only box has none, and
    they would print a warning and make temp dirs in the workspace. Point them at private ones."""
    import os

    home = os.path.expanduser("~")
    if os.access(home, os.W_OK):
        return
    for base in ("/dev/shm", "/tmp", "/run/user"):
        if os.access(base, os.W_OK):
            root = base + "/.kern-sandbox-" + str(os.getuid())
            try:
                os.makedirs(root, mode=0o700, exist_ok=True)
            except OSError:
                continue
            os.environ.setdefault("MPLCONFIGDIR", root + "/matplotlib")
            os.environ.setdefault("XDG_CACHE_HOME", root + "/cache")
            os.environ.setdefault("XDG_CONFIG_HOME", root + "/config")
            return


class _ImageShow:
    """An import hook for PIL.Image: once the module is loaded, Image.show() displays the image
    as a result (image/png) instead of looking for a viewer the box does not have, as hosted
    notebooks do, and _PIL_PATCHES are applied. Any other import pays one method call."""

    def __init__(self, display):
        self.display = display

    def find_spec(self, name, path=None, target=None):
        if name != "PIL.Image":
            return None
        return _pil_spec(self, name, path, target)


def _show_images_with(display):
    sys.meta_path.insert(0, _ImageShow(display))
