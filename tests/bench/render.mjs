// UI render benchmark in the real window (prints figures; asserts nothing about speed):
// open a conversation of 5,000 messages — time to first paint, then the frame intervals while
// scrolling through all of it (the list is virtualized) and while it sits idle; once while the
// runtime starts beside the window (opening a project pre-warms it, and on two cores the two share
// the machine), then in a second such conversation once the runtime is warm — then send → first
// streamed text on screen (the end of the frame that paints it, not only its arrival in the DOM)
// against the same turn's first text event reaching Hearth from the runtime (read from the app's
// log: both ends in one run), first turn and a warm one, and the frame
// intervals while a 200 KB reply streams in (the built-in model's "stream 200 kb").
// `node tests/bench/render.mjs` after `cargo build -p hearth` (HEARTH_APP_BIN picks the binary).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { click, launchApp, seedConversation, stopApp } from "../e2e/harness.mjs";

/** The conversation opened (`HEARTH_BENCH_MESSAGES` sets another size, to tell the list's share from the rest). */
const MESSAGES = Number(process.env.HEARTH_BENCH_MESSAGES ?? 5000);
const SCROLL_STEPS = 120;
const IDLE_MS = 2000;
const LONG_REPLY_KIB = 200;
const STREAM_TIMEOUT_MS = 300_000;
/** Warm turns timed for send → first text. */
const WARM_TURNS = 10;
/** The project's conversation list appearing after launch. */
const OPEN_TIMEOUT_MS = 20_000;
/** One scripted turn of a few words, first turn of the runtime included. */
const REPLY_TIMEOUT_MS = 120_000;
/** The app's log line reaching the file after the reply is on screen. */
const LOG_TIMEOUT_MS = 10_000;
/** What the app logs when a reply's first text arrives from the runtime (`FIRST_TEXT_LOG`). */
const FIRST_TEXT_LOG = "first text from the runtime";
/** What the app logs when the opened project's runtime instance is warm (`PREWARMED_LOG`). */
const PREWARMED_LOG = "project pre-warmed";
/** The runtime's start and the project's instance, on a busy machine. */
const PREWARM_TIMEOUT_MS = 120_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-render-bench-"));
const dataDir = path.join(scratch, "data");
const project = path.join(scratch, "project");
// Two conversations of alike messages (their words differ: no Markdown of one is remembered for the
// other): the newer, listed first, opened while the runtime starts; the other after.
seedConversation(dataDir, project, String(MESSAGES), "Part");
seedConversation(dataDir, project, String(MESSAGES), "Module");

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `min ${s[0].toFixed(1)} / p50 ${q(0.5).toFixed(1)} / p95 ${q(0.95).toFixed(1)} / max ${s[s.length - 1].toFixed(1)} ms (n=${s.length})`;
};

/** The app's log lines holding `marker`. */
const logLines = (marker) => {
  const dir = path.join(dataDir, "logs");
  return readdirSync(dir)
    .flatMap((f) => readFileSync(path.join(dir, f), "utf8").split("\n"))
    .filter((l) => l.includes(marker));
};

