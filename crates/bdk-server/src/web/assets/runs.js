// Runs: the caller's sessions (the server decides whose), searchable, each openable in Chat,
// Trace or Raw.

import { ApiError, get } from './api.js';
import { clear, h, notice, time } from './dom.js';
import { session } from './session.js';
import { show } from './app.js';

export function runsView(root) {
  const search = h('input', { type: 'search', id: 'runs-search', placeholder: 'Search by title, id, principal or status', 'aria-label': 'Search sessions' });
  const refresh = h('button', { type: 'button', onclick: load }, 'Refresh');
  const list = h('div', { class: 'runs' });
  root.append(h('div', { class: 'row' }, search, refresh), list);
  let sessions = [];

  function render() {
    clear(list);
    const q = search.value.trim().toLowerCase();
    const shown = sessions.filter((s) => !q || [s.sessionId, s.title, s.principal, s.status, s.channel]
      .some((v) => String(v ?? '').toLowerCase().includes(q)));
    if (!shown.length) {
      list.append(h('p', { class: 'muted' }, sessions.length ? 'No session matches.' : 'No sessions yet. Start one in Chat.'));
      return;
    }
    const open = (s, view) => () => { session.open(s.sessionId); show(view); };
    list.append(h('table', {},
      h('thead', {}, h('tr', {}, ['Session', 'Title', 'Principal', 'Status', 'Updated', 'Open'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, shown.map((s) => h('tr', { dataset: { sessionId: s.sessionId } },
        h('td', {}, h('code', {}, s.sessionId)),
        h('td', {}, s.title ?? ''),
        h('td', {}, s.principal),
        h('td', {}, h('span', { class: `status ${s.status}` }, s.status)),
        h('td', {}, time(s.updatedAt)),
        h('td', { class: 'actions' },
          h('button', { type: 'button', onclick: open(s, 'chat') }, 'Chat'), ' ',
          h('button', { type: 'button', onclick: open(s, 'trace') }, 'Trace'), ' ',
          h('button', { type: 'button', onclick: open(s, 'raw') }, 'Raw')))))));
  }

  async function load() {
    clear(list).append(h('p', { class: 'muted' }, 'Loading…'));
    try {
      sessions = (await get('/v1/sessions')).sessions ?? [];
      sessions.sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
      render();
    } catch (err) {
      clear(list).append(notice('error', err instanceof ApiError ? err.explain() : String(err)));
    }
  }

  search.addEventListener('input', render);
  load();
  search.focus();
}
