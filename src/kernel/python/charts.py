# Charts as data: a matplotlib figure read back in E2B's chart shape (type, title, axis labels,
# units, ticks, scales, elements), for callers that cannot look at a PNG. It is compiled on the
# first figure only, runs after the figure was drawn (its PNG is out), reads the artists' data
# arrays and never re-renders. Only public, long-stable matplotlib APIs: Debian 12's 3.6 to 3.10.
# Whatever raises here costs the chart alone; the caller catches it.

MAX_POINTS = 10000  # per element; past this an element is down-sampled evenly and says so
MAX_ITEMS = 10000  # bars, wedges or boxes of one axes
MAX_AXES = 1000  # charts of one superchart
# Points, bars, wedges and boxes of one figure, all axes together: a chart stays a few MB at
# most (the host drops a cell's results past 64 MiB). Many series share it evenly.
TOTAL = 200000
MAX_BOXES = 200  # box plot detection compares every box with every segment: kept small
MAX_TICKS = 1000
MAX_TEXT = 4096
# The axis kinds a chart can have (E2B's ScaleType): matplotlib's scales, dates and categories.
SCALES = frozenset(
    ("linear", "log", "symlog", "logit", "function", "functionlog", "asinh", "datetime", "categorical")
)


def chart_json(fig):
    """The figure's chart as JSON text, or None when it has no axes."""
    global _series_cap, _items_left
    axes = [a for a in fig.get_axes() if a.get_visible()][:MAX_AXES]
    if not axes:
        return None
    series = sum(len(a.lines) + len(a.collections) for a in axes)
    _series_cap = max(2, min(MAX_POINTS, TOTAL // max(1, series)))
    _items_left = TOTAL
    if len(axes) == 1:
        chart = _axes_chart(axes[0])
    else:
        # As E2B: a figure's title is its suptitle, "" when it has none (an axes' is null).
        chart = {
            "type": "superchart",
            "title": _suptitle(fig),
            "elements": [_axes_chart(a) for a in axes],
        }
    import json

    return json.dumps(chart, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


_series_cap = MAX_POINTS  # points per series in the figure being read
_items_left = TOTAL  # bars, wedges and boxes the figure being read may still give


def _items(n):
    """How many of n bars, wedges or boxes fit; they are taken from the figure's budget."""
    global _items_left
    k = max(0, min(n, MAX_ITEMS, _items_left))
    _items_left -= k
    return k


def _text(s):
    if s is None:
        return ""
    return (s if isinstance(s, str) else str(s))[:MAX_TEXT]


def _label(artist):
    """An artist's label; matplotlib's own placeholders ("_child0", "_nolegend_") are no label."""
    s = _text(artist.get_label())
    return "" if s.startswith("_") else s


def _suptitle(fig):
    get = getattr(fig, "get_suptitle", None)  # public from 3.8 on
    if callable(get):
        return _text(get())
    t = getattr(fig, "_suptitle", None)  # where 3.6 and 3.7 keep it (no getter there)
    return _text(t.get_text()) if t is not None else ""


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v - v == 0 else None  # finite only: JSON has no NaN or Infinity


def _unit(label):
    """The unit in a label's trailing parenthesis: "Time (s)" -> "s"."""
    s = label.rstrip()
    if s.endswith(")"):
        i = s.rfind("(")
        if i > 0 and s[i + 1:-1].strip():
            return s[i + 1:-1].strip()
    return None


class _Axis:
    """One axis of an axes: its scale, and how its float data map to the values a chart shows
    (ISO strings on a date axis, category names on a categorical one, floats elsewhere)."""

    def __init__(self, axis):
        self.axis = axis
        self.scale = axis.get_scale()
        self.fmt = axis.get_major_formatter()
        self.loc = axis.get_major_locator()
        self.period = None
        self._locs = self._labels = None  # read once, when first asked for
        fmt_t = type(self.fmt)
        self.kind = self.scale
        if self.scale == "linear":
            if fmt_t.__module__ == "matplotlib.category":
                self.kind = "categorical"
            elif self._dated():
                self.kind = "datetime"
            elif fmt_t.__module__.startswith("pandas.") and fmt_t.__name__ == "TimeSeries_DateFormatter":
                # pandas' time-series axes hold period ordinals, not matplotlib date numbers.
                self.period = getattr(self.fmt, "freq", None)
                if self.period is not None:
                    self.kind = "datetime"

    def _dated(self):
        md = _mdates()
        return isinstance(self.loc, md.DateLocator) or isinstance(
            self.fmt, (md.DateFormatter, md.AutoDateFormatter, md.ConciseDateFormatter)
        )

    def values(self, floats):
        """The chart values of a list of data floats."""
        if self.kind == "datetime":
            return self._dates(floats)
        if self.kind == "categorical":
            names = self.fmt.format_ticks(floats)
            return [_text(n) for n in names]
        return floats

    def _dates(self, floats):
        if self.period is not None:
            import pandas

            return [pandas.Period(ordinal=int(round(v)), freq=self.period).to_timestamp().isoformat() for v in floats]
        if not floats:
            return []
        return [d.replace(tzinfo=None).isoformat() for d in _mdates().num2date(floats)]

    def ticks(self):
        """(tick values, tick labels) of the major ticks in view."""
        locs = self.locs()
        labels = self.tick_labels(locs)
        lo, hi = sorted(self.axis.get_view_interval())
        pad = (hi - lo) * 1e-9
        keep = [i for i, v in enumerate(locs) if v - v == 0 and lo - pad <= v <= hi + pad]
        locs = [locs[i] for i in keep]
        if self.kind != "datetime":
            # 12 significant digits: 1.2, not the 1.2000000000000002 a locator's steps add up to.
            locs = [float(format(v, ".12g")) for v in locs]
        return self.values(locs), [labels[i] for i in keep]

    def locs(self):
        """The major tick locations (the locator runs once per axis)."""
        if self._locs is None:
            self._locs = [float(v) for v in self.loc()][:MAX_TICKS]
        return self._locs

    def tick_labels(self, locs):
        """The major ticks' labels as shown, mathtext markup ($10^{2}$) read as plain text."""
        if self._labels is None:
            # The formatter, as the draw used it: cheaper than the axis's tick labels, which
            # would run both locators again and update every Tick.
            self._labels = [_plain(_text(s)) for s in self.fmt.format_ticks(locs)]
        return self._labels

    def label_at(self, pos, spread):
        """What a bar or box centred at `pos` is called: the label of its tick (the nearest tick
        within half a tick spacing on a category or fixed-tick axis, where grouped bars sit
        beside their tick), else its position as the axis shows values."""
        locs = self.locs()
        labels = self.tick_labels(locs)
        if locs:
            best = min(range(len(locs)), key=lambda i: abs(locs[i] - pos))
            d = abs(locs[best] - pos)
            fixed = self.kind == "categorical" or type(self.loc).__name__ == "FixedLocator"
            if fixed and len(locs) > 1:
                step = min(abs(b - a) for a, b in zip(locs, locs[1:])) or spread
                if d <= step / 2:
                    return labels[best]
            elif d <= max(abs(pos), spread, 1.0) * 1e-9 or (fixed and d <= spread / 2):
                return labels[best]
        v = self.values([pos])[0]
        return v if isinstance(v, str) else format(v, ".12g")


def _plain(s):
    if len(s) > 1 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].replace("\\mathdefault", "").replace("\\times", "×").replace("\\cdot", "·")
        s = s.replace("\\minus", "−").replace("{", "").replace("}", "").replace("\\", "")
    return s


def _mdates():
    import matplotlib.dates

    return matplotlib.dates


def _axes_chart(ax):
    # As E2B, for every kind of chart: the axes' centred title, null when it has none (the left
    # and right titles and the figure's suptitle are not the chart's).
    title = _text(ax.get_title()) or None
    if getattr(ax, "name", "") != "rectilinear" or ax.images:
        return _unknown(title)
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    lines = list(ax.get_lines())
    colls = list(ax.collections)
    patches = list(ax.patches)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if patches and not lines and not colls and not bars and all(isinstance(p, Wedge) for p in patches):
        return {"type": "pie", "title": title, "elements": _pie(patches)}
    xs, ys = _Axis(ax.xaxis), _Axis(ax.yaxis)
    if xs.kind not in SCALES or ys.kind not in SCALES:
        return _unknown(title)
    if bars and not lines and not colls:
        in_bars = set(id(p) for c in bars for p in c.patches)
        if all(id(p) in in_bars for p in patches):
            return _chart2d("bar", title, ax, _bars(bars, xs, ys))
        return _unknown(title)
    if lines and not colls:
        boxes = _boxes(lines, patches, xs, ys)
        if boxes is not None:
            return _chart2d("box_and_whisker", title, ax, boxes)
    if patches:
        return _unknown(title)
    if lines and not colls:
        elements = [_points(_label(ln), ln.get_xydata(), xs, ys) for ln in lines[:MAX_ITEMS]]
        return _point_chart("line", title, ax, xs, ys, elements)
    if colls and not lines and all(isinstance(c, PathCollection) for c in colls):
        if all(c.get_offset_transform() == ax.transData for c in colls):
            elements = [_points(_label(c), c.get_offsets(), xs, ys) for c in colls[:MAX_ITEMS]]
            return _point_chart("scatter", title, ax, xs, ys, elements)
    return _unknown(title)


def _unknown(title):
    return {"type": "unknown", "title": title, "elements": []}


def _chart2d(kind, title, ax, elements):
    x_label, y_label = _text(ax.get_xlabel()), _text(ax.get_ylabel())
    return {
        "type": kind,
        "title": title,
        "x_label": x_label or None,
        "y_label": y_label or None,
        "x_unit": _unit(x_label),
        "y_unit": _unit(y_label),
        "elements": elements,
    }


def _point_chart(kind, title, ax, xs, ys, elements):
    chart = _chart2d(kind, title, ax, elements)
    chart["x_ticks"], chart["x_tick_labels"] = xs.ticks()
    chart["x_scale"] = xs.kind
    chart["y_ticks"], chart["y_tick_labels"] = ys.ticks()
    chart["y_scale"] = ys.kind
    return chart


def _points(label, xy, xs, ys):
    """A line's or a scatter's points, finite ones only, at most MAX_POINTS of them (fewer when
    the figure has many series)."""
    import numpy as np

    a = np.ma.asarray(xy, dtype=float).filled(np.nan)
    element = {"label": label, "points": []}
    if a.ndim != 2 or a.shape[1] != 2 or not len(a):
        return element
    a = a[np.isfinite(a).all(axis=1)]
    n = len(a)
    cap = _series_cap
    if n > cap:
        a = a[(np.arange(cap) * (n - 1)) // (cap - 1)]
        element["truncated"] = True
    element["points"] = [list(p) for p in zip(xs.values(a[:, 0].tolist()), ys.values(a[:, 1].tolist()))]
    return element


def _bars(containers, xs, ys):
    out = []
    limit = _items(sum(len(c.patches) for c in containers))
    for i, c in enumerate(containers):
        group = _text(c.get_label())
        if not group or group.startswith("_"):
            group = "Group %d" % i
        horizontal = getattr(c, "orientation", None) == "horizontal"
        cat = ys if horizontal else xs
        values = getattr(c, "datavalues", None)
        patches = list(c.patches)
        if values is None or len(values) != len(patches):
            values = [p.get_width() if horizontal else p.get_height() for p in patches]
        for p, v in zip(patches, values):
            v = _num(v)
            if v is None:
                continue
            if horizontal:
                size, pos = _num(p.get_height()), _num(p.get_y())
            else:
                size, pos = _num(p.get_width()), _num(p.get_x())
            if size is None or pos is None:
                continue
            if len(out) >= limit:
                return out
            out.append({"label": cat.label_at(pos + size / 2, abs(size)), "value": v, "group": group})
    return out


def _pie(wedges):
    out = []
    for w in wedges[: _items(len(wedges))]:
        t1, t2, radius = _num(w.theta1), _num(w.theta2), _num(w.r)
        if t1 is not None and t2 is not None and radius is not None:
            out.append({"label": _label(w), "angle": _angle(t1, t2), "radius": radius})
    return out


def _angle(theta1, theta2):
    """A wedge's angle in degrees, rounded as E2B rounds it. pie() works in single precision, so
    a 90 % wedge can span 323.99999141693115 degrees; E2B takes the exact decimal difference (to
    28 digits), keeps 8 - e significant digits of it, e being its decimal exponent (324.000 here,
    36.00000 for 10 %), rounding half to even, and gives the absolute value."""
    from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext

    # A context of its own: a cell may have changed the thread's (its precision, rounding, traps).
    with localcontext(Context(prec=28, rounding=ROUND_HALF_EVEN)) as ctx:
        d = abs(Decimal(theta2) - Decimal(theta1))
        if d:
            ctx.prec = max(1, 8 - d.adjusted())
            d = +d  # unary plus rounds to the context's precision
    return float(d)


def _segments(lines):
    """Box plot parts from Line2Ds: (closed outlines, two-point segments, marker-only lines), or
    None when some line is none of these (then it is no box plot)."""
    import matplotlib

    mean = matplotlib.rcParams["boxplot.meanprops.marker"]
    if mean == matplotlib.rcParams["boxplot.flierprops.marker"]:
        mean = None
    outlines, segs, marks = [], [], []
    for ln in lines:
        a = ln.get_xydata()
        style = ln.get_linestyle()
        if style in ("None", "none", "", " "):
            if not (len(a) == 1 and ln.get_marker() == mean):  # a mean, not an outlier
                marks.append(a)
        elif len(a) == 2:
            segs.append(a)
        elif len(a) >= 5 and (a[0] == a[-1]).all():
            outlines.append(a)
        else:
            return None
    return outlines, segs, marks


def _boxes(lines, patches, xs, ys):
    """Box-and-whisker elements read off the geometry boxplot() draws, or None."""
    from matplotlib.patches import PathPatch

    parts = _segments(lines)
    if parts is None:
        return None
    outlines, segs, marks = parts
    for p in patches:  # patch_artist=True draws the boxes as PathPatches
        if not isinstance(p, PathPatch):
            return None
        v = p.get_path().vertices
        if len(v) < 5:
            return None
        outlines.append(v)
    if not outlines or not segs or len(outlines) > MAX_BOXES or len(segs) > 8 * MAX_BOXES:
        return None
    for vertical in (True, False):
        got = _boxes_one_way(outlines, segs, marks, xs if vertical else ys, vertical)
        if got is not None:
            return got[: _items(len(got))]
    return None


def _boxes_one_way(outlines, segs, marks, cat, vertical):
    p, q = (0, 1) if vertical else (1, 0)  # p: the position axis, q: the value axis
    out = []
    for box in outlines:
        p0, p1 = float(box[:, p].min()), float(box[:, p].max())
        q1, q3 = float(box[:, q].min()), float(box[:, q].max())
        c = (p0 + p1) / 2
        tol = (p1 - p0) * 1e-6 + 1e-12
        lo, hi, med, span = q1, q3, None, -1.0
        for s in segs:
            a, b = s[0], s[1]
            if abs(a[p] - c) <= tol and abs(b[p] - c) <= tol:  # a whisker
                for end, other in ((a, b), (b, a)):
                    if abs(end[q] - q1) <= tol * (1 + abs(q1)) and other[q] <= q1:
                        lo = min(lo, float(other[q]))
                    elif abs(end[q] - q3) <= tol * (1 + abs(q3)) and other[q] >= q3:
                        hi = max(hi, float(other[q]))
            elif a[q] == b[q] and q1 <= a[q] <= q3 and min(a[p], b[p]) >= p0 - tol and max(a[p], b[p]) <= p1 + tol:
                # The median spans the box; a cap or a mean line at the same place is narrower.
                if abs(a[p] - b[p]) > span:
                    med, span = float(a[q]), abs(a[p] - b[p])
        if med is None:
            return None
        outliers = []
        for m in marks:
            for pt in m:
                if abs(pt[p] - c) <= tol and (pt[q] < lo or pt[q] > hi) and _num(pt[q]) is not None:
                    outliers.append(float(pt[q]))
        if len(outliers) > MAX_POINTS:
            step = (len(outliers) - 1) / (MAX_POINTS - 1)
            outliers = [outliers[int(i * step)] for i in range(MAX_POINTS)]
        out.append({
            "label": cat.label_at(c, p1 - p0),
            "min": lo,
            "first_quartile": q1,
            "median": med,
            "third_quartile": q3,
            "max": hi,
            "outliers": outliers,
        })
    return out
