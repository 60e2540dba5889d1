// QleetOS web view: the dependency graph, object pages, plan previews and live updates, over the /v1 API.
// Hand-written, no build step, no dependency. Everything the page shows comes from the API with the token
// the user gives; the token stays in sessionStorage and travels only in the Authorization header.
'use strict';

const TOKEN_KEY = 'qleet.token';
const SVG_NS = 'http://www.w3.org/2000/svg';
const NODE_W = 252, NODE_H = 76, COL_GAP = 88, ROW_GAP = 22, BAND_PAD = 34, BAND_BOTTOM = 12, BAND_GAP = 14, LEFT = 24, TOP = 12;
const CLEAR = 6;        // the least room between an edge and a box it passes
const ARROW_ROOM = 18;  // room for the arrowhead between a provider and the nearest lane
const CORNER = 6;       // radius of an edge's bends
const NAME_FONT = '650 14px', DETAIL_FONT = '11.5px'; // as style.css draws .node .name and .node .detail
const MIN_FRAME_H = 420, MIN_ZOOM = 0.2, MAX_ZOOM = 3;
const PHASES = ['Ready', 'Reconciling', 'Pending', 'Failed', 'Deleting'];
const GLOBAL_BAND = 'global';

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  kinds: {},          // kind -> plural
  graph: null,        // last GET /v1/graph
  regions: {},        // runtime id -> region
  plan: null,         // last POST /v1/plans answer
  planError: '',
  planText: '',
  watch: null,        // AbortController of the watch stream
  refreshTimer: 0,
  updates: 0,         // live updates applied, for the curious (and the browser test)
  seq: 0,             // the latest render
  full: false,        // a render the user asked for has not drawn yet: the next render redraws everything
  graphSig: '',       // what the drawn graph shows, without its clocks and tooltips
  pageSig: '',        // what the object page shows, without its clocks
  view: { k: 1, x: 0, y: 0, user: false }, // the graph's zoom and pan (see showGraph)
  viewOf: '',         // the graph page the view belongs to
};

// ---------- DOM helpers (no innerHTML: every value is text) ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  return fill(el, attrs, children);
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  return fill(el, attrs, children);
}

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const $ = (sel) => document.querySelector(sel);

function humanKind(kind) { return (kind || '').replace(/_/g, ' '); }

// parseTime reads an RFC 3339 time from the API. The server sends nanoseconds, which Date would take
// as that many milliseconds: keep three digits.
function parseTime(t) { return new Date(String(t).replace(/(\.\d{3})\d+/, '$1')); }

function age(since) {
  if (!since) return '';
  let sec = Math.max(0, Math.floor((Date.now() - parseTime(since).getTime()) / 1000));
  const d = Math.floor(sec / 86400); sec -= d * 86400;
  const hr = Math.floor(sec / 3600); sec -= hr * 3600;
  const m = Math.floor(sec / 60); sec -= m * 60;
  if (d) return `${d}d${hr}h`;
  if (hr) return `${hr}h${m}m`;
  if (m) return `${m}m${sec}s`;
  return `${sec}s`;
}

function clock(t) {
  if (!t) return '';
  const d = parseTime(t);
  return isNaN(d) ? '' : d.toLocaleString();
}

// ---------- API ----------

class APIError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e ? `${e.code || status}: ${e.message || ''}` : `HTTP ${status}`);
    this.status = status;
    this.detail = e;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + state.token, Accept: 'application/json' };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* empty or not JSON */ }
  if (res.status === 401) {
    signOut('The server refused the token (401). Sign in again.');
    throw new APIError(401, data);
  }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

async function loadKinds() {
  const res = await fetch('kinds.json', { cache: 'no-store' });
  for (const k of await res.json()) state.kinds[k.kind] = k.plural;
}

// loadGraph reads the graph (only what root, "<kind>/<id>", is connected to, when given) and the
// runtimes' regions.
async function loadGraph(root) {
  const [g, rts] = await Promise.all([
    api('GET', '/v1/graph' + (root ? '?root=' + encodeURIComponent(root) : '')),
    api('GET', '/v1/kubernetes_runtimes?limit=1000'),
  ]);
  state.regions = {};
  for (const rt of rts.items || []) {
    state.regions[rt.id] = (rt.status && rt.status.region) || (rt.spec && rt.spec.region) || '';
  }
  state.graph = g;
}

// ---------- sign-in ----------

function showSignIn(message) {
  $('#nav').hidden = true;
  $('#signout').hidden = true;
  $('#live').hidden = true;
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'qlt_…', 'aria-label': 'API token' });
  const form = h('form', { id: 'signin-form', class: 'card signin', onsubmit: async (ev) => {
    ev.preventDefault();
    const tok = input.value.trim();
    if (!tok) return;
    state.token = tok;
    try {
      await api('GET', '/v1/graph');
    } catch (e) {
      if (e.status !== 401) showSignIn(`Could not reach the API: ${e.message}`);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, tok);
    start();
  } },
  h('h1', {}, 'Sign in'),
  h('p', { class: 'muted' }, 'Paste an API bearer token (e.g. the admin token in the data dir, or one from ',
    h('code', {}, 'qleet token create --role viewer'), '). It is kept in this tab only.'),
  message ? h('p', { id: 'signin-error', class: 'error' }, message) : null,
  input,
  h('button', { id: 'signin', type: 'submit' }, 'Sign in'));
  $('#main').replaceChildren(form);
  input.focus();
}

function signOut(message) {
  state.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.watch) state.watch.abort();
  state.watch = null;
  showSignIn(message);
}

// ---------- live updates: GET /v1/watch as a fetch stream (EventSource cannot send the header) ----------

