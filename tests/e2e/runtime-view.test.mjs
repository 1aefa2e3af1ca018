// The Runtime view in the real window, against the real runtime binary.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { launchApp, realRuntime, screenshot, stopApp, textOf } from "./harness.mjs";

describe("Runtime view (real window, real runtime binary)", () => {
  let app;
  const runtime = realRuntime(); // throws — fails the suite — when the binary is missing

  before(async () => {
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
  });

  it("opens on the app frame with the Runtime view", async () => {
    assert.equal(await app.browser.getTitle(), "Hearth");
    assert.match(await textOf(app.browser, "sidebar"), /Hearth[\s\S]*Runtime/);
  });

  it("shows the version the real binary prints, which is the pinned one", async () => {
    assert.equal(runtime.printed, runtime.pinned, "the installed binary is not the pinned version");
    const shown = await textOf(app.browser, "runtime-binary-version");
    assert.equal(shown, runtime.printed);
    assert.equal(await textOf(app.browser, "runtime-binary-path"), runtime.bin);
    assert.match(await textOf(app.browser, "runtime-summary"), new RegExp(`Runtime ready — OpenCode ${runtime.pinned}`));
    assert.match(await textOf(app.browser, "ripgrep-path"), /\/rg$/);
    assert.equal(await textOf(app.browser, "data-dir"), app.dataDir);
    await screenshot(app.browser, "runtime-view");
  });
});
