// Chat: talk to the agent. Streams text and reasoning, shows tool calls inline (arguments,
// output, errors, durations), approve/deny for parked calls, stop, dry-run and asOf for a new
// session, and follow-ups with the rotating continuation token handled here.

import { ApiError, post } from './api.js';
import { clear, h, json, ms, notice, tokens, usd } from './dom.js';
import { session } from './session.js';

export function chatView(root) {
  const transcript = h('div', { class: 'transcript', 'aria-live': 'polite', 'aria-label': 'Conversation' });
  const status = h('p', { class: 'chat-status muted', role: 'status' });
  const message = h('textarea', {
    id: 'message', rows: 3, placeholder: 'Message the agent (Enter sends, Shift+Enter adds a line)',
    'aria-label': 'Message',
  });
  const dryRun = h('input', { type: 'checkbox', id: 'dry-run' });
  const asOf = h('input', { type: 'datetime-local', id: 'as-of', step: 1 });
  const send = h('button', { type: 'submit', class: 'primary' }, 'Send');
  const stop = h('button', { type: 'button', id: 'stop', disabled: true, onclick: stopTurn }, 'Stop');
  const fresh = h('button', { type: 'button', onclick: () => session.open(null) }, 'New chat');
  const options = h('fieldset', { class: 'options' },
    h('legend', {}, 'New session options'),
    h('label', {}, dryRun, ' Dry run (write tools are stubbed)'),
    h('label', {}, 'As of ', asOf));
  const form = h('form', { class: 'composer', onsubmit: submit },
    message, h('div', { class: 'row' }, send, stop, fresh, options), status);
  root.append(transcript, form);

  message.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  // Per-call cards and the text being streamed, rebuilt from the events.
  let cards = new Map();
  let text = null;
  let reasoning = null;
  let running = false;

  function setRunning(value) {
    running = value;
    stop.disabled = !running;
  }

  function reset() {
    clear(transcript);
    cards = new Map();
    text = null;
    reasoning = null;
    setRunning(false);
    options.disabled = Boolean(session.id);
    status.textContent = '';
    if (session.error) onEvent({ type: 'playground.error', error: session.error });
    for (const event of session.events) onEvent(event);
    if (!session.id) transcript.append(h('p', { class: 'muted empty' }, 'No messages yet.'));
  }

  function assistantBlock() {
    const last = transcript.lastElementChild;
    if (last?.classList.contains('assistant')) return last;
    const block = h('div', { class: 'msg assistant' }, h('div', { class: 'who' }, 'Agent'));
    transcript.append(block);
    return block;
  }

  function onEvent(event) {
    const d = event.data ?? {};
    switch (event.type) {
      case 'playground.reset': reset(); return;
      case 'playground.error':
        transcript.append(notice('error', event.error.explain()));
        return;
      case 'message.received':
        transcript.querySelector('.empty')?.remove();
        transcript.append(h('div', { class: 'msg user' }, h('div', { class: 'who' }, d.principal ?? 'You'), h('div', { class: 'body' }, d.text)));
        text = null;
        reasoning = null;
        break;
      case 'turn.queued':
        transcript.append(h('p', { class: 'muted' }, `Queued (position ${d.position ?? '?'})`));
        break;
      case 'turn.started':
        setRunning(true);
        break;
      case 'reasoning.appended':
        if (!reasoning) {
          reasoning = h('pre', { class: 'reasoning-text' });
          assistantBlock().append(h('details', { class: 'reasoning', open: true }, h('summary', {}, 'Reasoning'), reasoning));
        }
        reasoning.textContent += d.delta ?? '';
        break;
      case 'reasoning.completed':
        if (reasoning) reasoning.textContent = d.text ?? reasoning.textContent;
        reasoning = null;
        break;
      case 'message.appended':
        if (!text) {
          text = h('div', { class: 'body text' });
          assistantBlock().append(text);
        }
        text.textContent += d.delta ?? '';
        break;
      case 'message.completed':
        if (!text) assistantBlock().append(h('div', { class: 'body text' }, d.text ?? ''));
        else text.textContent = d.text ?? text.textContent;
        text = null;
        break;
      case 'actions.requested':
        for (const c of d.calls ?? []) {
          const card = toolCard(c);
          cards.set(c.callId, card);
          assistantBlock().append(card.el);
        }
        text = null;
        reasoning = null;
        break;
      case 'action.approval_requested':
        cardFor(d).awaitApproval(d);
        break;
      case 'action.approval_resolved':
        cardFor(d).resolved(d);
        break;
      case 'action.result':
        cardFor(d).result(d);
        break;
      case 'subagent.called':
        assistantBlock().append(h('p', { class: 'muted' }, `→ subagent ${d.subagent}: ${d.prompt}`));
        break;
      case 'subagent.completed':
        assistantBlock().append(h('p', { class: d.isError ? 'bad' : 'muted' }, `← ${d.subagent} (${ms(d.durationMs)})`));
        break;
      case 'turn.completed':
        setRunning(false);
        assistantBlock().append(h('div', { class: 'turn-meta muted' },
          ['Turn done', ms(d.durationMs), tokens(d.usage), usd(d.estimatedCostUsd)].filter(Boolean).join(' · ')));
        text = null;
        break;
      case 'turn.failed':
        setRunning(false);
        transcript.append(notice(d.status === 'cancelled' ? 'info' : 'error',
          d.status === 'cancelled' ? `Turn stopped: ${d.message}` : `Turn failed (${d.error ?? 'error'}): ${d.message}`));
        text = null;
        break;
      case 'session.failed':
        transcript.append(notice('error', `Session failed: ${d.message}`));
        break;
      default:
        return;
    }
    transcript.scrollTop = transcript.scrollHeight;
  }

  function cardFor(d) {
    let card = cards.get(d.callId);
    if (!card) {
      card = toolCard({ callId: d.callId, toolName: d.toolName, input: d.input });
      cards.set(d.callId, card);
      assistantBlock().append(card.el);
    }
    return card;
  }

  async function submit(e) {
    e.preventDefault();
    const text = message.value.trim();
    if (!text) {
      status.textContent = 'Type a message first.';
      message.focus();
      return;
    }
    send.disabled = true;
    status.textContent = 'Sending…';
    try {
      if (!session.id) {
        const body = { message: text };
        if (dryRun.checked) body.dryRun = true;
        if (asOf.value) body.asOf = new Date(asOf.value).toISOString();
        const answer = await post('/v1/session', body);
        session.open(answer.sessionId, answer.continuationToken);
        session.setContinuationToken(answer.continuationToken);
      } else {
        if (!session.continuationToken) {
          throw new ApiError(409, 'no_continuation_token', 'this tab does not hold the session\'s continuation token (it was started elsewhere); start a new chat');
        }
        const answer = await post(`/v1/session/${encodeURIComponent(session.id)}`, {
          message: text, continuationToken: session.continuationToken,
        });
        session.setContinuationToken(answer.continuationToken);
      }
      message.value = '';
      status.textContent = '';
    } catch (err) {
      status.textContent = err instanceof ApiError ? err.explain() : String(err);
    } finally {
      send.disabled = false;
      message.focus();
    }
  }

  async function stopTurn() {
    if (!session.id) return;
    try {
      await post(`/v1/session/${encodeURIComponent(session.id)}/stop`);
      status.textContent = 'Stop requested.';
    } catch (err) {
      status.textContent = err instanceof ApiError ? err.explain() : String(err);
    }
  }

  session.listeners.add(onEvent);
  reset();
  message.focus();
  return { dispose: () => session.listeners.delete(onEvent) };
}

