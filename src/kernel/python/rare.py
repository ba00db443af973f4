# What the one-shot runner and the warm kernel need only now and then, beside core.py: an indented
# cell's dedent, the AST split of a last line with a `;`, a traceback trimmed to the user's
# frames, and PIL.Image's patches. The warm kernel has it loaded; the one-shot runner compiles it
# from its capture file on first use.
import sys


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


# More patches of PIL.Image once it is loaded, each called with the module (ipython.py adds one:
# Image.save shows what it saves): one import hook serves them all.
_PIL_PATCHES = []


def _pil_spec(hook, name, path, target):
    """PIL.Image's spec from the finders after `hook`, its loader wrapped so that the loaded
    module's Image.show() displays the image and _PIL_PATCHES are applied."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if finder is hook or find is None:
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
    display = hook.display

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
