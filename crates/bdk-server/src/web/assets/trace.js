// Trace: a timeline of the session: turns, steps (one model call each) and tool calls, with
// durations, tokens and cost, drawn from the same events as Chat (live while they arrive).

import { ApiError, get } from './api.js';
import { clear, h, ms, notice, tokens, usd } from './dom.js';
import { session } from './session.js';

// Folds events into turns → steps → calls.
export function timeline(events) {
  const turns = [];
  const byTurn = new Map();
  const calls = new Map();
  const turnOf = (e) => {
    const id = e.turnId ?? 'session';
    let t = byTurn.get(id);
    if (!t) {
      t = { id, start: e.at, end: null, status: 'running', steps: [], message: null, usage: null, cost: null, durationMs: null, model: null };
      byTurn.set(id, t);
      turns.push(t);
    }
    return t;
  };
  for (const e of events) {
    const d = e.data ?? {};
    if (!e.turnId) continue;
    const t = turnOf(e);
    const step = () => t.steps[t.steps.length - 1];
    switch (e.type) {
      case 'message.received': t.message = d.text; break;
      case 'turn.started': t.start = e.at; t.model = d.model ?? null; break;
      case 'step.started': t.steps.push({ step: d.step, start: e.at, durationMs: null, usage: null, finish: null, calls: [] }); break;
      case 'step.completed': {
        const s = t.steps.find((x) => x.step === d.step) ?? step();
        if (s) Object.assign(s, { durationMs: d.durationMs, usage: d.usage ?? null, finish: d.finishReason ?? null });
        break;
      }
      case 'actions.requested':
        for (const c of d.calls ?? []) {
          const call = { callId: c.callId, toolName: c.toolName, start: e.at, durationMs: null, isError: false, status: 'running', approval: null };
          calls.set(c.callId, call);
          (step() ?? t.steps[t.steps.push({ step: 0, start: e.at, calls: [] }) - 1]).calls.push(call);
        }
        break;
      case 'action.approval_requested': if (calls.get(d.callId)) calls.get(d.callId).approval = 'waiting'; break;
      case 'action.approval_resolved': if (calls.get(d.callId)) calls.get(d.callId).approval = d.decision; break;
      case 'action.result': {
        const call = calls.get(d.callId);
        if (call) Object.assign(call, { durationMs: d.durationMs, isError: d.isError, status: d.isError ? 'error' : 'done' });
        break;
      }
      case 'turn.completed':
        Object.assign(t, { end: e.at, status: 'completed', usage: d.usage, cost: d.estimatedCostUsd ?? null, durationMs: d.durationMs ?? null });
        break;
      case 'turn.failed':
        Object.assign(t, { end: e.at, status: d.status === 'cancelled' ? 'cancelled' : 'failed', usage: d.usage ?? null, cost: d.estimatedCostUsd ?? null, error: d.message });
        break;
      default:
    }
  }
  for (const t of turns) {
    if (t.durationMs === null && t.end) t.durationMs = new Date(t.end) - new Date(t.start);
  }
  return turns;
}

export function traceView(root) {
  const body = h('div', { class: 'trace' });
  const totals = h('p', { class: 'muted', id: 'trace-totals' });
  root.append(totals, body);
  let pending = false;

  function render() {
    pending = false;
    clear(body);
    if (!session.id) {
      body.append(notice('info', 'No session open. Start one in Chat or pick one in Runs.'));
      return;
    }
    if (session.error) {
      body.append(notice('error', session.error.explain()));
      return;
    }
    const turns = timeline(session.events);
    if (!turns.length) body.append(h('p', { class: 'muted' }, 'No turns yet.'));
    const longest = Math.max(1, ...turns.map((t) => t.durationMs ?? 0));
    turns.forEach((t, i) => {
      const bar = (value) => h('span', { class: 'bar', style: `width:${Math.max(2, Math.round(100 * (value ?? 0) / longest))}%` });
      body.append(h('section', { class: `turn ${t.status}`, 'aria-label': `Turn ${i + 1}` },
        h('h3', {}, `Turn ${i + 1} `, h('span', { class: `status ${t.status}` }, t.status)),
        t.message ? h('p', { class: 'turn-message' }, `“${t.message}”`) : null,
        h('div', { class: 'line' }, bar(t.durationMs), h('span', {}, [ms(t.durationMs), tokens(t.usage), usd(t.cost), t.model].filter(Boolean).join(' · '))),
        t.error ? notice('error', t.error) : null,
        h('ol', { class: 'steps' }, t.steps.map((s, n) => h('li', { class: 'step' },
          h('div', { class: 'line' }, h('strong', {}, `Model call ${n + 1}`), h('span', { class: 'muted' }, `step ${s.step}`), bar(s.durationMs),
            h('span', {}, [ms(s.durationMs), tokens(s.usage), s.finish].filter(Boolean).join(' · '))),
          h('ul', { class: 'calls' }, s.calls.map((c) => h('li', { class: `tool ${c.status}` },
            h('div', { class: 'line' }, h('code', {}, c.toolName), bar(c.durationMs),
              h('span', {}, [c.status, ms(c.durationMs), c.approval ? `approval: ${c.approval}` : null].filter(Boolean).join(' · ')))))))))));
    });
  }

  async function loadCost() {
    if (!session.id) return;
    try {
      const cost = await get(`/v1/session/${encodeURIComponent(session.id)}/cost`);
      totals.textContent = `Session total: ${tokens(cost.usage)} · ${usd(cost.costUsd)} over ${cost.turns?.length ?? 0} turn(s)`;
    } catch (err) {
      totals.textContent = err instanceof ApiError && err.status === 403 ? '' : `Cost unavailable: ${err.message}`;
    }
  }

  const onEvent = (e) => {
    if (e.type === 'turn.completed' || e.type === 'playground.reset') loadCost();
    if (!pending) {
      pending = true;
      requestAnimationFrame(render);
    }
  };
  session.listeners.add(onEvent);
  render();
  loadCost();
  return { dispose: () => session.listeners.delete(onEvent) };
}
