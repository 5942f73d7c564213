/* floodmark run report: copy button, paged anomaly tables, canvas process timeline.
   All data comes from <script type="application/json"> blocks and is only ever written
   into the page with textContent, never as HTML. */
(function () {
  "use strict";

  function readJson(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  /* ---- copy the repro command ---- */
  var copy = document.getElementById("copy-repro");
  if (copy) {
    copy.addEventListener("click", function () {
      var text = document.getElementById("repro").textContent;
      var done = function () { copy.textContent = "copied"; setTimeout(function () { copy.textContent = "copy"; }, 1200); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(); });
      } else { selectText(); }
    });
  }
  function selectText() {
    var range = document.createRange();
    range.selectNodeContents(document.getElementById("repro"));
    var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
  }

  /* ---- paged anomaly tables; a click on a row shows its context ---- */
  var PAGE = 100;
  var contextTables = readJson("context-data") || { ops: {}, events: {} };

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function show(v) { return v === null || v === undefined ? "" : String(v); }

  function opTable(block) {
    var table = el("table", "ops"), head = el("tr");
    ["index", "time (s)", "process", "type", "f", "value", "node", "error"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    var highlight = {};
    block.highlight.forEach(function (i) { highlight[i] = true; });
    block.rows.forEach(function (item) {
      var tr = el("tr");
      if (Array.isArray(item)) {
        tr.className = "gap";
        var td = el("td", "", "… " + item[0] + " more op" + (item[0] !== 1 ? "s" : "") +
          (block.partition === "—" ? " in the history" : " on this partition") + " in between (indices " + item[1] + "–" + item[2] + ") …");
        td.colSpan = 8; tr.appendChild(td);
      } else {
        var op = contextTables.ops[item] || [null, "?", "?", "?", "(op not in this page's data)", null, null];
        if (highlight[item]) tr.className = "witness";
        tr.appendChild(el("td", "num", item));
        tr.appendChild(el("td", "num", typeof op[0] === "number" ? op[0].toFixed(6) : "—"));
        tr.appendChild(el("td", "", show(op[1])));
        tr.appendChild(el("td", /^[a-z]+$/.test(op[2]) ? "t-" + op[2] : "", show(op[2])));
        tr.appendChild(el("td", "", show(op[3])));
        tr.appendChild(el("td", "value", show(op[4])));
        tr.appendChild(el("td", "", show(op[5])));
        tr.appendChild(el("td", "value", show(op[6])));
      }
      table.appendChild(tr);
    });
    return table;
  }

  function nodeColumn(node) {
    var col = el("div", "node-col"), h = el("h4", "", node.node), events = contextTables.events[node.node] || {};
    if (node.omitted) h.appendChild(el("span", "note", " (" + node.omitted + " more relevant events in events/" + node.node + ".jsonl)"));
    col.appendChild(h);
    var table = el("table"), named = {};
    node.named.forEach(function (s) { named[s] = true; });
    node.rows.forEach(function (item) {
      var tr = el("tr");
      if (Array.isArray(item)) {
        tr.className = "gap";
        var td = el("td", "", item[0] === 1 ? "… 1 event (seq " + item[1] + ") …" : "… " + item[0] + " events (seq " + item[1] + "–" + item[2] + ") …");
        td.colSpan = 3; tr.appendChild(td);
      } else {
        var e = events[item] || ["?", "(event not in this page's data)"];
        if (named[item]) tr.className = "named";
        tr.appendChild(el("td", "num", item));
        tr.appendChild(el("td", /^[a-z_]+$/.test(e[0]) ? "ev-kind " + e[0] : "ev-kind", show(e[0])));
        tr.appendChild(el("td", "value", show(e[1])));
      }
      table.appendChild(tr);
    });
    col.appendChild(table);
    return col;
  }

  function renderContext(row, limit) {
    var box = el("div", "ctx"), ctx = row[5], partition = row[1];
    if (!ctx) {
      box.appendChild(el("p", "warnings no-context", "No inline context for #" + row[0] + ": this page carries the context of the first " +
        limit + " anomalies of this type. Its witness ops (" + row[3] + ") are in history.jsonl by index."));
      return box;
    }
    ctx.witnesses.forEach(function (block) {
      var where = block.elsewhere ? "on its own partition " + block.partition + ", not the anomaly's " + partition
        : block.partition === "—" ? "all ops" : "partition " + block.partition;
      box.appendChild(el("div", "ctx-title", "Ops around witness op " + block.witness + " (" + where + ", history order; witness highlighted)"));
      box.appendChild(opTable(block));
    });
    if (ctx.not_shown.length) box.appendChild(el("p", "note", "Further witness ops (not expanded): " + ctx.not_shown.join(", ")));
    if (ctx.nodes.length) {
      box.appendChild(el("div", "ctx-title", "What the nodes recorded about partition " + partition +
        " (each node in its own seq order; node clocks are not comparable)"));
      var columns = el("div", "node-columns");
      ctx.nodes.forEach(function (node) { columns.appendChild(nodeColumn(node)); });
      box.appendChild(columns);
    }
    if (!ctx.witnesses.length && !ctx.nodes.length) {
      box.appendChild(el("p", "note", "The checker named no ops of this history and the nodes recorded nothing about this partition."));
    }
    return box;
  }

  Array.prototype.forEach.call(document.querySelectorAll(".paged"), function (box) {
    var rows = readJson(box.getAttribute("data-source")) || [];
    var limit = Number(box.getAttribute("data-context-limit")) || 0;
    var body = box.querySelector("tbody");
    var pager = box.querySelector(".pager");
    var page = 0, pages = Math.max(1, Math.ceil(rows.length / PAGE)), open = {};
    var prev = document.createElement("button"); prev.type = "button"; prev.textContent = "◀ previous";
    var next = document.createElement("button"); next.type = "button"; next.textContent = "next ▶";
    var label = document.createElement("span");
    pager.appendChild(prev); pager.appendChild(label); pager.appendChild(next);
    function toggle(tr, row) {
      var number = row[0];
      if (open[number]) {
        open[number].parentNode.removeChild(open[number]);
        delete open[number];
        tr.classList.remove("open"); tr.setAttribute("aria-expanded", "false");
        return;
      }
      var ctxRow = el("tr", "ctx-row"), td = el("td");
      td.colSpan = 5; td.appendChild(renderContext(row, limit)); ctxRow.appendChild(td);
      tr.parentNode.insertBefore(ctxRow, tr.nextSibling);
      open[number] = ctxRow;
      tr.classList.add("open"); tr.setAttribute("aria-expanded", "true");
    }
    function render() {
      body.textContent = "";
      open = {};
      var end = Math.min(rows.length, (page + 1) * PAGE);
      for (var i = page * PAGE; i < end; i++) {
        var tr = el("tr", "expandable" + (rows[i][5] ? "" : " no-context"));
        tr.tabIndex = 0; tr.setAttribute("aria-expanded", "false");
        tr.setAttribute("data-number", String(rows[i][0]));
        for (var k = 0; k < 5; k++) tr.appendChild(el("td", k === 2 || k === 3 ? "num" : "", rows[i][k]));
        (function (tr, row) {
          tr.addEventListener("click", function () { toggle(tr, row); });
          tr.addEventListener("keydown", function (e) {
            if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(tr, row); }
          });
        })(tr, rows[i]);
        body.appendChild(tr);
      }
      label.textContent = "rows " + (page * PAGE + 1) + "–" + end + " of " + rows.length + " (page " + (page + 1) + " of " + pages + ")";
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
    }
    prev.addEventListener("click", function () { if (page > 0) { page--; render(); } });
    next.addEventListener("click", function () { if (page < pages - 1) { page++; render(); } });
    render();
  });

  /* ---- process timeline ---- */
  var data = readJson("timeline-data");
  var canvas = document.getElementById("timeline-canvas");
  if (!data || !canvas) return;

  function decode(b64, Type) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  var n = data.count;
  var start = decode(data.start, Float32Array), stop = decode(data.stop, Float32Array);
  var outcome = decode(data.outcome, Uint8Array), fcode = decode(data.f, Uint16Array);
  var lane = decode(data.lane, Int32Array), proc = decode(data.process, Int32Array);
  var index = decode(data.index, Int32Array);
  var lanes = Math.max(1, data.lanes), end = Math.max(data.end, 1e-6);
  var SEVERITY = [1, 3, 4, 2]; // ok < pending < fail < info, by outcome code
  var LEFT = 52, AXIS = 22, BAND = 8;
  var laneH = lanes <= 40 ? 18 : Math.max(4, Math.floor(640 / lanes));
  var view0 = 0, view1 = end;
  var ctx = canvas.getContext("2d");
  var windowLabel = document.getElementById("timeline-window");
  var details = document.getElementById("timeline-details");

  function width() { return Math.max(200, canvas.clientWidth || 1000); }
  function plotW() { return width() - LEFT - 8; }
  function scale() { return plotW() / Math.max(view1 - view0, 1e-9); }

  function niceStep(span, target) {
    var raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
  }

  function draw() {
    var W = width(), H = AXIS + BAND + lanes * laneH + 2, dpr = window.devicePixelRatio || 1;
    canvas.style.height = H + "px";
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    var s = scale(), top = AXIS + BAND;
    // faults: a band at the top and a translucent wash over the lanes
    data.faults.forEach(function (f) {
      var x0 = LEFT + Math.max(0, (f.start - view0) * s), x1 = LEFT + Math.min(plotW(), (f.end - view0) * s);
      if (x1 <= LEFT || x0 >= LEFT + plotW()) return;
      ctx.globalAlpha = 0.85; ctx.fillStyle = f.colour; ctx.fillRect(x0, AXIS, Math.max(1, x1 - x0), BAND - 2);
      ctx.globalAlpha = 0.10; ctx.fillRect(x0, top, Math.max(1, x1 - x0), lanes * laneH);
      ctx.globalAlpha = 1;
    });
    // lane labels and stripes
    ctx.font = "11px ui-monospace, Menlo, monospace"; ctx.textBaseline = "middle";
    for (var l = 0; l < lanes; l++) {
      if (l % 2) { ctx.fillStyle = "rgba(0,0,0,0.03)"; ctx.fillRect(LEFT, top + l * laneH, plotW(), laneH); }
      if (laneH >= 10 || l % Math.ceil(10 / laneH) === 0) { ctx.fillStyle = "#5b6475"; ctx.fillText("w" + l, 4, top + l * laneH + laneH / 2); }
    }
    // time axis
    var step = niceStep(view1 - view0, 8), t = Math.ceil(view0 / step) * step;
    ctx.fillStyle = "#5b6475"; ctx.strokeStyle = "#dfe3ea"; ctx.textBaseline = "alphabetic";
    for (; t <= view1; t += step) {
      var x = LEFT + (t - view0) * s;
      ctx.beginPath(); ctx.moveTo(x, AXIS - 4); ctx.lineTo(x, H); ctx.stroke();
      ctx.fillText(+t.toPrecision(6) + " s", x + 2, 12);
    }
    var visible = 0;
    for (var i = 0; i < n; i++) if (stop[i] >= view0 && start[i] <= view1) visible++;
    if (visible <= 3000) drawBoxes(s, top); else drawRaster(s, top);
    windowLabel.textContent = view0.toFixed(3) + " – " + view1.toFixed(3) + " s · " + visible.toLocaleString() +
      " of " + n.toLocaleString() + " ops visible" + (visible > 3000 ? " (aggregated per pixel)" : "");
  }

  function drawBoxes(s, top) {
    var pad = laneH >= 10 ? 2 : 0;
    for (var i = 0; i < n; i++) {
      if (stop[i] < view0 || start[i] > view1) continue;
      var x0 = LEFT + Math.max(-2, (start[i] - view0) * s), x1 = LEFT + Math.min(plotW() + 2, (stop[i] - view0) * s);
      var w = Math.max(2, x1 - x0), y = top + lane[i] * laneH + pad;
      ctx.fillStyle = data.outcome_colours[outcome[i]];
      ctx.fillRect(x0, y, w, laneH - 2 * pad);
      if (w > 36 && laneH >= 14) {
        ctx.fillStyle = "#111"; ctx.textBaseline = "middle";
        ctx.fillText(data.f_names[fcode[i]], x0 + 3, y + (laneH - 2 * pad) / 2, w - 5);
      }
    }
  }

  function drawRaster(s, top) {
    var W = Math.ceil(plotW()) + 1, grid = new Uint8Array(lanes * W);
    for (var i = 0; i < n; i++) {
      if (stop[i] < view0 || start[i] > view1) continue;
      var p0 = Math.max(0, Math.floor((start[i] - view0) * s)), p1 = Math.min(W - 1, Math.floor((stop[i] - view0) * s));
      var sev = SEVERITY[outcome[i]], base = lane[i] * W;
      for (var p = p0; p <= p1; p++) if (grid[base + p] < sev) grid[base + p] = sev;
    }
    var colourOf = [null, data.outcome_colours[0], data.outcome_colours[3], data.outcome_colours[1], data.outcome_colours[2]];
    for (var l = 0; l < lanes; l++) {
      var row = l * W, runStart = 0;
      for (var p = 1; p <= W; p++) {
        if (p === W || grid[row + p] !== grid[row + runStart]) {
          var sev = grid[row + runStart];
          if (sev) { ctx.fillStyle = colourOf[sev]; ctx.fillRect(LEFT + runStart, top + l * laneH + (laneH >= 10 ? 2 : 0), p - runStart, laneH - (laneH >= 10 ? 4 : 0)); }
          runStart = p;
        }
      }
    }
  }

  function clampView() {
    var span = Math.min(Math.max(view1 - view0, 1e-6), end);
    if (view0 < 0) view0 = 0;
    if (view0 + span > end) view0 = Math.max(0, end - span);
    view1 = view0 + span;
  }
  function zoom(factor, centre) {
    var c = centre === undefined ? (view0 + view1) / 2 : centre;
    view0 = c - (c - view0) * factor; view1 = c + (view1 - c) * factor; clampView(); draw();
  }
  document.querySelectorAll(".timeline-controls button").forEach(function (b) {
    b.addEventListener("click", function () {
      var span = view1 - view0, a = b.getAttribute("data-action");
      if (a === "left") { view0 -= span; view1 -= span; clampView(); draw(); }
      else if (a === "right") { view0 += span; view1 += span; clampView(); draw(); }
      else if (a === "in") zoom(0.5);
      else if (a === "out") zoom(2);
      else { view0 = 0; view1 = end; draw(); }
    });
  });
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    var rect = canvas.getBoundingClientRect(), t = view0 + (e.clientX - rect.left - LEFT) / scale();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, t);
  }, { passive: false });
  var dragX = null, dragView = null, moved = false;
  canvas.addEventListener("mousedown", function (e) { dragX = e.clientX; dragView = [view0, view1]; moved = false; });
  window.addEventListener("mousemove", function (e) {
    if (dragX === null) return;
    var dt = (e.clientX - dragX) / scale();
    if (Math.abs(e.clientX - dragX) > 3) moved = true;
    view0 = dragView[0] - dt; view1 = dragView[1] - dt; clampView(); draw();
  });
  window.addEventListener("mouseup", function () { dragX = null; });
  canvas.addEventListener("click", function (e) {
    if (moved) return;
    var rect = canvas.getBoundingClientRect(), x = e.clientX - rect.left, y = e.clientY - rect.top;
    var l = Math.floor((y - AXIS - BAND) / laneH), t = view0 + (x - LEFT) / scale(), tol = 3 / scale();
    if (l < 0 || l >= lanes || x < LEFT) return;
    var best = -1;
    for (var i = 0; i < n; i++) {
      if (lane[i] !== l || start[i] - tol > t || stop[i] + tol < t) continue;
      if (best < 0 || SEVERITY[outcome[i]] > SEVERITY[outcome[best]]) best = i;
    }
    if (best < 0) { details.textContent = "No op at " + t.toFixed(4) + " s on lane w" + l + "."; return; }
    var text = "op " + index[best] + " · process " + proc[best] + " · " + data.f_names[fcode[best]] + " · " +
      data.outcomes[outcome[best]] + " · " + start[best].toFixed(4) + " → " + stop[best].toFixed(4) + " s (" +
      ((stop[best] - start[best]) * 1000).toFixed(1) + " ms)";
    if (data.values) text += " · " + data.values[best];
    details.textContent = text;
  });
  window.addEventListener("resize", draw);
  draw();
})();
