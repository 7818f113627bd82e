"""The report page's stylesheet (inline in the page): readable from a laptop's width down to a
phone's — the page never scrolls sideways, wide tables and configs scroll in their own box —
and on paper (print: no navigation, configs and tables whole, pictures kept on one page, the
charts' colours printed)."""

CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--soft:#f6f8fa;--accent:#0b5cad;
--gen:#4c78a8;--asm:#f58518;--trn:#54a24b;--warn:#9a6700;--bad:#b42318}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--fg);background:#fff;
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header,main,footer{max-width:1120px;margin:0 auto;padding:0 20px}
header{padding-top:18px;border-bottom:2px solid var(--line)}
h1{font-size:1.45rem;line-height:1.25;margin:0 0 6px}
h2{font-size:1.2rem;margin:18px 0 8px}
h3{font-size:1rem;margin:14px 0 6px}
nav{display:flex;flex-wrap:wrap;gap:2px 16px;margin:6px 0 12px;font-size:.9rem}
nav a{color:var(--accent);text-decoration:none}
nav a:hover{text-decoration:underline}
section{padding:2px 0 14px;border-bottom:1px solid var(--line);min-width:0}
footer{padding:14px 20px 28px;color:var(--muted);font-size:.85rem}
p{margin:6px 0}
ul{margin:6px 0;padding-left:22px}
.note{color:var(--muted)}
.warning{color:var(--warn);font-weight:600}
.refused{color:var(--bad)}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.86rem;margin:6px 0 10px}
caption{caption-side:bottom;text-align:left;color:var(--muted);font-size:.8rem;padding-top:3px}
th,td{padding:3px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.chosen td{background:#fff3cd;font-weight:600}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(240px,1fr));gap:8px 22px;
margin:10px 0}
dl.facts div{border-left:3px solid var(--accent);padding-left:9px;min-width:0}
dt{font-size:.74rem;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
dd{margin:0;font-weight:600;overflow-wrap:anywhere}
pre.code{background:var(--soft);border:1px solid var(--line);border-radius:4px;
padding:8px 10px;margin:6px 0 12px;overflow:auto;max-height:380px;white-space:pre;
font:.8rem/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
figure{margin:8px 0 12px}
figcaption{font-size:.82rem;color:var(--muted)}
svg.chart,svg.picture{display:block;width:100%;max-width:100%;height:auto}
svg.chart{max-width:760px}
svg.chart text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;
fill:var(--fg)}
svg.chart .tick,svg.chart .legend,svg.chart .axis-title{fill:var(--muted);font-size:11px}
svg.chart .bar-label{font-size:11px}
svg.chart .on-bar{fill:#fff;font-size:11px}
svg.chart .axis{stroke:#8c959f;stroke-width:1}
svg.chart .grid{stroke:#eaeef2;stroke-width:1}
svg.chart .capacity{fill:#eef1f4;stroke:#afb8c1;stroke-width:1}
svg.chart .allocated{fill:var(--gen)}
svg.chart .reserved{fill:#9ecae9}
svg.chart .reserve{fill:#f2cf5b}
svg.chart .limit{fill:none;stroke:var(--bad);stroke-width:2;stroke-dasharray:4 3}
svg.chart .iteration{fill:var(--gen)}
svg.chart .bound{fill:#afb8c1}
svg.chart .part-prefill{fill:#9ecae9}
svg.chart .part-decode{fill:var(--gen)}
svg.chart .part-decode_tail{fill:#fdae6b}
svg.chart .part-recompute{fill:#e45756}
svg.chart .part-overhead{fill:#bab0ac}
svg.chart .dot{stroke:#fff;stroke-width:1}
svg.chart .s0{stroke:#4c78a8;fill:#4c78a8}svg.chart .s1{stroke:#f58518;fill:#f58518}
svg.chart .s2{stroke:#54a24b;fill:#54a24b}svg.chart .s3{stroke:#b279a2;fill:#b279a2}
svg.chart .s4{stroke:#9d755d;fill:#9d755d}svg.chart .s5{stroke:#e45756;fill:#e45756}
svg.chart .points{fill:#8c959f;stroke:#8c959f}
svg.chart .frontier{stroke:#1f2328;fill:#1f2328}
svg.chart text.key{stroke:none;font-weight:600}
svg.chart polyline.line{fill:none;stroke-width:2}
svg.chart .chosen{fill:none;stroke:var(--bad);stroke-width:2.5}
svg.chart .chosen-label{fill:var(--bad);font-weight:600}
@media (max-width:600px){body{font-size:14px}header,main,footer{padding:0 12px}}
@media print{
@page{margin:14mm 12mm}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{font-size:10pt}
nav{display:none}
header,main,footer{max-width:none;padding:0}
.scroll{overflow:visible}
table{width:100%;font-size:8.5pt}
th{white-space:normal}
pre.code{max-height:none;overflow:visible;white-space:pre-wrap;overflow-wrap:anywhere;
font-size:7.5pt}
figure,svg,tr,.export h3{break-inside:avoid}
h2,h3{break-after:avoid}
section{border-bottom:none}
}
"""
