// attncli's interactive page. It reads its documents from the JSON element #attncli-data
// and draws each by its "command": the head view (BertViz's: a line from each attending
// token to each attended one, its opacity the weight), the model view (every layer's every
// head as a thumbnail), the heatmap (a tooltip a cell: ω, the scaled score, α), compare's
// sentences side by side, contributions' matrices by method and layer, stats' heads (with
// --document, every head's distance and tenths profiles too), and a long document's rows
// chosen (scores --rows), a strip each over all its pieces.
// Every text from a document is set with textContent, or drawn on a canvas, never as HTML. Lines and cells are
// drawn on canvases, so that 512 tokens (262,144 lines a head) stay quick.
"use strict";

const PARSING = performance.now();
const DATA = JSON.parse(document.getElementById("attncli-data").textContent);
window.attncliParse = performance.now() - PARSING; // the JSON read
const COLOURS = DATA.colours;
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];
const ROW = 16; // px: a token's line in the head view
const BUCKETS = 24; // opacities the head view's lines are drawn in, a path each
const TOP = 5;
// the heatmaps' axes, as the PNG names them (views/plot.py)
const WEIGHT_AXES = ["attending token i", "attended token j"];
const CONTRIBUTION_AXES = ["receiving token i", "contributing token j"];
const OVERVIEW_LEAST = 0.01; // the least weight the head view draws a line for with no token focused
const LINE_BUDGET = 6000; // and the most lines it draws then, the heaviest

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function num(x, digits = 4) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

function rgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

const VIRIDIS_RGB = VIRIDIS.map(rgb);

function viridis(t) { // t in [0, 1] -> [r, g, b]
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS_RGB.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS_RGB.length - 2);
  const f = x - i;
  return VIRIDIS_RGB[i].map((c, k) => Math.round(c + (VIRIDIS_RGB[i + 1][k] - c) * f));
}

const LUT = new Uint8Array(256 * 3); // viridis at 256 steps, for images drawn a pixel a number
for (let k = 0; k < 256; k++) LUT.set(viridis(k / 255), 3 * k);

const UNDEFINED_RGB = [190, 190, 190]; // a cell whose number is undefined (null): grey, off the viridis scale

function paint(image, M, lo, span) { // image.data from the T x T matrix M, (v - lo) / span on viridis
  const T = M.length, data = image.data;
  for (let i = 0; i < T; i++) {
    const row = M[i];
    for (let j = 0; j < T; j++) {
      if (row[j] === null) {
        data.set([...UNDEFINED_RGB, 255], 4 * (i * T + j));
        continue;
      }
      let k = Math.round((row[j] - lo) / span * 255);
      k = 3 * (k < 0 ? 0 : k > 255 ? 255 : k);
      const at = 4 * (i * T + j);
      data[at] = LUT[k]; data[at + 1] = LUT[k + 1]; data[at + 2] = LUT[k + 2]; data[at + 3] = 255;
    }
  }
}

function luminance([r, g, b]) {
  const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

function textOn(colour) { // black or white, whichever contrasts more
  const l = luminance(colour);
  return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? "#000" : "#fff";
}

function maxOf(M) {
  let m = 0;
  for (const row of M) for (const v of row) if (v > m) m = v;
  return m || 1;
}

function topOf(row, tokens, skip) { // the TOP largest of a row: [[index, weight], ...]
  const order = row.map((w, j) => [j, w]).filter(([j]) => j !== skip);
  order.sort((a, b) => b[1] - a[1]);
  return order.slice(0, TOP);
}

function section(parent, heading, note) {
  const s = el("section", {"class": "view"});
  s.appendChild(el("h2", {}, heading));
  if (note) s.appendChild(el("p", {"class": "note"}, note));
  parent.appendChild(s);
  return s;
}

function select(parent, label, options, onChange, value) {
  const l = el("label", {}, label + " ");
  const s = el("select", {});
  options.forEach(([v, text]) => s.appendChild(el("option", {value: v}, text)));
  if (value !== undefined) s.value = String(value);
  s.addEventListener("change", () => onChange(s.value));
  l.appendChild(s);
  parent.appendChild(l);
  return s;
}

// --- the head view --------------------------------------------------------------------------

class HeadView {
  // heads: [{name, colour, W: T x T}], the last the mean where there is one
  constructor(parent, tokens, special) {
    this.tokens = tokens;
    this.special = special || [];
    this.root = el("div", {"class": "headview", role: "group", "aria-label": "head view"});
    this.left = el("div", {"class": "column left", role: "list", "aria-label": "attending tokens"});
    this.canvas = el("canvas", {role: "img"});
    this.right = el("div", {"class": "column right", role: "list", "aria-label": "attended tokens"});
    this.top = el("div", {"class": "top", "aria-live": "polite", id: "top-attended"});
    this.root.append(this.left, this.canvas, this.right, this.top);
    if (parent) parent.appendChild(this.root);
    this.buttons = [[], []];
    [this.left, this.right].forEach((column, side) => tokens.forEach((t, i) => {
      const b = el("button", {"data-index": i, "data-side": side ? "attended" : "attending", role: "listitem",
        "aria-label": `${side ? "attended" : "attending"} token ${i}: ${t}`}, t);
      b.style.height = ROW + "px";
      if (this.special[i]) b.classList.add("special");
      b.addEventListener("mouseenter", () => this.focus(i, side));
      b.addEventListener("focus", () => this.focus(i, side));
      b.addEventListener("mouseleave", () => this.focus(null));
      b.addEventListener("blur", () => this.focus(null));
      b.addEventListener("keydown", (e) => this.key(e, i, side));
      column.appendChild(b);
      this.buttons[side].push(b);
    }));
    const dpr = window.devicePixelRatio || 1;
    this.width = 220;
    this.height = tokens.length * ROW;
    this.canvas.width = this.width * dpr;
    this.canvas.height = this.height * dpr;
    this.canvas.style.width = this.width + "px";
    this.canvas.style.height = this.height + "px";
    this.ctx = this.canvas.getContext("2d");
    this.ctx.scale(dpr, dpr);
    this.heads = [];
    this.focused = null;
  }

  show(heads) {
    this.heads = heads;
    this.canvas.setAttribute("aria-label", `lines from each attending token to each attended one, for ${
      heads.map((h) => h.name).join(", ") || "no head"}; their opacity is the weight`);
    this.focus(this.focused ? this.focused[0] : null, this.focused ? this.focused[1] : 0);
  }

  key(e, i, side) {
    const next = {ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: this.tokens.length - 1}[e.key];
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      this.buttons[e.key === "ArrowRight" ? 1 : 0][i].focus();
      e.preventDefault();
    } else if (next !== undefined && next >= 0 && next < this.tokens.length) {
      this.buttons[side][next].focus();
      e.preventDefault();
    }
  }

  focus(i, side = 0) {
    const start = performance.now();
    this.focused = i === null ? null : [i, side];
    for (const column of this.buttons) for (const b of column) b.classList.remove("active");
    if (i !== null) this.buttons[side][i].classList.add("active");
    this.draw(i, side);
    if (i !== null || !this.top.childElementCount) this.showTop(i, side); // left as it was: nothing below moves
    window.attncliLastDraw = performance.now() - start;
    document.body.dataset.drawn = String(Number(document.body.dataset.drawn || 0) + 1);
  }

  draw(only, side) {
    const ctx = this.ctx, T = this.tokens.length, x0 = 4, x1 = this.width - 4;
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.lineWidth = 1;
    // every line of a token focused; of all of them, those of 1% or more (OVERVIEW_LEAST), a
    // weight under it being drawn at under 2% opacity, and of those the LINE_BUDGET heaviest:
    // 512 tokens have 262,144 lines a head, and a line's cost is its length in pixels
    const least = only === null ? OVERVIEW_LEAST : 0.5 / BUCKETS / 8;
    const rows = only === null || side === 1 ? [...Array(T).keys()] : [only];
    const found = this.heads.map((head) => {
      const lines = [];
      for (const i of rows) {
        const row = head.W[i];
        const [from, to] = only !== null && side === 1 ? [only, only + 1] : [0, T];
        for (let j = from; j < to; j++) if (row[j] >= least) lines.push(i, j, row[j]);
      }
      return lines;
    });
    let cutoff = least;
    const count = found.reduce((n, lines) => n + lines.length / 3, 0);
    if (only === null && count > LINE_BUDGET) {
      const weights = new Float64Array(count);
      let k = 0;
      for (const lines of found) for (let n = 2; n < lines.length; n += 3) weights[k++] = lines[n];
      weights.sort();
      cutoff = weights[count - LINE_BUDGET];
    }
    this.canvas.dataset.least = String(cutoff); // the least weight drawn
    this.heads.forEach((head, k) => {
      const paths = Array.from({length: BUCKETS}, () => new Path2D());
      const used = new Uint8Array(BUCKETS);
      const lines = found[k];
      for (let n = 0; n < lines.length; n += 3) {
        const w = lines[n + 2];
        if (w < cutoff) continue;
        const b = Math.min(BUCKETS - 1, Math.floor(w * BUCKETS));
        paths[b].moveTo(x0, lines[n] * ROW + ROW / 2);
        paths[b].lineTo(x1, lines[n + 1] * ROW + ROW / 2);
        used[b] = 1;
      }
      ctx.strokeStyle = head.colour;
      for (let b = 0; b < BUCKETS; b++) {
        if (!used[b]) continue;
        ctx.globalAlpha = Math.min(1, (b + 0.5) / BUCKETS * 1.2 + 0.04);
        ctx.stroke(paths[b]);
      }
    });
    ctx.globalAlpha = 1;
  }

  showTop(i, side) {
    this.top.replaceChildren();
    if (i === null) {
      this.top.appendChild(el("p", {"class": "note"}, "Hover over a token, or move to one with Tab and the arrow keys, " +
        "to see only its lines and what it attends to most."));
      return;
    }
    const attending = side === 0;
    this.top.appendChild(el("h3", {}, attending ? `${this.tokens[i]} (${i}) attends most to` :
      `attended most by, of ${this.tokens[i]} (${i})`));
    for (const head of this.heads) {
      const list = el("ul", {"data-head": head.name});
      const label = el("li", {});
      const swatch = el("span", {"class": "swatch"});
      swatch.style.background = head.colour;
      label.append(swatch, document.createTextNode(head.name));
      list.appendChild(label);
      const row = attending ? head.W[i] : head.W.map((r) => r[i]);
      for (const [j, w] of topOf(row, this.tokens, -1)) {
        list.appendChild(el("li", {"data-index": j, "data-weight": w}, `${num(w)}  ${this.tokens[j]} (${j})`));
      }
      this.top.appendChild(list);
    }
  }
}