// The app logs at warn in the window tests; the first-text and pre-warmed lines are info.
const app = await launchApp({ dataDir, env: { RUST_LOG: "warn,hearth_core::app=info" } });
try {
  await click(app.browser, "project-item");
  await (await app.browser.$('[data-testid="conversation-item"]')).waitForDisplayed({ timeout: OPEN_TIMEOUT_MS });
  /** Open the `index`-th conversation of the list: the time until its first messages are painted. */
  const open = (index) => app.browser.executeAsync((index, done) => {
    const t0 = performance.now();
    const before = document.querySelector('[data-testid="message"]');
    document.querySelectorAll('[data-testid="conversation-item"]')[index].click();
    const poll = () => {
      const first = document.querySelector('[data-testid="message"]');
      if (first && first !== before) {
        requestAnimationFrame(() => done(performance.now() - t0));
      } else setTimeout(poll, 1);
    };
    poll();
  }, index);
  const firstPaintStarting = await open(0);
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
  const framesStarting = await scrollPass();
  await app.browser.waitUntil(async () => logLines(PREWARMED_LOG).length > 0, { timeout: PREWARM_TIMEOUT_MS, interval: 100, timeoutMsg: "the project's runtime instance was not warm in time" });
  const firstPaint = await open(1);
  const frames = await scrollPass();
  const framesAgain = await scrollPass();

  // What the list manages when nothing happens: the baseline the streaming figures are held to.
  const idleFrames = await app.browser.executeAsync((ms, done) => {
    const gaps = [];
    let last = performance.now();
    const end = last + ms;
    const tick = (now) => {
      gaps.push(now - last);
      last = now;
      if (now < end) requestAnimationFrame(tick);
      else done(gaps.slice(1));
    };
    requestAnimationFrame(tick);
  }, IDLE_MS);

  // The reply a send is about to start. The list is virtualized, so a reply never seen before is not
  // necessarily new: the new one is the first seen still running, and it is followed from then on.
  await app.browser.execute(() => {
    window.__hearthNewReply = () => {
      let id = null;
      return () => {
        if (id === null) {
          const running = Array.from(document.querySelectorAll('[data-testid="message"][data-role="assistant"]')).find((r) => r.dataset.status !== "done" && r.dataset.status !== "error" && r.dataset.status !== "cancelled");
          if (!running) return null;
          id = running.dataset.id;
        }
        return document.querySelector(`[data-testid="message"][data-id="${id}"]`);
      };
    };
  });
  // When each text delta reaches the page (a listener of its own, beside the view's): the middle of
  // send → first text, between Hearth getting it and the window showing it.
  await app.browser.executeAsync((done) => {
    window.__hearthDeltas = [];
    const internals = window.__TAURI_INTERNALS__;
    const handler = internals.transformCallback((e) => {
      const k = e.payload.kind;
      if (k.type === "runtime" && k.event.type === "textDelta") window.__hearthDeltas.push(performance.timeOrigin + performance.now());
    });
    internals.invoke("plugin:event|listen", { event: "conversation-updated", target: { kind: "Any" }, handler }).then(() => done());
  });
  // A turn with the built-in scripted model: the wall-clock time of the click, and of the first text
  // of the new reply on screen.
  const sendAndSeeFirstText = async (prompt) => {
    const input = await app.browser.$('[data-testid="composer-input"]');
    await input.setValue(prompt);
    return app.browser.executeAsync((done) => {
      const reply = window.__hearthNewReply();
      window.__hearthDeltas.length = 0;
      const now = () => performance.timeOrigin + performance.now();
      // The end of each frame: a message posted from the frame's first callback runs once that
      // frame has been laid out and painted. The first one after the text is in the DOM is when
      // the frame showing it was done. The port listens from the start, so no message of an
      // earlier frame waits in its queue to be taken for that one.
      const frameEnd = new MessageChannel();
      let frames = true;
      let inDom = null;
      frameEnd.port1.onmessage = () => {
        if (inDom === null) return;
        frames = false;
        frameEnd.port1.onmessage = null;
        done({ clicked, inDom, painted: now(), inPage: window.__hearthDeltas[0] ?? null });
      };
      const loop = () => {
        if (!frames) return;
        frameEnd.port2.postMessage(0);
        requestAnimationFrame(loop);
      };
      requestAnimationFrame(loop);
      const clicked = now();
      document.querySelector('[data-testid="send-button"]').click();
      const obs = new MutationObserver(() => {
        if (reply()?.querySelector('[data-testid="message-text"]').innerText.trim()) {
          obs.disconnect();
          inDom = now();
        }
      });
      obs.observe(document.body, { subtree: true, childList: true, characterData: true });
    });
  };
  const replyDone = () =>
    app.browser.waitUntil(
      async () => (await app.browser.execute(() => {
        const replies = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
        return replies[replies.length - 1]?.dataset.status;
      })) === "done",
      { timeout: REPLY_TIMEOUT_MS, interval: 50 },
    );
  // The runtime's end: when Hearth got the reply's first text event (logged with a UTC timestamp).
  const firstTextEvents = () => logLines(FIRST_TEXT_LOG).map((l) => Date.parse(l.split(/\s+/)[0]));
  const turn = async (prompt) => {
    const seen = firstTextEvents().length;
    const t = await sendAndSeeFirstText(prompt);
    await replyDone();
    let event;
    await app.browser.waitUntil(async () => (event = firstTextEvents()[seen]) !== undefined, { timeout: LOG_TIMEOUT_MS, interval: 50 });
    return { dom: t.inDom - t.clicked, screen: t.painted - t.clicked, runtime: event - t.clicked, page: t.inPage === null ? null : t.inPage - t.clicked };
  };
  const first = await turn("hello firstturn");
  // Warm turns, several: one sits anywhere in the frame when its text arrives (a frame is ~16 ms,
  // a sixth of the whole), so a single turn says little.
  const warm = [];
  for (let i = 0; i < WARM_TURNS; i++) warm.push(await turn(`hello warmturn ${i}`));

  // A 200 KB reply streaming in: frame intervals from the click until it is done. Collected in the
  // page and polled from here: a slow window may take minutes, longer than one WebDriver call may.
  await (await app.browser.$('[data-testid="composer-input"]')).setValue(`stream ${LONG_REPLY_KIB} kb`);
  await app.browser.execute(() => {
    const newReply = window.__hearthNewReply();
    const bench = (window.__hearthStreamBench = { gaps: [], took: null, chars: 0 });
    const t0 = performance.now();
    let last = t0;
    document.querySelector('[data-testid="send-button"]').click();
    const tick = (now) => {
      bench.gaps.push(now - last);
      last = now;
      const reply = newReply();
      const text = reply?.querySelector('[data-testid="message-text"]');
      // Done, and rendered whole (what one frame cannot render waits as plain text).
      if (reply?.dataset.status === "done" && text?.dataset.pending === "false") {
        bench.took = now - t0;
        bench.chars = text.innerText.length;
      } else requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  await app.browser.waitUntil(async () => (await app.browser.execute(() => window.__hearthStreamBench.took)) !== null, {
    timeout: STREAM_TIMEOUT_MS,
    interval: 500,
    timeoutMsg: `the ${LONG_REPLY_KIB} KB reply was not shown whole within ${STREAM_TIMEOUT_MS / 1000} s`,
  });
  const streaming = await app.browser.execute(() => window.__hearthStreamBench);
  streaming.gaps = streaming.gaps.slice(1);

  const ratio = (t) =>
    `${t.screen.toFixed(0)} ms on screen, first text event ${t.runtime.toFixed(0)} ms (${(t.screen / t.runtime).toFixed(2)}×); ` +
    `it reached the page at ${t.page === null ? "?" : t.page.toFixed(0)} ms and its DOM at ${t.dom.toFixed(0)} ms`;
  console.log(`render bench: a conversation of ${MESSAGES} messages (${rendered} of them in the page at once)`);
  console.log(`  while the runtime starts beside the window (opening the project pre-warms it):`);
  console.log(`    open → first paint: ${firstPaintStarting.toFixed(0)} ms`);
  console.log(`    frame interval scrolling to the top, first pass: ${stats(framesStarting)}`);
  console.log(`  the same messages in a second conversation, the runtime warm and idle:`);
  console.log(`  open → first paint: ${firstPaint.toFixed(0)} ms`);
  console.log(`  frame interval scrolling to the top, first pass: ${stats(frames)}`);
  console.log(`  frame interval scrolling to the top, second pass: ${stats(framesAgain)}`);
  console.log(`  frame interval idle (nothing happening, ${IDLE_MS} ms): ${stats(idleFrames)}`);
  console.log(`  send → first streamed text, first turn (includes the runtime's start): ${ratio(first)}`);
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ratios = warm.map((t) => t.screen / t.runtime);
  console.log(
    `  send → first streamed text, ${WARM_TURNS} warm turns: on screen median ${median(warm.map((t) => t.screen)).toFixed(0)} ms, ` +
      `first text event median ${median(warm.map((t) => t.runtime)).toFixed(0)} ms; ratio median ${median(ratios).toFixed(2)}× ` +
      `(min ${Math.min(...ratios).toFixed(2)}×, max ${Math.max(...ratios).toFixed(2)}×); reached the page median ` +
      `${median(warm.filter((t) => t.page !== null).map((t) => t.page - t.runtime)).toFixed(0)} ms after the event, ` +
      `its DOM median ${median(warm.map((t) => t.dom - t.runtime)).toFixed(0)} ms after it`,
  );
  console.log(`  frame interval while a ${LONG_REPLY_KIB} KB reply streams in: ${stats(streaming.gaps)}; done in ${streaming.took.toFixed(0)} ms, ${streaming.chars} characters shown`);
} finally {
  await stopApp(app);
  rmSync(scratch, { recursive: true, force: true });
}