function setLive(on) {
  const el = $('#live');
  el.hidden = false;
  el.textContent = on ? 'live' : 'reconnecting';
  el.classList.toggle('on', on);
}

async function watchLoop() {
  let delay = 500;
  while (state.token) {
    const ctrl = new AbortController();
    state.watch = ctrl;
    try {
      const res = await fetch('/v1/watch', { headers: { Authorization: 'Bearer ' + state.token }, signal: ctrl.signal, cache: 'no-store' });
      if (res.status === 401) { signOut('The server refused the token (401). Sign in again.'); return; }
      if (!res.ok || !res.body) throw new Error(`watch: HTTP ${res.status}`);
      setLive(true);
      delay = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = { event: 'message', data: '' };
          for (const line of block.split('\n')) {
            if (line.startsWith('event:')) ev.event = line.slice(6).trim();
            else if (line.startsWith('data:')) ev.data += line.slice(5).trim();
          }
          if (ev.event === 'ready' || ev.event === 'change') scheduleRefresh();
        }
      }
    } catch (e) {
      if (ctrl.signal.aborted) return;
    }
    if (!state.token) return;
    setLive(false);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

function scheduleRefresh() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(async () => {
    state.updates++;
    document.body.dataset.updates = String(state.updates);
    await render(true);
  }, 120);
}

// ---------- routing ----------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'object' && parts.length === 3) return { name: 'object', kind: parts[1], id: parts[2] };
  if (parts[0] === 'plan') return { name: 'plan' };
  if (parts[0] === 'focus' && parts.length === 3) return { name: 'graph', root: `${parts[1]}/${parts[2]}`, rootId: parts[2] };
  return { name: 'graph' };
}

// render draws the page the location names. Renders may overlap (a live update, then a click): only
// the latest one touches the page.
async function render(live) {
  if (!state.token) return;
  const seq = ++state.seq;
  // A live update may overtake a render the user asked for (a plan run, a click): it then draws the
  // whole page in its place, so that what the user asked for still shows.
  if (!live) state.full = true;
  const r = route();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.route === r.name);
  try {
    if (r.name === 'object') await renderObject(r.kind, r.id, live, seq);
    else await renderGraphPage(r.name === 'plan', live, seq, r);
  } catch (e) {
    if (e.status === 401 || seq !== state.seq) return;
    $('#main').replaceChildren(h('div', { class: 'card error', id: 'load-error' }, `Could not load: ${e.message}`));
  }
}

// ---------- graph layout ----------

// layout places nodes in columns by dependency depth (providers left, consumers right) and in bands by
// region (an object's region is the one of the runtimes it reaches; several or none: the global band).
// It also returns, per column, the tops of its boxes, which the edge router steers around.
function layout(nodes, edges) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const providers = new Map(nodes.map((n) => [n.id, []]));
  for (const e of edges) if (byId.has(e.from) && byId.has(e.to)) providers.get(e.from).push(e.to);

  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0;
    visiting.add(id);
    let d = 0;
    for (const p of providers.get(id)) d = Math.max(d, depthOf(p) + 1);
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };

  const regionsOf = new Map();
  const reach = (id, seen) => {
    if (regionsOf.has(id)) return regionsOf.get(id);
    if (seen.has(id)) return new Set();
    seen.add(id);
    const n = byId.get(id);
    const out = new Set();
    if (n.kind === 'kubernetes_runtime') out.add(state.regions[id] || n.region || 'no region');
    else for (const p of providers.get(id)) for (const r of reach(p, seen)) out.add(r);
    regionsOf.set(id, out);
    return out;
  };
  const band = (id) => {
    const rs = reach(id, new Set());
    return rs.size === 1 ? [...rs][0] : GLOBAL_BAND;
  };

  const cells = new Map(); // band -> column -> [node]
  let maxCol = 0;
  for (const n of nodes) {
    const b = band(n.id), c = depthOf(n.id);
    maxCol = Math.max(maxCol, c);
    if (!cells.has(b)) cells.set(b, new Map());
    const cols = cells.get(b);
    if (!cols.has(c)) cols.set(c, []);
    cols.get(c).push(n);
  }
  const bands = [...cells.keys()].sort((a, b) => (a === GLOBAL_BAND) - (b === GLOBAL_BAND) || a.localeCompare(b));

  const pos = new Map();
  const bandBoxes = [];
  const colTops = Array.from({ length: maxCol + 1 }, () => []);
  let y = TOP;
  for (const b of bands) {
    const cols = cells.get(b);
    let rows = 0;
    for (let c = 0; c <= maxCol; c++) {
      const list = cols.get(c) || [];
      // Order each column by where its providers sit (fewer crossings), then by kind and name.
      const key = (n) => {
        const ys = providers.get(n.id).filter((p) => pos.has(p)).map((p) => pos.get(p).y);
        return ys.length ? ys.reduce((a, v) => a + v, 0) / ys.length : Infinity;
      };
      list.sort((a, z) => key(a) - key(z) || a.kind.localeCompare(z.kind) || a.name.localeCompare(z.name));
      list.forEach((n, i) => {
        const p = { x: colX(c), y: y + BAND_PAD + i * (NODE_H + ROW_GAP), col: c };
        pos.set(n.id, p);
        colTops[c].push(p.y);
      });
      rows = Math.max(rows, list.length);
    }
    const height = BAND_PAD + rows * (NODE_H + ROW_GAP) - ROW_GAP + BAND_BOTTOM;
    bandBoxes.push({ name: b, y, height });
    y += height + BAND_GAP;
  }
  return { pos, bands: bandBoxes, colTops, maxCol, width: colX(maxCol) + NODE_W + LEFT, height: y - BAND_GAP + TOP };
}

function colX(c) { return LEFT + c * (NODE_W + COL_GAP); }

