"""Every cell readable, offline: hover on the profile heatmap and a searchable, sortable table.

The cells travel inside the page as JSON; a few lines of plain JavaScript (no library, no
network) show a cell's values under the pointer and filter, sort and page the table. At the
paper's scale (95 cohorts, 9,025 cells) the page stays one file of about a megabyte.
"""

from __future__ import annotations

import html
import json
import math

import numpy as np

from ._html import figure_png

__all__ = ["CELLS_SCRIPT", "cells_json", "heatmap_html", "cells_table_html"]

COLUMNS = ("cohort", "time", "event_time", "estimate", "std_error", "ci_lower", "ci_upper",
           "significant", "tau")


def _number(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    v = float(v)
    return None if not math.isfinite(v) else float(f"{v:.6g}")


def cells_json(cells) -> dict:
    """The cells as ``{"cols": [...], "rows": [[...], ...]}`` (NaN as null, 6 digits)."""
    cols = [c for c in COLUMNS if c in cells.columns]
    rows = [[_number(v) for v in row] for row in cells[cols].itertuples(index=False)]
    names = {"tau": "true_tau"}  # the truth, as in the other tables
    return {"cols": [names.get(c, c) for c in cols], "rows": rows}


def _script_json(data: dict) -> str:
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def heatmap_html(result, cells, key: str, caption: str, options) -> str:
    """The profile heatmap with a tooltip per cell; ``cells`` is the frame behind it."""
    from ..results.plotting import plot_profile

    ax = plot_profile(result, **dict(options))
    rows, cols = ax.images[0].get_array().shape
    src = figure_png(ax, dpi=110)  # drawing it fixes the axes' place (constrained layout)
    box = ax.get_position()
    data = cells_json(cells)
    data.update(cohorts=[_number(g) for g in np.sort(cells["cohort"].unique())],
                times=[_number(c) for c in np.sort(cells["time"].unique())],
                box=[box.x0, 1 - box.y1, box.x1, 1 - box.y0], shape=[rows, cols])
    return (f"<figure class='wide'><div class='heat' id='{key}-heat'>"
            f"<img alt='memorisation profile heatmap' src='{src}'><div class='tip'></div></div>"
            f"<figcaption>{caption}</figcaption></figure>"
            f"<script type='application/json' id='{key}-data'>{_script_json(data)}</script>")


def cells_table_html(key: str, n_cells: int) -> str:
    """The searchable, sortable table of every cell (filled by :data:`CELLS_SCRIPT`)."""
    return (f"<div class='cells' id='{key}-cells'><p><input type='search' "
            "placeholder='filter: cohort=40 time&gt;=100 significant=true' "
            f"aria-label='filter the cells'><span class='count'></span></p>"
            f"<table><thead></thead><tbody></tbody></table><p class='nav'></p>"
            f"<noscript><p>The table of the {html.escape(str(n_cells))} cells needs "
            "JavaScript; the same cells are in the results file (didmem.load_result)."
            "</p></noscript></div>")


CELLS_SCRIPT = r"""<script>
(function(){
function fmtv(v){if(v===null)return '';if(typeof v==='boolean')return v?'yes':'no';
 if(Number.isInteger(v)&&Math.abs(v)<1e15)return v.toString();
 var a=Math.abs(v);return (a!==0&&(a<1e-3||a>=1e6))?v.toExponential(3):(+v.toPrecision(4)).toString();}
function test(row,cols,tok){
 var m=tok.match(/^([a-z_]+)(<=|>=|=|<|>)(.+)$/);
 if(!m){return row.some(function(v){return fmtv(v).indexOf(tok)>=0;});}
 var i=cols.indexOf(m[1]);if(i<0)return false;var v=row[i],w=m[3];
 if(typeof v==='boolean'){w=(w==='true'||w==='yes'||w==='1');return m[2]==='='&&v===w;}
 if(v===null)return false;w=parseFloat(w);
 return {'=':v===w,'<':v<w,'>':v>w,'<=':v<=w,'>=':v>=w}[m[2]];}
function setup(key){
 var d=JSON.parse(document.getElementById(key+'-data').textContent),cols=d.cols;
 var box=document.getElementById(key+'-cells'),input=box.querySelector('input'),
  head=box.querySelector('thead'),body=box.querySelector('tbody'),
  nav=box.querySelector('.nav'),count=box.querySelector('.count');
 var sortCol=-1,asc=true,page=0,size=25,shown=d.rows;
 head.innerHTML='<tr>'+cols.map(function(c,i){return '<th data-i="'+i+'">'+c+'</th>';}).join('')+'</tr>';
 function render(){
  var pages=Math.max(1,Math.ceil(shown.length/size));page=Math.min(page,pages-1);
  var part=shown.slice(page*size,(page+1)*size),sig=cols.indexOf('significant');
  body.innerHTML=part.map(function(r){return '<tr>'+r.map(function(v,i){
   return '<td'+(i===sig&&v?' class="sig"':'')+'>'+fmtv(v)+'</td>';}).join('')+'</tr>';}).join('');
  count.textContent=shown.length+' of '+d.rows.length+' cells';
  nav.innerHTML='<button data-p="-1">previous</button> page '+(page+1)+' of '+pages+
   ' <button data-p="1">next</button>';}
 function apply(){
  var toks=input.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  shown=d.rows.filter(function(r){return toks.every(function(t){return test(r,cols,t);});});
  if(sortCol>=0){shown=shown.slice().sort(function(a,b){var x=a[sortCol],y=b[sortCol];
   if(x===y)return 0;if(x===null)return 1;if(y===null)return -1;return (x<y?-1:1)*(asc?1:-1);});}
  page=0;render();}
 input.addEventListener('input',apply);
 head.addEventListener('click',function(e){var i=+e.target.getAttribute('data-i');
  if(isNaN(i))return;asc=(sortCol===i)?!asc:true;sortCol=i;apply();});
 nav.addEventListener('click',function(e){var p=e.target.getAttribute('data-p');
  if(p){page=Math.max(0,page+(+p));render();}});
 apply();
 var heat=document.getElementById(key+'-heat');if(!heat)return;
 var img=heat.querySelector('img'),tip=heat.querySelector('.tip'),index={};
 var gi=cols.indexOf('cohort'),ti=cols.indexOf('time');
 d.rows.forEach(function(r){index[r[gi]+'|'+r[ti]]=r;});
 function cellAt(e){var b=img.getBoundingClientRect(),x=(e.clientX-b.left)/b.width,
   y=(e.clientY-b.top)/b.height,bx=d.box;
  if(x<bx[0]||x>bx[2]||y<bx[1]||y>bx[3])return null;
  var j=Math.floor((x-bx[0])/(bx[2]-bx[0])*d.shape[1]),i=Math.floor((y-bx[1])/(bx[3]-bx[1])*d.shape[0]);
  return index[d.cohorts[i]+'|'+d.times[j]]||null;}
 img.addEventListener('mousemove',function(e){var r=cellAt(e);
  if(!r){tip.style.display='none';return;}
  tip.textContent=cols.map(function(c,i){return c+': '+fmtv(r[i]);}).join('\n');
  var b=heat.getBoundingClientRect();tip.style.left=(e.clientX-b.left+14)+'px';
  tip.style.top=(e.clientY-b.top+14)+'px';tip.style.display='block';});
 img.addEventListener('mouseleave',function(){tip.style.display='none';});
 img.addEventListener('click',function(e){var r=cellAt(e);if(!r)return;
  input.value='cohort='+r[gi]+' time='+r[ti];apply();box.scrollIntoView();});}
document.querySelectorAll('.cells').forEach(function(b){setup(b.id.slice(0,-6));});
})();
</script>"""
"""Runs once at the end of the page: sets up every result's table and heatmap tooltip."""
