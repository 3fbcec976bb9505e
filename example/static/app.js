// replog dashboard: polls every node's /status and /history, draws each
// replica's log on one shared offset axis, and replays the last append's
// two fetch rounds in slow motion. Plain JavaScript, no dependencies.
'use strict';

const POLL_MS = 200;        // live refresh of every node
const STEP_MS = 1200;       // one replay step
const HOLD_MS = 3000;       // last replay frame stays this long
const MAX_EVENTS = 800;     // history kept per node
const MIN_CELLS = 12, MAX_CELLS = 30;

const S = {
  cfg: null,
  ids: [],
  nodes: {},        // id -> {url, status, reachable, busy, seen}
  events: {},       // id -> [{seq, t_us, status}]
  seq: {},          // id -> last history seq
  procs: {},        // id -> control API state (demo mode)
  rows: {},         // id -> row elements
  replay: null,     // {steps, frames, i, timer}
  pending: null,    // {offset, deadline}: an append whose replay we wait for
  entriesBusy: false,
  logsBusy: false,
  membersKey: '',   // what the members table shows now
  memberBusy: false, // a voter change is under way
};

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// request fetches url and returns {ok, status, body}: body is the parsed
// JSON, or the text if it is not JSON or raw is set (NDJSON).
async function request(url, opts = {}, timeoutMs = 1500, raw = false) {
  const ctrl = new AbortController();
  const t = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const r = await fetch(url, { cache: 'no-store', ...opts, signal: ctrl.signal });
    const text = await r.text();
    let body = text;
    if (!raw || !r.ok) {
      try { body = JSON.parse(text); } catch (e) { body = text; }
    }
    return { ok: r.ok, status: r.status, body };
  } finally {
    clearTimeout(t);
  }
}

// ---------- polling ----------

async function pollNode(id) {
  const n = S.nodes[id];
  if (n.busy || !n.url) return;
  n.busy = true;
  try {
    const [st, hist] = await Promise.all([
      request(n.url + '/status'),
      request(n.url + '/history?since=' + S.seq[id]),
    ]);
    if (st.ok) {
      n.status = st.body;
      n.reachable = true;
      n.seen = Date.now();
    } else {
      n.reachable = false;
    }
    if (hist.ok && hist.body && Array.isArray(hist.body.events)) {
      if (hist.body.seq < S.seq[id]) {
        // The node restarted: its history starts again.
        S.events[id] = [];
        S.seq[id] = 0;
      } else {
        S.events[id].push(...hist.body.events);
        if (S.events[id].length > MAX_EVENTS) S.events[id].splice(0, S.events[id].length - MAX_EVENTS);
        S.seq[id] = hist.body.seq;
      }
    }
  } catch (e) {
    n.reachable = false;
  } finally {
    n.busy = false;
  }
}

// Each node is polled on its own loop, so a node that hangs (a paused
// process, a partition) does not slow down the picture of the others.
async function nodeLoop(id) {
  for (;;) {
    const t = performance.now();
    await pollNode(id);
    await sleep(Math.max(0, POLL_MS - (performance.now() - t)));
  }
}

function tick() {
  detectAppend();
  maybeStartReplay();
  if (!S.replay) render(liveView());
  renderMembers(liveView());
}

async function pollControl() {
  if (!S.cfg.control) return;
  try {
    const r = await request(S.cfg.control + '/nodes');
    if (r.ok && Array.isArray(r.body)) for (const p of r.body) S.procs[p.id] = p;
  } catch (e) { /* the parent is gone: nothing to show */ }
}

async function pollEntries() {
  if (S.entriesBusy) return;
  // Read from this page's node if it is up, else from any reachable one.
  const order = [S.cfg.self, ...S.ids.filter((i) => i !== S.cfg.self)];
  const id = order.find((i) => S.nodes[i].reachable && S.nodes[i].status);
  if (!id) return;
  const st = S.nodes[id].status;
  const from = Math.max(st.log_start, st.hw - 8);
  S.entriesBusy = true;
  try {
    const r = await request(`${S.nodes[id].url}/entries?from=${from}&follow=false`, {}, 4000, true);
    if (!r.ok) return;
    const lines = String(r.body).split('\n').filter((l) => l.trim() !== '');
    const rows = [];
    for (const l of lines) {
      try { rows.push(JSON.parse(l)); } catch (e) { /* partial line */ }
    }
    $('entries-src').textContent = `(read from ${id}, HW ${st.hw})`;
    const tb = $('entries');
    tb.replaceChildren();
    if (rows.length === 0) {
      const tr = el('tr');
      const td = el('td', 'empty', 'no committed entries yet');
      td.colSpan = 3;
      tr.append(td);
      tb.append(tr);
    }
    for (const e of rows.reverse()) {
      const tr = el('tr');
      if (e.error) {
        const td = el('td', '', 'error: ' + e.error);
        td.colSpan = 3;
        tr.append(td);
      } else {
        tr.append(el('td', '', e.offset), el('td', '', e.epoch), el('td', 'data', decode(e.data)));
      }
      tb.append(tr);
    }
  } catch (e) {
    /* try again next time */
  } finally {
    S.entriesBusy = false;
  }
}