// --- the heatmap ----------------------------------------------------------------------------

const LABEL_PX = 14; // the least room an axis label has, its 13 px line and a pixel between

function labelled(T, cell) { // the cells an axis of T labels: every k-th from the first, k = ⌈LABEL_PX / cell⌉
  const k = Math.ceil(LABEL_PX / cell);
  return Array.from({length: Math.ceil(T / k)}, (_, n) => n * k);
}

const SCALE_TICKS = 3; // the numbers beside the colour scale: its ends and its middle

class Heatmap {
  // a T x T grid on one canvas, its rows and columns labelled with the tokens (every k-th,
  // labelled()), the colour scale beside it with its numbers, and a tooltip a cell.
  // axes: the rows' and the columns' names; symbol: what a cell's number is (α, c_ij)
  constructor(parent, label, axes, symbol) {
    this.root = el("div", {"class": "heatmap"});
    this.root.appendChild(el("p", {"class": "axes"}, `rows: ${axes[0]}, columns: ${axes[1]}`));
    const figure = el("div", {"class": "figure"});
    this.columns = el("div", {"class": "labels columns", "aria-hidden": "true"});
    this.rows = el("div", {"class": "labels rows", "aria-hidden": "true"});
    this.canvas = el("canvas", {tabindex: 0, role: "img", "aria-label": label});
    this.legend = el("div", {"class": "legend", role: "img"});
    this.legend.appendChild(el("span", {"class": "symbol"}, symbol));
    this.bar = el("div", {"class": "bar"});
    this.bar.style.background = `linear-gradient(to top, ${VIRIDIS.join(", ")})`; // viridis() between the same stops
    this.ticks = el("div", {"class": "ticks"});
    const scale = el("div", {"class": "scale"});
    scale.append(this.bar, this.ticks);
    this.undefinedKey = el("div", {"class": "undefined"}); // shown where a number is undefined (null)
    const grey = el("span", {"class": "swatch"});
    grey.style.background = `rgb(${UNDEFINED_RGB})`;
    this.undefinedKey.append(grey, document.createTextNode("undefined"));
    this.legend.append(scale, this.undefinedKey);
    this.symbol = symbol;
    figure.append(this.columns, this.rows, this.canvas, this.legend);
    this.tip = el("div", {"class": "tooltip", role: "status", "aria-live": "polite", id: "cell"});
    this.root.append(figure, this.tip);
    parent.appendChild(this.root);
    this.cursor = [0, 0];
    this.labelledFor = null;
    this.canvas.addEventListener("mousemove", (e) => {
      const r = this.canvas.getBoundingClientRect();
      const j = Math.floor((e.clientX - r.left) / this.cell), i = Math.floor((e.clientY - r.top) / this.cell);
      if (i >= 0 && j >= 0 && i < this.T && j < this.T) this.point(i, j);
    });
    this.canvas.addEventListener("keydown", (e) => {
      const [i, j] = this.cursor;
      const to = {ArrowUp: [i - 1, j], ArrowDown: [i + 1, j], ArrowLeft: [i, j - 1], ArrowRight: [i, j + 1]}[e.key];
      if (to && to[0] >= 0 && to[1] >= 0 && to[0] < this.T && to[1] < this.T) {
        this.point(...to);
        e.preventDefault();
      }
    });
    this.canvas.addEventListener("focus", () => this.point(...this.cursor));
  }

  // M: T x T numbers, tokens: their T labels (special: the markers among them)
  show(M, tokens, describe, {diverging = false, special = []} = {}) {
    this.M = M;
    this.T = M.length;
    this.describe = describe;
    this.cell = Math.max(2, Math.min(40, Math.floor(560 / Math.max(this.T, 1))));
    const image = new ImageData(this.T || 1, this.T || 1);
    let lo = 0, hi = 0;
    for (const row of M) for (const v of row) { if (v === null) continue; if (v < lo) lo = v; if (v > hi) hi = v; }
    if (diverging) { hi = Math.max(-lo, hi) || 1; lo = -hi; } // 0 in the middle of the scale
    paint(image, M, lo, (hi - lo) || 1);
    const source = el("canvas", {width: this.T || 1, height: this.T || 1});
    source.getContext("2d").putImageData(image, 0, 0);
    this.canvas.width = this.canvas.height = this.T * this.cell;
    const ctx = this.canvas.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(source, 0, 0, this.T * this.cell, this.T * this.cell);
    if (this.labelledFor !== tokens) this.label(tokens, special);
    this.scale(lo, hi);
    this.tip.textContent = "Point at a cell, or focus the grid and use the arrow keys.";
  }

  label(tokens, special) { // the axes' labels, made again only for other tokens
    this.labelledFor = tokens;
    const T = tokens.length, cell = this.cell;
    const nudge = cell / 2 - (LABEL_PX - 1) / 2; // a label's line centred on its cell
    this.rows.replaceChildren();
    this.columns.replaceChildren();
    for (const i of labelled(T, cell)) {
      const room = Math.min(Math.ceil(LABEL_PX / cell), T - i) * cell; // its cell and those up to the next label
      for (const [axis, along] of [[this.rows, "height"], [this.columns, "width"]]) {
        const slot = el("div", {});
        slot.style[along] = room + "px";
        const text = el("span", {"data-index": i, "class": special[i] ? "special" : ""}, tokens[i]);
        text.style[along === "height" ? "top" : "left"] = nudge + "px";
        slot.appendChild(text);
        axis.appendChild(slot);
      }
    }
    this.rows.style.height = this.columns.style.width = T * cell + "px";
  }

