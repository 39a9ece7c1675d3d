"""Offline HTML pages: the Vega JavaScript inline once per page, no link that goes online.

Every page poetsim writes (the sweep report, the page of one run) is built here, so that each
carries a title, the JavaScript exactly once, the same type sizes, and the same escaping: text
goes into HTML through `html.escape`, data into a <script> through `script_json`, which leaves
no `<`, `>` or `&` that the HTML parser could read as the end of the script.
"""

import functools
import html
import json
import math

import vl_convert

from poetsim.report.framing import VL_VERSION
from poetsim.units import json_numbers

#: vega-embed's options: SVG (sharp at any zoom, text a browser can measure), tooltips escaped
#: by vega-tooltip, and no actions menu: it would offer "Open in Vega Editor", which goes online,
#: and the PNG and SVG of every chart are written beside the page anyway.
EMBED_OPTIONS = {"mode": "vega-lite", "renderer": "svg", "actions": False}

_STYLE = """
body { font-family: sans-serif; font-size: 14px; color: #222; margin: 12px auto; padding: 0 16px; max-width: 1368px;
  overflow-wrap: break-word; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 18px 0 6px 0; }
h3 { font-size: 14px; margin: 10px 0 4px 0; }
p { margin: 4px 0; }
a { color: #0060A0; }
.finding { font-size: 15px; line-height: 1.45; margin: 6px 0 8px 0; max-width: 1100px; }
.scope { color: #444; }
.note { color: #555; font-size: 12px; }
.footer { color: #555; font-size: 12px; margin-top: 20px; border-top: 1px solid #ddd; padding-top: 6px; }
.footer p { margin: 3px 0; }
.row { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.row > * { min-width: 0; max-width: 100%; }
.headline-box { flex: 0 1 560px; }
table.headline th { white-space: normal; max-width: 80px; vertical-align: bottom; }
table.sortable th { white-space: normal; max-width: 110px; vertical-align: bottom; }
@media (max-width: 600px) { table.reach td, table.reach th { white-space: normal; padding: 2px 3px; font-size: 12px; } }
table.headline .mark { font-size: 11px; font-weight: 400; color: #555; }
table.headline td.text { white-space: normal; }
.main-chart { flex: 1 1 640px; }
.over { color: #B00020; font-weight: 700; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #d0d0d0; padding: 2px 6px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; font-weight: 600; }
td.text, th.text { text-align: left; }
td.msg { text-align: left; white-space: normal; min-width: 320px; max-width: 520px; }
td.best { font-weight: 700; }
td.none { color: #666; font-style: italic; }
tr.group td { border-top: 2px solid #999; }
details { margin: 8px 0; border: 1px solid #ddd; border-radius: 4px; padding: 4px 8px; }
summary { cursor: pointer; font-weight: 600; font-size: 14px; }
.tabs > input { position: absolute; opacity: 0; pointer-events: none; }
.tabs > label { display: inline-block; padding: 2px 10px; margin: 0 4px 4px 0; border: 1px solid #bbb;
  border-radius: 4px; cursor: pointer; font-size: 13px; background: #fafafa; }
.tabs > input:checked + label { background: #0072B2; color: #fff; border-color: #0072B2; }
.tabs > input:focus-visible + label { outline: 2px solid #E69F00; }
.tab-panel { display: none; }
th.sortable { cursor: pointer; }
th.sortable[aria-sort=ascending]::after { content: " \\25B2"; }
th.sortable[aria-sort=descending]::after { content: " \\25BC"; }
input.filter, select { font-size: 13px; padding: 2px 6px; width: 360px; max-width: 100%; margin: 4px 0; }
.chart { margin: 4px 0 12px 0; max-width: 100%; overflow: hidden; }
.chart .vega-embed { max-width: 100%; }
.chart svg { max-width: 100%; height: auto; }
.verdict { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 700; font-size: 13px; color: #fff; }
.verdict.holds { background: #1B7837; }
.verdict.holds-in-part { background: #B35806; }
.verdict.does-not-hold { background: #B2182B; }
.verdict.cannot-be-judged { background: #666; }
.claim { border: 1px solid #ddd; border-left: 4px solid #999; border-radius: 4px; padding: 6px 10px; margin: 8px 0; }
.claim.holds { border-left-color: #1B7837; }
.claim.holds-in-part { border-left-color: #B35806; }
.claim.does-not-hold { border-left-color: #B2182B; }
.claim dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 4px 0; }
.claim dt { color: #555; }
.claim dd { margin: 0; }
"""