// One tool call, inline in the conversation.
function toolCard(c) {
  const state = h('span', { class: 'call-state muted' }, 'running…');
  const output = h('div', { class: 'call-output' });
  const approval = h('div', { class: 'approval' });
  const el = h('details', { class: 'call', open: true, dataset: { callId: c.callId, tool: c.toolName } },
    h('summary', {}, h('span', { class: 'tool-name' }, c.toolName), ' ', state),
    h('div', { class: 'call-args' }, h('div', { class: 'label' }, 'Arguments'), h('pre', {}, json(c.input ?? {}))),
    approval, output);

  return {
    el,
    awaitApproval() {
      state.textContent = 'waiting for approval';
      state.className = 'call-state warn';
      const decide = (decision) => async () => {
        for (const b of approval.querySelectorAll('button')) b.disabled = true;
        try {
          await post(`/v1/session/${encodeURIComponent(session.id)}/approvals/${encodeURIComponent(c.callId)}`, { decision });
        } catch (err) {
          approval.append(notice('error', err instanceof ApiError ? err.explain() : String(err)));
          for (const b of approval.querySelectorAll('button')) b.disabled = false;
        }
      };
      clear(approval).append(
        h('span', {}, `${c.toolName} needs your approval. `),
        h('button', { type: 'button', class: 'approve primary', onclick: decide('approve') }, 'Approve'),
        ' ',
        h('button', { type: 'button', class: 'deny', onclick: decide('deny') }, 'Deny'));
    },
    resolved(d) {
      clear(approval).append(h('span', { class: d.decision === 'approve' ? 'good' : 'bad' },
        `${d.decision === 'approve' ? 'Approved' : 'Denied'}${d.principal ? ` by ${d.principal}` : ''}${d.reason ? ` (${d.reason})` : ''}`));
      if (d.decision !== 'approve') {
        state.textContent = 'denied';
        state.className = 'call-state bad';
      } else {
        state.textContent = 'running…';
        state.className = 'call-state muted';
      }
    },
    result(d) {
      state.textContent = `${d.isError ? 'error' : 'done'} · ${ms(d.durationMs)}${d.stubbed ? ' · stubbed (dry run)' : ''}`;
      state.className = `call-state ${d.isError ? 'bad' : 'good'}`;
      clear(output).append(h('div', { class: 'label' }, d.isError ? 'Error' : 'Output'),
        h('pre', { class: d.isError ? 'bad' : '' }, typeof d.result === 'string' ? d.result : json(d.result)));
    },
  };
}
