// The public HTTP API, as any client uses it: JSON calls and the NDJSON event stream, with the
// bearer token the user entered (kept in this tab's session storage, never elsewhere).

export const base = document.querySelector('meta[name="bdk-base"]')?.content ?? '';
const TOKEN_KEY = 'bdk.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function authHeaders(extra = {}) {
  const headers = { ...extra };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }

  // What a person should read.
  explain() {
    if (this.status === 401) return `Not signed in (401 ${this.code}): enter a bearer token above. ${this.message}`;
    if (this.status === 403) return `Refused (403 ${this.code}): ${this.message}`;
    return `${this.code || 'error'} (${this.status}): ${this.message}`;
  }
}

async function errorFrom(response) {
  let code = '';
  let message = '';
  try {
    const body = await response.json();
    code = body.error || '';
    message = body.message || '';
  } catch {
    message = response.statusText;
  }
  return new ApiError(response.status, code, message);
}

// A JSON call to `path` under the agent's base path.
export async function call(method, path, body, { signal } = {}) {
  const init = { method, headers: authHeaders(), signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(base + path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'network_error', `the server cannot be reached (${err.message})`);
  }
  if (!response.ok) throw await errorFrom(response);
  return response.json();
}

export const get = (path, opts) => call('GET', path, undefined, opts);
export const post = (path, body, opts) => call('POST', path, body ?? {}, opts);

// Reads NDJSON from `path`, calling onEvent per line, until the stream ends or `signal` aborts.
export async function stream(path, onEvent, { signal } = {}) {
  const response = await fetch(base + path, { headers: authHeaders({ Accept: 'application/x-ndjson' }), signal });
  if (!response.ok) throw await errorFrom(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line) onEvent(JSON.parse(line));
    }
  }
  const rest = buffer.trim();
  if (rest) onEvent(JSON.parse(rest));
}

// The recorded events of a session, without following.
export async function events(sessionId) {
  const list = [];
  const response = await fetch(`${base}/v1/session/${encodeURIComponent(sessionId)}/events`, { headers: authHeaders() });
  if (!response.ok) throw await errorFrom(response);
  for (const line of (await response.text()).split('\n')) if (line.trim()) list.push(JSON.parse(line));
  return list;
}

// `curl` for a call, with the token as $BDK_TOKEN (the secret itself is never copied).
export function curl(method, path, body) {
  const parts = [`curl -sS -X ${method} '${location.origin}${base}${path}'`];
  if (token()) parts.push(`-H "Authorization: Bearer $BDK_TOKEN"`);
  if (body !== undefined) {
    parts.push(`-H 'Content-Type: application/json'`);
    parts.push(`-d '${JSON.stringify(body).replaceAll("'", "'\\''")}'`);
  }
  return parts.join(' \\\n  ');
}