// pollLogs lists the node's logs (GET /logs) with each one's leader,
// LEO and HW, from this page's node if it is up, else from any reachable
// one.
async function pollLogs() {
  if (S.logsBusy) return;
  const order = [S.cfg.self, ...S.ids.filter((i) => i !== S.cfg.self)];
  const id = order.find((i) => S.nodes[i].reachable && S.nodes[i].status);
  if (!id) return;
  S.logsBusy = true;
  try {
    const r = await request(`${S.nodes[id].url}/logs`, {}, 2000);
    if (!r.ok || !r.body || !Array.isArray(r.body.logs)) return;
    $('logs-src').textContent = `(as ${id} holds them)`;
    const tb = $('logs');
    tb.replaceChildren();
    for (const l of r.body.logs) {
      const tr = el('tr');
      const open = l.open;
      const replicas = (l.replicas || []).map((x) => (x === l.preferred_leader ? x + '*' : x)).join(', ');
      tr.append(
        el('td', 'data', l.name === '' ? '(default)' : l.name),
        el('td', '', open ? (l.leader_id || 'none known') : (l.local ? 'opening' : 'not here')),
        el('td', '', open ? l.leo : '–'),
        el('td', '', open ? l.hw : '–'),
        el('td', '', replicas));
      tb.append(tr);
    }
  } catch (e) {
    /* try again next time */
  } finally {
    S.logsBusy = false;
  }
}

function decode(b64) {
  try {
    const bin = atob(b64 || '');
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  } catch (e) {
    return b64;
  }
}

// ---------- views ----------

// A view is what the board draws: per node a status (or null) and whether
// it is reachable.
function liveView() {
  const v = {};
  for (const id of S.ids) {
    const n = S.nodes[id];
    v[id] = { status: n.status, up: n.reachable };
  }
  return v;
}

function leaderOf(view) {
  let best = null;
  for (const id of S.ids) {
    const s = view[id].status;
    if (view[id].up && s && s.role === 'leader' && (!best || s.epoch > view[best].status.epoch)) best = id;
  }
  return best;
}

// ---------- drawing ----------

function buildBoard() {
  const rows = $('rows');
  for (const id of S.ids) {
    const row = el('div', 'row');
    row.dataset.node = id;
    const who = el('div', 'who');
    const name = el('div', 'name', id);
    if (id === S.cfg.self) name.append(el('span', 'self', '(serves this page)'));
    const role = el('span', 'role', '…');
    role.dataset.field = 'role';
    const nums = el('div', 'nums');
    const mk = (label, field, cls) => {
      const s = el('span', cls || '');
      const b = el('b', '', '–');
      b.dataset.field = field;
      s.append(label + ' ', b);
      return [s, b];
    };
    const [ep, epB] = mk('epoch', 'epoch');
    const [ls, lsB] = mk('start', 'log_start', 'start');
    ls.title = 'log start: entries below it were deleted by retention';
    const [le, leB] = mk('LEO', 'leo', 'leo');
    const [hw, hwB] = mk('HW', 'hw', 'hw');
    nums.append(ep, ' · ', ls, ' · ', le, ' · ', hw);
    const note = el('div', 'note');
    who.append(name, role, nums, note);

    const track = el('div', 'track');
    const cells = el('div', 'cells');
    const hwMark = el('div', 'mark hw');
    hwMark.append(el('span'));
    const leoMark = el('div', 'mark leo');
    leoMark.append(el('span'));
    const remotes = el('div', 'remotes');
    track.append(cells, hwMark, leoMark, remotes);

    const actions = el('div', 'actions');
    if (S.cfg.control) {
      const kill = el('button', 'danger', 'Kill -9');
      kill.type = 'button';
      kill.title = 'SIGKILL the node process (no clean shutdown)';
      kill.onclick = () => control(id, 'kill');
      const restart = el('button', 'ghost', 'Restart');
      restart.type = 'button';
      restart.title = 'Start the node again (stops it cleanly first if it runs)';
      restart.onclick = () => control(id, 'restart');
      const wipe = el('button', 'danger', 'Wipe');
      wipe.type = 'button';
      wipe.title = 'Stop the node, delete its data directory, start it again: a new incarnation, an observer until it is a voter again';
      wipe.onclick = () => control(id, 'wipe');
      actions.append(kill, restart, wipe);
      S.rows[id] = { restart };
    }
    row.append(who, track, actions);
    rows.append(row);
    S.rows[id] = { ...S.rows[id], row, role, epB, lsB, leB, hwB, note, track, cells, hwMark, leoMark, remotes, cellKey: '' };
  }
  for (const via of [$('append-via'), $('delete-via'), $('kv-via')]) {
    for (const id of S.ids) {
      const o = el('option', '', id);
      o.value = id;
      if (id === S.cfg.self) o.selected = true;
      via.append(o);
    }
  }
}

function windowFor(view) {
  let maxLEO = 0, minStart = Infinity;
  for (const id of S.ids) {
    const s = view[id].status;
    if (!s) continue;
    maxLEO = Math.max(maxLEO, s.leo);
    minStart = Math.min(minStart, s.log_start);
  }
  if (minStart === Infinity) minStart = 0;
  // Two deleted boxes stay in view, when there are any.
  if (minStart > 0) minStart = Math.max(0, minStart - 2);
  const end = maxLEO + 3;
  let size = Math.max(MIN_CELLS, end - minStart);
  size = Math.min(size, MAX_CELLS);
  const start = Math.max(0, end - size);
  return { start, size: Math.max(size, end - start) };
}

