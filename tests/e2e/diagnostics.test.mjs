// The diagnostics panel's self-test button in the real window: reuse and isolation checks against
// the real runtime, every row of the result table passed.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { attrs, click, launchApp, realRuntime, screenshot, stopApp, textOf, until } from "./harness.mjs";

/** The self-test launches its own runtime and runs 8 turns, a compaction and the isolation probes. */
const SELFTEST_MS = 300_000;

describe("diagnostics panel", () => {
  realRuntime();
  let app;
  before(async () => {
    app = await launchApp();
  });
  after(async () => stopApp(app));

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
    await click(app.browser, "selftest-export");
    assert.match(await textOf(app.browser, "selftest-exported"), /Saved to .*selftest-\d+\.json/);
    await screenshot(app.browser, "diagnostics-selftest");
  });
});
