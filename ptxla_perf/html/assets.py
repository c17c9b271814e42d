"""The page's inline style and its one small script (zoom buttons). The script only widens the plots' shared
container; everything else on the page is server-side HTML and SVG, readable with JavaScript disabled."""

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")

STYLE = """
:root{--fg:#1d1f23;--muted:#61656e;--line:#d9dce1;--bg:#f7f8fa;--card:#fff;--warn:#c9661a;--err:#c0262d;
--info:#3b6fd4;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}
body{margin:0;background:var(--bg)}
main{max-width:1280px;margin:0 auto;padding:18px 24px 48px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 10px}h3{font-size:15px;margin:0}
.sub{color:var(--muted);font-size:13px}
.status{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
background:#e4f3ea;color:#17693f}
.status.bad{background:#fbe4e4;color:var(--err)}.status.mid{background:#fdf0dc;color:var(--warn)}
.headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(175px,1fr));gap:10px;margin-top:14px}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.kpi .k{color:var(--muted);font-size:12px}.kpi .v{font-size:19px;font-weight:600;margin-top:2px}
.kpi .n{color:var(--muted);font-size:12px}
section.box{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.chart{display:flex;align-items:flex-start}
.chart .ycol{flex:none;width:86px}
.chart .scroll{flex:1;overflow-x:auto;overflow-y:hidden}
.chart .inner{width:100%;min-width:100%}
svg.plot{display:block;width:100%}
svg text{font-size:11px;fill:var(--muted)}svg text.flag{font-size:10px}
.xticks{position:relative;height:18px;font-size:11px;color:var(--muted)}
.xticks span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.spacer{height:18px}
.grid{stroke:#eceef1;vector-effect:non-scaling-stroke}.axis{stroke:#9aa0a8;vector-effect:non-scaling-stroke}
.band.warmup{fill:#efefef}.band.capture{fill:#f6ebb4}
.m.tr{fill:#3b6fd4}.m.ev{fill:#8e44ad}.m.at{fill-opacity:.55}.m.cp{fill:#d6322c;fill-opacity:1}
.m:hover{fill:#111}
.f.cp{fill:#d6322c}.f.at{fill:#e39b1b}.f.rd{fill:#1c9a6c}.f.fb{fill:#7a4b1f}
.c{fill:#6b7785}.c.compiles{fill:#d6322c}.c.d2h{fill:#1c9a6c}.c.h2d{fill:#e39b1b}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;color:var(--muted);margin:6px 0 8px 86px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.tools{margin-left:auto;display:none;gap:4px}.js .tools{display:flex}
.tools button{font:12px system-ui;padding:1px 8px;border:1px solid var(--line);background:#fff;border-radius:4px;
cursor:pointer}
.cards{display:flex;flex-direction:column;gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--info);border-radius:8px;
padding:12px 14px}
.card.warning{border-left-color:var(--warn)}.card.error{border-left-color:var(--err)}
.sev{display:inline-block;font-size:11px;font-weight:700;padding:1px 6px;border-radius:4px;margin-right:6px;
color:#fff;background:var(--info);vertical-align:1px}.warning .sev{background:var(--warn)}
.error .sev{background:var(--err)}
.where{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;color:var(--muted);
margin-left:6px}
.cost{margin:6px 0;font-size:13px}.cost b{font-weight:600}
pre.src{background:#f3f4f6;border-radius:6px;padding:6px 0;overflow-x:auto;margin:8px 0;font-size:12.5px}
pre.src span.l{display:block;padding:0 10px;white-space:pre}
pre.src span.l.hit{background:#fde8c4;font-weight:600}
pre.src span.n{display:inline-block;width:4em;color:#9aa0a8;user-select:none}
.msg{margin:6px 0}
table{border-collapse:collapse;font-size:13px}
td,th{border-bottom:1px solid var(--line);padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:var(--muted);font-weight:600}td.r,th.r{text-align:right}
td code,.ev code{font-size:12px;word-break:break-all}
details{margin-top:6px}summary{cursor:pointer;color:var(--muted);font-size:13px}
.empty{color:var(--muted)}
footer{margin-top:30px;color:var(--muted);font-size:12px}
"""

SCRIPT = """
(function(){
  var root=document.documentElement; root.classList.add('js');
  var inner=document.getElementById('tl-inner'), scroll=document.getElementById('tl-scroll'), zoom=1;
  function set(z){
    var centre=(scroll.scrollLeft+scroll.clientWidth/2)/inner.offsetWidth;
    zoom=Math.max(1,Math.min(z,64)); inner.style.width=(zoom*100)+'%';
    scroll.scrollLeft=centre*inner.offsetWidth-scroll.clientWidth/2;
    document.getElementById('tl-zoom').textContent=zoom+'x';
  }
  if(inner&&scroll){
    document.getElementById('tl-in').onclick=function(){set(zoom*2)};
    document.getElementById('tl-out').onclick=function(){set(zoom/2)};
    document.getElementById('tl-reset').onclick=function(){set(1)};
    scroll.addEventListener('wheel',function(e){if(e.ctrlKey||e.metaKey){e.preventDefault();
      set(e.deltaY<0?zoom*2:zoom/2)}},{passive:false});
  }
  root.setAttribute('data-ptxla-ready','1');
})();
"""