// ---------- edge routing ----------

// Edges are drawn orthogonally, from the consumer's left side to the provider's right side. Between two
// columns they run vertically in the gap (a channel), each in a lane of its own; an edge that spans
// columns crosses each column between its boxes (a corridor), so that no edge passes through a box.
// Edges into the same provider share their last lane, and edges out of the same consumer their first.

// corridor returns the y at which a path now at y, bound for goal, crosses column c: in the gap between
// two boxes (or above or below all of them) that costs the least detour. used counts the edges already
// through each gap, which are spread over its width.
function corridor(lay, c, y, goal, used) {
  const tops = lay.colTops[c].slice().sort((a, b) => a - b);
  const gaps = [];
  let lo = 4;
  for (const t of tops) {
    gaps.push([lo, t - CLEAR]);
    lo = t + NODE_H + CLEAR;
  }
  gaps.push([lo, lay.height - 4]);
  let best = null;
  gaps.forEach(([a, b], i) => {
    if (b < a) return;
    const key = c + ':' + i;
    const n = used.get(key) || 0;
    // A narrow gap is used at its middle; a wide one as close to the straight way as it allows.
    let yc = b - a < 3 * CLEAR ? (a + b) / 2 : Math.min(Math.max(y, a + CLEAR), b - CLEAR);
    const spread = Math.min(5, (b - a) / 6);
    yc += (n % 2 ? 1 : -1) * Math.ceil(n / 2) * spread;
    yc = Math.min(Math.max(yc, a), b);
    const cost = 1.1 * Math.abs(yc - y) + Math.abs(yc - goal); // ties go to the straighter way
    if (!best || cost < best.cost - 0.5) best = { y: yc, key, cost };
  });
  used.set(best.key, (used.get(best.key) || 0) + 1);
  return best.y;
}

// routeEdges returns, for each drawable edge, its path as points.
function routeEdges(edges, lay) {
  const used = new Map();
  const routes = [];
  const lanes = new Map(); // channel -> lane key -> { ys, order }
  const lane = (ch, key, order, y1, y2) => {
    if (!lanes.has(ch)) lanes.set(ch, new Map());
    const m = lanes.get(ch);
    if (!m.has(key)) m.set(key, { ys: [], order });
    m.get(key).ys.push(y1, y2);
  };
  edges.forEach((e, i) => {
    const a = lay.pos.get(e.from), b = lay.pos.get(e.to);
    if (!a || !b) return;
    const ya = a.y + NODE_H / 2, yb = b.y + NODE_H / 2;
    if (b.col >= a.col) {
      // Only a cycle draws a provider at or after its consumer: a plain curve.
      routes.push({ e, curve: [a.x, ya, b.x + NODE_W, yb] });
      return;
    }
    // legs[j] runs in the channel left of column a.col - j, from ys[j] to ys[j + 1].
    const ys = [ya];
    for (let c = a.col - 1; c > b.col; c--) ys.push(corridor(lay, c, ys[ys.length - 1], yb, used));
    ys.push(yb);
    const legs = [];
    for (let j = 0; j < ys.length - 1; j++) {
      const ch = a.col - 1 - j;
      const last = ch === b.col;
      const key = last ? 'to:' + e.to : j === 0 ? 'from:' + e.from : 'edge:' + i;
      lane(ch, key, last ? 0 : j === 0 ? 2 : 1, ys[j], ys[j + 1]);
      legs.push({ ch, key });
    }
    routes.push({ e, a, b, ys, legs });
  });
  // Lanes: those into providers nearest the providers (left), those out of consumers nearest the
  // consumers (right), through-going ones between; each group by height.
  const laneX = new Map();
  for (const [ch, m] of lanes) {
    const list = [...m.entries()].map(([key, l]) => ({ key, order: l.order, y: l.ys.reduce((s, v) => s + v, 0) / l.ys.length }));
    list.sort((p, q) => p.order - q.order || p.y - q.y);
    const left = colX(ch) + NODE_W + ARROW_ROOM, right = colX(ch + 1) - 8;
    const step = (right - left) / list.length;
    list.forEach((l, i) => laneX.set(ch + '|' + l.key, left + (i + 0.5) * step));
  }
  for (const r of routes) {
    if (r.curve) continue;
    const pts = [[r.a.x, r.ys[0]]];
    r.legs.forEach((leg, j) => {
      const x = laneX.get(leg.ch + '|' + leg.key);
      pts.push([x, r.ys[j]], [x, r.ys[j + 1]]);
    });
    pts.push([r.b.x + NODE_W, r.ys[r.ys.length - 1]]);
    r.points = pts;
  }
  return routes;
}

// pathOf draws points as straight segments with rounded corners.
function pathOf(points) {
  const pts = [];
  for (const p of points) {
    const q = pts[pts.length - 1];
    if (q && Math.abs(q[0] - p[0]) < 0.01 && Math.abs(q[1] - p[1]) < 0.01) continue;
    const o = pts[pts.length - 2];
    // Drop a point in the middle of a straight run.
    if (o && ((Math.abs(o[0] - q[0]) < 0.01 && Math.abs(q[0] - p[0]) < 0.01) || (Math.abs(o[1] - q[1]) < 0.01 && Math.abs(q[1] - p[1]) < 0.01))) pts.pop();
    pts.push(p);
  }
  const f = (v) => Math.round(v * 10) / 10;
  let d = `M ${f(pts[0][0])} ${f(pts[0][1])}`;
  for (let i = 1; i < pts.length - 1; i++) {
    const [p0, p, p1] = [pts[i - 1], pts[i], pts[i + 1]];
    const d0 = Math.hypot(p[0] - p0[0], p[1] - p0[1]), d1 = Math.hypot(p1[0] - p[0], p1[1] - p[1]);
    const r = Math.min(CORNER, d0 / 2, d1 / 2);
    const a = [p[0] + (p0[0] - p[0]) * r / d0, p[1] + (p0[1] - p[1]) * r / d0];
    const b = [p[0] + (p1[0] - p[0]) * r / d1, p[1] + (p1[1] - p[1]) * r / d1];
    d += ` L ${f(a[0])} ${f(a[1])} Q ${f(p[0])} ${f(p[1])} ${f(b[0])} ${f(b[1])}`;
  }
  const z = pts[pts.length - 1];
  return d + ` L ${f(z[0])} ${f(z[1])}`;
}

