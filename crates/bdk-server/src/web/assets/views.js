// The smaller views: Logs (polling `/v1/logs`), Raw (the session's NDJSON events), Schedules
// and Evals (the `/v1/dev/...` routes, shown as unavailable where this server lacks them) and
// Try (channel routes, unavailable until channels are served).

import { ApiError, base, get, post } from './api.js';
import { clear, h, json, notice, time } from './dom.js';
import { info } from './agent.js';
import { session } from './session.js';

export function logsView(root) {
  const level = h('select', { id: 'log-level', 'aria-label': 'Lowest level shown' },
    ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'].map((l) => h('option', { value: l, selected: l === 'INFO' }, l)));
  const out = h('div', { class: 'logs', role: 'log', 'aria-label': 'Server log' });
  root.append(h('div', { class: 'row' }, h('label', { for: 'log-level' }, 'Level '), level), out);
  const order = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];
  let cursor = 0;
  let lines = [];
  let timer = null;
  let stopped = false;
  const render = () => {
    const min = order.indexOf(level.value);
    clear(out).append(...lines.filter((l) => order.indexOf(l.level) >= min).map((l) =>
      h('div', { class: `log ${l.level.toLowerCase()}` }, h('span', { class: 'muted' }, time(l.at)), ` ${l.level} `, h('span', { class: 'muted' }, l.target), ` ${l.message}`)));
    if (!out.childElementCount) out.append(h('p', { class: 'muted' }, 'No log lines yet.'));
  };
  const poll = async () => {
    try {
      const answer = await get(`/v1/logs?after=${cursor}`);
      cursor = answer.cursor;
      lines = lines.concat(answer.lines).slice(-2000);
      render();
    } catch (err) {
      clear(out).append(notice('error', err instanceof ApiError ? err.explain() : String(err)));
      return;
    }
    if (!stopped) timer = setTimeout(poll, 2000);
  };
  level.addEventListener('change', render);
  poll();
  return { dispose: () => { stopped = true; clearTimeout(timer); } };
}

export function rawView(root) {
  const pre = h('pre', { class: 'raw', id: 'raw-events', tabindex: 0, 'aria-label': 'NDJSON events' });
  const link = h('a', {}, 'Download NDJSON');
  root.append(h('div', { class: 'row' }, link), pre);
  const render = () => {
    if (!session.id) {
      root.replaceChildren(notice('info', 'No session open. Start one in Chat or pick one in Runs.'));
      return;
    }
    link.href = `${base}/v1/session/${encodeURIComponent(session.id)}/events`;
    pre.textContent = session.events.map((e) => JSON.stringify(e)).join('\n');
    if (session.error) pre.textContent = session.error.explain();
  };
  const onEvent = (e) => {
    if (e.type.startsWith('playground.')) render();
    else pre.textContent += (pre.textContent ? '\n' : '') + JSON.stringify(e);
  };
  session.listeners.add(onEvent);
  render();
  return { dispose: () => session.listeners.delete(onEvent) };
}

export function schedulesView(root) {
  root.append(h('p', { class: 'muted' }, 'Loading…'));
  info().then((i) => {
    const schedules = i.schedules ?? [];
    if (!schedules.length) {
      root.replaceChildren(notice('unavailable', 'This agent has no schedules (files under bot/schedules/).'));
      return;
    }
    root.replaceChildren(
      h('p', { class: 'muted' }, 'Fire now works under `bdk serve --dev`, where schedules never fire by themselves.'),
      h('ul', { class: 'schedules' }, schedules.map((s) => {
        const out = h('span', { role: 'status' });
        const fire = async () => {
          out.textContent = 'Firing…';
          try {
            const answer = await post(`/v1/dev/schedules/${encodeURIComponent(s.id ?? s.name)}`);
            out.textContent = `Started ${answer.sessionIds?.join(', ') || 'no session'}`;
          } catch (err) {
            out.textContent = err instanceof ApiError && err.code === 'route_not_found'
              ? 'Unavailable: this server is not running with --dev.' : (err.explain?.() ?? String(err));
          }
        };
        return h('li', {}, h('strong', {}, s.id ?? s.name), s.cron ? h('code', {}, ` ${s.cron}`) : '',
          s.description ? ` — ${s.description}` : '', ' ', h('button', { type: 'button', onclick: fire }, 'Fire now'), ' ', out);
      })));
  }).catch((err) => root.replaceChildren(notice('error', err instanceof ApiError ? err.explain() : String(err))));
}

export function evalsView(root) {
  const list = h('div');
  const runs = h('div');
  root.append(list, h('h3', {}, 'Runs'), runs);
  let timer = null;
  let stopped = false;
  const loadRuns = async () => {
    try {
      const answer = await get('/v1/dev/evals/runs');
      const all = answer.runs ?? [];
      clear(runs).append(all.length
        ? h('ul', {}, all.map((r) => h('li', {}, h('code', {}, r.runId ?? r.id ?? '?'), ` ${r.status ?? ''} `,
          r.summary ? h('span', { class: 'muted' }, json(r.summary).replace(/\s+/g, ' ')) : '')))
        : h('p', { class: 'muted' }, 'No runs yet.'));
      if (!stopped && all.some((r) => r.status === 'running')) timer = setTimeout(loadRuns, 1500);
    } catch (err) {
      clear(runs).append(notice('error', err.explain?.() ?? String(err)));
    }
  };
  get('/v1/dev/evals').then((answer) => {
    const evals = answer.evals ?? [];
    if (!evals.length) {
      list.replaceChildren(notice('unavailable', 'This agent has no evals (files under evals/).'));
      return;
    }
    const state = h('span', { role: 'status' });
    const start = async () => {
      state.textContent = 'Starting…';
      try {
        await post('/v1/dev/evals/runs', {});
        state.textContent = 'Started.';
        loadRuns();
      } catch (err) {
        state.textContent = err.explain?.() ?? String(err);
      }
    };
    list.replaceChildren(h('ul', {}, evals.map((e) => h('li', {}, h('code', {}, e.id ?? e.name ?? '?'), (e.tags ?? []).length ? ` [${e.tags.join(', ')}]` : ''))),
      h('button', { type: 'button', class: 'primary', onclick: start }, 'Run all'), ' ', state);
    loadRuns();
  }).catch((err) => {
    list.replaceChildren(err instanceof ApiError && err.status === 404
      ? notice('unavailable', `Evals are unavailable on this server: ${err.message}`)
      : notice('error', err.explain?.() ?? String(err)));
  });
  return { dispose: () => { stopped = true; clearTimeout(timer); } };
}

export function tryView(root) {
  root.append(h('p', { class: 'muted' }, 'Loading…'));
  info().then((i) => {
    const channels = i.channels ?? [];
    root.replaceChildren(notice('unavailable',
      'Try calls channel routes. This server does not serve channel routes yet, so there is nothing to try here.',
      channels.length ? ` Declared channels: ${channels.map((c) => c.id ?? c.name).join(', ')}.` : ''));
  }).catch((err) => root.replaceChildren(notice('error', err.explain?.() ?? String(err))));
}
