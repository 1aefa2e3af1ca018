// UI render benchmark in the real window (prints figures; asserts nothing about speed):
// open a conversation of 5,000 messages — time to first paint, then the frame budget while scrolling
// through all of it (the list is virtualized) — and the send → first streamed text on screen latency of a new turn.
// `node tests/bench/render.mjs` after `cargo build -p hearth`.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { click, launchApp, seedConversation, stopApp } from "../e2e/harness.mjs";

const MESSAGES = 5000;
const SCROLL_STEPS = 120;

const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-render-bench-"));
const dataDir = path.join(scratch, "data");
const project = path.join(scratch, "project");
seedConversation(dataDir, project, String(MESSAGES));

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `min ${s[0].toFixed(1)} / p50 ${q(0.5).toFixed(1)} / p95 ${q(0.95).toFixed(1)} / max ${s[s.length - 1].toFixed(1)} ms (n=${s.length})`;
};

const app = await launchApp({ dataDir });
try {
  await click(app.browser, "project-item");
  await (await app.browser.$('[data-testid="conversation-item"]')).waitForDisplayed({ timeout: 20_000 });
  const firstPaint = await app.browser.executeAsync((done) => {
    const t0 = performance.now();
    document.querySelector('[data-testid="conversation-item"]').click();
    const poll = () => {
      if (document.querySelectorAll('[data-testid="message"]').length > 0) {
        requestAnimationFrame(() => done(performance.now() - t0));
      } else setTimeout(poll, 1);
    };
    poll();
  });
  const rendered = await app.browser.execute(() => document.querySelectorAll('[data-testid="message"]').length);
  // Two passes from the end to the top: the first meets every message for the first time, the
  // second meets them again (finished replies' HTML is remembered).
  const scrollPass = () => app.browser.executeAsync((steps, done) => {
    const el = document.querySelector('[data-testid="conversation-view"] .scroll');
    const gaps = [];
    let last = performance.now();
    let i = 0;
    const tick = (now) => {
      gaps.push(now - last);
      last = now;
      el.scrollTop = el.scrollHeight * (1 - i / steps);
      if (++i <= steps) requestAnimationFrame(tick);
      else done(gaps.slice(1));
    };
    requestAnimationFrame(tick);
  }, SCROLL_STEPS);
  const frames = await scrollPass();
  const framesAgain = await scrollPass();

  // A new turn with the built-in scripted model: send → first text of the reply on screen.
  const input = await app.browser.$('[data-testid="composer-input"]');
  await input.setValue("hello there");
  const latency = await app.browser.executeAsync((done) => {
    // The list is virtualized: a new reply shows as a new last element, not a longer list.
    const all = () => document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    const before = all()[all().length - 1];
    const t0 = performance.now();
    document.querySelector('[data-testid="send-button"]').click();
    const obs = new MutationObserver(() => {
      const replies = all();
      const last = replies[replies.length - 1];
      if (last !== before && last.querySelector('[data-testid="message-text"]').innerText.trim()) {
        obs.disconnect();
        done(performance.now() - t0);
      }
    });
    obs.observe(document.body, { subtree: true, childList: true, characterData: true });
  });

  console.log(`UI render benchmark (${MESSAGES} stored messages, virtualized: ${rendered} in the page at first)`);
  console.log(`  open conversation → first paint: ${firstPaint.toFixed(0)} ms`);
  console.log(`  frame interval while scrolling, first pass: ${stats(frames)} (budget 16.7 ms at 60 Hz)`);
  console.log(`  frame interval while scrolling, second pass: ${stats(framesAgain)}`);
  console.log(`  send → first streamed text on screen (first turn, includes the runtime's start): ${latency.toFixed(0)} ms`);
} finally {
  await stopApp(app);
  rmSync(scratch, { recursive: true, force: true });
}