// fitText shortens text with an ellipsis to fit max pixels in the given font (a CSS font without the
// family, which is the page's).
let measurer = null;
function fitText(text, font, max) {
  text = text || '';
  if (!measurer) {
    measurer = document.createElement('canvas').getContext('2d');
    measurer.family = getComputedStyle(document.documentElement).fontFamily;
  }
  measurer.font = font + ' ' + measurer.family;
  const fits = (t) => measurer.measureText(t).width <= max;
  if (fits(text)) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (fits(text.slice(0, mid) + '…')) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + '…';
}

// ---------- plan overlay ----------

// planOverlay merges a plan (POST /v1/plans) into the graph: the objects it would create become dashed
// nodes, each node an action is about is labelled with it, and the edges it would add are dashed.
function planOverlay(graph, plan) {
  const nodes = graph.nodes.map((n) => ({ ...n }));
  const edges = graph.edges.slice();
  if (!plan) return { nodes, edges };
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const actionOf = new Map();
  for (const a of plan.actions || []) {
    if (a.action !== 'depend' && !actionOf.has(a.id)) actionOf.set(a.id, a);
  }
  const pg = plan.graph || { nodes: [], edges: [] };
  for (const n of pg.nodes || []) {
    if (!byId.has(n.id)) {
      const m = { ...n, planned: true };
      nodes.push(m);
      byId.set(m.id, m);
    }
  }
  for (const n of nodes) {
    const a = actionOf.get(n.id);
    if (!a) continue;
    n.action = a.action;
    n.reason = a.reason || '';
    if (n.planned && a.region) n.region = a.region;
  }
  const have = new Set(edges.map((e) => e.from + '>' + e.to));
  for (const e of pg.edges || []) {
    if (!have.has(e.from + '>' + e.to)) edges.push({ ...e, planned: true });
  }
  return { nodes, edges };
}

// ---------- graph page ----------

function phaseClass(p) { return 'phase-' + (p || 'none').toLowerCase(); }

