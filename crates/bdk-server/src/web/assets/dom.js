// Small DOM helpers: h() builds elements, fmt helpers format durations, tokens and money.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function ms(value) {
  if (value === undefined || value === null) return '';
  if (value < 1000) return `${Math.round(value)} ms`;
  return `${(value / 1000).toFixed(value < 10000 ? 2 : 1)} s`;
}

export function usd(value) {
  if (value === undefined || value === null) return '';
  return value === 0 ? '$0' : `$${value < 0.01 ? value.toFixed(5) : value.toFixed(4)}`;
}

export function tokens(usage) {
  if (!usage) return '';
  const parts = [`${usage.inputTokens ?? 0} in`, `${usage.outputTokens ?? 0} out`];
  if (usage.reasoningTokens) parts.push(`${usage.reasoningTokens} reasoning`);
  if (usage.cachedInputTokens) parts.push(`${usage.cachedInputTokens} cached`);
  return parts.join(' · ');
}

export function time(at) {
  if (!at) return '';
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? String(at) : d.toLocaleString();
}

// A notice box: kind is 'error', 'info' or 'unavailable'.
export function notice(kind, ...children) {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children);
}