function render(view, replayFrame) {
  const w = windowFor(view);
  const leader = leaderOf(view);
  const axis = $('axis');
  const width = axis.getBoundingClientRect().width || 600;
  const cw = width / w.size;
  const xOf = (o) => Math.max(0, Math.min(w.size, o - w.start)) * cw;

  // Axis: offsets centred in their boxes.
  const key = `${w.start}/${w.size}/${Math.round(width)}`;
  if (axis.dataset.key !== key) {
    axis.dataset.key = key;
    axis.replaceChildren();
    for (let i = 0; i < w.size; i++) {
      const n = el('div', 'axis-num', String(w.start + i));
      n.style.left = i * cw + 'px';
      n.style.width = cw + 'px';
      axis.append(n);
    }
  }

  for (const id of S.ids) {
    const r = S.rows[id];
    const { status: s, up } = view[id];
    const proc = S.procs[id];
    r.row.classList.toggle('down', !up);
    r.row.classList.toggle('leaderrow', !!s && up && id === leader);
    r.row.dataset.up = up ? 'true' : 'false';
    const role = !up ? (proc && proc.state === 'stopped' ? 'down' : 'unreachable') : (s ? s.role : '…');
    r.role.textContent = role;
    r.role.className = 'role ' + role;
    r.row.dataset.role = role;
    r.epB.textContent = s ? s.epoch : '–';
    r.lsB.textContent = s ? s.log_start : '–';
    r.leB.textContent = s ? s.leo : '–';
    r.hwB.textContent = s ? s.hw : '–';
    let note = '';
    if (!up) {
      const last = s ? '; last known state shown' : '';
      note = proc && proc.state === 'stopped' ? `process stopped${proc.last_exit ? ' (' + proc.last_exit + ')' : ''}${last}`
        : `not answering${last}`;
    } else if (s && s.role !== 'leader') {
      note = s.leader_id ? `follows ${s.leader_id}` : 'no leader known';
    } else if (s) {
      note = 'takes appends; ▲ marks the followers\' LEOs as it knows them (remote LEO)';
    }
    if (r.flash && Date.now() < r.flash.until) note = r.flash.text;
    r.note.textContent = note;
    if (r.restart) {
      const stopped = !proc || proc.state === 'stopped';
      r.restart.textContent = stopped ? 'Start' : 'Restart';
      r.restart.title = stopped ? 'Start the node' : 'Start the node again (stops it cleanly first)';
    }
    r.note.classList.toggle('bad', !up);

    // Cells: one box per offset of the window.
    const ck = `${key}`;
    if (r.cellKey !== ck) {
      r.cellKey = ck;
      r.cells.replaceChildren();
      for (let i = 0; i < w.size; i++) {
        const c = el('div', 'cell');
        c.style.left = i * cw + 2 + 'px';
        c.style.width = Math.max(2, cw - 4) + 'px';
        r.cells.append(c);
      }
    }
    const cells = r.cells.children;
    for (let i = 0; i < w.size; i++) {
      const o = w.start + i;
      let cls = 'cell';
      let title = `offset ${o}`;
      if (s && o < s.log_start) {
        cls += ' deleted';
        title += `: deleted (below ${id}'s log start ${s.log_start})`;
      } else if (s && o < s.hw) cls += ' committed';
      else if (s && o >= s.hw && o < s.leo) cls += ' pending';
      if (cells[i].className !== cls) cells[i].className = cls;
      cells[i].title = title;
    }

    // Markers.
    r.hwMark.hidden = !s;
    r.leoMark.hidden = !s;
    if (s) {
      r.hwMark.style.left = xOf(s.hw) + 'px';
      r.hwMark.firstChild.textContent = 'HW ' + s.hw;
      r.leoMark.style.left = xOf(s.leo) + 'px';
      r.leoMark.firstChild.textContent = 'LEO ' + s.leo;
    }
    // Remote LEOs: the leader's view of each follower, grouped by value.
    const groups = new Map();
    if (s && up && id === leader && s.remote_leo) {
      for (const f of Object.keys(s.remote_leo).sort()) {
        const v = s.remote_leo[f];
        if (!groups.has(v)) groups.set(v, []);
        groups.get(v).push(f);
      }
    }
    const want = [...groups.entries()].sort((a, b) => a[0] - b[0]);
    while (r.remotes.children.length > want.length) r.remotes.lastChild.remove();
    while (r.remotes.children.length < want.length) {
      const m = el('div', 'mark remote');
      m.append(el('span'));
      r.remotes.append(m);
    }
    // Labels that would touch go one line lower.
    const lastX = [-1e9, -1e9];
    want.forEach(([v, fs], i) => {
      const m = r.remotes.children[i];
      const x = xOf(v);
      const label = fs.join(', ');
      const lane = x - lastX[0] >= 14 + 8 * label.length ? 0 : 1;
      lastX[lane] = x;
      m.style.left = x + 'px';
      m.firstChild.style.top = 24 + 15 * lane + 'px';
      m.firstChild.textContent = label;
      m.title = `remote LEO of ${label} = ${v}: the fetch offset of the latest FETCH from ${label}`;
      m.dataset.followers = fs.join(',');
      m.dataset.value = v;
    });
  }

  // Summary line.
  const upCount = S.ids.filter((id) => view[id].up).length;
  const sum = $('summary');
  if (leader) {
    const ls = view[leader].status;
    const start = ls.log_start > 0 ? ` · log start ${ls.log_start} (offsets below it deleted)` : '';
    sum.replaceChildren('leader ', el('b', '', leader), ` · epoch ${ls.epoch} · HW ${ls.hw} (committed entries: offsets below ${ls.hw})${start} · ${upCount} of ${S.ids.length} nodes up · this page is served by ${S.cfg.self}`);
  } else {
    sum.textContent = `no leader right now (election under way or no majority) · ${upCount} of ${S.ids.length} nodes up · this page is served by ${S.cfg.self}`;
  }
  const mode = $('mode');
  if (replayFrame) {
    mode.textContent = 'SLOW-MOTION REPLAY';
    mode.className = 'mode replay';
  } else {
    mode.textContent = 'LIVE';
    mode.className = 'mode live';
  }
  document.body.dataset.mode = replayFrame ? 'replay' : 'live';
}

// ---------- voters and observers ----------

const shortDir = (d) => (d ? d.slice(0, 8) : '');