function drawGraph(nodes, edges) {
  const lay = layout(nodes, edges);
  const svg = s('svg', { id: 'graph', width: '100%', height: Math.ceil(lay.height), role: 'img', 'aria-label': 'dependency graph',
    'data-width': Math.ceil(lay.width), 'data-height': Math.ceil(lay.height) });
  svg.append(s('defs', {},
    s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }))));
  const root = s('g', { id: 'viewport' });
  svg.append(root);
  for (const b of lay.bands) {
    root.append(s('g', { class: 'band', 'data-band': b.name },
      s('rect', { x: 8, y: b.y, width: lay.width - 16, height: b.height, rx: 14 }),
      s('text', { x: 22, y: b.y + 22, class: 'band-label' }, b.name === GLOBAL_BAND ? 'global · definitions, profiles, multi-region' : 'region ' + b.name)));
  }
  const edgeLayer = s('g', { class: 'edges' });
  root.append(edgeLayer);
  for (const r of routeEdges(edges, lay)) {
    const e = r.e;
    let d;
    if (r.curve) {
      const [x1, y1, x2, y2] = r.curve;
      const dx = Math.max(40, Math.abs(x1 - x2) / 2);
      d = `M ${x1} ${y1} C ${x1 - dx} ${y1}, ${x2 + dx} ${y2}, ${x2} ${y2}`;
    } else {
      d = pathOf(r.points);
    }
    edgeLayer.append(s('path', { class: `edge edge-${e.type}${e.attached ? ' attached' : ''}${e.planned ? ' planned' : ''}`, 'data-from': e.from, 'data-to': e.to,
      d, 'marker-end': 'url(#arrow)' },
    s('title', {}, `${e.attached ? 'attached ' : ''}${e.type}: ${e.why || ''}`)));
  }
  const textMax = NODE_W - 26;
  for (const n of nodes) {
    const p = lay.pos.get(n.id);
    const phase = n.planned ? 'Planned' : (n.phase || 'Pending');
    const classes = ['node', phaseClass(phase)];
    if (n.planned) classes.push('planned');
    if (n.action) classes.push('action-' + n.action);
    if (n.deleting) classes.push('deleting');
    const open = () => { if (!n.planned) location.hash = `#/object/${n.kind}/${encodeURIComponent(n.id)}`; };
    const g = s('g', { class: classes.join(' '), transform: `translate(${p.x},${p.y})`, tabindex: n.planned ? null : 0,
      'data-id': n.id, 'data-kind': n.kind, 'data-name': n.name, 'data-phase': phase,
      onclick: open, onkeydown: (ev) => { if (ev.key === 'Enter') open(); },
      onmouseenter: () => highlight(svg, n.id, true), onmouseleave: () => highlight(svg, n.id, false) });
    // The tooltip has everything in full: the name, what it waits on, the message.
    g.append(s('title', {}, [`${humanKind(n.kind)} ${n.name}: ${phase}`, n.waiting_on ? `waiting on ${n.waiting_on}` : '',
      n.message, n.reason].filter(Boolean).join('\n')));
    g.append(s('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 10 }));
    g.append(s('rect', { class: 'stripe', width: 6, height: NODE_H - 2, x: 1, y: 1, rx: 3 }));
    g.append(s('text', { class: 'kind', x: 16, y: 17 }, humanKind(n.kind).toUpperCase()));
    g.append(s('text', { class: 'name', x: 16, y: 36 }, fitText(n.name, NAME_FONT, textMax)));
    const detail = (cls, ...parts) => g.append(s('text', { class: 'detail' + (cls ? ' ' + cls : ''), x: 16, y: 53 }, ...parts));
    if (n.planned || n.action) {
      detail('action', s('tspan', { class: 'verb' }, n.action || 'create'), n.planned ? ' · planned' : '');
      if (n.reason) g.append(s('text', { class: 'detail', x: 16, y: 69 }, fitText(n.reason, DETAIL_FONT, textMax)));
    } else if (n.waiting_on) {
      // The age is filled in by fillAges, after the graph's signature is taken.
      detail('waiting', s('tspan', { class: 'phase' }, phase), ' · waiting ', s('tspan', { class: 'age', 'data-since': n.waiting_since || '' }));
      g.append(s('text', { class: 'detail waiting-on', x: 16, y: 69 }, fitText('on ' + n.waiting_on, DETAIL_FONT, textMax)));
    } else {
      detail('', s('tspan', { class: 'phase' }, phase), n.deleting ? ' · deleting' : '');
      if (!n.reconciled && n.message) g.append(s('text', { class: 'detail', x: 16, y: 69 }, fitText(n.message, DETAIL_FONT, textMax)));
    }
    g.append(s('circle', { class: 'dot', cx: NODE_W - 16, cy: 16, r: 5 }));
    root.append(g);
  }
  return svg;
}

// highlight marks the edges of a node under the pointer.
function highlight(svg, id, on) {
  for (const p of svg.querySelectorAll('path.edge')) {
    if (p.dataset.from === id || p.dataset.to === id) p.classList.toggle('hl', on);
  }
}

// ---------- pan and zoom ----------

// The graph is drawn at its natural size inside a frame as wide as the page and as high as the window
// allows. state.view is the frame's transform: fitted (the whole graph shown, never enlarged) until the
// user zooms (wheel, buttons) or pans (drag), then kept across live updates until "Fit".

function zoomControls() {
  return h('div', { class: 'zoom', role: 'group', 'aria-label': 'zoom' },
    h('button', { id: 'graph-zoom-out', class: 'ghost', title: 'Zoom out', onclick: () => zoomBy(1 / 1.25) }, '−'),
    h('span', { id: 'graph-scale', class: 'scale' }),
    h('button', { id: 'graph-zoom-in', class: 'ghost', title: 'Zoom in', onclick: () => zoomBy(1.25) }, '+'),
    h('button', { id: 'graph-fit', class: 'ghost', title: 'Show the whole graph', onclick: () => { const g = $('svg#graph'); if (g) fitView(g); } }, 'Fit'),
    h('button', { id: 'graph-actual', class: 'ghost', title: 'Actual size', onclick: () => zoomBy(1 / state.view.k) }, '1:1'));
}

// sizeFrame makes the frame as high as the graph at the width's scale, within what the window shows
// below the frame's top (at least MIN_FRAME_H).
function sizeFrame(svg) {
  const top = svg.getBoundingClientRect().top + window.scrollY;
  const room = Math.max(MIN_FRAME_H, window.innerHeight - top - 44); // below: the page's padding
  const w = svg.clientWidth || 1;
  const gw = +svg.dataset.width, gh = +svg.dataset.height;
  svg.setAttribute('height', Math.ceil(Math.max(200, Math.min(room, gh * Math.min(1, w / gw)))));
}

function fitView(svg) {
  const w = svg.clientWidth || 1, hh = svg.clientHeight || 1;
  const gw = +svg.dataset.width, gh = +svg.dataset.height;
  const k = Math.min(1, w / gw, hh / gh);
  state.view = { k, x: (w - gw * k) / 2, y: Math.max(0, (hh - gh * k) / 2), user: false };
  applyView(svg);
}

function applyView(svg) {
  const v = state.view;
  svg.querySelector('#viewport').setAttribute('transform', `translate(${v.x} ${v.y}) scale(${v.k})`);
  svg.dataset.scale = String(v.k);
  const label = $('#graph-scale');
  if (label) label.textContent = Math.round(v.k * 100) + '%';
}

// zoomAt scales by f around the frame's point (px, py), within MIN_ZOOM..MAX_ZOOM.
function zoomAt(svg, px, py, f) {
  const v = state.view;
  const k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, v.k * f));
  state.view = { k, x: px - (px - v.x) * k / v.k, y: py - (py - v.y) * k / v.k, user: true };
  applyView(svg);
}

function zoomBy(f) {
  const svg = $('svg#graph');
  if (svg) zoomAt(svg, svg.clientWidth / 2, svg.clientHeight / 2, f);
}

// panZoom lets the wheel zoom around the pointer and a drag pan; a drag is not a click on a node.
function panZoom(svg) {
  svg.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    zoomAt(svg, ev.clientX - r.left, ev.clientY - r.top, Math.exp(-ev.deltaY * (ev.deltaMode ? 0.05 : 0.0015)));
  }, { passive: false });
  let drag = null, dragged = 0;
  svg.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    drag = { id: ev.pointerId, sx: ev.clientX, sy: ev.clientY, x: state.view.x, y: state.view.y, moved: false };
  });
  svg.addEventListener('pointermove', (ev) => {
    if (!drag || ev.pointerId !== drag.id) return;
    const dx = ev.clientX - drag.sx, dy = ev.clientY - drag.sy;
    if (!drag.moved) {
      if (Math.hypot(dx, dy) < 5) return;
      drag.moved = true;
      svg.setPointerCapture(ev.pointerId);
      svg.classList.add('panning');
    }
    state.view = { ...state.view, x: drag.x + dx, y: drag.y + dy, user: true };
    applyView(svg);
  });
  const end = () => {
    if (drag && drag.moved) dragged = performance.now();
    drag = null;
    svg.classList.remove('panning');
  };
  svg.addEventListener('pointerup', end);
  svg.addEventListener('pointercancel', end);
  svg.addEventListener('click', (ev) => {
    if (performance.now() - dragged < 400) { ev.stopPropagation(); ev.preventDefault(); }
  }, true);
}

