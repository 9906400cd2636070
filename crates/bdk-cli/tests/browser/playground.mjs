// End-to-end test of the playground in headless Chromium, driven by playwright-core.
//
// Environment (set by crates/bdk-cli/tests/suite/playground.rs):
//   BDK_URL          origin of a running `bdk serve` (agent slug `shop`, bearer tokens below)
//   BDK_TOKEN_ALICE  a bearer secret of principal alice; BDK_TOKEN_BOB one of bob
//   CHROMIUM         the browser executable; PLAYWRIGHT the folder holding node_modules/playwright-core
//   ARTIFACTS        where screenshots go
//
// The agent's scripted model answers, in order: (1) reasoning + a greeting, (2) a call to
// `deploy` (needs approval), (3) "Deployed web." after the tool result.

import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import assert from 'node:assert/strict';

const require = createRequire(`${process.env.PLAYWRIGHT}/`);
const { chromium } = require('playwright-core');

const url = process.env.BDK_URL;
const playground = `${url}/shop/playground`;
const artifacts = process.env.ARTIFACTS;
mkdirSync(artifacts, { recursive: true });
const WAIT = 20_000;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const failures = [];

async function step(name, body) {
  const started = Date.now();
  try {
    await body();
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    failures.push(name);
    console.log(`FAIL ${name}: ${err.stack ?? err}`);
  }
}

// A page that records console errors and uncaught exceptions.
async function open(context, address) {
  const page = await context.newPage();
  page.errors = [];
  page.on('console', (msg) => { if (msg.type() === 'error') page.errors.push(msg.text()); });
  page.on('pageerror', (err) => page.errors.push(`uncaught: ${err.message}`));
  page.setDefaultTimeout(WAIT);
  await page.goto(address);
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: `${artifacts}/${name}.png`, fullPage: true });
}

async function signIn(page, token) {
  await page.fill('#token', token);
  await page.click('#auth button[type=submit]');
  await page.waitForSelector('#auth-state:has-text("token set")');
}

const alice = await browser.newContext({ viewport: { width: 1280, height: 800 } });
await alice.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
let page;
let sessionId;

await step('send a message and see the streamed reply', async () => {
  page = await open(alice, playground);
  await signIn(page, process.env.BDK_TOKEN_ALICE);
  await page.fill('#message', 'hello there');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.msg.user >> text=hello there');
  await page.waitForSelector('.msg.assistant .text >> text=Hello from the scripted agent.');
  await page.waitForSelector('.reasoning >> text=The user greets me.');
  await page.waitForSelector('.turn-meta >> text=Turn done');
  sessionId = new URL(page.url()).searchParams.get('sessionId');
  assert.match(sessionId ?? '', /\S/, 'the URL carries the session id');
  await shot(page, '01-chat-reply');
});

await step('approve a parked call (follow-up with the rotated token)', async () => {
  await page.fill('#message', 'deploy web please');
  await page.click('.composer button[type=submit]');
  const card = page.locator('details.call[data-tool="deploy"]');
  await card.locator('button.approve').waitFor();
  await card.locator('.call-state >> text=waiting for approval').waitFor();
  await shot(page, '02-approval-parked');
  await card.locator('button.approve').click();
  await card.locator('.approval >> text=Approved by alice').waitFor();
  await card.locator('.call-state >> text=done').waitFor();
  await card.locator('.call-output >> text="deployed": true').waitFor();
  await page.waitForSelector('.msg.assistant .text >> text=Deployed web.');
  await shot(page, '03-approved');
});

await step('open a trace', async () => {
  await page.click('#tab-trace');
  await page.waitForSelector('.trace .turn >> nth=1');
  const turns = await page.locator('.trace .turn').count();
  assert.equal(turns, 2, 'two turns in the trace');
  await page.locator('.trace .turn >> nth=1').locator('.tool.done code >> text=deploy').waitFor();
  await page.waitForSelector('.trace .turn >> nth=0 >> text=Model call 1');
  await page.waitForSelector('#trace-totals >> text=Session total');
  await shot(page, '04-trace');
});

await step('runs lists the session and opens it raw', async () => {
  await page.click('#tab-runs');
  const row = page.locator(`tr[data-session-id="${sessionId}"]`);
  await row.waitFor();
  await page.fill('#runs-search', 'no-such-session-xyz');
  await page.waitForSelector('text=No session matches.');
  await page.fill('#runs-search', 'alice');
  await row.locator('button >> text=Raw').click();
  await page.waitForFunction(() => document.querySelector('#raw-events')?.textContent.includes('"type":"action.approval_resolved"'));
  const lines = (await page.locator('#raw-events').textContent()).split('\n').map((l) => JSON.parse(l));
  assert.ok(lines.every((e, i) => e.index === i), 'every event, in order');
  await shot(page, '05-raw');
});