// membersOf lists the nodes by membership, as the leader knows it (its
// voter set with caught-up flags, the observers fetching from it, the
// nodes it is replacing), or, without a leader, as any reachable node's
// log records the voter set; the page's other nodes follow with their own
// view of themselves.
function membersOf(view) {
  const leader = leaderOf(view);
  const src = leader || S.ids.find((id) => view[id].up && view[id].status && view[id].status.voters);
  const rows = [];
  const st = src ? view[src].status : null;
  if (st) {
    const voterIds = new Set((st.voters || []).map((v) => v.id));
    const observers = st.observers || [];
    const replacing = new Map((st.replacing || []).map((r) => [r.id, r.directory_id]));
    const newInc = new Map(observers.filter((o) => voterIds.has(o.id)).map((o) => [o.id, o.directory_id]));
    for (const v of st.voters || []) {
      rows.push({
        id: v.id, kind: 'voter', dir: v.directory_id, caughtUp: leader ? !!v.caught_up : null,
        replacing: newInc.has(v.id) ? `being replaced: a new incarnation (${shortDir(newInc.get(v.id))}) fetches` : '',
      });
    }
    for (const o of observers) {
      let mark = '';
      if (voterIds.has(o.id)) mark = 'new incarnation of a voter';
      else if (replacing.has(o.id)) mark = 'replacing its old incarnation: a voter once caught up';
      rows.push({ id: o.id, kind: 'observer', dir: o.directory_id, caughtUp: null, replacing: mark });
    }
    for (const [id, dir] of replacing) {
      if (!rows.some((r) => r.id === id)) {
        rows.push({ id, kind: 'observer', dir, caughtUp: null, replacing: 'replacing its old incarnation: a voter once caught up' });
      }
    }
  }
  for (const id of S.ids) {
    if (rows.some((r) => r.id === id)) continue;
    const s = view[id].status;
    if (view[id].up && s) {
      const kind = s.role === 'observer' ? 'observer' : 'voter';
      rows.push({ id, kind, dir: s.directory_id, caughtUp: null, replacing: kind === 'observer' && leader ? 'not fetching from the leader (yet)' : '' });
    } else {
      rows.push({ id, kind: 'down', dir: s ? s.directory_id : '', caughtUp: null, replacing: '' });
    }
  }
  return { src, leader, rows };
}

function renderMembers(view) {
  const m = membersOf(view);
  const key = JSON.stringify(m) + S.memberBusy + S.ids.map((id) => !!view[id].up).join();
  if (key === S.membersKey) return;
  S.membersKey = key;
  $('members-src').textContent = m.src ? (m.leader ? `(as the leader ${m.leader} knows them)` : `(as ${m.src}'s log records them; no leader now)`) : '';
  const tb = $('members');
  tb.replaceChildren();
  if (m.rows.length === 0) {
    const tr = el('tr');
    const td = el('td', 'empty', 'no node answers');
    td.colSpan = 5;
    tr.append(td);
    tb.append(tr);
  }
  for (const r of m.rows) {
    const tr = el('tr');
    tr.dataset.node = r.id;
    tr.dataset.kind = r.kind;
    const kind = el('td');
    kind.append(el('span', 'kind ' + r.kind, r.kind === 'down' ? 'not running' : r.kind));
    if (r.replacing) {
      kind.append(el('span', 'replacing', r.replacing));
      tr.dataset.replacing = 'true';
    }
    const dir = el('td', 'dir', r.dir ? shortDir(r.dir) : (r.kind === 'voter' ? '(not recorded yet)' : ''));
    if (r.dir) dir.title = r.dir;
    const cu = el('td', '', r.caughtUp === null ? '–' : (r.caughtUp ? 'yes' : 'no'));
    const act = el('td');
    if (r.kind === 'voter' || r.kind === 'observer') {
      const add = r.kind === 'observer';
      const b = el('button', 'ghost', add ? 'Add voter' : 'Remove voter');
      b.type = 'button';
      b.disabled = S.memberBusy;
      b.title = add ? `POST /voters/add?node=${r.id}: a voter once it has caught up` : `POST /voters/remove?node=${r.id}: it keeps running as an observer`;
      b.dataset.action = add ? 'add-voter' : 'remove-voter';
      b.onclick = () => voterChange(add ? 'add' : 'remove', r.id);
      act.append(b);
    }
    if (r.kind === 'voter' && m.leader && r.id !== m.leader && view[r.id] && view[r.id].up) {
      const b = el('button', 'ghost', 'Make leader');
      b.type = 'button';
      b.disabled = S.memberBusy;
      b.dataset.action = 'make-leader';
      b.title = `POST /leader/transfer?to=${r.id}: ${m.leader} hands the leadership over once ${r.id} has its whole log`;
      b.onclick = () => makeLeader(r.id);
      act.append(b);
    }
    tr.append(el('td', '', r.id), kind, dir, cu, act);
    tb.append(tr);
  }
}

// voterChange asks this page's node to add or remove a voter (any node
// may: a follower forwards to the leader) and shows the answer.
async function voterChange(op, id) {
  const via = S.cfg.self;
  const out = $('members-result');
  S.memberBusy = true;
  out.className = 'result members-result';
  out.textContent = `${op === 'add' ? 'adding' : 'removing'} voter ${id} via ${via}…`;
  try {
    const r = await request(`${S.nodes[via].url}/voters/${op}?node=${encodeURIComponent(id)}`, { method: 'POST' }, 60000);
    const b = r.body || {};
    if (r.ok) {
      out.className = 'result members-result ok';
      out.textContent = `${op === 'add' ? 'added' : 'removed'} ${id}: voters ${(b.voters || []).map((v) => v.id).join(', ')}`;
    } else {
      out.className = 'result members-result err';
      out.textContent = `${r.status}: ${b.error || r.body}`;
    }
  } catch (e) {
    out.className = 'result members-result err';
    out.textContent = `${via} did not answer: ${e.name === 'AbortError' ? 'timeout' : e.message}`;
  } finally {
    S.memberBusy = false;
  }
}