// showGraph sizes a graph just put on the page and gives it the view: the user's, or a fitted one.
function showGraph(svg) {
  sizeFrame(svg);
  panZoom(svg);
  if (state.view.user) applyView(svg); else fitView(svg);
}

window.addEventListener('resize', () => {
  const svg = $('svg#graph');
  if (!svg) return;
  sizeFrame(svg);
  if (state.view.user) applyView(svg); else fitView(svg);
});

function fillAges(root) {
  for (const el of root.querySelectorAll('.age[data-since]')) el.textContent = age(el.dataset.since);
}

// viewSig is what a graph view shows, without the tooltips (a waiting message counts its seconds) and
// the clocks (they tick on their own): a live update that changes neither leaves the page as it is, so
// that a node under the pointer is not replaced mid-click.
function viewSig(view) {
  const box = h('div', {}, ...view.filter(Boolean).map((el) => el.cloneNode(true)));
  for (const t of box.querySelectorAll('title')) t.remove();
  return box.innerHTML;
}

function legend() {
  return h('div', { class: 'legend' },
    ...PHASES.map((p) => h('span', { class: 'chip ' + phaseClass(p) }, h('i'), p)),
    h('span', { class: 'chip phase-planned' }, h('i'), 'Planned'),
    h('span', { class: 'edge-key' }, 'arrows: consumer → provider'));
}

async function renderGraphPage(withPlan, live, seq, r) {
  await loadGraph(r.root);
  if (seq !== state.seq) return;
  const g = withPlan ? planOverlay(state.graph, state.plan) : { nodes: state.graph.nodes, edges: state.graph.edges };
  const counts = {};
  for (const n of state.graph.nodes) counts[n.phase || 'Pending'] = (counts[n.phase || 'Pending'] || 0) + 1;
  const summary = h('div', { class: 'summary', id: 'summary' },
    h('strong', {}, `${state.graph.nodes.length} objects`), ' · ',
    PHASES.filter((p) => counts[p]).map((p) => `${counts[p]} ${p}`).join(' · ') || 'empty');
  const body = g.nodes.length
    ? h('div', { id: 'graph-scroll', class: 'graph-scroll' }, drawGraph(g.nodes, g.edges))
    : h('div', { class: 'card empty' }, 'No objects yet. Create a kubernetes_runtime, a workload_definition and a workload_instance, and they appear here.');
  const rootNode = r.rootId && state.graph.nodes.find((n) => n.id === r.rootId);
  const focus = rootNode ? h('div', { class: 'focus', id: 'focus' }, 'Showing what ', h('strong', {}, `${humanKind(rootNode.kind)} ${rootNode.name}`),
    ' depends on and what depends on it · ', h('a', { href: '#/' }, 'show everything')) : null;
  if (rootNode) {
    const el = body.querySelector(`g.node[data-id="${CSS.escape(rootNode.id)}"]`);
    if (el) el.classList.add('root');
  }
  // No null in the view: replaceChildren would show it as the text "null".
  const view = [focus, h('div', { class: 'toolbar' }, summary, h('div', { class: 'tools' }, legend(), g.nodes.length ? zoomControls() : null)), body].filter(Boolean);
  const sig = (r.root || '') + '\n' + viewSig(view);
  fillAges(body);
  // Another graph page starts fitted; the same page keeps the view the user chose.
  const viewOf = (withPlan ? 'plan' : 'graph') + ' ' + (r.root || '');
  if (viewOf !== state.viewOf) state.view = { k: 1, x: 0, y: 0, user: false };
  state.viewOf = viewOf;
  // A live update redraws the graph only: the plan panel keeps its text, cursor and focus.
  const slot = $('#graph-slot');
  if (live && !state.full && slot && withPlan === Boolean($('#plan-panel'))) {
    if (sig === state.graphSig) {
      // Nothing shown changed: only the tooltips follow.
      for (const t of body.querySelectorAll('g.node > title')) {
        const old = slot.querySelector(`g.node[data-id="${CSS.escape(t.parentNode.dataset.id)}"] > title`);
        if (old && old.textContent !== t.textContent) old.textContent = t.textContent;
      }
      return;
    }
    slot.replaceChildren(...view);
  } else {
    $('#main').replaceChildren(...[withPlan ? planPanel() : null, h('div', { id: 'graph-slot' }, ...view)].filter(Boolean));
  }
  state.full = false;
  state.graphSig = sig;
  state.pageSig = '';
  const svg = $('svg#graph');
  if (svg) showGraph(svg);
}

// ---------- plan preview ----------

const PLAN_EXAMPLE = JSON.stringify({ changes: [{ op: 'create', kind: 'workload_instance', name: 'web-eu',
  spec: { definition_id: '<definition id>', placement: { regions: ['eu-west'] } } }] }, null, 2);