  scale(lo, hi) { // the colour scale's numbers: hi at the top, lo at the bottom
    // as tall as the grid less the symbol's line above it, within 96 and 216 px
    this.bar.style.height = Math.min(Math.max(this.T * this.cell - 24, 96), 216) + "px";
    this.ticks.replaceChildren();
    for (let n = 0; n < SCALE_TICKS; n++) {
      const v = hi - (hi - lo) * n / (SCALE_TICKS - 1);
      const tick = el("span", {"data-value": v}, num(v));
      tick.style.top = (100 * n / (SCALE_TICKS - 1)) + "%";
      this.ticks.appendChild(tick);
    }
    const missing = this.M.some((row) => row.some((v) => v === null));
    this.undefinedKey.hidden = !missing;
    this.legend.setAttribute("aria-label", `colour scale of ${this.symbol}: from ${num(lo)}, dark purple, ` +
      `to ${num(hi)}, yellow${missing ? "; grey where a number is undefined" : ""}`);
  }

  point(i, j) {
    this.cursor = [i, j];
    this.tip.textContent = this.describe(i, j).join("\n");
    this.tip.dataset.row = i;
    this.tip.dataset.column = j;
  }
}

// --- the views of each command --------------------------------------------------------------

function headsOf(doc) { // the heads of a scores document: [{name, colour, W}], the mean last
  const heads = (doc.heads || []).map((h, k) => ({name: `head ${k + 1}`, colour: COLOURS[k % COLOURS.length],
    W: h.weights}));
  if (heads.length !== 1) heads.push({name: "mean", colour: "#000000", W: doc.weights});
  return heads;
}

function headToggles(parent, heads, onChange, initial) {
  const box = el("fieldset", {"class": "controls toggles"});
  box.appendChild(el("legend", {}, "heads shown"));
  const inputs = heads.map((h, k) => {
    const l = el("label", {});
    const input = el("input", {type: "checkbox", "data-head": h.name});
    input.checked = initial(k, h);
    const swatch = el("span", {"class": "swatch"});
    swatch.style.background = h.colour;
    l.append(input, swatch, document.createTextNode(h.name));
    box.appendChild(l);
    input.addEventListener("change", () => onChange(chosen()));
    return input;
  });
  const chosen = () => heads.filter((_, k) => inputs[k].checked);
  parent.appendChild(box);
  return {chosen, set(names) { inputs.forEach((input, k) => { input.checked = names.includes(heads[k].name); }); onChange(chosen()); }};
}

function scoresCell(doc, W, S) {
  return (i, j) => {
    const t = doc.tokens;
    const lines = [`row ${i} ${t[i]}  ->  column ${j} ${t[j]}`];
    if (S) {
      const scaled = S[i][j] * doc.scale / doc.temperature;
      lines.push(`ω = q_i · k_j = ${num(S[i][j])}`,
        `scaled score = ω × ${num(doc.scale, 6)} / ${num(doc.temperature, 2)} = ${num(scaled)}`);
    }
    lines.push(`α = ${num(W[i][j])}`, "α_ij = exp(s_ij) / Σ_k exp(s_ik), s = scaled score");
    return lines;
  };
}

function scoresView(app, doc) {
  const heads = headsOf(doc);
  const s1 = section(app, "Head view", heads.length > 1 ? `The mean of the ${heads.length - 1} heads, in black. ` +
    "Tick a head to add its lines in its colour; the heatmap below shows the head chosen there." : "");
  const view = new HeadView(null, doc.tokens, doc.special);
  const toggles = headToggles(s1, heads, (chosen) => view.show(chosen),
    (k, h) => heads.length === 1 || h.name === "mean");
  s1.appendChild(view.root);
  view.show(toggles.chosen());
  const s2 = section(app, "Heatmap", "Row i attends to column j with weight α_ij; point at a cell for its numbers.");
  const controls = el("div", {"class": "controls"});
  s2.appendChild(controls);
  const map = new Heatmap(s2, "the attention weights as a grid of colours, row i the attending token", WEIGHT_AXES,
    "α");
  const draw = (k) => {
    const h = heads[k];
    const S = h.name === "mean" ? doc.scores : (doc.heads[k] || {}).scores;
    map.show(h.W, doc.tokens, scoresCell(doc, h.W, S), {special: doc.special});
  };
  if (heads.length > 1) select(controls, "head", heads.map((h, k) => [k, h.name]), (v) => draw(Number(v)),
    heads.length - 1);
  draw(heads.length - 1);
  return {headView: view, heatmap: map, toggles};
}

function thumbnail(W, size) {
  const T = W.length;
  const image = new ImageData(T, T);
  paint(image, W, 0, maxOf(W));
  const source = el("canvas", {width: T, height: T});
  source.getContext("2d").putImageData(image, 0, 0);
  const c = el("canvas", {width: size, height: size, "aria-hidden": "true"});
  const ctx = c.getContext("2d");
  ctx.imageSmoothingEnabled = T > size;
  ctx.drawImage(source, 0, 0, size, size);
  return c;
}

function headsView(app, doc) {
  const L = doc.weights.length, H = L ? doc.weights[0].length : 0;
  const firstLayer = doc.layer || 1, firstHead = doc.head || 1;
  const name = (l, h) => `layer ${firstLayer + l} head ${firstHead + h}`;
  const shares = doc.first_share || doc.special_share;
  const what = doc.first_share ? "the first position" : "the markers";
  const s0 = section(app, "Model view", `Every layer's every head (rows: layers, columns: heads); a head ` +
    `with a thick border puts more than half its attention on ${what}. Click one to see it in the head view.`);
  const grid = el("div", {"class": "heads", role: "grid"});
  grid.style.gridTemplateColumns = `repeat(${H}, auto)`;
  s0.appendChild(grid);
  const s1 = section(app, "Head view", H > 1 ? `The mean of the layer's ${H} heads, in black. Tick a head to ` +
    "add its lines in its colour, or click a head in the model view to see it alone." : "");
  const controls = el("div", {"class": "controls"});
  s1.appendChild(controls);
  const view = new HeadView(null, doc.tokens, doc.special);
  let layer = 0;
  const means = [];
  const meanAt = (l) => { // the layer's mean over its heads, as the terminal's mean is: made once, when asked for
    if (!means[l]) {
      const heads = doc.weights[l], T = heads[0].length;
      means[l] = Array.from({length: T}, (_, i) => {
        const row = new Array(T).fill(0);
        for (const W of heads) for (let j = 0; j < T; j++) row[j] += W[i][j];
        return row.map((sum) => sum / heads.length);
      });
    }
    return means[l];
  };
  const headsAt = (l) => {
    const heads = doc.weights[l].map((W, h) => ({name: `head ${firstHead + h}`,
      colour: COLOURS[(firstHead + h - 1) % COLOURS.length], W}));
    if (heads.length > 1) heads.push({name: "mean", colour: "#000000", get W() { return meanAt(l); }});
    return heads;
  };
  let toggles = null;
  const toggleBox = el("div", {});
  s1.appendChild(toggleBox);
  s1.appendChild(view.root);
  const s2 = section(app, "Heatmap", "The head opened (at first the layer's mean), row i attending to column j.");
  const map = new Heatmap(s2, "the weights of the head opened as a grid of colours", WEIGHT_AXES, "α");
  const buttons = [];
  const first = () => [H > 1 ? H : 0]; // a layer opens on its heads' mean, or on its only head
  const open = (l, hs) => { // hs: the heads shown, indices of headsAt(l) (H: the mean); the heatmap's the first
    layer = l;
    layerSelect.value = String(l);
    toggleBox.replaceChildren();
    const heads = headsAt(l);
    toggles = headToggles(toggleBox, heads, (chosen) => view.show(chosen), (k) => hs.includes(k));
    view.show(toggles.chosen());
    const h = hs[0], W = heads[h].W;
    const title = h === H ? `layer ${firstLayer + l}, the mean of its ${H} heads` : name(l, h);
    map.show(W, doc.tokens, (i, j) => [`${title}: row ${i} ${doc.tokens[i]}  ->  column ${j} ${doc.tokens[j]}`,
      `α = ${num(W[i][j])}`, "α_ij = exp(s_ij) / Σ_k exp(s_ik)"], {special: doc.special});
    buttons.forEach((b) => b.classList.toggle("chosen", Number(b.dataset.layer) === l && hs.includes(Number(b.dataset.head))));
    state.layer = l; state.heads = hs;
  };
  const layerSelect = select(controls, "layer", doc.weights.map((_, l) => [l, `layer ${firstLayer + l}`]),
    (v) => open(Number(v), first()));
  const state = {};
  for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) {
    const share = shares ? shares[l][h] : null;
    const label = name(l, h) + (share !== null ? `, ${num(share * 100, 0)}% on ${what}` : "");
    const b = el("button", {"data-layer": l, "data-head": h, "aria-label": label, title: label, role: "gridcell"});
    if (share !== null && share > 0.5) b.classList.add("marked");
    b.appendChild(thumbnail(doc.weights[l][h], 56));
    b.appendChild(el("span", {}, `${firstLayer + l}.${firstHead + h}${share !== null && share > 0.5 ? " *" : ""}`));
    b.addEventListener("click", () => { open(l, [h]); view.root.scrollIntoView({block: "nearest"}); });
    grid.appendChild(b);
    buttons.push(b);
  }
  open(0, first());
  return {headView: view, heatmap: map, open, state};
}