// makeLeader asks this page's node to hand the leadership over to id
// (any node may: a follower forwards to the leader) and shows the answer.
async function makeLeader(id) {
  const via = S.cfg.self;
  const out = $('members-result');
  S.memberBusy = true;
  out.className = 'result members-result';
  out.textContent = `making ${id} the leader via ${via}…`;
  try {
    const r = await request(`${S.nodes[via].url}/leader/transfer?to=${encodeURIComponent(id)}`, { method: 'POST' }, 60000);
    const b = r.body || {};
    if (r.ok) {
      out.className = 'result members-result ok';
      out.textContent = b.unchanged ? `${id} leads already` : `${b.from} handed the leadership over: ${b.leader} leads`;
      out.dataset.leader = b.leader;
    } else {
      out.className = 'result members-result err';
      let msg = `${r.status}: ${b.error || r.body}`;
      if (b.leader) msg += ` leader: ${b.leader}`;
      out.textContent = msg;
    }
  } catch (e) {
    out.className = 'result members-result err';
    out.textContent = `${via} did not answer: ${e.name === 'AbortError' ? 'timeout' : e.message}`;
  } finally {
    S.memberBusy = false;
  }
}

// ---------- replay of the last append ----------

// The nodes sample their state independently (every millisecond, in
// separate processes), so two changes less than a sample apart can come out
// in the wrong order. causalOrder keeps the time order but holds back a
// change until the changes it depends on for entry x are shown:
//   a follower writes x only after the leader has written it;
//   the leader's remote LEO of f passes x only after f has written x;
//   a follower's HW passes x only after the leader's HW and its own LEO have.
function keysOf(e, x) {
  const p = e.prev, c = e.status;
  const provides = [], requires = [];
  if (!p) return { provides, requires };
  const lead = c.role === 'leader';
  if (p.leo <= x && c.leo > x) {
    if (lead) provides.push('L');
    else { provides.push('F:' + e.id); requires.push('L'); }
  }
  if (lead && c.remote_leo) {
    for (const f of Object.keys(c.remote_leo)) {
      const before = p.remote_leo && p.remote_leo[f] !== undefined ? p.remote_leo[f] : 0;
      if (before <= x && c.remote_leo[f] > x) { provides.push('R:' + f); requires.push('F:' + f); }
    }
  }
  if (p.hw <= x && c.hw > x) {
    if (lead) provides.push('H');
    else { provides.push('FH:' + e.id); requires.push('H', 'F:' + e.id); }
  }
  return { provides, requires };
}

function causalOrder(events, x) {
  const provided = new Set();
  for (const e of events) {
    const k = keysOf(e, x);
    e.provides = k.provides;
    e.requires = k.requires;
    for (const key of k.provides) provided.add(key);
  }
  const done = new Set();
  const out = [], held = [];
  const ready = (e) => e.requires.every((k) => done.has(k) || !provided.has(k) || e.provides.includes(k));
  const emit = (e) => { out.push(e); for (const k of e.provides) done.add(k); };
  for (const e of events) {
    held.push(e);
    for (let progress = true; progress;) {
      progress = false;
      for (let i = 0; i < held.length; i++) {
        if (ready(held[i])) {
          emit(held.splice(i, 1)[0]);
          progress = true;
          break;
        }
      }
    }
  }
  held.forEach(emit); // a cycle cannot happen; if it did, keep time order
  return out;
}

function describe(id, prev, cur, frame, leader) {
  if (!prev) return { text: `${id} is up: ${cur.role}, epoch ${cur.epoch}, LEO ${cur.leo}, HW ${cur.hw}`, round: '' };
  const parts = [];
  const rounds = new Set();
  const isLeader = cur.role === 'leader';
  if (prev.role !== cur.role || prev.epoch !== cur.epoch) {
    parts.push(isLeader ? `${id} became leader of epoch ${cur.epoch}` : `${id} is ${cur.role} in epoch ${cur.epoch}`);
  }
  if (cur.leo > prev.leo) {
    const range = cur.leo - prev.leo === 1 ? `offset ${prev.leo}` : `offsets ${prev.leo}–${cur.leo - 1}`;
    if (isLeader) {
      parts.push(`leader ${id} writes ${range} to its log: LEO ${prev.leo} → ${cur.leo}. HW stays ${cur.hw}: no follower has fetched it yet`);
      rounds.add('append');
    } else {
      parts.push(`${id}'s FETCH (fetch offset ${prev.leo}) returns ${range}; ${id} writes it: LEO ${prev.leo} → ${cur.leo}, HW stays ${cur.hw}`);
      rounds.add('fetch round 1');
    }
  } else if (cur.leo < prev.leo) {
    parts.push(`${id} truncates its log to the leader's history: LEO ${prev.leo} → ${cur.leo}`);
  }
  if (cur.log_start > prev.log_start) {
    parts.push(isLeader
      ? `leader ${id} deletes the entries below offset ${cur.log_start}: log start ${prev.log_start} → ${cur.log_start}`
      : `${id} follows the leader's log start: log start ${prev.log_start} → ${cur.log_start}`);
  }
  if (isLeader && cur.remote_leo) {
    for (const f of Object.keys(cur.remote_leo).sort()) {
      const p = prev.remote_leo ? prev.remote_leo[f] : undefined;
      if (cur.remote_leo[f] !== p) {
        parts.push(`${f}'s next FETCH carries fetch offset ${cur.remote_leo[f]}, so remote LEO of ${f} = ${cur.remote_leo[f]}`);
        rounds.add('fetch round 2');
      }
    }
  }
  if (cur.durable_leo > prev.durable_leo && cur.leo === prev.leo) {
    parts.push(isLeader
      ? `leader ${id}'s own write reaches the disk: durable LEO ${prev.durable_leo} → ${cur.durable_leo} (the leader counts itself for the HW only with what is durable)`
      : `${id}'s write reaches the disk: durable LEO ${prev.durable_leo} → ${cur.durable_leo}`);
  }
  const remoteMoved = isLeader && cur.remote_leo && Object.keys(cur.remote_leo).some((f) => !prev.remote_leo || prev.remote_leo[f] !== cur.remote_leo[f]);
  if (remoteMoved && cur.hw === prev.hw && cur.hw < cur.leo) {
    parts.push(cur.durable_leo < cur.leo
      ? `HW stays ${cur.hw}: the leader's own copy is not on disk yet (durable LEO ${cur.durable_leo})`
      : `HW stays ${cur.hw}: no majority beyond it yet`);
  }
  if (cur.hw > prev.hw) {
    if (isLeader) {
      const have = [id, ...Object.keys(cur.remote_leo || {}).filter((f) => cur.remote_leo[f] >= cur.hw)].sort();
      parts.push(`leader HW ${prev.hw} → ${cur.hw}: a majority (${have.join(', ')}) has LEO ≥ ${cur.hw}, so offsets below ${cur.hw} are committed`);
      rounds.add('fetch round 2');
    } else {
      const lhw = leader && frame[leader] && frame[leader].status ? frame[leader].status.hw : cur.hw;
      parts.push(`${id} reads the leader's HW (${lhw}) in the fetch response: HW = min(own LEO ${cur.leo}, ${lhw}) = ${cur.hw}`);
      rounds.add('fetch round 2');
    }
  }
  if (parts.length === 0) parts.push(`${id}: ${cur.role}, epoch ${cur.epoch}, leader ${cur.leader_id || 'unknown'}`);
  return { text: parts.join('; '), round: [...rounds].join(' + ') };
}

