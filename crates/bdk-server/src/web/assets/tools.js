// Tools: call a tool directly (no model turn) with a form generated from its JSON Schema, see
// the envelope, and copy the call as curl.

import { ApiError, curl, post } from './api.js';
import { clear, h, json, ms, notice } from './dom.js';
import { info } from './agent.js';
import { session } from './session.js';

// A form for an object schema: one field per property; anything the form cannot express is a
// JSON text field. Returns { el, value() } where value() throws with a message on bad input.
export function schemaForm(schema, idPrefix) {
  const props = schema?.type === 'object' || schema?.properties ? (schema.properties ?? {}) : null;
  if (!props) {
    const area = h('textarea', { id: `${idPrefix}-json`, rows: 6, 'aria-label': 'Input (JSON)' }, '{}');
    return { el: h('label', {}, 'Input (JSON)', area), value: () => JSON.parse(area.value || 'null') };
  }
  const required = new Set(schema.required ?? []);
  const fields = [];
  const el = h('div', { class: 'schema-form' });
  for (const [name, prop] of Object.entries(props)) {
    const id = `${idPrefix}-${name}`;
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
    let input;
    let read;
    if (Array.isArray(prop.enum)) {
      input = h('select', { id, name }, required.has(name) ? null : h('option', { value: '' }, '—'),
        prop.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
      read = () => (input.value === '' ? undefined : JSON.parse(input.value));
    } else if (type === 'boolean') {
      input = h('input', { id, name, type: 'checkbox', checked: prop.default === true });
      read = () => input.checked;
    } else if (type === 'integer' || type === 'number') {
      input = h('input', { id, name, type: 'number', step: type === 'integer' ? 1 : 'any', value: prop.default });
      read = () => {
        if (input.value === '') return undefined;
        const n = Number(input.value);
        if (type === 'integer' && !Number.isInteger(n)) throw new Error(`${name} must be a whole number`);
        return n;
      };
    } else if (type === 'string') {
      input = h('input', { id, name, type: 'text', value: prop.default, placeholder: prop.format ?? '' });
      read = () => (input.value === '' ? undefined : input.value);
    } else {
      input = h('textarea', { id, name, rows: 3, placeholder: 'JSON' }, prop.default !== undefined ? JSON.stringify(prop.default) : '');
      read = () => {
        if (input.value.trim() === '') return undefined;
        try { return JSON.parse(input.value); } catch { throw new Error(`${name} must be JSON`); }
      };
    }
    fields.push({ name, read, required: required.has(name) });
    el.append(h('div', { class: 'field' },
      h('label', { for: id }, name, required.has(name) ? h('span', { class: 'req', 'aria-label': 'required' }, ' *') : null,
        type ? h('span', { class: 'muted' }, ` ${type}`) : null),
      input,
      prop.description ? h('small', { class: 'muted' }, prop.description) : null));
  }
  return {
    el,
    value() {
      const out = {};
      for (const f of fields) {
        const v = f.read();
        if (v === undefined) {
          if (f.required) throw new Error(`${f.name} is required`);
        } else out[f.name] = v;
      }
      return out;
    },
  };
}

export function toolsView(root) {
  root.append(h('p', { class: 'muted' }, 'Loading…'));
  info().then((i) => {
    const tools = i.tools ?? [];
    if (!tools.length) {
      root.replaceChildren(notice('info', 'This agent has no tools.'));
      return;
    }
    const picker = h('select', { id: 'tool-picker', 'aria-label': 'Tool' }, tools.map((t) => h('option', { value: t.name }, t.name)));
    const panel = h('div', { class: 'tool-panel' });
    root.replaceChildren(h('div', { class: 'row' }, h('label', { for: 'tool-picker' }, 'Tool '), picker), panel);
    const pick = () => renderTool(panel, tools.find((t) => t.name === picker.value));
    picker.addEventListener('change', pick);
    const wanted = new URLSearchParams(location.search).get('tool');
    if (wanted && tools.some((t) => t.name === wanted)) picker.value = wanted;
    pick();
  }).catch((err) => root.replaceChildren(notice('error', err instanceof ApiError ? err.explain() : String(err))));
}

function renderTool(panel, tool) {
  clear(panel);
  const form = schemaForm(tool.inputSchema, `tool-${tool.name}`);
  const bind = h('input', { type: 'checkbox', id: 'tool-bind', disabled: !session.id || !session.continuationToken });
  const result = h('div', { class: 'tool-result', 'aria-live': 'polite' });
  const curlText = h('pre', { class: 'curl', id: 'tool-curl' });
  const requestBody = () => {
    const body = { input: form.value() };
    if (bind.checked && session.continuationToken) body.continuationToken = session.continuationToken;
    return body;
  };
  const path = `/v1/tools/${encodeURIComponent(tool.name)}`;
  const showCurl = () => {
    try { curlText.textContent = curl('POST', path, requestBody()); } catch (err) { curlText.textContent = `# ${err.message}`; }
  };
  const run = async (e) => {
    e.preventDefault();
    clear(result);
    let body;
    try { body = requestBody(); } catch (err) {
      result.append(notice('error', err.message));
      return;
    }
    showCurl();
    const button = e.submitter;
    if (button) button.disabled = true;
    try {
      const envelope = await post(path, body);
      result.append(h('p', { class: envelope.isError ? 'bad' : 'good' },
        `${envelope.isError ? 'Tool error' : 'OK'} · ${ms(envelope.durationMs)} · call ${envelope.callId}`),
      h('pre', { class: 'envelope' }, json(envelope)));
    } catch (err) {
      result.append(notice('error', err instanceof ApiError ? err.explain() : String(err)));
    } finally {
      if (button) button.disabled = false;
    }
  };
  const copy = async () => {
    showCurl();
    try {
      await navigator.clipboard.writeText(curlText.textContent);
      copyState.textContent = 'Copied.';
    } catch {
      copyState.textContent = 'Copy blocked by the browser: select the text below.';
    }
  };
  const copyState = h('span', { class: 'muted', role: 'status' });
  panel.append(
    h('h3', {}, tool.name), h('p', {}, tool.description),
    h('p', { class: 'muted' }, `${tool.execution} tool · effect ${typeof tool.effect === 'string' ? tool.effect : 'conditional'}${tool.needsApproval === true ? ' · needs approval (direct calls are refused)' : ''}`),
    h('form', { class: 'tool-form', onsubmit: run, oninput: () => { showCurl(); result.querySelector('.notice.error')?.remove(); } },
      form.el,
      h('label', {}, bind, ' Run in the open session\'s workspace'),
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Call tool'),
        h('button', { type: 'button', onclick: copy }, 'Copy as curl'), copyState)),
    result,
    h('details', {}, h('summary', {}, 'curl'), curlText),
    h('details', {}, h('summary', {}, 'Input schema'), h('pre', {}, json(tool.inputSchema))));
  showCurl();
}
