# Shared by the one-shot runner and the warm kernel, and loaded before any user code: how a cell
# is split into its statements and its trailing expression, which frames of a traceback are the
# user's, and private config dirs. It imports nothing that is not loaded at interpreter start.
import sys
import builtins


def _split_tail(src, filename):
    """Compiles a cell: (code for its statements, code for its trailing expression or None).

    The last top-level statement starts at the last column-0 line where the source splits into
    two parts that both compile; it is the trailing expression when it compiles in eval mode.
    This spares the `_ast` import (~1 ms per one-shot call); a last line with a `;` takes the AST
    path, which sees inside the line."""
    lines = src.splitlines(True)
    last = len(lines) - 1
    while last >= 0 and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    if last < 0:
        return compile(src, filename, "exec"), None
    if ";" in lines[last]:
        return _split_tail_ast(src, filename)
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
        if word[:1] != "@" and word not in _STATEMENT_WORDS and not (_assigns and _assigns(line)):
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


# The warm kernel's test for lines that are plainly assignments (kernel.py): a failed eval attempt
# costs a SyntaxError, most of a small cell's compile time. The one-shot runner goes without: it
# compiles this file on every call, and the test would cost it more than it saves.
_assigns = None


def _split_tail_ast(src, filename):
    import _ast

    tree = compile(src, filename, "exec", _ast.PyCF_ONLY_AST)
    tail = None
    if tree.body and type(tree.body[-1]) is _ast.Expr:
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