function contextView(app, doc) {
  const s = section(app, `What ${doc.token} (${doc.index}) attends to`,
    "Its row of α, the weights of its context vector z_i = Σ_j α_ij v_j.");
  const bars = el("div", {"class": "bars", role: "list"});
  const m = Math.max(...doc.weights, 1e-12);
  doc.weights.forEach((w, j) => {
    const row = el("div", {role: "listitem", "data-index": j, "data-weight": w});
    const bar = el("span", {"class": "bar"});
    bar.style.width = (w / m * 240).toFixed(1) + "px";
    row.append(el("span", {}, `${num(w)}  `), bar, el("span", {}, ` ${doc.tokens[j]} (${j})`));
    bars.appendChild(row);
  });
  s.appendChild(bars);
  for (const [key, heading] of [["neighbors", "nearest words to its context vector"],
    ["token_neighbors", "nearest words to its own vector"]]) {
    if (!doc[key] || !doc[key].length) continue;
    s.appendChild(el("h3", {}, heading));
    const list = el("ul", {"class": "neighbors", "data-key": key});
    doc[key].forEach((n) => list.appendChild(el("li", {"data-cosine": n.cosine}, `${num(n.cosine, 3)}  ${n.word}`)));
    s.appendChild(list);
  }
}

function tableOf(parent, caption, header, rows, explanation) {
  // a table of numbers to 3 places (as the terminal's), with what they are under it where given
  const t = el("table", {"class": "numbers"});
  t.appendChild(el("caption", {}, caption));
  const head = el("tr", {});
  header.forEach((h) => head.appendChild(el("th", {scope: "col"}, h)));
  t.appendChild(head);
  rows.forEach(([name, values]) => {
    const tr = el("tr", {});
    tr.appendChild(el("th", {scope: "row"}, name));
    values.forEach((v) => tr.appendChild(el("td", {"data-value": v === null ? "" : v}, num(v, 3))));
    t.appendChild(tr);
  });
  if (explanation === undefined) {
    parent.appendChild(t);
    return t;
  }
  const box = el("div", {"class": "captioned"});
  box.append(t, el("p", {"class": "caption"}, explanation));
  parent.appendChild(box);
  return t;
}

function quoted(text) { // a text as Python's repr() writes it, as the terminal's views name a token
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escapes = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", [q]: "\\" + q};
  return q + [...text].map((c) => escapes[c] || c).join("") + q;
}

function offDiagonal(M) { // the defined cosines between different sentences
  return M.flatMap((row, a) => row.filter((x, b) => a !== b && x !== null));
}

function span(values) { // "0.963", or "0.951 to 0.985", as the terminal writes a range of cosines
  if (!values.length) return "undefined";
  const low = num(Math.min(...values), 3), high = num(Math.max(...values), 3);
  return low === high ? low : `${low} to ${high}`;
}

// compare's page shows what the terminal's compare view does (views/sentence.py), by the same
// names and in the same words, each table with what its numbers are under it
function compareView(app, doc) {
  const docs = doc.sentences, token = quoted(doc.token);
  const labels = docs.map((_, k) => `(${k + 1})`);
  const s = section(app, `${token} in ${docs.length.toLocaleString("en-US")} sentences`,
    "Each sentence's tokens coloured by the weight the word gives them (its row of α); point at one for its α.");
  const box = el("div", {"class": "sentences"});
  docs.forEach((d, k) => {
    const part = el("div", {"class": "tokens", "data-sentence": k});
    part.appendChild(el("h3", {}, `${labels[k]} ${d.sentence}`));
    const m = Math.max(...d.weights, 1e-12);
    d.tokens.forEach((t, j) => {
      const colour = viridis(d.weights[j] / m);
      const piece = el("span", {title: `α = ${num(d.weights[j])}`, "data-weight": d.weights[j]}, t);
      piece.style.background = `rgb(${colour})`;
      piece.style.color = textOn(colour);
      if (j === d.index) piece.classList.add("followed");
      part.appendChild(piece);
    });
    box.appendChild(part);
  });
  s.appendChild(box);
  const summary = (text) => s.appendChild(el("p", {"class": "summary"}, text));
  const notes = () => (doc.notes || []).forEach((n) => s.appendChild(el("p", {"class": "note"}, n)));
  if (doc.hidden_cosine) { // a model's: its hidden states layer by layer, and the word vectors' for contrast
    const pairs = [];
    for (let a = 0; a < docs.length; a++) for (let b = a + 1; b < docs.length; b++) pairs.push([a, b]);
    s.appendChild(el("h3", {}, `cosine of the hidden states of ${token} between the sentences:`));
    tableOf(s, "hidden states", ["after", ...pairs.map(([a, b]) => `${labels[a]}-${labels[b]}`)],
      doc.hidden_cosine.map((M, l) => [l ? `layer ${l}` : "embeddings", pairs.map(([a, b]) => M[a][b])]),
      "The cosine between the word's hidden states in two sentences, after the embeddings and after each " +
      "layer: 1 where the model holds the word the same in both, lower where the layers tell its uses apart.");
    if (doc.static) {
      summary(`over the word vectors ${doc.static.vectors}, with no learned projections, the context vectors of ` +
        `${token} have cosine ${span(offDiagonal(doc.static.context_cosine))} (raw vectors: ` +
        `${span(offDiagonal(doc.static.raw_cosine))}): the trained model's learned W_Q, W_K, W_V and its layers ` +
        "are what let the sentences pull the word apart.");
    }
    notes();
    return;
  }
  s.appendChild(el("h3", {}, `cosines between the sentences' vectors of ${token}:`));
  const tables = el("div", {"class": "cosines"});
  s.appendChild(tables);
  tableOf(tables, "context vectors", ["", ...labels], doc.context_cosine.map((row, k) => [labels[k], row]),
    "The cosine between the word's context vectors in two sentences, z_i = Σ_j α_ij v_j: the word mixed " +
    "with each sentence's words by its weights.");
  tableOf(tables, "raw vectors", ["", ...labels], doc.raw_cosine.map((row, k) => [labels[k], row]),
    "The cosine between the word's raw vectors x_i, the vectors attention starts from: one word, one " +
    "vector, whatever the sentence.");
  notes();
  const identity = docs[0].qkv.kind === "identity";
  summary(`the context vectors of ${token} have cosine ${span(offDiagonal(doc.context_cosine))} between ` +
    `sentences (its raw vectors: ${span(offDiagonal(doc.raw_cosine))}). ` + (identity ?
    "With raw vectors and no learned projections, context barely moves a word: each token attends mostly to " +
    "itself, so its context vector stays near its own vector. Learned W_Q, W_K, W_V are what would let the " +
    "sentences pull it apart." : "These context vectors are sums of value vectors under the projections given."));
  if (!identity && !docs[0].qkv.trained) {
    summary("no nearest words for the context vectors: with projections they are sums of value vectors, not " +
      "word vectors");
    return;
  }
  const own = (docs[0].token_neighbors || []).map((n) => n.word);
  const near = el("table", {"class": "words"});
  near.appendChild(el("caption", {}, "nearest vocabulary words (* = not near the word itself)"));
  const head = el("tr", {});
  for (const h of [`${token} itself`, ...labels.map((l) => `context ${l}`)]) {
    head.appendChild(el("th", {scope: "col"}, h));
  }
  near.appendChild(head);
  const contexts = docs.map((d) => (d.neighbors || []).map((n) => n.word));
  const rows = Math.max(own.length, ...contexts.map((c) => c.length));
  for (let r = 0; r < rows; r++) {
    const tr = el("tr", {});
    tr.appendChild(el("td", {}, r < own.length ? own[r] : ""));
    for (const words of contexts) {
      const word = r < words.length ? words[r] : "";
      const moved = word && !own.includes(word);
      const cell = el("td", moved ? {"class": "moved"} : {}, moved ? `*${word}` : word);
      tr.appendChild(cell);
    }
    near.appendChild(tr);
  }
  s.appendChild(near);
}