function actionLine(a) {
  return h('li', { class: 'action-' + a.action },
    h('strong', {}, a.action), ` ${humanKind(a.kind)} `, h('code', {}, a.name || a.id),
    a.support_type ? ` (${a.support_type})` : '', a.region ? ` in ${a.region}` : '',
    a.profile ? ` from profile ${a.profile}` : '', a.runtime && a.action !== 'provision' ? ` on ${a.runtime}` : '',
    a.provider ? ` on ${humanKind(a.provider.kind)} ${a.provider.name || a.provider.id}` : '',
    a.reason ? h('span', { class: 'muted' }, ' · ' + a.reason) : null);
}

function planPanel() {
  const ta = h('textarea', { id: 'plan-input', spellcheck: 'false', rows: 9, placeholder: PLAN_EXAMPLE });
  ta.value = state.planText;
  const actions = state.plan && state.plan.actions ? state.plan.actions : [];
  const warnings = state.plan && state.plan.warnings ? state.plan.warnings : [];
  return h('section', { id: 'plan-panel', class: 'card plan' },
    h('h2', {}, 'Plan preview'),
    h('p', { class: 'muted' }, 'Paste a plan request (the body of ', h('code', {}, 'POST /v1/plans'),
      ', e.g. from ', h('code', {}, 'qleet plan'), '). Nothing changes: what would happen is drawn on the graph, new objects and edges dashed.'),
    ta,
    h('div', { class: 'row' },
      h('button', { id: 'plan-run', onclick: runPlan }, 'Preview'),
      state.plan || state.planError ? h('button', { class: 'ghost', onclick: () => { state.plan = null; state.planError = ''; render(); } }, 'Clear') : null),
    state.planError ? h('pre', { id: 'plan-error', class: 'error' }, state.planError) : null,
    warnings.length ? h('ul', { id: 'plan-warnings', class: 'warnings' }, warnings.map((w) => h('li', {}, w))) : null,
    state.plan ? h('ol', { id: 'plan-actions', class: 'actions' }, actions.map(actionLine)) : null);
}

async function runPlan() {
  state.planText = $('#plan-input').value;
  state.planError = '';
  try {
    JSON.parse(state.planText);
  } catch (e) {
    state.planError = 'Not JSON: ' + e.message;
    state.plan = null;
    return render();
  }
  try {
    state.plan = await api('POST', '/v1/plans', state.planText);
  } catch (e) {
    state.plan = null;
    const d = e.detail;
    state.planError = e.message + (d && d.fields ? '\n' + d.fields.map((f) => `${f.field}: ${f.message}`).join('\n') : '');
  }
  render();
}

// ---------- object page ----------

function table(id, cols, rows, empty) {
  if (!rows.length) return h('p', { id, class: 'muted' }, empty);
  return h('table', { id },
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c[0])))),
    h('tbody', {}, rows.map((r) => h('tr', {}, cols.map((c) => h('td', {}, c[1](r)))))));
}

function badge(phase) {
  return h('span', { class: 'badge ' + phaseClass(phase || 'Pending') }, phase || 'Pending');
}

function appliedObjects(status) {
  if (status.placements && status.placements.length) {
    return status.placements.flatMap((p) => (p.objects || []).map((o) => ({ ...o, runtime: o.runtime || p.runtime })));
  }
  return status.objects || [];
}

function nodeLink(id) {
  const n = state.graph && state.graph.nodes.find((x) => x.id === id);
  if (!n) return h('code', {}, id);
  return h('a', { href: `#/object/${n.kind}/${encodeURIComponent(n.id)}` }, `${humanKind(n.kind)} ${n.name}`, ' ', badge(n.phase));
}