function buildReplay(x) {
  // Every recorded change of every node, with the node's previous state.
  const all = [];
  for (const id of S.ids) {
    const evs = S.events[id];
    for (let i = 0; i < evs.length; i++) {
      all.push({ id, t: evs[i].t_us, status: evs[i].status, prev: i > 0 ? evs[i - 1].status : null });
    }
  }
  all.sort((a, b) => a.t - b.t);
  // The append starts where some node's LEO first passes x.
  const first = all.findIndex((e) => e.prev && e.prev.leo <= x && e.status.leo > x);
  if (first < 0) return null;
  const tStart = all[first].t;
  // Frame 0: each node's last state before that.
  const frame0 = {};
  for (const id of S.ids) frame0[id] = { status: null, up: S.nodes[id].reachable };
  for (let i = 0; i < first; i++) frame0[all[i].id].status = all[i].status;
  for (const id of S.ids) if (!frame0[id].status) frame0[id].status = null;
  // Steps: from there until every reachable node's HW passes x.
  const seen = [];
  const cur = {};
  for (const id of S.ids) cur[id] = frame0[id].status;
  const done = () => S.ids.every((id) => !S.nodes[id].reachable || (cur[id] && cur[id].hw > x));
  for (let i = first; i < all.length && !done(); i++) {
    seen.push(all[i]);
    cur[all[i].id] = all[i].status;
  }
  // A sample can hold two steps of the protocol (the sampler runs every
  // millisecond; a follower may write an entry and learn the HW in between):
  // show them as two steps, marked as seen in one sample.
  const split = [];
  for (const e of seen) {
    const p = e.prev;
    const leoMoved = p && e.status.leo !== p.leo;
    const hwMoved = p && (e.status.hw !== p.hw || JSON.stringify(e.status.remote_leo || {}) !== JSON.stringify(p.remote_leo || {}));
    if (leoMoved && hwMoved) {
      const mid = { ...e.status, hw: p.hw, remote_leo: p.remote_leo };
      split.push({ ...e, status: mid, sameSample: true });
      split.push({ ...e, prev: mid, sameSample: true });
    } else {
      split.push(e);
    }
  }
  seen.length = 0;
  seen.push(...split);
  const ordered = causalOrder(seen, x);
  const frames = [frame0];
  const steps = [];
  let frame = frame0;
  for (const e of ordered) {
    const next = { ...frame, [e.id]: { status: e.status, up: frame[e.id].up } };
    const leader = leaderOf(next);
    const d = describe(e.id, frame[e.id].status || e.prev, e.status, next, leader);
    steps.push({ id: e.id, dt: (e.t - tStart) / 1000, text: d.text, round: d.round, sameSample: !!e.sameSample });
    frames.push(next);
    frame = next;
  }
  return { x, steps, frames, complete: done() };
}

function showSteps(rp, current) {
  const ol = $('steps');
  ol.replaceChildren();
  if (!rp || rp.steps.length === 0) {
    ol.append(el('li', 'empty', 'No recorded changes for that append (history is off or the node restarted).'));
    return;
  }
  rp.steps.forEach((s, i) => {
    const li = el('li', i === current ? 'current' : (current !== undefined && i > current ? 'future' : ''));
    const tm = el('span', 't', `+${s.dt.toFixed(1)} ms${s.sameSample ? '*' : ''}`);
    if (s.sameSample) tm.title = 'seen in one sample together with the step next to it';
    li.append(tm, `${s.text}`);
    if (s.round) li.append(el('span', 'round', s.round));
    ol.append(li);
  });
  if (rp.steps.some((s, i) => i > 0 && s.dt < rp.steps[i - 1].dt)) {
    ol.append(el('li', 'empty', 'Times are when each node noticed the change; the nodes sample separately, every 1 ms, so steps less than a sample apart can show their times out of order. The list follows the protocol\'s order.'));
  }
  if (rp.steps.some((s) => s.sameSample)) {
    ol.append(el('li', 'empty', '* two steps that happened within one sampling interval (1 ms) of that node.'));
  }
  if (!rp.complete) ol.append(el('li', 'empty', 'The HW has not reached this entry on every reachable node yet.'));
}

