"""The profile as HTML: an icicle of the merged call tree plus the hot-function and hot-line tables.

Self-contained and offline: positioned ``div``s drawn in Python (readable without
JavaScript: nbconvert, a reopened untrusted notebook) and ~25 lines of inline JavaScript
for click-to-zoom; nothing is fetched. Every piece of user text (function and file names,
source lines) goes through ``html.escape``, in text and in attributes.
"""

from __future__ import annotations

import zlib
from html import escape

from eugo_lab.profile.model import Profile, ProfileNode
from eugo_lab.profile.renderers.base import Renderer

ROW_PX = 18
MIN_WIDTH = 0.002  # blocks narrower than this share of the width are not drawn (thousands of slivers otherwise)
MAX_DEPTH = 48
COLORS = {"app": "#f4a259", "library": "#8ecae6", "native": "#90be6d", "root": "#d9d9d9"}
# Neighbouring blocks of one kind differ in shade, picked by a hash of the function name
# (the same function has the same colour everywhere, in every run).
SHADES = {"app": ("#f4a259", "#f6bd60", "#ee8959", "#f2b880", "#e9c46a", "#f7a072"),
          "library": ("#8ecae6", "#a8dadc", "#9cc5e8", "#b5c7e8"), "native": ("#90be6d", "#a7c957"),
          "root": ("#d9d9d9",), "unsampled": ("#eeeeee",)}


def _color(kind: str, name: str) -> str:
    shades = SHADES[kind]
    return shades[zlib.crc32(name.encode()) % len(shades)]
_STYLE = ("font-family: var(--jp-ui-font-family, sans-serif); font-size: 12px; line-height: 1.35; "
          "color: var(--jp-ui-font-color1, #222)")

# Zoom: a click on a block stretches it to the full width, shows its descendants scaled
# alike and its ancestors full width; a click on the root resets. Only positions change,
# so no user text ever passes through the script.
_SCRIPT = """<script>(function(){
document.querySelectorAll('.eugo-icicle:not([data-ready])').forEach(function(box){
box.setAttribute('data-ready','1');
var blocks=Array.prototype.slice.call(box.querySelectorAll('.eugo-block'));
function zoom(X,W,D){blocks.forEach(function(b){
var x=+b.dataset.x,w=+b.dataset.w,d=+b.dataset.d,e=1e-9;
if(d<D&&x<=X+e&&x+w>=X+W-e){b.style.left='0%';b.style.width='100%';b.style.display='';}
else if(d>=D&&x>=X-e&&x+w<=X+W+e){b.style.left=((x-X)/W*100)+'%';b.style.width=(w/W*100)+'%';b.style.display='';}
else{b.style.display='none';}});}
blocks.forEach(function(b){b.addEventListener('click',function(){
zoom(+b.dataset.x,+b.dataset.w,+b.dataset.d);});});
});})();</script>"""


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th style='text-align:left;padding:1px 8px'>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;padding:1px 8px'>{c}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table class='eugo-profile-table' style='border-collapse:collapse'><tr>{th}</tr>{body}</table>"


class HTMLRenderer(Renderer):
    """The profile as one self-contained HTML view (the ``text/html`` next to :class:`TextRenderer`'s text)."""

    def render(self, p: Profile) -> str:
        """The whole profile view: header, icicle, hottest functions and lines."""
        if p.total <= 0:
            return f"<div class='eugo-profile' style='{_STYLE}'><i>Profile: no samples</i></div>"
        fn_rows = [[f"{h.self_share:.0%}", f"{h.native_share:.0%}", f"{h.total_share:.0%}",
                    f"<code>{escape(h.function)}</code>", escape(self.where(h.file, h.path, h.line)),
                    escape(h.where)] for h in p.hot_functions(self.functions)]
        line_rows = [[f"{x.share:.0%}", escape(self.where(x.file, x.path, x.line)),
                      f"<code>{escape(x.function)}</code>", f"<code>{escape(x.source)}</code>"]
                     for x in p.hot_lines(self.lines)]
        tasks = f"{p.tasks} task{'s' if p.tasks != 1 else ''} on {p.workers} worker{'s' if p.workers != 1 else ''}"
        # How much of the time is estimated varies from run to run, so it is said here and not in
        # the text/plain form, which notebooks compare.
        est = (f"; {p.estimated_share:.0%} of it in tasks too short to be sampled, shared out like their "
               "function's sampled tasks" if p.estimated_share >= 0.01 else "")
        return (f"<div class='eugo-profile' style='{_STYLE}'><b>Profile</b>: {escape(tasks)}, "
                f"{p.total:.3g} s of task time{est}" + self.icicle(p)
                + "<b>Hottest functions</b>" + _table(["self", "native", "total", "function", "file", "where"], fn_rows)
                + "<b>Hottest lines</b>" + _table(["share", "file", "function", "source"], line_rows) + "</div>")

    def icicle(self, p: Profile) -> str:
        """The merged call tree as an icicle: width is share of task time, depth is call depth."""
        root = p.tree()
        if root.time <= 0:
            return "<div class='eugo-icicle'><i>no samples</i></div>"
        blocks: list[str] = []
        depth_seen = 0

        def draw(node: ProfileNode, x: float, depth: int) -> None:
            nonlocal depth_seen
            w = node.time / root.time
            if w < MIN_WIDTH or depth > MAX_DEPTH:
                return
            depth_seen = max(depth_seen, depth)
            kind = "root" if depth == 0 else node.kind
            where_txt = ({"native": "C code", "unsampled": "no sample"}.get(node.kind)
                         or self.where(node.file, node.path, node.line))
            tip = (f"{node.function} ({where_txt}): {w:.1%} of task time, self {node.self_time / root.time:.1%}"
                   if depth else f"all profiled tasks: {p.tasks} on {p.workers} workers")
            label = node.function if depth else f"all tasks ({p.tasks})"
            blocks.append(
                f"<div class='eugo-block eugo-{kind}' data-x='{x:.6f}' data-w='{w:.6f}' data-d='{depth}' "
                f"title='{escape(tip, quote=True)}' style='position:absolute;box-sizing:border-box;cursor:pointer;"
                f"left:{x * 100:.4f}%;width:{w * 100:.4f}%;top:{depth * ROW_PX}px;height:{ROW_PX - 1}px;"
                f"background:{_color(kind, node.function)};border-right:1px solid #fff;padding:0 3px;overflow:hidden;"
                f"white-space:nowrap;text-overflow:ellipsis;font-size:11px;line-height:{ROW_PX - 1}px'>"
                f"{escape(label)}</div>")
            cx = x
            for child in node.children:
                draw(child, cx, depth + 1)
                cx += child.time / root.time

        draw(root, 0.0, 0)
        height = (depth_seen + 1) * ROW_PX
        legend = " ".join(f"<span style='background:{COLORS[k]};padding:0 4px'>{label}</span>"
                          for k, label in (("app", "your code"), ("library", "library"),
                                           ("native", "C code / GIL released")))
        return (f"<div class='eugo-icicle' style='position:relative;width:100%;max-width:960px;height:{height}px;"
                f"margin:4px 0'>" + "".join(blocks) + "</div>"
                f"<div style='font-size:11px;margin-bottom:6px'>{legend} &middot; width = share of task time; "
                "click a block to zoom, the top block to reset</div>" + _SCRIPT)
