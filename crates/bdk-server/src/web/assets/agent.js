// Agent: everything `GET /v1/info` describes, section by section, with the raw JSON behind a
// disclosure.

import { ApiError, get } from './api.js';
import { h, json, notice } from './dom.js';

let cached = null;

// `/v1/info`, fetched once per page (the Tools view shares it).
export async function info({ reload = false } = {}) {
  if (!cached || reload) cached = get('/v1/info').catch((err) => { cached = null; throw err; });
  return cached;
}

function list(title, items, describe) {
  return h('section', { class: 'info-section', 'aria-label': title },
    h('h3', {}, `${title} (${items?.length ?? 0})`),
    items?.length
      ? h('ul', {}, items.map((item) => h('li', {}, describe(item))))
      : h('p', { class: 'muted' }, 'None.'));
}

const named = (item) => [h('strong', {}, item.name ?? item.id ?? item.slug ?? '?'), item.description ? ` — ${item.description}` : ''];

export function agentView(root) {
  root.append(h('p', { class: 'muted' }, 'Loading…'));
  info({ reload: true }).then((i) => {
    root.replaceChildren(
      h('section', { class: 'info-section' },
        h('h2', {}, i.name, ' ', h('code', {}, i.slug)),
        i.description ? h('p', {}, i.description) : null,
        h('dl', { class: 'facts' },
          h('dt', {}, 'Model'), h('dd', {}, `${i.model?.id ?? '?'}${i.model?.provider ? ` (${i.model.provider})` : ''}`),
          h('dt', {}, 'Layout'), h('dd', {}, i.layout),
          h('dt', {}, 'Max steps'), h('dd', {}, String(i.harness?.maxSteps ?? '')),
          h('dt', {}, 'Max running turns'), h('dd', {}, String(i.harness?.maxRunningTurns ?? '')),
          h('dt', {}, 'Instructions'), h('dd', {}, `${(i.instructions?.files ?? []).join(', ')} (${i.instructions?.bytes ?? 0} bytes)`))),
      list('Tools', i.tools, (t) => [...named(t), h('span', { class: 'muted' }, ` · ${t.execution}, ${typeof t.effect === 'string' ? t.effect : 'write when…'}${t.needsApproval === true ? ', needs approval' : t.needsApproval && t.needsApproval !== false ? ', approval when…' : ''}`)]),
      list('Skills', i.skills, named),
      list('Subagents', i.subagents, named),
      list('MCP connections', i.connections, named),
      list('Channels', i.channels, named),
      list('Schedules', i.schedules, (s) => [...named(s), s.cron ? h('code', {}, ` ${s.cron}`) : '']),
      list('Hooks', i.hooks, named),
      list('Reminders', i.reminders, named),
      list('Extensions', i.extensions, named),
      list('Diagnostics', i.diagnostics, (d) => `${d.severity ?? ''} ${d.code ?? ''}: ${d.message ?? ''}`),
      h('details', {}, h('summary', {}, 'Raw /v1/info'), h('pre', {}, json(i))));
  }).catch((err) => root.replaceChildren(notice('error', err instanceof ApiError ? err.explain() : String(err))));
}