// detectAppend notices appends from any client (this page, curl, another
// service) by the leader's LEO, and queues their replay.
function detectAppend() {
  const lv = liveView();
  const leader = leaderOf(lv);
  if (!leader) return;
  const leo = lv[leader].status.leo;
  if (S.seenLEO === undefined) {
    // First look: show the steps of the latest entry the nodes remember.
    S.seenLEO = leo;
    if (leo > 0) {
      const rp = buildReplay(leo - 1);
      if (rp && rp.steps.length > 0) {
        S.lastReplay = rp;
        S.replayedX = rp.x;
        $('replay-button').disabled = false;
        showSteps(rp);
      }
    }
    return;
  }
  if (leo !== S.seenLEO) {
    // Replay appends from elsewhere only when they come one at a time: under
    // a steady stream the page would be replaying forever, never live.
    const now = Date.now();
    const quiet = !S.lastLEOChange || now - S.lastLEOChange > 2000;
    S.lastLEOChange = now;
    if (leo > S.seenLEO && quiet && !S.replay && (!S.pending || S.pending.offset < leo - 1)) {
      S.pending = { offset: leo - 1, deadline: now + 5000 };
    }
  }
  S.seenLEO = leo; // also when it went down: a truncation after a failover
}

function maybeStartReplay() {
  const p = S.pending;
  if (!p || S.replay) return;
  // Wait until every reachable node's recorded history (not just its
  // status: the two are fetched separately) shows the HW past the entry.
  const reachable = S.ids.filter((id) => S.nodes[id].reachable && S.nodes[id].status);
  const caughtUp = (id) => {
    const evs = S.events[id];
    return evs.length > 0 && evs[evs.length - 1].status.hw > p.offset;
  };
  if (!reachable.every(caughtUp) && Date.now() < p.deadline) return;
  S.pending = null;
  S.replayedX = p.offset;
  const rp = buildReplay(p.offset);
  S.lastReplay = rp;
  $('replay-button').disabled = !rp;
  if (rp) playReplay(rp);
  else showSteps(null);
}

function playReplay(rp) {
  stopReplay();
  S.replay = { rp, i: 0, timer: null };
  $('live-button').hidden = false;
  const banner = $('replay-banner');
  banner.hidden = false;
  const tick = () => {
    const r = S.replay;
    if (!r) return;
    const i = r.i; // frame i shows the state after step i-1
    render(rp.frames[i], true);
    showSteps(rp, i - 1);
    for (const id of S.ids) S.rows[id].row.classList.toggle('active', i > 0 && rp.steps[i - 1].id === id);
    const total = rp.steps.length;
    if (i === 0) {
      banner.textContent = `Slow-motion replay of the append at offset ${rp.x}: the state just before it. ${total} recorded changes follow.`;
    } else {
      const s = rp.steps[i - 1];
      banner.textContent = `Step ${i} of ${total} (+${s.dt.toFixed(1)} ms real time, ${s.id}): ${s.text}`;
    }
    if (i < rp.frames.length - 1) {
      r.i++;
      r.timer = setTimeout(tick, STEP_MS);
    } else {
      r.timer = setTimeout(stopReplay, HOLD_MS);
    }
  };
  tick();
}

function stopReplay() {
  if (S.replay && S.replay.timer) clearTimeout(S.replay.timer);
  const had = !!S.replay;
  S.replay = null;
  $('live-button').hidden = true;
  $('replay-banner').hidden = true;
  for (const id of S.ids) S.rows[id].row.classList.remove('active');
  if (had) {
    showSteps(S.lastReplay);
    render(liveView());
  }
}

// ---------- actions ----------

async function append(ev) {
  ev.preventDefault();
  const input = $('append-input');
  const via = $('append-via').value;
  const text = input.value === '' ? `entry at ${new Date().toLocaleTimeString()}` : input.value;
  const out = $('append-result');
  const btn = $('append-button');
  btn.disabled = true;
  out.className = 'result';
  out.textContent = `appending via ${via}…`;
  const t0 = performance.now();
  try {
    const r = await request(S.nodes[via].url + '/append', {
      method: 'POST', body: text, headers: { 'Content-Type': 'text/plain' },
    }, 15000);
    const ms = (performance.now() - t0).toFixed(0);
    if (r.ok) {
      out.className = 'result ok';
      out.textContent = `committed at offset ${r.body.offset} (${ms} ms via ${via})`;
      out.dataset.offset = r.body.offset;
      input.value = '';
      const off = r.body.offset;
      if (S.replayedX !== off && !(S.pending && S.pending.offset >= off)) {
        S.pending = { offset: off, deadline: Date.now() + 5000 };
      }
    } else {
      const b = r.body || {};
      out.className = 'result err';
      let msg = `${r.status}: ${b.error || r.body}`;
      if (b.outcome) msg += ` (outcome: ${b.outcome})`;
      if (b.leader) msg += ` leader: ${b.leader}`;
      out.textContent = msg;
    }
  } catch (e) {
    out.className = 'result err';
    out.textContent = `${via} did not answer: ${e.name === 'AbortError' ? 'timeout' : e.message}`;
  } finally {
    btn.disabled = false;
  }
}

