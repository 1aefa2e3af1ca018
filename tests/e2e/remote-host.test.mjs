// A project on another host through the real window, against a real sshd on this machine logging
// in as a second user: a host that cannot be reached is a sentence in the form; the good host's
// folders are browsed and one is added; the sidebar marks it remote and connected; a turn in it reads
// the marker on that host with the agent's own tool; the Diagnostics self-test runs on the host named
// there; nothing is left running there after the app.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { attrs, click, launchApp, realRuntime, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";
import { HOST, HOST_DOWN, remoteProcesses, startSshd } from "./sshd.mjs";

/** The first turn stages the runtime on the host and starts it there. */
const TURN_MS = 180_000;
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

describe("a project on another host in the real window", async () => {
  realRuntime();
  const sshd = await startSshd();
  if (!sshd) {
    it("NOT RUN: HEARTH_SKIP_REMOTE_TESTS=1", { skip: "HEARTH_SKIP_REMOTE_TESTS=1" }, () => {});
    return;
  }
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-remote-"));
  const folder = sshd.remoteProject("window", { "marker.txt": "PROJECT_81" });
  let app;

  before(async () => {
    app = await launchApp({ dataDir: path.join(scratch, "data"), env: { HEARTH_SSH_CONFIG: sshd.clientConfig } });
  });
  after(async () => {
    await stopApp(app);
    sshd.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const connect = async (host) => {
    const input = await app.browser.$('[data-testid="remote-host"]');
    await input.setValue(host);
    await click(app.browser, "remote-connect");
  };

  it("says why a host cannot be reached", async () => {
    await click(app.browser, "add-project");
    await click(app.browser, "project-remote");
    await connect(HOST_DOWN);
    assert.match(await textOf(app.browser, "remote-error"), new RegExp(`${HOST_DOWN} could not be reached`));
    assert.deepEqual(await texts(app.browser, '[data-testid="project-item"]'), [], "nothing was added");
  });

  it("browses the host's folders and adds one as a remote project", async () => {
    await connect(HOST);
    await until(async () => (await textOf(app.browser, "remote-path")).startsWith(`${HOST}:${sshd.home}`), "the host's home listed");
    for (const name of path.relative(sshd.home, folder).split("/")) {
      const buttons = await app.browser.$$('[data-testid="remote-folder"]');
      let target = null;
      for (const b of buttons) if ((await b.getText()) === `${name}/`) target = b;
      assert.ok(target, `${name}/ is listed`);
      await target.click();
      await until(async () => (await textOf(app.browser, "remote-path")).endsWith(`/${name}`), `${name} opened`);
    }
    await click(app.browser, "remote-add");
    const name = path.basename(folder);
    await until(async () => (await texts(app.browser, '[data-testid="project-item"]')).includes(name), `${name} in the sidebar`);
    assert.equal(await textOf(app.browser, "project-host"), HOST);
    await until(async () => (await attrs(app.browser, '[data-testid="project-host"]', "data-state"))[0] === "connected", "the host shown connected");
  });

  it("runs a turn on the host that reads the marker there", async () => {
    await click(app.browser, "new-conversation");
    const input = await app.browser.$('[data-testid="composer-input"]');
    await input.setValue("Read marker.txt");
    await app.browser.keys("Enter");
    const replyText = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1);
    await until(async () => (await attrs(app.browser, ASSISTANT, "data-status")).at(-1) === "done" && (await replyText()) !== "", "the reply", TURN_MS);
    assert.equal(await replyText(), "PROJECT_81");
    const card = await app.browser.$(`${ASSISTANT} [data-testid="tool-card"]`);
    assert.equal(await card.getAttribute("data-tool"), "read");
    assert.ok(remoteProcesses().some((p) => p.includes("opencode serve")), "the runtime runs as the host's user");
    await screenshot(app, "remote-project");
  });

  it("runs the Diagnostics self-test on the host named there", async () => {
    await click(app.browser, "nav-diagnostics");
    await (await app.browser.$('[data-testid="selftest-host"]')).setValue(HOST);
    await until(async () => (await attrs(app.browser, '[data-testid="selftest-runtime"]', "data-available")).filter((a) => a === "true").length === 1, "only OpenCode's server offered on a host");
    await click(app.browser, "selftest-run");
    await until(async () => (await attrs(app.browser, '[data-testid="selftest-verdict"]', "data-passed")).length > 0, "the self-test to finish", TURN_MS);
    const failed = await app.browser.execute(() =>
      Array.from(document.querySelectorAll('[data-testid="selftest-row"][data-passed="false"]')).map((r) => r.innerText),
    );
    assert.deepEqual(failed, [], await textOf(app.browser, "selftest-verdict"));
    assert.deepEqual(await attrs(app.browser, '[data-testid="selftest-check"]', "data-runtime"), [`OpenCode (server) on ${HOST}`, `OpenCode (server) on ${HOST}`]);
    const rows = await texts(app.browser, '[data-testid="selftest-row"]');
    assert.ok(rows.some((r) => r.includes("Marker files intact")), rows.join("\n"));
    await screenshot(app, "remote-selftest");
  });

  it("leaves nothing running on the host after the app closes", async () => {
    await stopApp(app);
    app = null;
    await until(async () => remoteProcesses().length === 0, "nothing left as the remote user", 20_000);
  });
});