#: Sorting and filtering of tables marked `sortable`: no library, no network.
_TABLE_SCRIPT = """
for (const table of document.querySelectorAll("table.sortable")) {
  const body = table.tBodies[0];
  table.querySelectorAll("th").forEach((th, column) => {
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(other => other.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const key = row => row.cells[column].dataset.sort ?? row.cells[column].textContent;
      const rows = Array.from(body.rows);
      const numeric = rows.every(row => key(row) === "" || !isNaN(Number(key(row))));
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === "" || y === "") return (x === "") - (y === "");
        const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return ascending ? order : -order;
      });
      body.append(...rows);
    });
  });
}
const WORD_BREAK = /[^\\p{L}\\p{N}%#._+-]+/u;
for (const input of document.querySelectorAll("input.filter")) {
  const table = document.getElementById(input.dataset.table);
  const count = document.getElementById(input.dataset.count);
  input.addEventListener("input", () => {
    // Every term starts a word of the row: "feasible" is not "infeasible".
    const terms = input.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    for (const row of table.tBodies[0].rows) {
      const words = Array.from(row.cells, cell => cell.textContent.toLowerCase()).join(" ").split(WORD_BREAK);
      const keep = terms.every(term => words.some(word => word.startsWith(term)));
      row.hidden = !keep;
      shown += keep;
    }
    count.textContent = shown + " of " + table.tBodies[0].rows.length + " runs";
  });
}
"""


def script_json(value) -> str:
    r"""`value` as JSON that is safe inside a <script> element.

    `<`, `>` and `&` only occur inside JSON strings, where their \u escapes mean the same; with
    them escaped, no data (a graph or platform named `</script><script>...`) can end the script.
    U+2028 and U+2029 are escaped too, since older JavaScript reads them as line ends.
    """
    text = json.dumps(json_numbers(value), allow_nan=False, default=str)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


