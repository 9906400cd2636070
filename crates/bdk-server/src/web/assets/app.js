// The playground shell: tabs (keyboard navigable), the bearer token form, the current session
// (one live NDJSON follower shared by every view) and `?sessionId=` / `#view` deep links.

import { setToken, token } from './api.js';
import { session } from './session.js';
import { clear, h } from './dom.js';
import { chatView } from './chat.js';
import { runsView } from './runs.js';
import { traceView } from './trace.js';
import { agentView } from './agent.js';
import { toolsView } from './tools.js';
import { evalsView, logsView, rawView, schedulesView, tryView } from './views.js';

const VIEWS = [
  ['chat', 'Chat', chatView],
  ['runs', 'Runs', runsView],
  ['trace', 'Trace', traceView],
  ['agent', 'Agent', agentView],
  ['tools', 'Tools', toolsView],
  ['logs', 'Logs', logsView],
  ['raw', 'Raw', rawView],
  ['schedules', 'Schedules', schedulesView],
  ['evals', 'Evals', evalsView],
  ['try', 'Try', tryView],
];

let current = null;

export function show(name) {
  const entry = VIEWS.find(([id]) => id === name) ?? VIEWS[0];
  current?.dispose?.();
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const selected = tab.dataset.view === entry[0];
    tab.setAttribute('aria-selected', String(selected));
    tab.tabIndex = selected ? 0 : -1;
  }
  const main = clear(document.getElementById('view'));
  main.setAttribute('aria-labelledby', `tab-${entry[0]}`);
  current = entry[2](main) ?? null;
  if (location.hash !== `#${entry[0]}`) history.replaceState(null, '', urlFor(entry[0]));
}

function urlFor(view) {
  const params = new URLSearchParams(location.search);
  if (session.id) params.set('sessionId', session.id);
  else params.delete('sessionId');
  const query = params.toString();
  return `${location.pathname}${query ? `?${query}` : ''}#${view}`;
}

function updateUrl() {
  history.replaceState(null, '', urlFor(location.hash.slice(1) || 'chat'));
}

function renderBar() {
  const bar = clear(document.getElementById('session-bar'));
  if (!session.id) {
    bar.append('New chat: your first message starts a session.');
    return;
  }
  bar.append('Session ', h('code', {}, session.id));
  if (session.error) bar.append(' · ', h('span', { class: 'bad' }, session.error.explain()));
}

function buildTabs() {
  const nav = document.getElementById('tabs');
  for (const [id, label] of VIEWS) {
    nav.append(h('button', {
      role: 'tab', id: `tab-${id}`, type: 'button', 'aria-controls': 'view', dataset: { view: id },
      onclick: () => show(id),
    }, label));
  }
  nav.addEventListener('keydown', (e) => {
    const tabs = [...nav.querySelectorAll('[role="tab"]')];
    const at = tabs.indexOf(document.activeElement);
    if (at < 0) return;
    let next = null;
    if (e.key === 'ArrowRight') next = (at + 1) % tabs.length;
    else if (e.key === 'ArrowLeft') next = (at - 1 + tabs.length) % tabs.length;
    else if (e.key === 'Home') next = 0;
    else if (e.key === 'End') next = tabs.length - 1;
    if (next === null) return;
    e.preventDefault();
    tabs[next].focus();
    show(tabs[next].dataset.view);
  });
}

function buildAuth() {
  const form = document.getElementById('auth');
  const input = document.getElementById('token');
  const state = document.getElementById('auth-state');
  const say = () => { state.textContent = token() ? 'token set for this tab' : ''; };
  input.value = token();
  say();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    say();
    // Everything shown may change with the principal: reopen the session and the view.
    session.open(session.id);
    show(location.hash.slice(1) || 'chat');
  });
}

session.changed = () => { updateUrl(); renderBar(); };
buildTabs();
buildAuth();
session.open(new URLSearchParams(location.search).get('sessionId'));
show(location.hash.slice(1) || 'chat');
window.addEventListener('hashchange', () => {
  const name = location.hash.slice(1);
  if (VIEWS.some(([id]) => id === name)) show(name);
});
// The skip link moves focus to the view without touching the #view routing.
document.querySelector('a.skip')?.addEventListener('click', (e) => {
  e.preventDefault();
  document.getElementById('view').focus();
});