function contributionsView(app, docs) {
  const doc0 = docs[0];
  const s = section(app, "Contributions", "Row i receives from column j: c_ij, by the method and layer chosen.");
  const controls = el("div", {"class": "controls"});
  s.appendChild(controls);
  const map = new Heatmap(s, "the contributions as a grid of colours, row i the receiving token", CONTRIBUTION_AXES,
    "c_ij");
  const notes = el("div", {"class": "notes"}); // why a number is undefined (a grey cell, "–")
  s.appendChild(notes);
  let doc = doc0, layer = doc0.layers.length - 1;
  const draw = () => {
    notes.replaceChildren(...(doc.notes || []).map((n) => el("p", {"class": "note"}, n)));
    const M = doc.contributions[layer];
    map.show(M, doc.tokens, (i, j) => [`${doc.method}, layer ${doc.layers[layer]}${doc.rollout ? " (rolled out)" : ""}`,
      `row ${i} ${doc.tokens[i]}  <-  column ${j} ${doc.tokens[j]}`, `c_ij = ${num(M[i][j])}`,
      `mixing ratio of row ${i} = ${num(doc.mixing_ratio[layer][i])}`],
    {diverging: M.some((r) => r.some((v) => v !== null && v < 0)), special: doc.special});
  };
  if (docs.length > 1) select(controls, "method", docs.map((d, k) => [k, d.method]), (v) => {
    doc = docs[Number(v)]; layer = Math.min(layer, doc.layers.length - 1); draw();
  });
  const layers = select(controls, "layer", doc0.layers.map((l, k) => [k, `layer ${l}`]), (v) => {
    layer = Number(v); draw();
  }, layer);
  layers.disabled = doc0.layers.length < 2;
  draw();
  return {heatmap: map};
}

function statsView(app, records) {
  const keys = Object.keys(records[0]).filter((k) => typeof records[0][k] === "number" && // counts are no statistic
    !["layer", "head", "sentences", "tokens", "importance_sentences", "redone_in_float64", "tenths_rows"].includes(k) &&
    !k.startsWith("rows"));
  const L = Math.max(...records.map((r) => r.layer)), H = Math.max(...records.map((r) => r.head));
  let profiles = null;
  if (records[0].distance_profile) {
    const p = section(app, "Where each head's attention goes along the text",
      "A block a layer, a row a head (▶ marks a sink head: on average more than 0.3 of a row's attention on the " +
      "first position). Left, the distance profile: a row's attention at distance 0, 1, 2–3, 4–7, … from the " +
      "attending piece; right, past the gap, the tenths profile: the last rows' attention on each tenth of the " +
      "text, first to last. Each coloured from 0, dark purple, to its largest over the heads, yellow.");
    profiles = new ProfileView(p, records);
  }
  const s = section(app, "What each head does across the corpus", "Rows: layers; columns: heads.");
  const controls = el("div", {"class": "controls"});
  s.appendChild(controls);
  const box = el("div", {});
  s.appendChild(box);
  const draw = (key) => {
    box.replaceChildren();
    const rows = [];
    for (let l = 1; l <= L; l++) {
      rows.push([`layer ${l}`, Array.from({length: H}, (_, h) => {
        const r = records.find((x) => x.layer === l && x.head === h + 1);
        return r ? r[key] : null;
      })]);
    }
    const t = tableOf(box, key, ["", ...Array.from({length: H}, (_, h) => `head ${h + 1}`)], rows);
    const values = rows.flatMap(([, v]) => v).filter((v) => v !== null);
    const lo = Math.min(...values), hi = Math.max(...values);
    t.querySelectorAll("td").forEach((td) => {
      if (td.dataset.value === "") return;
      const colour = viridis((Number(td.dataset.value) - lo) / ((hi - lo) || 1));
      td.style.background = `rgb(${colour})`;
      td.style.color = textOn(colour);
    });
  };
  select(controls, "statistic", keys.map((k) => [k, k]), draw);
  draw(keys[0]);
  return {profiles};
}

// stats --document's: every head's distance and tenths profiles on one canvas, a layer a
// block of H rows (a head a row), its columns the K distance buckets and, past a gap, the ten
// tenths; blocks side by side as the page's width holds them. Thousands of positions give
// a few more buckets, never more cells: 512 heads of 8,192 positions are 512 x 25 cells.
const PROFILE_CELL = 12; // px: a column's width
const PROFILE_HEADER = 18; // px: a block's title, "layer l"
const PROFILE_MARGIN = 30; // px: the head numbers left of a block, and a sink head's mark
const PROFILE_GAP = 16; // px: between blocks, and between the distance and the tenths columns

function bucketName(k) { // a distance_profile item's distances: 0, 1, 2–3, 4–7, ...
  return k < 2 ? String(k) : `${2 ** (k - 1)}–${2 ** k - 1}`;
}

class ProfileView {
  constructor(parent, records) {
    this.L = Math.max(...records.map((r) => r.layer));
    this.H = Math.max(...records.map((r) => r.head));
    this.K = records[0].distance_profile.length;
    this.at = {}; // "l.h": the head's record
    for (const r of records) this.at[`${r.layer}.${r.head}`] = r;
    this.row = Math.max(4, Math.min(16, Math.floor(240 / this.H))); // px: a head's row
    this.blockWidth = PROFILE_MARGIN + (this.K + 10) * PROFILE_CELL + PROFILE_GAP;
    this.blockHeight = PROFILE_HEADER + this.H * this.row;
    const available = Math.max(parent.clientWidth || 0, 400);
    this.across = Math.max(1, Math.min(this.L, Math.floor(available / (this.blockWidth + PROFILE_GAP))));
    this.down = Math.ceil(this.L / this.across);
    this.width = this.across * (this.blockWidth + PROFILE_GAP);
    this.height = this.down * (this.blockHeight + PROFILE_GAP);
    // each profile on its own scale, 0 to its largest number over the heads
    this.hi = ["distance_profile", "tenths_profile"].map((key) =>
      Math.max(...records.flatMap((r) => r[key]), 1e-12));
    const sinks = records.filter((r) => r.sink).length;
    this.canvas = el("canvas", {"class": "profiles", tabindex: 0, role: "img", "aria-label": `the distance and tenths profiles of ${
      records.length} heads, a layer a block, a head a row; ${sinks} sink heads marked with a triangle`});
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = this.width * dpr;
    this.canvas.height = this.height * dpr;
    this.canvas.style.width = this.width + "px";
    this.canvas.style.height = this.height + "px";
    this.legend = el("p", {"class": "note profile-scale"});
    this.legend.append(...this.hi.map((hi, k) => {
      const bar = el("span", {"class": "gradient", "data-value": hi});
      bar.style.background = `linear-gradient(to right, ${VIRIDIS.join(", ")})`;
      const part = el("span", {}, `${k ? "tenths" : "distance"}: 0 `);
      part.append(bar, document.createTextNode(` ${num(hi)}  `));
      return part;
    }));
    this.tip = el("div", {"class": "tooltip", role: "status", "aria-live": "polite", id: "profile"});
    parent.append(this.legend, this.canvas, this.tip);
    this.cursor = [1, 1, 0];
    this.pinned = null;
    this.canvas.addEventListener("mousemove", (e) => {
      const r = this.canvas.getBoundingClientRect();
      const found = this.cellAt(e.clientX - r.left, e.clientY - r.top);
      if (found && !this.pinned) this.point(...found);
    });
    this.canvas.addEventListener("click", (e) => { // a click holds a head's numbers; another lets go
      const r = this.canvas.getBoundingClientRect();
      const found = this.cellAt(e.clientX - r.left, e.clientY - r.top);
      this.pinned = this.pinned || !found ? null : found;
      if (found) this.point(...found);
    });
    this.canvas.addEventListener("keydown", (e) => {
      const [l, h, c] = this.cursor;
      const to = {ArrowUp: [l, h - 1, c], ArrowDown: [l, h + 1, c], ArrowLeft: [l, h, c - 1],
        ArrowRight: [l, h, c + 1], PageUp: [l - 1, h, c], PageDown: [l + 1, h, c]}[e.key];
      if (to && to[0] >= 1 && to[0] <= this.L && to[1] >= 1 && to[1] <= this.H && to[2] >= 0 &&
          to[2] < this.K + 10) {
        this.point(...to);
        e.preventDefault();
      }
    });
    this.canvas.addEventListener("focus", () => this.point(...this.cursor));
    this.draw(dpr);
    this.tip.textContent = "Point at a head's row, or focus the picture and use the arrow keys (Page Up and " +
      "Page Down for the layers); a click holds a head.";
  }

