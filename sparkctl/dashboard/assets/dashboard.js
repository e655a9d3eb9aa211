// sparkctl dashboard: renders the collector's snapshots (pushed over SSE at /events) into the
// tables, the event log and three Chart.js charts of the last hour.
'use strict';

const GIB_PER_KIB = 1 / (1024 * 1024);
const MAX_ROWS = 3600;
const COLORS = ['#2b6cb0', '#c05621', '#2f855a', '#6b46c1', '#b83280', '#2c7a7b', '#975a16', '#4a5568'];

function num(v, digits, scale) {
  if (typeof v !== 'number' || !isFinite(v)) return 'n/a';
  return (v * (scale || 1)).toFixed(digits);
}

function cell(text, cls, attrs) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  for (const [k, v] of Object.entries(attrs || {})) td.setAttribute(k, v);
  return td;
}

function setField(name, text) {
  const el = document.querySelector('#endpoint [data-field="' + name + '"]');
  if (el) el.textContent = text;
}

function renderNodes(nodes) {
  const body = document.querySelector('#nodes tbody');
  body.replaceChildren();
  for (const n of nodes) {
    const tr = document.createElement('tr');
    tr.dataset.node = n.node;
    if (!n.reachable) tr.className = 'unreachable';
    const g = n.gpu || {};
    const links = (n.links || []).map(l =>
      l.device + ' ' + l.state + ' ' + num(l.speed_mbps, 0) + 'M mtu ' + num(l.mtu, 0) +
      Object.entries(l.rates || {}).filter(([, r]) => typeof r === 'number' && r > 0)
        .map(([k, r]) => ' ' + k + ' ' + r.toFixed(1) + '/s').join('')).join('; ');
    tr.append(
      cell(n.node, 'text'),
      cell(n.reachable ? 'ok' : 'unreachable', 'text', {'data-field': 'reachable'}),
      cell(num(n.mem_available_kib, 2, GIB_PER_KIB), '',
           {'data-field': 'mem_available', 'data-kib': String(n.mem_available_kib)}),
      cell(num(n.mem_total_kib, 1, GIB_PER_KIB)),
      cell(num(n.swap_used_kib, 2, GIB_PER_KIB), '', {'data-field': 'swap_used'}),
      cell(num(n.page_cache_kib, 2, GIB_PER_KIB)),
      cell(num(n.cma_free_kib, 2, GIB_PER_KIB)),
      cell(num(g.utilization_percent, 0)),
      cell(num(g.temperature_c, 0)),
      cell(num(g.sm_clock_mhz, 0)),
      cell(num(g.power_w, 1)),
      cell(links || 'none', 'text links'));
    body.append(tr);
  }
}

function renderRanks(ranks) {
  const body = document.querySelector('#ranks tbody');
  body.replaceChildren();
  for (const r of ranks) {
    const tr = document.createElement('tr');
    tr.dataset.rank = String(r.rank);
    tr.dataset.phase = r.phase;
    if (r.problem) tr.className = 'problem';
    const state = r.hung ? 'HUNG' : r.busy ? 'busy' : 'idle';
    tr.append(
      cell(String(r.rank), 'text'), cell(r.node, 'text'),
      cell(r.phase, 'text', {'data-field': 'phase'}), cell(state, 'text', {'data-field': 'state'}),
      cell(num(r.step_time_ms, 1)), cell(num(r.progress_age_s, 0)),
      cell(String(r.steps), '', {'data-field': 'steps'}), cell(String(r.tokens)),
      cell((r.problem || '').split('\n')[0], 'text'));
    body.append(tr);
  }
}

function renderEndpoint(e, status) {
  setField('guard', status.memory_guard || 'n/a');
  if (!e) {
    for (const f of ['ready', 'load', 'prompt_tps', 'gen_tps', 'ttft', 'itl', 'kv', 'prefix', 'spec']) setField(f, 'n/a');
    return;
  }
  const q = (h, d) => h ? [num(h.p50, d, 1000), num(h.p90, d, 1000), num(h.p99, d, 1000)].join(' / ') : 'n/a';
  setField('ready', e.ready ? 'yes' : 'no');
  setField('load', num(e.running, 0) + ' / ' + num(e.waiting, 0));
  setField('prompt_tps', num(e.prompt_tokens_per_s, 1));
  setField('gen_tps', num(e.generation_tokens_per_s, 1));
  setField('ttft', q(e.ttft_seconds, 0));
  setField('itl', q(e.itl_seconds, 1));
  setField('kv', num(e.kv_cache_usage, 1, 100) + ' %');
  setField('prefix', num(e.prefix_cache_hit_rate, 1, 100) + ' %');
  setField('spec', e.spec_acceptance === null || e.spec_acceptance === undefined ? 'not running' : num(e.spec_acceptance, 1, 100) + ' %');
}