async function renderObject(kind, id, live, seq) {
  const plural = state.kinds[kind];
  if (!plural) throw new Error(`unknown kind ${kind}`);
  const [obj, evs] = await Promise.all([
    api('GET', `/v1/${plural}/${encodeURIComponent(id)}`),
    api('GET', `/v1/${plural}/${encodeURIComponent(id)}/events`),
    // The whole graph, for what the object depends on and what depends on it.
    live || !state.graph || state.graph.root ? loadGraph() : null,
  ]);
  if (seq !== state.seq) return;
  const st = obj.status || {};
  const node = state.graph && state.graph.nodes.find((n) => n.id === id);
  const reconciled = st.phase === 'Ready' && st.observed_generation === obj.generation;
  const events = (evs.items || []).slice().sort((a, b) => parseTime(b.created_at) - parseTime(a.created_at) || b.id - a.id);
  const applied = appliedObjects(st);
  const placements = st.placements || [];
  const hasReplicas = placements.length || st.replicas !== undefined;

  const page = h('article', { id: 'object-page', class: 'object', 'data-id': obj.id, 'data-phase': st.phase || '' },
    h('nav', { class: 'crumbs' }, h('a', { href: '#/', id: 'back' }, '← graph'), ` / ${humanKind(kind)} · `,
      h('a', { href: `#/focus/${kind}/${encodeURIComponent(obj.id)}`, id: 'focus-link' }, 'show its part of the graph')),
    h('header', { class: 'object-head' },
      h('div', {}, h('div', { class: 'kind' }, humanKind(kind)), h('h1', { id: 'object-name' }, obj.name)),
      h('div', { class: 'head-right' }, badge(st.phase),
        h('span', { class: 'muted' }, reconciled ? 'reconciled' : `generation ${obj.generation}, observed ${st.observed_generation || 0}`))),
    st.message ? h('p', { class: 'message ' + phaseClass(st.phase) }, st.message) : null,
    node && node.waiting_on ? h('p', { class: 'waiting', id: 'object-waiting' }, 'Waits on ', h('strong', {}, node.waiting_on),
      ' since ', clock(node.waiting_since), ' (', h('span', { class: 'age', 'data-since': node.waiting_since }, age(node.waiting_since)), ')') : null,
    h('dl', { class: 'meta' },
      h('dt', {}, 'id'), h('dd', {}, h('code', {}, obj.id)),
      h('dt', {}, 'created'), h('dd', {}, clock(obj.created_at)),
      h('dt', {}, 'updated'), h('dd', {}, clock(obj.updated_at)),
      h('dt', {}, 'resource version'), h('dd', { id: 'object-rv' }, String(obj.resource_version)),
      obj.labels && Object.keys(obj.labels).length ? [h('dt', {}, 'labels'),
        h('dd', {}, Object.entries(obj.labels).map(([k, v]) => h('span', { class: 'label' }, `${k}=${v}`)))] : null,
      obj.deletion_requested_at ? [h('dt', {}, 'deletion requested'), h('dd', {}, clock(obj.deletion_requested_at))] : null),
    h('div', { class: 'grid' },
      h('section', { class: 'card' }, h('h2', {}, 'Depends on'),
        h('ul', { id: 'providers', class: 'links' }, (state.graph ? state.graph.edges.filter((e) => e.from === id) : [])
          .map((e) => h('li', {}, nodeLink(e.to), h('span', { class: 'muted' }, ' · ' + e.why))),
        (st.dependencies || []).filter((d) => !(state.graph && state.graph.edges.some((e) => e.from === id && e.to === d.id)))
          .map((d) => h('li', {}, nodeLink(d.id), h('span', { class: 'muted' }, ' · status.dependencies'))))),
      h('section', { class: 'card' }, h('h2', {}, 'Used by'),
        h('ul', { id: 'consumers', class: 'links' }, (state.graph ? state.graph.edges.filter((e) => e.to === id) : [])
          .map((e) => h('li', {}, nodeLink(e.from), h('span', { class: 'muted' }, ' · ' + e.why)))))),
    h('section', { class: 'card' }, h('h2', {}, 'Conditions'),
      table('conditions', [
        ['type', (c) => c.type], ['status', (c) => h('span', { class: 'cond-' + String(c.status).toLowerCase() }, c.status)],
        ['reason', (c) => c.reason || ''], ['message', (c) => c.message || ''],
        ['waiting on', (c) => c.waiting_on || ''], ['since', (c) => clock(c.last_transition_time)],
      ], st.conditions || [], 'No conditions yet.')),
    hasReplicas ? h('section', { class: 'card' }, h('h2', {}, 'Pods'),
      h('p', { class: 'muted' }, 'Replica counts as the controllers last reported them (status); ', h('code', {}, 'qleet pods'), ' lists the pods themselves.'),
      placements.length
        ? table('pods', [
          ['runtime', (p) => p.runtime], ['region', (p) => p.region || ''], ['phase', (p) => badge(p.phase)],
          ['desired', (p) => p.replicas], ['ready', (p) => p.ready_replicas], ['available', (p) => p.available_replicas],
          ['profile', (p) => p.profile || ''], ['message', (p) => p.message || ''],
        ], placements, '')
        : table('pods', [['desired', (x) => x.replicas], ['ready', (x) => x.ready_replicas || 0], ['available', (x) => x.available_replicas || 0]], [st], '')) : null,
    applied.length || kind === 'workload_instance' ? h('section', { class: 'card' }, h('h2', {}, 'Objects applied in the cluster'),
      table('applied', [
        ['runtime', (o) => o.runtime || ''], ['kind', (o) => o.kind], ['namespace', (o) => o.namespace || ''],
        ['name', (o) => o.name], ['ready', (o) => h('span', { class: o.ready ? 'cond-true' : 'cond-false' }, o.ready ? 'yes' : 'no')],
        ['message', (o) => o.message || ''],
      ], applied, 'Nothing applied yet.')) : null,
    h('section', { class: 'card' }, h('h2', {}, 'Events'),
      table('events', [
        ['time', (e) => clock(e.created_at)], ['type', (e) => h('span', { class: 'ev-' + String(e.type).toLowerCase() }, e.type)],
        ['reason', (e) => e.reason], ['message', (e) => e.message], ['generation', (e) => e.generation],
        ['took', (e) => (e.duration_ms ? e.duration_ms + ' ms' : '')], ['source', (e) => e.source || ''],
      ], events, 'No events yet.')),
    h('div', { class: 'grid' },
      h('section', { class: 'card' }, h('h2', {}, 'Spec'), h('pre', { id: 'spec', class: 'json' }, JSON.stringify(obj.spec, null, 2))),
      h('section', { class: 'card' }, h('h2', {}, 'Status'), h('pre', { id: 'status', class: 'json' }, JSON.stringify(st, null, 2)))));
  // A live update that changes nothing shown (but the clocks) leaves the page alone: the reader keeps
  // a selection, and a node read meanwhile stays in the page.
  const sig = pageSig(page);
  if (live && !state.full && sig === state.pageSig && $('#object-page')) {
    fillAges($('#object-page'));
    return;
  }
  const y = window.scrollY;
  state.full = false;
  state.graphSig = '';
  state.pageSig = sig;
  $('#main').replaceChildren(page);
  if (live) window.scrollTo(0, y); else window.scrollTo(0, 0);
}

// pageSig is what an object page shows, without the ticking ages.
function pageSig(page) {
  const copy = page.cloneNode(true);
  for (const el of copy.querySelectorAll('.age')) el.textContent = '';
  return copy.outerHTML;
}

// ---------- start ----------

async function start() {
  $('#nav').hidden = false;
  const so = $('#signout');
  so.hidden = false;
  so.onclick = () => signOut('Signed out.');
  await render();
  if (!state.watch) watchLoop();
}

setInterval(() => {
  for (const el of document.querySelectorAll('.age[data-since]')) el.textContent = age(el.dataset.since);
}, 1000);

window.addEventListener('hashchange', () => render());

(async () => {
  await loadKinds();
  if (state.token) start(); else showSignIn();
})();