  origin(l) { // the top left corner of layer l's block
    const k = l - 1;
    return [(k % this.across) * (this.blockWidth + PROFILE_GAP), Math.floor(k / this.across) *
      (this.blockHeight + PROFILE_GAP)];
  }

  columnX(c) { // the left of column c within a block: the K buckets, then the ten tenths
    return PROFILE_MARGIN + c * PROFILE_CELL + (c >= this.K ? PROFILE_GAP : 0);
  }

  where(l, h, c) { // the middle of a cell, in the canvas's px (for the keyboard's and tests' sake)
    const [x, y] = this.origin(l);
    return [x + this.columnX(c) + PROFILE_CELL / 2, y + PROFILE_HEADER + (h - 1) * this.row + this.row / 2];
  }

  cellAt(x, y) { // [layer, head, column] under (x, y), or null
    const across = Math.floor(x / (this.blockWidth + PROFILE_GAP));
    const down = Math.floor(y / (this.blockHeight + PROFILE_GAP));
    const l = down * this.across + across + 1;
    if (across >= this.across || l > this.L) return null;
    const [x0, y0] = this.origin(l);
    const h = Math.floor((y - y0 - PROFILE_HEADER) / this.row) + 1;
    if (h < 1 || h > this.H) return null;
    const dx = x - x0 - PROFILE_MARGIN;
    let c = Math.floor(dx / PROFILE_CELL);
    if (c >= this.K) c = Math.floor((dx - PROFILE_GAP) / PROFILE_CELL);
    if (dx < 0) c = 0; // the head's numbers, the mark: the head all the same
    return c >= 0 && c < this.K + 10 ? [l, h, c] : null;
  }

  draw(dpr) {
    const ctx = this.canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    for (let l = 1; l <= this.L; l++) {
      const [x0, y0] = this.origin(l);
      ctx.fillStyle = "#000";
      ctx.textAlign = "left";
      ctx.fillText(`layer ${l}`, x0 + PROFILE_MARGIN, y0 + PROFILE_HEADER / 2);
      ctx.fillText("tenths", x0 + this.columnX(this.K), y0 + PROFILE_HEADER / 2);
      const label = Math.ceil(12 / this.row); // every k-th head numbered, 12 px a number
      for (let h = 1; h <= this.H; h++) {
        const r = this.at[`${l}.${h}`], y = y0 + PROFILE_HEADER + (h - 1) * this.row;
        if (!r) continue;
        ctx.fillStyle = "#000";
        if ((h - 1) % label === 0) {
          ctx.textAlign = "right";
          ctx.fillText(String(h), x0 + PROFILE_MARGIN - 9, y + this.row / 2);
        }
        if (r.sink) { // a triangle pointing at the row
          const mid = y + this.row / 2, size = Math.min(this.row / 2, 5);
          ctx.beginPath();
          ctx.moveTo(x0 + PROFILE_MARGIN - 1, mid);
          ctx.lineTo(x0 + PROFILE_MARGIN - 8, mid - size);
          ctx.lineTo(x0 + PROFILE_MARGIN - 8, mid + size);
          ctx.fill();
        }
        const values = [...r.distance_profile, ...r.tenths_profile];
        values.forEach((v, c) => {
          ctx.fillStyle = `rgb(${viridis(v / this.hi[c < this.K ? 0 : 1])})`;
          ctx.fillRect(x0 + this.columnX(c), y, PROFILE_CELL, this.row);
        });
      }
    }
  }

  point(l, h, c) {
    this.cursor = [l, h, c];
    const r = this.at[`${l}.${h}`];
    if (!r) return;
    // beside each number, uniform attention's (the same rows, every key they may see alike)
    const uniform = (r.baselines || {}).uniform || {};
    const pointed = (k, v, u, name) => `${k === c ? "→" : " "} ${name.padStart(11)}  ${num(v)}  ${num(u)}`;
    this.tip.textContent = [
      `layer ${l}, head ${h}${r.sink ? ", a sink head" : ""}: ${num(r.first)} of a row on the first position`,
      "distance profile (attention at |i − j|), the head's and uniform attention's:",
      ...r.distance_profile.map((v, k) => pointed(k, v, (uniform.distance_profile || [])[k], bucketName(k))),
      `tenths profile (the last ${r.tenths_rows} rows' attention on each tenth of the text), the head's and ` +
        "uniform attention's:",
      ...r.tenths_profile.map((v, t) => pointed(this.K + t, v, (uniform.tenths_profile || [])[t], `tenth ${t + 1}`)),
    ].join("\n");
    Object.assign(this.tip.dataset, {layer: l, head: h, column: c});
  }
}

// scores --rows: the rows chosen of a long document, each a strip over all T pieces on one
// canvas. Past ROWS_WIDTH positions a pixel column is a bin of ⌈T / ROWS_WIDTH⌉ positions,
// coloured by the bin's largest weight (a sum would wash a sharp look out, a mean more so), so
// that 8,192 positions are 683 columns of 12 and a single piece looked at still shows.
const ROWS_WIDTH = 720; // px: the strips' width at most, a pixel column a bin
const ROWS_LABEL = 140; // px: the row's position and piece, left of its strip
const ROWS_HEIGHT = 26; // px: a strip's
const ROWS_GAP = 6; // px: between strips
const ROWS_AXIS = 22; // px: the positions under the strips

function masked(doc, i, j) { // whether row i may not see position j, as the document's mask says
  if (!String(doc.mask || "").startsWith("causal")) return false;
  return j > i || (doc.window !== undefined && j <= i - doc.window);
}

