// The session the playground shows: one live NDJSON follower shared by every view.

import { ApiError, stream } from './api.js';

// The session the views show: its events as they arrive, and who wants to hear of them.
export const session = {
  // Set by the shell: the id, token or error changed.
  changed: () => {},
  id: null,
  continuationToken: null,
  events: [],
  error: null,
  ended: false,
  listeners: new Set(),
  controller: null,

  notify(event) {
    for (const listener of this.listeners) listener(event);
  },

  // Opens `id` (null: a new, empty chat) and follows its events.
  open(id, continuationToken) {
    if (this.controller) this.controller.abort();
    this.id = id;
    this.continuationToken = continuationToken ?? (id ? sessionStorage.getItem(`bdk.ct.${id}`) : null);
    this.events = [];
    this.error = null;
    this.ended = false;
    this.controller = null;
    this.changed();
    this.notify({ type: 'playground.reset' });
    if (!id) return;
    const controller = new AbortController();
    this.controller = controller;
    stream(`/v1/session/${encodeURIComponent(id)}/stream`, (event) => {
      this.events.push(event);
      this.notify(event);
    }, { signal: controller.signal })
      .then(() => {
        if (this.controller === controller) {
          this.ended = true;
          this.notify({ type: 'playground.ended' });
        }
      })
      .catch((err) => {
        if (err.name === 'AbortError' || this.controller !== controller) return;
        this.error = err instanceof ApiError ? err : new ApiError(0, 'stream_error', err.message);
        this.changed();
        this.notify({ type: 'playground.error', error: this.error });
      });
  },

  setContinuationToken(value) {
    this.continuationToken = value;
    if (this.id && value) sessionStorage.setItem(`bdk.ct.${this.id}`, value);
    this.changed();
  },
};

