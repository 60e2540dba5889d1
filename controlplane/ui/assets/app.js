// QleetOS web view: the dependency graph, object pages, plan previews and live updates, over the /v1 API.
// Hand-written, no build step, no dependency. Everything the page shows comes from the API with the token
// the user gives; the token stays in sessionStorage and travels only in the Authorization header.
'use strict';

const TOKEN_KEY = 'qleet.token';
const SVG_NS = 'http://www.w3.org/2000/svg';
const NODE_W = 240, NODE_H = 80, COL_GAP = 96, ROW_GAP = 18, BAND_PAD = 34, LEFT = 24, TOP = 16;
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

function truncate(text, n) { return text && text.length > n ? text.slice(0, n - 1) + '…' : (text || ''); }

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
      list.forEach((n, i) => pos.set(n.id, { x: LEFT + c * (NODE_W + COL_GAP), y: y + BAND_PAD + i * (NODE_H + ROW_GAP) }));
      rows = Math.max(rows, list.length);
    }
    const height = BAND_PAD + rows * (NODE_H + ROW_GAP) + 6;
    bandBoxes.push({ name: b, y, height });
    y += height + 14;
  }
  return { pos, bands: bandBoxes, width: LEFT * 2 + (maxCol + 1) * NODE_W + maxCol * COL_GAP, height: y };
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
  const svg = s('svg', { id: 'graph', width: Math.max(lay.width, 600), height: Math.max(lay.height, 200),
    viewBox: `0 0 ${Math.max(lay.width, 600)} ${Math.max(lay.height, 200)}`, role: 'img', 'aria-label': 'dependency graph' });
  svg.append(s('defs', {},
    s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }))));
  for (const b of lay.bands) {
    svg.append(s('g', { class: 'band', 'data-band': b.name },
      s('rect', { x: 8, y: b.y, width: Math.max(lay.width, 600) - 16, height: b.height, rx: 14 }),
      s('text', { x: 22, y: b.y + 22, class: 'band-label' }, b.name === GLOBAL_BAND ? 'global · definitions, profiles, multi-region' : 'region ' + b.name)));
  }
  const edgeLayer = s('g', { class: 'edges' });
  svg.append(edgeLayer);
  for (const e of edges) {
    const a = lay.pos.get(e.from), b = lay.pos.get(e.to);
    if (!a || !b) continue;
    // From the consumer's left side to the provider's right side (providers sit in earlier columns).
    const x1 = a.x, y1 = a.y + NODE_H / 2, x2 = b.x + NODE_W, y2 = b.y + NODE_H / 2;
    const dx = Math.max(40, Math.abs(x1 - x2) / 2);
    edgeLayer.append(s('path', { class: `edge edge-${e.type}${e.attached ? ' attached' : ''}${e.planned ? ' planned' : ''}`, 'data-from': e.from, 'data-to': e.to,
      d: `M ${x1} ${y1} C ${x1 - dx} ${y1}, ${x2 + dx} ${y2}, ${x2} ${y2}`, 'marker-end': 'url(#arrow)' },
    s('title', {}, `${e.attached ? 'attached ' : ''}${e.type}: ${e.why || ''}`)));
  }
  for (const n of nodes) {
    const p = lay.pos.get(n.id);
    const phase = n.planned ? 'Planned' : (n.phase || 'Pending');
    const classes = ['node', phaseClass(phase)];
    if (n.planned) classes.push('planned');
    if (n.action) classes.push('action-' + n.action);
    if (n.deleting) classes.push('deleting');
    const g = s('g', { class: classes.join(' '), transform: `translate(${p.x},${p.y})`, tabindex: n.planned ? null : 0,
      'data-id': n.id, 'data-kind': n.kind, 'data-name': n.name, 'data-phase': phase,
      onclick: () => { if (!n.planned) location.hash = `#/object/${n.kind}/${encodeURIComponent(n.id)}`; },
      onkeydown: (ev) => { if (ev.key === 'Enter' && !n.planned) location.hash = `#/object/${n.kind}/${encodeURIComponent(n.id)}`; } });
    g.append(s('title', {}, [`${humanKind(n.kind)} ${n.name}: ${phase}`, n.message, n.reason].filter(Boolean).join('\n')));
    g.append(s('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 10 }));
    g.append(s('rect', { class: 'stripe', width: 6, height: NODE_H - 2, x: 1, y: 1, rx: 3 }));
    g.append(s('text', { class: 'kind', x: 16, y: 18 }, humanKind(n.kind).toUpperCase()));
    g.append(s('text', { class: 'name', x: 16, y: 38 }, truncate(n.name, 27)));
    if (n.planned || n.action) {
      g.append(s('text', { class: 'detail action', x: 16, y: 56 }, s('tspan', { class: 'verb' }, n.action || 'create'),
        n.planned ? ' · planned' : ''));
      if (n.reason) g.append(s('text', { class: 'detail', x: 16, y: 72 }, truncate(n.reason, 38)));
    } else if (n.waiting_on) {
      // The age is filled in by fillAges, after the graph's signature is taken.
      g.append(s('text', { class: 'detail waiting', x: 16, y: 56 }, s('tspan', { class: 'phase' }, phase), ' · waiting ',
        s('tspan', { class: 'age', 'data-since': n.waiting_since || '' })));
      g.append(s('text', { class: 'detail waiting-on', x: 16, y: 72 }, 'on ' + truncate(n.waiting_on, 36)));
    } else {
      g.append(s('text', { class: 'detail', x: 16, y: 56 }, s('tspan', { class: 'phase' }, phase), n.deleting ? ' · deleting' : ''));
      if (!n.reconciled && n.message) g.append(s('text', { class: 'detail', x: 16, y: 72 }, truncate(n.message, 38)));
    }
    g.append(s('circle', { class: 'dot', cx: NODE_W - 16, cy: 16, r: 5 }));
    svg.append(g);
  }
  return svg;
}

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
  const scroller = $('#graph-scroll');
  const keep = scroller ? { left: scroller.scrollLeft, top: scroller.scrollTop } : null;
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
  const view = [focus, h('div', { class: 'toolbar' }, summary, legend()), body];
  const sig = (r.root || '') + '\n' + viewSig(view);
  fillAges(body);
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
    $('#main').replaceChildren(withPlan ? planPanel() : '', h('div', { id: 'graph-slot' }, ...view));
  }
  state.full = false;
  state.graphSig = sig;
  const sc = $('#graph-scroll');
  if (sc && keep) { sc.scrollLeft = keep.left; sc.scrollTop = keep.top; }
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
  const y = window.scrollY;
  state.full = false;
  state.graphSig = '';
  $('#main').replaceChildren(page);
  if (live) window.scrollTo(0, y); else window.scrollTo(0, 0);
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