class RowsView {
  constructor(parent, doc) {
    this.doc = doc;
    this.T = doc.tokens.length;
    this.K = doc.rows.length;
    this.bin = Math.max(1, Math.ceil(this.T / ROWS_WIDTH)); // positions a pixel column
    this.px = Math.max(1, Math.min(24, Math.floor(ROWS_WIDTH / this.T))); // pixel columns a bin: a short text wider
    this.bins = Math.ceil(this.T / this.bin);
    this.width = ROWS_LABEL + this.bins * this.px;
    this.height = this.K * (ROWS_HEIGHT + ROWS_GAP) + ROWS_AXIS;
    this.canvas = el("canvas", {"class": "rows", tabindex: 0, role: "img", "aria-label": `the attention of ${
      this.K} rows over all ${this.T} pieces, a strip a row, ${this.bin > 1 ? `a pixel column the largest weight of ${
      this.bin} positions` : "a column a position"}`});
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = this.width * dpr;
    this.canvas.height = this.height * dpr;
    this.canvas.style.width = this.width + "px";
    this.canvas.style.height = this.height + "px";
    this.legend = el("p", {"class": "note rows-scale"});
    this.tip = el("div", {"class": "tooltip", role: "status", "aria-live": "polite", id: "rows"});
    parent.append(this.legend, this.canvas, this.tip);
    this.cursor = [0, 0];
    this.canvas.addEventListener("mousemove", (e) => {
      const r = this.canvas.getBoundingClientRect();
      const found = this.cellAt(e.clientX - r.left, e.clientY - r.top);
      if (found) this.point(...found);
    });
    this.canvas.addEventListener("keydown", (e) => {
      const [k, b] = this.cursor;
      const to = {ArrowUp: [k - 1, b], ArrowDown: [k + 1, b], ArrowLeft: [k, b - 1], ArrowRight: [k, b + 1],
        Home: [k, 0], End: [k, this.bins - 1]}[e.key];
      if (to && to[0] >= 0 && to[0] < this.K && to[1] >= 0 && to[1] < this.bins) {
        this.point(...to);
        e.preventDefault();
      }
    });
    this.canvas.addEventListener("focus", () => this.point(...this.cursor));
    this.tip.textContent = "Point at a strip for the pieces under the pointer and their weights, or focus the " +
      "picture and use the arrow keys.";
  }

  where(k, b) { // the middle of row k's bin b, in the canvas's px
    return [ROWS_LABEL + b * this.px + this.px / 2, k * (ROWS_HEIGHT + ROWS_GAP) + ROWS_HEIGHT / 2];
  }

  cellAt(x, y) { // [row, bin] under (x, y), or null
    const k = Math.floor(y / (ROWS_HEIGHT + ROWS_GAP)), b = Math.floor((x - ROWS_LABEL) / this.px);
    const inside = y - k * (ROWS_HEIGHT + ROWS_GAP) < ROWS_HEIGHT;
    return k >= 0 && k < this.K && inside && b >= 0 && b < this.bins ? [k, b] : null;
  }

  largest(k, b) { // [position, weight] of bin b's largest weight in row k, the first of equals; null: all masked
    const row = this.W[k], i = this.doc.rows[k];
    let best = null;
    for (let j = b * this.bin; j < Math.min((b + 1) * this.bin, this.T); j++) {
      if (!masked(this.doc, i, j) && (best === null || row[j] > best[1])) best = [j, row[j]];
    }
    return best;
  }

  show(W, name) {
    this.W = W;
    this.name = name;
    this.hi = maxOf(W);
    this.legend.replaceChildren();
    const bar = el("span", {"class": "gradient", "data-value": this.hi});
    bar.style.background = `linear-gradient(to right, ${VIRIDIS.join(", ")})`;
    this.legend.append(`α, ${name}: 0 `, bar, ` ${num(this.hi)}; grey: masked`);
    const dpr = window.devicePixelRatio || 1;
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    this.doc.rows.forEach((i, k) => {
      const y = k * (ROWS_HEIGHT + ROWS_GAP);
      ctx.fillStyle = "#000";
      ctx.textAlign = "right";
      ctx.fillText(`${i} ${this.doc.tokens[i]}`.slice(0, 22), ROWS_LABEL - 6, y + ROWS_HEIGHT / 2, ROWS_LABEL - 8);
      for (let b = 0; b < this.bins; b++) {
        const best = this.largest(k, b);
        ctx.fillStyle = best === null ? "#d0d0d0" : `rgb(${viridis(best[1] / this.hi)})`;
        ctx.fillRect(ROWS_LABEL + b * this.px, y, this.px, ROWS_HEIGHT);
      }
    });
    const y = this.K * (ROWS_HEIGHT + ROWS_GAP) + ROWS_AXIS / 2;
    const every = Math.max(1, Math.ceil(80 / this.px)); // a position named every 80 px or so
    ctx.fillStyle = "#000";
    ctx.textAlign = "center";
    for (let b = 0; b < this.bins; b += every) ctx.fillText(String(b * this.bin), ROWS_LABEL + b * this.px, y);
    this.point(...this.cursor);
  }

  point(k, b) {
    this.cursor = [k, b];
    const i = this.doc.rows[k], t = this.doc.tokens, first = b * this.bin;
    const last = Math.min(first + this.bin, this.T) - 1;
    const best = this.largest(k, b);
    const span = first === last ? `position ${first} ${t[first]}` : `positions ${first}–${last}`;
    const lines = [`row ${i} ${t[i]} (${this.name})  ->  ${span}`];
    if (best === null) lines.push("masked: the row does not see them");
    else if (first === last) lines.push(`α = ${num(best[1])}`);
    else lines.push(`the largest: α = ${num(best[1])} at ${best[0]} ${t[best[0]]}`);
    this.tip.textContent = lines.join("\n");
    Object.assign(this.tip.dataset, {row: k, bin: b});
  }
}

function rowsView(app, doc) {
  const heads = headsOf(doc);
  const s = section(app, "Rows", `${doc.rows.length} rows of the ${doc.tokens.length} pieces, each over all of ` +
    "them: row i attends to position j with weight α_ij. Point at a strip for its numbers.");
  const controls = el("div", {"class": "controls"});
  s.appendChild(controls);
  const view = new RowsView(s, doc);
  const draw = (k) => view.show(heads[k].W, heads[k].name);
  if (heads.length > 1) select(controls, "head", heads.map((h, k) => [k, h.name]), (v) => draw(Number(v)),
    heads.length - 1);
  draw(heads.length - 1);
  return {rows: view};
}

// --- generate: what a decoder wrote, and where each written piece looked ---------------------

const GRID_CELL = 14; // px: a cell of the written rows' grid at most

function pieceOf(t) { // a written piece's name: none for an id the tokenizer names nothing
  return t === null ? "(no piece)" : t;
}

function shadingsOf(doc) { // what the pieces can be shaded by: each head's rows, the shown one's, the attribution
  const H = doc.heads && doc.heads.length ? doc.heads[0].length : 0;
  const out = [];
  for (let h = 0; h < H; h++) out.push({name: `head ${h + 1}`, rows: doc.heads.map((r) => r[h]), symbol: "α"});
  out.push({name: doc.head ? `head ${doc.head}` : "mean", rows: doc.weights, symbol: "α"});
  if (doc.attribution) out.push({name: doc.method + (doc.contrast ? ` against ${doc.contrast.token}` : ""),
    rows: doc.attribution, symbol: doc.method === "alti-logit" ? "logit" : doc.method, signed: true});
  return out;
}

function shade(value, largest, signed) { // a background for a value on its row's scale: viridis, or blue/red by sign
  if (value === null || value === undefined) return `rgb(${UNDEFINED_RGB})`;
  if (!signed) return `rgb(${viridis(Math.min(1, Math.max(0, value / (largest || 1))))})`;
  const t = Math.min(1, Math.abs(value) / (largest || 1));
  const [r, g, b] = value >= 0 ? [0, 114, 178] : [213, 94, 0];
  return `rgba(${r}, ${g}, ${b}, ${t.toFixed(3)})`;
}

