// The diagnostics panel in the real window: the self-test button (reuse and isolation checks against
// the real runtime, on every runtime installed — OpenCode's server, its ACP agent, Claude Code —,
// every row of the result table passed), and the chart of the app's own runtime's
// memory with its bound.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { addProject, attrs, click, launchApp, realRuntime, screenshot, setComposer, stopApp, textOf, until } from "./harness.mjs";

/** The self-test launches each runtime it checks and runs, per runtime, 8 turns, a cancel, a
 * compaction (the server) and the isolation probes. */
const SELFTEST_MS = 600_000;
/** A first turn starts the runtime; the registry reads its memory every 30 s, the panel every 4 s. */
const TURN_MS = 120_000;
const CHART_MS = 60_000;

describe("diagnostics panel", () => {
  realRuntime();
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-diagnostics-"));
  let app;
  before(async () => {
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("charts the app's runtime memory over the last hour, with the bound past which it is replaced", async () => {
    const project = path.join(scratch, "memory-project");
    mkdirSync(project);
    writeFileSync(path.join(project, "marker.txt"), "PROJECT_7");
    await addProject(app.browser, project);
    await click(app.browser, "new-conversation");
    await setComposer(app.browser, "read marker.txt");
    await click(app.browser, "send-button");
    const reply = '[data-testid="message"][data-role="assistant"]';
    await until(async () => (await attrs(app.browser, reply, "data-status")).at(-1) === "done", "the first reply", TURN_MS);
    await click(app.browser, "nav-diagnostics");
    await until(async () => Number((await attrs(app.browser, '[data-testid="memory-chart"]', "data-samples"))[0] ?? 0) > 0, "a memory reading in the chart", CHART_MS);
    const caption = await textOf(app.browser, "memory-chart");
    assert.match(caption, /bound 840 MiB/);
    const drawn = await app.browser.execute(() => document.querySelector('[data-testid="memory-chart"] path')?.getAttribute("d") ?? "");
    assert.match(drawn, /^M[\d.]+,[\d.]+/, "the reading is drawn");
    await screenshot(app, "diagnostics-memory");
  });

  it("runs the self-test and every check passes", async () => {
    await click(app.browser, "nav-diagnostics");
    await click(app.browser, "selftest-run");
    await (await app.browser.$('[data-testid="selftest-cancel"]')).waitForDisplayed({ timeout: 10_000 });
    await until(async () => (await attrs(app.browser, '[data-testid="selftest-verdict"]', "data-passed")).length > 0, "the self-test to finish", SELFTEST_MS);
    const verdict = await textOf(app.browser, "selftest-verdict");
    const rows = await attrs(app.browser, '[data-testid="selftest-row"]', "data-passed");
    const failed = await app.browser.execute(() =>
      Array.from(document.querySelectorAll('[data-testid="selftest-row"][data-passed="false"]')).map((r) => r.innerText),
    );
    assert.ok(rows.length >= 10, `result rows: ${rows.length}`);
    assert.deepEqual(failed, [], verdict);
    assert.match(verdict, /Every check passed/);
    // Every runtime offered and installed was checked, each with its own reuse and isolation rows.
    const offered = await app.browser.execute(() =>
      Array.from(document.querySelectorAll('[data-testid="selftest-runtime"][data-available="true"]')).map((l) => l.innerText.trim()),
    );
    const checked = await attrs(app.browser, '[data-testid="selftest-check"]', "data-runtime");
    assert.ok(offered.includes("OpenCode (server)") && offered.includes("OpenCode (ACP)"), `offered: ${offered}`);
    for (const runtime of offered) {
      assert.equal(checked.filter((c) => c === runtime).length, 2, `${runtime}: reuse and isolation (checked: ${checked})`);
    }
    await click(app.browser, "selftest-export");
    assert.match(await textOf(app.browser, "selftest-exported"), /Saved to .*selftest-\d+\.json/);
    await screenshot(app, "diagnostics-selftest");
  });
});