// deleteBefore asks a node to delete the entries below an offset (any node
// may: a follower asks its leader) and shows the log start it answers.
async function deleteBefore(ev) {
  ev.preventDefault();
  const input = $('delete-offset');
  const via = $('delete-via').value;
  const out = $('delete-result');
  const btn = $('delete-button');
  const offset = input.value.trim();
  if (!/^[0-9]+$/.test(offset)) {
    out.className = 'result err';
    out.textContent = 'enter an offset (a whole number)';
    return;
  }
  btn.disabled = true;
  out.className = 'result';
  out.textContent = `deleting before ${offset} via ${via}…`;
  try {
    const r = await request(`${S.nodes[via].url}/delete-before?offset=${offset}`, { method: 'POST' }, 15000);
    const b = r.body || {};
    if (r.ok) {
      out.className = 'result ok';
      out.textContent = b.log_start < b.requested
        ? `log start ${b.log_start} on ${via}: only committed entries go, and the last one stays (HW ${b.hw})`
        : `log start ${b.log_start} on ${via}`;
      out.dataset.logStart = b.log_start;
    } else {
      out.className = 'result err';
      let msg = `${r.status}: ${b.error || r.body}`;
      if (b.log_start !== undefined) msg += ` (log start ${b.log_start})`;
      out.textContent = msg;
    }
  } catch (e) {
    out.className = 'result err';
    out.textContent = `${via} did not answer: ${e.name === 'AbortError' ? 'timeout' : e.message}`;
  } finally {
    btn.disabled = false;
  }
}

async function control(id, action) {
  const r = S.rows[id];
  const doing = { kill: 'killing…', restart: 'restarting…', wipe: 'wiping its directory and starting it…' };
  const done = { kill: 'killed with SIGKILL', restart: 'restarted', wipe: 'started with an empty directory: a new incarnation' };
  r.flash = { text: doing[action], until: Date.now() + 30000 };
  try {
    const res = await request(`${S.cfg.control}/nodes/${id}/${action}`, { method: 'POST' }, 60000);
    r.flash = { text: res.ok ? done[action] : `${action} failed: ${res.body && res.body.error}`, until: Date.now() + 3000 };
    if (res.ok && Array.isArray(res.body)) for (const p of res.body) S.procs[p.id] = p;
  } catch (e) {
    r.flash = { text: `${action} failed: ${e.message}`, until: Date.now() + 5000 };
  }
}

// ---------- start ----------

// ---------- the key-value view ----------

// kvAction runs one KV operation through the chosen node and shows the
// key's history as that node holds it.
async function kvAction(kind) {
  const key = $('kv-key').value.trim();
  const out = $('kv-result');
  if (key === '') { out.className = 'result err'; out.textContent = 'a key, please'; return; }
  const via = $('kv-via').value;
  const base = S.nodes[via].url + '/kv/' + encodeURIComponent(key);
  out.className = 'result';
  out.textContent = `${kind} via ${via}…`;
  try {
    let r;
    if (kind === 'get') {
      r = await request(base);
    } else if (kind === 'delete') {
      r = await request(base, { method: 'DELETE' }, 15000);
    } else {
      let url = base;
      if (kind === 'update') url += '?expected=' + encodeURIComponent(S.kvRev || 0);
      r = await request(url, { method: 'PUT', body: $('kv-value').value, headers: { 'Content-Type': 'text/plain' } }, 15000);
    }
    const b = r.body || {};
    if (r.ok) {
      out.className = 'result ok';
      if (b.revision !== undefined) S.kvRev = b.revision;
      out.textContent = kind === 'get' ? `${key} = ${b.value} at revision ${b.revision}` : `${kind}: revision ${b.revision}`;
    } else {
      out.className = 'result err';
      out.textContent = `${r.status}: ${b.error || r.body}` + (b.current !== undefined ? ` (the key is at ${b.current})` : '');
      if (b.current !== undefined) S.kvRev = b.current;
    }
    const h = await request(base + '?history=1');
    const body = $('kv-history');
    body.replaceChildren();
    for (const c of (h.ok && h.body.history) || []) {
      const tr = el('tr');
      tr.append(el('td', '', String(c.revision)), el('td', c.deleted ? 'thin' : '', c.deleted ? '(deleted)' : c.value));
      body.append(tr);
    }
  } catch (e) {
    out.className = 'result err';
    out.textContent = `${via} did not answer: ${e.name === 'AbortError' ? 'timeout' : e.message}`;
  }
}

async function init() {
  let r;
  for (;;) {
    try {
      r = await request('/config');
      if (r.ok) break;
    } catch (e) { /* retry */ }
    await sleep(500);
  }
  S.cfg = r.body;
  for (const n of S.cfg.nodes) {
    S.ids.push(n.id);
    S.nodes[n.id] = { url: n.url || (n.id === S.cfg.self ? location.origin : ''), status: null, reachable: false, busy: false };
    S.events[n.id] = [];
    S.seq[n.id] = 0;
  }
  buildBoard();
  $('append-form').addEventListener('submit', append);
  $('delete-form').addEventListener('submit', deleteBefore);
  $('kv-form').addEventListener('submit', (ev) => { ev.preventDefault(); kvAction('put'); });
  for (const b of document.querySelectorAll('#kv-form button[type=button]')) {
    b.addEventListener('click', () => kvAction(b.dataset.kv));
  }
  $('replay-button').addEventListener('click', () => S.lastReplay && playReplay(S.lastReplay));
  $('live-button').addEventListener('click', stopReplay);
  window.addEventListener('resize', () => !S.replay && render(liveView()));
  for (const id of S.ids) nodeLoop(id);
  setInterval(tick, 100);
  pollControl();
  setInterval(pollControl, 1000);
  pollEntries();
  setInterval(pollEntries, 1000);
  pollLogs();
  setInterval(pollLogs, 1000);
}

init();