class GeneratedView {
  // the prompt's pieces and the written ones; pointing at a written piece shades every piece
  // before it by the row of the step that chose it (the first position's weight, the sink,
  // said apart and left unshaded, the rest on the scale of their largest); a grid of the
  // written rows over every position under it
  constructor(parent, doc) {
    this.doc = doc;
    this.P = doc.prompt_length;
    this.text = el("div", {"class": "tokens written", role: "list", "aria-label": "the prompt and what was written"});
    this.spans = doc.tokens.map((t, i) => {
      const b = el("button", {"data-index": i, role: "listitem", "class": (i >= this.P ? "generated" : "") +
        (doc.special[i] ? " special" : ""), "aria-label": `${i >= this.P ? "written" : "prompt"} piece ${i}: ${t}`},
        pieceOf(t));
      if (i >= this.P) {
        b.addEventListener("mouseenter", () => this.point(i - this.P));
        b.addEventListener("focus", () => this.point(i - this.P));
      }
      this.text.appendChild(b);
      return b;
    });
    this.tip = el("div", {"class": "tooltip", role: "status", "aria-live": "polite", id: "written-row"});
    this.grid = el("canvas", {"class": "rows", role: "img", tabindex: 0,
      "aria-label": "each written piece's row (a line each) over every position before it"});
    this.gridTip = el("div", {"class": "tooltip", role: "status", "aria-live": "polite", id: "written-cell"});
    parent.append(this.text, this.tip, el("p", {"class": "caption"}, "Every written piece's row, a line each, " +
      "over the positions before it (grey: after it); point at a cell for its number."), this.grid, this.gridTip);
    this.grid.addEventListener("mousemove", (e) => {
      const r = this.grid.getBoundingClientRect();
      const k = Math.floor((e.clientY - r.top) / this.cell), j = Math.floor((e.clientX - r.left) / this.cell);
      if (k >= 0 && j >= 0 && k < this.rows.length && j < this.columns) this.pointCell(k, j);
    });
    this.k = 0;
  }

  show(shading) {
    this.shading = shading;
    this.rows = shading.rows;
    this.columns = this.doc.tokens.length - 1;
    this.cell = Math.max(2, Math.min(GRID_CELL, Math.floor(720 / Math.max(this.columns, 1))));
    const K = this.rows.length, C = this.columns;
    const image = new ImageData(C || 1, K || 1);
    const largest = this.largest();
    for (let k = 0; k < K; k++) for (let j = 0; j < C; j++) {
      const v = this.rows[k][j];
      const rgbText = j < this.rows[k].length ? shade(v, largest, shading.signed) : `rgb(${UNDEFINED_RGB})`;
      const m = rgbText.match(/[\d.]+/g).map(Number), a = m.length > 3 ? m[3] : 1;
      const o = 4 * (k * (C || 1) + j);
      for (let c = 0; c < 3; c++) image.data[o + c] = Math.round(255 - (255 - m[c]) * a); // on white
      image.data[o + 3] = 255;
    }
    const source = el("canvas", {width: C || 1, height: K || 1});
    source.getContext("2d").putImageData(image, 0, 0);
    this.grid.width = C * this.cell;
    this.grid.height = K * this.cell;
    const ctx = this.grid.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(source, 0, 0, this.grid.width, this.grid.height);
    this.gridTip.textContent = "Point at a cell.";
    this.point(this.k);
  }

  largest() { // the scale: past the first position for weights (the sink apart), every |value| for a signed row
    let m = 0;
    for (const row of this.rows) row.forEach((v, j) => {
      if (v !== null && (this.shading.signed || j > 0)) m = Math.max(m, Math.abs(v));
    });
    return m;
  }

  point(k) { // written piece k: every piece before it shaded by its row
    this.k = k;
    const row = this.rows[k] || [], largest = this.largest(), doc = this.doc, i = this.P + k;
    this.spans.forEach((b, j) => {
      b.classList.toggle("active", j === i);
      const sink = !this.shading.signed && j === 0;
      b.style.background = j < row.length && !sink ? shade(row[j], largest, this.shading.signed) : "";
      b.style.color = j < row.length && !sink && !this.shading.signed && row[j] / (largest || 1) < 0.5 ? "#fff" : "";
      if (j < row.length) b.dataset.value = row[j] === null ? "" : row[j]; else delete b.dataset.value;
    });
    const top = row.map((v, j) => [j, v]).filter(([j, v]) => v !== null && (this.shading.signed || j > 0))
      .sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 3);
    const lines = [`piece ${i} ${pieceOf(doc.tokens[i])}: log p = ${num(doc.logprobs[k])}` +
      (this.shading.signed ? "" : `, sink (position 0) ${num(row[0])}`),
      `${this.shading.name}, most: ` + top.map(([j, v]) => `${pieceOf(doc.tokens[j])} (${j}) ${num(v)}`).join(", ")];
    if (doc.logit && this.shading.signed) {
      const p = doc.logit[k];
      lines.push(`logit ${num(p.logit)} = positions ${num(p.positions)} + feed-forward ${num(p.feed_forward)} + ` +
        `own embedding ${num(p.embedding)} + biases ${num(p.attention_bias + p.norm_bias)}`);
    }
    this.tip.textContent = lines.join("\n");
  }

  pointCell(k, j) {
    const doc = this.doc, row = this.rows[k], i = this.P + k;
    this.gridTip.textContent = `row of piece ${i} ${pieceOf(doc.tokens[i])}  ->  position ${j} ${pieceOf(doc.tokens[j])}\n` +
      (j < row.length ? `${this.shading.symbol} = ${row[j] === null ? "undefined" : num(row[j])}` :
        "after it: the step did not see it");
    this.gridTip.dataset.row = k;
    this.gridTip.dataset.column = j;
  }
}

function generateView(app, doc) {
  const s = section(app, "What it wrote", "The prompt, then the written pieces (bold). Point at a written piece " +
    "to shade every piece before it by the row of the step that chose it: its weight on the first position, " +
    "the attention sink, is said apart, and the rest shaded on the scale of the largest past it.");
  const shadings = shadingsOf(doc);
  const controls = el("div", {"class": "controls"});
  s.appendChild(controls);
  const view = new GeneratedView(s, doc);
  const shown = shadings.findIndex((x) => x.name === (doc.head ? `head ${doc.head}` : "mean"));
  if (shadings.length > 1) select(controls, "shade by", shadings.map((x, k) => [k, x.name]),
    (v) => view.show(shadings[Number(v)]), shown);
  view.show(shadings[shown]);
  return {written: view};
}

// --- the page -------------------------------------------------------------------------------

function main() {
  const start = performance.now();
  const app = document.getElementById("app");
  document.getElementById("title").textContent = DATA.title;
  const docs = DATA.docs;
  window.attncli = {data: DATA, views: []};
  const command = docs.length ? docs[0].command : "";
  const groups = {};
  if (command === "contributions") { // a page of several methods: a selector over them, a sentence at a time
    docs.forEach((d) => { (groups[d.sentence] = groups[d.sentence] || []).push(d); });
  }
  if (command === "stats") {
    const records = docs[0].records;
    // by head; by word: the table view alone
    if (records.length && records[0].layer !== undefined) window.attncli.views.push(statsView(app, records));
  } else if (command === "contributions") {
    Object.values(groups).forEach((g) => {
      if (Object.keys(groups).length > 1) app.appendChild(el("h2", {}, g[0].sentence));
      window.attncli.views.push(contributionsView(app, g));
    });
  } else {
    docs.forEach((doc) => {
      if (docs.length > 1 && doc.sentence !== undefined) app.appendChild(el("h2", {"class": "sentence"}, doc.sentence));
      if (doc.command === "scores" && doc.rows && doc.weights) window.attncli.views.push(rowsView(app, doc));
      else if (doc.command === "scores" && doc.weights && doc.tokens) window.attncli.views.push(scoresView(app, doc));
      else if (doc.command === "heads" && doc.weights) window.attncli.views.push(headsView(app, doc));
      else if (doc.command === "context" && doc.weights && doc.token !== undefined) contextView(app, doc);
      else if (doc.command === "compare") compareView(app, doc);
      else if (doc.command === "generate" && doc.weights) window.attncli.views.push(generateView(app, doc));
    });
  }
  const d = docs[0] || {};
  const named = (x) => typeof x === "string" ? x : x.name; // stats names its model and vectors by a string
  const about = [d.model ? `model ${named(d.model)}` : d.vectors ? `vectors ${named(d.vectors)}` : "",
    d.layer ? `layer ${d.layer}` : "", d.scale !== undefined ? `scale ${num(d.scale, 6)}` : ""].filter(Boolean);
  document.getElementById("subtitle").textContent = about.join(", ");
  window.attncliFirstDraw = performance.now() - start; // the views drawn, from the script's start
  window.attncliReady = performance.now(); // and from the navigation's start: the HTML and JSON read too
  document.body.dataset.ready = "true";
  // the first frame painted: the callback of the frame after it
  requestAnimationFrame(() => requestAnimationFrame(() => { window.attncliPainted = performance.now(); }));
}

main();
