# Shared by the one-shot runner and the warm kernel, and loaded before any user code: how a cell
# is dedented and split into its statements and its trailing expression, which frames of a
# traceback are the user's, private config dirs, and PIL's Image.show() made a display. It
# imports nothing that is not loaded at interpreter start.
import sys
import builtins


def _dedent(src):
    """A cell without the indentation common to all its non-blank lines, as IPython runs code
    sent from an indented string. Lines stay where they are, so line numbers stay the user's."""
    if not src[:1].isspace():
        return src  # the first line starts at column 0: nothing is common
    lines = src.splitlines(True)
    common = None
    for line in lines:
        body = line.lstrip()
        if not body:
            continue
        lead = line[: len(line) - len(body)]
        if common is None:
            common = lead
        else:
            while not lead.startswith(common):
                common = common[:-1]
        if not common:
            return src
    if not common:
        return src
    n = len(common)
    return "".join(line[n:] if line.startswith(common) else line.lstrip(" \t\f") for line in lines)


def _split_tail(src, filename, assigns=None):
    """Compiles a cell: (code for its statements, code for its trailing expression or None).

    The last top-level statement starts at the last column-0 line where the source splits into
    two parts that both compile; it is the trailing expression when it compiles in eval mode.
    This spares the `_ast` import (~1 ms per one-shot call); a last line with a `;` takes the AST
    path, which sees inside the line. A cell ending in `;` has no trailing value, as in IPython
    (`plt.plot(xs);` gives its figure and no `[<Line2D>]`). `assigns(line)`, when given, tells a
    line that is plainly an assignment, whose eval attempt is then skipped."""
    src = _dedent(src)
    lines = src.splitlines(True)
    last = len(lines) - 1
    while last >= 0 and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    if last < 0:
        return compile(src, filename, "exec"), None
    if ";" in lines[last]:
        return _split_tail_ast(src, filename, quiet=lines[last].rstrip().endswith(";"))
    for k in range(last, max(-1, last - 64), -1):
        line = lines[k]
        if not line[:1].strip() or line.startswith("#"):
            continue
        pad = "\n" * k
        tail = pad + "".join(lines[k:])
        try:
            body = compile("".join(lines[:k]), filename, "exec") if k else _EMPTY
        except SyntaxError:
            continue
        word = lines[k].split(None, 1)[0].split("(", 1)[0].rstrip(":")
        if word[:1] != "@" and word not in _STATEMENT_WORDS and not (assigns and assigns(line)):
            try:
                return body, compile(tail, filename, "eval")
            except SyntaxError:
                pass
        try:
            last_stmt = compile(tail, filename, "exec")
        except SyntaxError:
            continue
        # The last statement is no expression; when it is the whole cell it is compiled already.
        return (last_stmt if k == 0 else compile(src, filename, "exec")), None
    return _split_tail_ast(src, filename)


# A line starting with one of these starts a statement, never an expression: no eval attempt.
_STATEMENT_WORDS = frozenset(
    "import from def class if elif else for while with try except finally return del pass raise"
    " global nonlocal assert break continue async".split()
)


_EMPTY = compile("", "<cell>", "exec")


def _split_tail_ast(src, filename, quiet=False):
    import _ast

    tree = compile(src, filename, "exec", _ast.PyCF_ONLY_AST)
    tail = None
    if not quiet and tree.body and type(tree.body[-1]) is _ast.Expr:
        tail = compile(_ast.Expression(body=tree.body.pop().value), filename, "eval")
    return compile(tree, filename, "exec"), tail


def _trimmed_tb(tb, filename):
    """The traceback from the first frame of the user's cell on: no frame of ours shows."""
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return tb


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


# More patches of PIL.Image once it is loaded, each called with the module (ipython.py adds one:
# Image.save shows what it saves): one import hook serves them all.
_PIL_PATCHES = []


class _ImageShow:
    """An import hook for PIL.Image: once the module is loaded, Image.show() displays the image
    as a result (image/png) instead of looking for a viewer the box does not have, as hosted
    notebooks do, and _PIL_PATCHES are applied. Any other import pays one method call."""

    def __init__(self, display):
        self.display = display

    def find_spec(self, name, path=None, target=None):
        if name != "PIL.Image":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec
        display = self.display

        def exec_module(module):
            run(module)
            if getattr(module, "__name__", None) == "PIL.Image":  # a loader may serve others too
                try:
                    module.Image.show = lambda image, *args, **kwargs: display(image)
                except Exception:
                    pass
                for patch in _PIL_PATCHES:
                    patch(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def _show_images_with(display):
    sys.meta_path.insert(0, _ImageShow(display))