await step('call a tool from its form and copy it as curl', async () => {
  await page.click('#tab-tools');
  await page.selectOption('#tool-picker', 'add');
  await page.fill('#tool-add-a', '2');
  await page.fill('#tool-add-b', '40');
  await page.click('.tool-form button[type=submit]');
  await page.waitForSelector('.tool-result >> text=OK');
  const envelope = JSON.parse(await page.locator('.tool-result pre.envelope').textContent());
  assert.equal(envelope.toolName, 'add');
  assert.equal(envelope.isError, false);
  assert.deepEqual(envelope.result, { sum: 42 });
  // A required field left empty is refused in the page, before any request.
  await page.fill('#tool-add-b', '');
  await page.click('.tool-form button[type=submit]');
  await page.waitForSelector('.tool-result >> text=b is required');
  await page.fill('#tool-add-b', '40');
  await page.click('button >> text=Copy as curl');
  await page.waitForSelector('text=Copied.');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.match(copied, /curl -sS -X POST '.*\/shop\/v1\/tools\/add'/);
  assert.match(copied, /Bearer \$BDK_TOKEN/);
  assert.ok(!copied.includes(process.env.BDK_TOKEN_ALICE), 'the secret itself is never copied');
  assert.match(copied, /"input":\{"a":2,"b":40\}/);
  await shot(page, '06-tools');
});

await step('agent, logs, raw and the unavailable views render; tabs work from the keyboard', async () => {
  await page.click('#tab-agent');
  await page.waitForSelector('.info-section h2 >> text=shop');
  await page.waitForSelector('.info-section >> text=Tools (2)');
  await page.focus('#tab-agent');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'tab-tools');
  assert.equal(await page.getAttribute('#tab-tools', 'aria-selected'), 'true');
  await page.keyboard.press('ArrowRight');
  await page.waitForSelector('.logs >> text=agent mounted');
  await shot(page, '07-logs');
  await page.keyboard.press('End');
  await page.waitForSelector('.notice.unavailable >> text=does not serve channel routes');
  await page.click('#tab-schedules');
  await page.waitForSelector('.notice.unavailable >> text=no schedules');
  // Every control of every view has an accessible name.
  for (const tab of ['chat', 'runs', 'tools', 'logs']) {
    await page.click(`#tab-${tab}`);
    await page.waitForTimeout(0);
    const unnamed = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button')]
      .filter((el) => !(el.labels?.length || el.getAttribute('aria-label') || el.textContent.trim()))
      .map((el) => el.outerHTML.slice(0, 80)));
    assert.deepEqual(unnamed, [], `unnamed controls in ${tab}`);
  }
  // The skip link moves focus to the view.
  await page.focus('a.skip');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'view');
  assert.deepEqual(page.errors, [], `console errors: ${page.errors.join('\n')}`);
});

await step('readable at phone width', async () => {
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
  const small = await open(phone, `${playground}#chat`);
  await signIn(small, process.env.BDK_TOKEN_ALICE);
  await small.waitForSelector('#message');
  const overflow = await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page scrolls sideways by ${overflow}px at 390px`);
  await shot(small, '08-phone');
  assert.deepEqual(small.errors, [], `console errors: ${small.errors.join('\n')}`);
  await phone.close();
});

await step("open a deep link as another principal and be refused", async () => {
  const bob = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const other = await bob.newPage();
  other.setDefaultTimeout(WAIT);
  await other.goto(playground);
  await signIn(other, process.env.BDK_TOKEN_BOB);
  await other.goto(`${playground}?sessionId=${sessionId}#chat`);
  await other.waitForSelector('.notice.error >> text=Refused (403 forbidden)');
  const leaked = await other.locator('text=Hello from the scripted agent.').count();
  assert.equal(leaked, 0, "alice's conversation is not shown to bob");
  await other.click('#tab-runs');
  await other.waitForSelector('text=No sessions yet.');
  await shot(other, '09-deep-link-refused');
  await bob.close();
});

await browser.close();
if (failures.length) {
  console.log(`${failures.length} step(s) failed: ${failures.join('; ')}`);
  process.exit(1);
}
console.log('all playground steps passed');
