// A minimal WebDriver BiDi client for Debian's firefox-esr, for the offline tests.
//
// playwright-core's Firefox needs Playwright's own patched build (not installable here), and its
// BiDi mode ("moz-firefox" channel) sends commands firefox-esr does not know
// (emulation.setMediaFeaturesOverride). Standard BiDi is enough for what these tests need:
// navigate, evaluate script, and record every request the browser starts.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';

/** How long one BiDi command may go unanswered (a navigation waits for the page's load). */
const ANSWER_MS = 90000;

/** Firefox left a command unanswered (seen on 2026-12-03 in offline.test.mjs's Firefox test:
 * the browser idle for minutes, the answer never sent, and the run waiting for ever). */
export class NoAnswer extends Error {
  constructor(method) {
    super(`firefox: no answer to ${method} within ${ANSWER_MS / 1000} s`);
    this.name = 'NoAnswer';
  }
}

export class Firefox {
  static async launch() {
    const WS = globalThis.WebSocket || require('playwright-core/lib/utilsBundle').ws;
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-firefox-'));
    // No background traffic from the browser itself, so every request recorded is the page's.
    fs.writeFileSync(path.join(profile, 'user.js'), [
      'user_pref("browser.shell.checkDefaultBrowser", false);',
      'user_pref("app.update.enabled", false);',
      'user_pref("datareporting.policy.dataSubmissionEnabled", false);',
      'user_pref("toolkit.telemetry.enabled", false);',
      'user_pref("network.captive-portal-service.enabled", false);',
      'user_pref("network.connectivity-service.enabled", false);',
      'user_pref("browser.safebrowsing.malware.enabled", false);',
      'user_pref("browser.safebrowsing.phishing.enabled", false);',
    ].join('\n'));
    const proc = spawn(FIREFOX, ['--headless', '--remote-debugging-port=0', '--profile', profile,
      '--no-remote', 'about:blank'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const url = await new Promise((resolve, reject) => {
      let log = '';
      const on = (d) => {
        log += d;
        const m = log.match(/WebDriver BiDi listening on (ws:\/\/\S+)/);
        if (m) resolve(m[1]);
      };
      proc.stdout.on('data', on);
      proc.stderr.on('data', on);
      proc.on('exit', (code) => reject(new Error(`firefox exited (${code}): ${log}`)));
    });
    const ws = new WS(`${url}/session`);
    await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
    const ff = new Firefox(proc, ws, profile);
    await ff.send('session.new', { capabilities: {} });
    await ff.send('session.subscribe', { events: ['network.beforeRequestSent', 'log.entryAdded'] });
    const tree = await ff.send('browsingContext.getTree', {});
    ff.context = tree.contexts[0].context;
    return ff;
  }

  constructor(proc, ws, profile) {
    Object.assign(this, { proc, ws, profile, nextId: 1, pending: new Map() });
    /** Every URL the browser requested, and the page's console errors. */
    this.requests = [];
    this.errors = [];
    ws.onmessage = (ev) => {
      const m = JSON.parse(typeof ev.data === 'string' ? ev.data : ev.data.toString());
      const p = m.id !== undefined && this.pending.get(m.id);
      if (p) {
        this.pending.delete(m.id);
        if (m.type === 'error') p.reject(new Error(`${m.error}: ${m.message}`));
        else p.resolve(m.result);
      } else if (m.method === 'network.beforeRequestSent') {
        this.requests.push(m.params.request.url);
      } else if (m.method === 'log.entryAdded' && m.params.level === 'error') {
        this.errors.push(m.params.text);
      }
    };
  }

  /** One BiDi command; a command firefox does not answer within ANSWER_MS fails with a
   * `NoAnswer` naming it, instead of waiting for ever. */
  send(method, params) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new NoAnswer(method));
      }, ANSWER_MS);
      const done = (f) => (v) => { clearTimeout(timer); f(v); };
      this.pending.set(id, { resolve: done(resolve), reject: done(reject) });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async goto(url) {
    await this.send('browsingContext.navigate', { context: this.context, url, wait: 'complete' });
  }

  /** Evaluates `fn(arg)` in the page (promises awaited); returns a JSON-able result. */
  async evaluate(fn, arg) {
    const expression = `(async () => JSON.stringify(await (${fn})(${JSON.stringify(arg)})))()`;
    const r = await this.send('script.evaluate', { expression, target: { context: this.context }, awaitPromise: true });
    if (r.type === 'exception') throw new Error(`in page: ${r.exceptionDetails.text}`);
    const v = r.result.value;
    return v === undefined ? undefined : JSON.parse(v);
  }

  /** Polls `fn(arg)` until it returns something truthy. */
  async waitFor(fn, arg, timeoutMs = 60000) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const v = await this.evaluate(fn, arg);
      if (v) return v;
      if (Date.now() > until) throw new Error(`firefox: timed out waiting for ${fn}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async close() {
    try { this.ws.close(); } catch { /* already closed */ }
    this.proc.kill();
    await new Promise((r) => { if (this.proc.exitCode !== null) r(); else this.proc.on('exit', r); });
    fs.rmSync(this.profile, { recursive: true, force: true });
  }
}