@functools.cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script, for the Vega-Lite version altair writes.

    Cached: building it takes about a second and every page of a process needs the same one.
    """
    # vl-convert's stub marks `snippet` as required; at run time it defaults to None (the global
    # vegaEmbed, vegaLite and vega), as its docstring says.
    bundle = vl_convert.javascript_bundle(vl_version=VL_VERSION)  # type: ignore[call-arg]
    # A "</script" inside the bundle would end the element early; "<\\/" means the same in JavaScript strings.
    return bundle.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def responsive(wide: dict, narrow: dict, wide_px: float) -> dict:
    """A chart in two layouts: `wide` where its element is at least `wide_px` wide, `narrow` elsewhere.

    A chart's layout (how many panels side by side) is fixed when it is drawn, so a page that
    must fit a phone and a desktop carries both and picks one by the room it has.
    """
    return {"wide": wide, "narrow": narrow, "wide_px": wide_px}


def fitted(spec: dict, from_px: float, margin_px: float, below_px: float) -> dict:
    """A single-view chart that the page narrows where its element is under `below_px` wide.

    The plot's width (`from_px` in `spec`) becomes the element's width less `margin_px` (room
    for axis labels), legends go below it, titles wrap shorter and ticks thin out.

    Cheaper than a second layout (`responsive`) for a page of many such charts, which would
    build every chart twice; only charts whose plots are plain widths (no facets) narrow well.
    """
    return {"spec": spec, "fit": {"from": from_px, "margin": margin_px, "below": below_px}}


#: Numbers in a page's chart data keep this many significant digits: a tooltip shows at most 6,
#: and 17-digit floats would double the size of a page of schedules.
DATA_DIGITS = 6


def _hoisted(specs: dict[str, dict], datasets: dict[str, list]) -> dict[str, dict]:
    """The specs with their data moved into `datasets`, so data that charts share is in the page once.

    Each dataset is named as altair names it (a hash of the content), so data that two layouts
    or two charts share is stored once; each entry keeps the names it needs in `data`.
    """
    entries = {}
    for element, spec in specs.items():
        if "wide" in spec:
            layouts = {k: v for k, v in spec.items() if k in ("wide", "narrow")}
        else:
            layouts = {"spec": spec["spec"] if "fit" in spec else spec}
        entry: dict = {"data": []}
        for name, layout in layouts.items():
            layout = dict(layout)
            for key, rows in layout.pop("datasets", {}).items():
                datasets.setdefault(key, [_rounded(row) for row in rows])
                entry["data"].append(key)
            entry[name] = layout
        if "wide" in spec:
            entry["wide_px"] = spec["wide_px"]
        if "fit" in spec:
            entry["fit"] = spec["fit"]
        entry["data"] = sorted(set(entry["data"]))
        entries[element] = entry
    return entries


def _rounded(row):
    if isinstance(row, dict):
        return {k: _rounded(v) for k, v in row.items()}
    if isinstance(row, float) and math.isfinite(row) and row:
        return float(f"{row:.{DATA_DIGITS}g}")
    return row


#: Draws a chart entry (`_hoisted`) into the element whose id is given: a `responsive` pair by the
#: element's width, a `fitted` chart narrowed where the element is narrow; `drawGroup` draws the
#: charts of one group (charts drawn only when shown).
_EMBED_SCRIPT = """
function rewrap(lines, chars) {
  const out = [];
  let line = "";
  for (const word of lines.join(" ").split(/\\s+/)) {
    if (line && line.length + 1 + word.length > chars) { out.push(line); line = word; }
    else line = line ? line + " " + word : word;
  }
  if (line) out.push(line);
  return out;
}
function narrowed(node, width, from) {
  if (Array.isArray(node)) return node.map(value => narrowed(value, width, from));
  if (!node || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "width" && value === from) out[key] = width;
    else if (key === "x2" && value && value.value === from) out[key] = {value: width};
    else if (key === "labelLimit" && typeof value === "number") out[key] = Math.min(value, 90);
    else if (key === "tickCount" && typeof value === "number") out[key] = Math.min(value, 5);
    else if (key === "legend" && value && typeof value === "object")
      out[key] = Object.assign({}, value, {orient: "bottom", columns: 2});
    else if ((key === "subtitle" || key === "text") && Array.isArray(value)) out[key] = rewrap(value, Math.floor(width / 6.5));
    else out[key] = narrowed(value, width, from);
  }
  return out;
}
function drawChart(id, entry) {
  const element = document.getElementById(id);
  let spec = entry.wide ? (element.clientWidth >= entry.wide_px ? entry.wide : entry.narrow) : entry.spec;
  if (entry.fit && element.clientWidth < entry.fit.below)
    spec = narrowed(spec, Math.max(150, element.clientWidth - entry.fit.margin), entry.fit.from);
  const data = {};
  for (const name of entry.data) data[name] = datasets[name];
  return vegaEmbed(element, Object.assign({}, spec, {datasets: data}), embedOptions).catch(error => console.error(error));
}
function drawGroup(name) {
  for (const [id, entry] of Object.entries(groups[name] || {})) drawChart(id, entry);
}
for (const [id, entry] of Object.entries(specs)) drawChart(id, entry);
"""


def page(
    title: str,
    body: str,
    specs: dict[str, dict],
    extra_style: str = "",
    groups: dict[str, dict[str, dict]] | None = None,
    script: str = "",
) -> str:
    """A whole HTML page: `title`, `body`, and the Vega-Lite `specs` drawn into their elements.

    `title` is escaped here, `body` (HTML) by its maker; each spec (or `responsive` pair) is
    drawn into the element whose id is its key.

    `groups` holds charts drawn only when the page's `script` calls `drawGroup(name)` (a page of
    many charts shows a few at a time); their data, like every chart's, is in the page once.
    """
    scripts = ""
    if specs or groups:
        datasets: dict[str, list] = {}
        entries = _hoisted(specs, datasets)
        grouped = {name: _hoisted(charts, datasets) for name, charts in (groups or {}).items()}
        scripts = f"""<script>
{javascript_bundle()}
</script>
<script>
const datasets = {script_json(datasets)};
const specs = {script_json(entries)};
const groups = {script_json(grouped)};
const embedOptions = {script_json(EMBED_OPTIONS)};
{_EMBED_SCRIPT}
{script}
</script>"""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_STYLE}{extra_style}</style>
</head>
<body>
{body}
<script>{_TABLE_SCRIPT}</script>
{scripts}
</body>
</html>
"""
