# Rich-result capture shared by the one-shot runner and the warm kernel (both prepend this file).
# It runs inside the box, next to untrusted code, so it trusts nothing it is handed and imports
# only what is already loaded at interpreter start; json/base64/io load on the paths that need them.
import sys
import builtins

_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
)
# JSON string escapes for str.translate: quotes, backslash and control characters.
_ESC = {i: "\\u%04x" % i for i in range(32)}
_ESC.update({34: '\\"', 92: "\\\\", 10: "\\n", 13: "\\r", 9: "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def _jstr(s):
    return '"' + s.translate(_ESC) + '"'


def _jdict(d):
    return "{" + ",".join(_jstr(k) + ":" + v for k, v in d.items()) + "}"


def _b64(raw):
    import base64

    return base64.b64encode(bytes(raw)).decode("ascii")


def _mime_value(mime, v):
    """One MIME payload as a str: images base64, JSON serialised, text as is; None drops it."""
    if isinstance(v, tuple) and v:  # (data, metadata), as IPython allows
        v = v[0]
    if v is None:
        return None
    if mime.startswith("image/") and mime != "image/svg+xml":
        if isinstance(v, (bytes, bytearray, memoryview)):
            return _b64(v)
        return v if isinstance(v, str) else None
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if mime == "application/json" or mime.endswith("+json"):
        import json

        return json.dumps(v, default=repr)
    return None


def _figure_png(fig):
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return _b64(buf.getbuffer())


def _is_figure(o):
    t = type(o)
    return t.__module__.startswith("matplotlib.") and t.__name__ == "Figure" and hasattr(o, "savefig")


_charts = None  # the chart extractor's namespace, compiled from _CHARTS on the first figure


def _chart(fig):
    """The figure's chart as JSON text, or None. It never raises and never prints: a failed
    extraction costs the chart alone, and the warnings or log records it would cause are muted."""
    global _charts
    import warnings

    log = sys.modules.get("logging")
    muted = log.root.manager.disable if log is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if log is not None:
                log.disable(log.CRITICAL)
            if _charts is None:
                ns = {"__name__": "kern_charts", "__builtins__": builtins}
                exec(compile(_CHARTS, "<kern-charts>", "exec"), ns)
                _charts = ns
            return _charts["chart_json"](fig)
    except Exception:
        return None
    finally:
        if log is not None:
            log.disable(muted)


def _wanted(mime, include, exclude):
    return (include is None or mime in include) and (exclude is None or mime not in exclude)


def _bundle(o, include=None, exclude=None):
    """The MIME bundle of one object, the way IPython builds it: _repr_mimebundle_ first, then the
    _repr_*_ methods for what it left out, then text/plain from repr()."""
    data = {}
    fn = getattr(o, "_repr_mimebundle_", None)
    if callable(fn) and not isinstance(o, type):
        try:
            got = fn(include=include, exclude=exclude)
            if isinstance(got, tuple) and got:
                got = got[0]
            if isinstance(got, dict):
                for mime, v in got.items():
                    if isinstance(mime, str) and _wanted(mime, include, exclude):
                        v = _mime_value(mime, v)
                        if v is not None:
                            data[mime] = v
        except Exception:
            pass
    if not isinstance(o, type):
        for meth, mime in _REPR_METHODS:
            if mime in data or not _wanted(mime, include, exclude):
                continue
            fn = getattr(o, meth, None)
            if not callable(fn):
                continue
            try:
                v = _mime_value(mime, fn())
            except Exception:
                continue
            if v:
                data[mime] = v
    if _is_figure(o) and "image/png" not in data and _wanted("image/png", include, exclude):
        try:
            data["image/png"] = _figure_png(o)
        except Exception:
            pass
    if "text/plain" not in data and _wanted("text/plain", include, exclude):
        try:
            data["text/plain"] = repr(o)
        except Exception:
            data["text/plain"] = "<unrepresentable object>"
    return data


def _shown_figure(fig, png):
    """The bundle of a figure the end-of-cell sweep shows (ipython.py adds Jupyter's text/plain)."""
    return {"image/png": png}


class _Capture:
    """The results of one cell, in the order they were produced."""

    def __init__(self, emit):
        self.emit = emit  # called with each result as a JSON text
        self.shown = set()  # ids of figures already display()ed this cell

    def add(self, data, main=False, chart=None):
        if data:
            self.emit(
                '{"data":' + _jdict({k: _jstr(v) for k, v in data.items()})
                + ',"main":' + ("true" if main else "false")
                + (',"chart":' + chart if chart else "") + "}"
            )

    def value(self, o, main=False, include=None, exclude=None):
        """One object as a result. A figure also gives its chart, and counts as shown: the sweep
        at the end of the cell does not give it again."""
        data = _bundle(o, include, exclude)
        chart = None
        if _is_figure(o):
            self.shown.add(id(o))
            if data:
                chart = _chart(o)
        self.add(data, main, chart)

    def display(self, *objs, include=None, exclude=None, metadata=None, transient=None,
                display_id=None, raw=False, clear=False, **kwargs):
        include = set(include) if include is not None else None
        exclude = set(exclude) if exclude is not None else None
        for o in objs:
            if raw and isinstance(o, dict):
                data = {}
                for mime, v in o.items():
                    if isinstance(mime, str) and _wanted(mime, include, exclude):
                        v = _mime_value(mime, v)
                        if v is not None:
                            data[mime] = v
                self.add(data)
            elif o is not None:
                self.value(o, include=include, exclude=exclude)

    def figures(self):
        """Every matplotlib figure still open, as PNG and chart once, then closed so no later cell
        sees it."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = plt.get_fignums()
        except Exception:
            return
        for num in nums:
            try:
                fig = plt.figure(num)
                if id(fig) not in self.shown:
                    png = _figure_png(fig)  # draws the figure: its chart reads it laid out
                    self.add(_shown_figure(fig, png), chart=_chart(fig))
            except Exception:
                pass
            finally:
                try:
                    plt.close(num)
                except Exception:
                    pass
        self.shown.clear()


def _error(e, tb):
    """(E2B-shaped error JSON, traceback text) for an uncaught exception."""
    import traceback

    text = "".join(traceback.format_exception(type(e), e, tb))
    try:
        value = str(e)
    except Exception:
        value = "<unprintable exception>"
    err = _jdict({"name": _jstr(type(e).__name__), "value": _jstr(value), "traceback": _jstr(text)})
    return err, text