function render(s) {
  if (!s) return;
  const st = s.status || {};
  document.getElementById('model').textContent = st.model || 'nothing runs';
  const health = document.getElementById('health');
  health.textContent = st.health || '?';
  health.className = 'badge ' + (st.health || '');
  const reason = document.getElementById('reason');
  reason.hidden = !st.reason;
  reason.textContent = st.reason || '';
  document.getElementById('updated').textContent = 'at ' + new Date(s.time * 1000).toLocaleTimeString();
  document.body.dataset.time = String(s.time);
  renderNodes(s.nodes || []);
  renderRanks(s.ranks || []);
  renderEndpoint(s.endpoint, st);
  const c = s.collector;
  if (c) {
    document.getElementById('collector').textContent = 'collector: tick ' + c.ticks + ', ' +
      c.tick_ms.toFixed(0) + ' ms; over SSH ' + (c.ssh_bytes_sent / 1024).toFixed(0) + ' KiB sent, ' +
      (c.ssh_bytes_received / 1024).toFixed(0) + ' KiB received';
  }
}

function addEvents(events) {
  const list = document.getElementById('events');
  for (const e of events || []) {
    const li = document.createElement('li');
    li.className = e.kind;
    li.textContent = new Date(e.time * 1000).toLocaleTimeString() + '  ' + e.kind + '  ' + e.text;
    list.append(li);
  }
  while (list.children.length > 1000) list.firstElementChild.remove();
  list.scrollTop = list.scrollHeight;
}

function makeChart(id, yTitle) {
  return new Chart(document.getElementById(id), {
    type: 'line',
    data: {labels: [], datasets: []},
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, normalized: true,
      elements: {point: {radius: 0}, line: {borderWidth: 1.5}},
      scales: {x: {ticks: {maxTicksLimit: 8, autoSkip: true}}, y: {beginAtZero: true, title: {display: true, text: yTitle}}},
      plugins: {legend: {position: 'bottom'}},
    },
  });
}

const charts = {};

function series(chart, name) {
  let d = chart.data.datasets.find(x => x.label === name);
  if (!d) {
    const color = COLORS[chart.data.datasets.length % COLORS.length];
    d = {label: name, data: new Array(chart.data.labels.length).fill(null), borderColor: color, backgroundColor: color};
    chart.data.datasets.push(d);
  }
  return d;
}

function pushRow(row) {
  const label = new Date(row.t * 1000).toLocaleTimeString();
  const add = (chart, values) => {
    chart.data.labels.push(label);
    for (const [name, v] of Object.entries(values)) series(chart, name);
    for (const d of chart.data.datasets) d.data.push(typeof values[d.label] === 'number' ? values[d.label] : null);
    if (chart.data.labels.length > MAX_ROWS) {
      chart.data.labels.shift();
      for (const d of chart.data.datasets) d.data.shift();
    }
  };
  add(charts.mem, row.mem || {});
  add(charts.tps, {'generation': row.gen_tps, 'prompt': row.prompt_tps});
  add(charts.load, {'running': row.running, 'waiting': row.waiting,
                    'KV %': typeof row.kv === 'number' ? row.kv * 100 : null});
}

function updateCharts() {
  for (const c of Object.values(charts)) c.update('none');
}

function connect() {
  const badge = document.getElementById('link');
  const source = new EventSource('/events');
  source.addEventListener('hello', ev => {
    const m = JSON.parse(ev.data);
    for (const c of Object.values(charts)) {
      c.data.labels = [];
      c.data.datasets = [];
    }
    for (const r of m.rows || []) pushRow(r);
    updateCharts();
    document.getElementById('events').replaceChildren();
    addEvents(m.events);
    render(m.snapshot);
    badge.textContent = 'live';
    badge.className = 'badge live';
  });
  source.addEventListener('tick', ev => {
    const m = JSON.parse(ev.data);
    pushRow(m.row);
    updateCharts();
    addEvents(m.events);
    render(m.snapshot);
    document.body.dataset.ticks = String((Number(document.body.dataset.ticks) || 0) + 1);
  });
  source.onerror = () => {
    badge.textContent = 'reconnecting';
    badge.className = 'badge lost';
  };
}

window.addEventListener('DOMContentLoaded', () => {
  charts.mem = makeChart('chart-mem', 'GiB');
  charts.tps = makeChart('chart-tps', 'tok/s');
  charts.load = makeChart('chart-load', 'requests / %');
  connect();
});
