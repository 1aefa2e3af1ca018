// Native open dialogs in the real window, answered by keyboard through X as a user would: a project
// folder, files and a folder imported into a knowledge library, a skill package (again: refused,
// then replaced on request; a bad package beside it shows its reason); cancelling changes nothing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { answerFileDialog, click, launchApp, ROOT, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

describe("choosing folders in the native dialog", () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-dialog-"));
  const project = path.join(scratch, "chosen-project");
  let app;

  before(async () => {
    mkdirSync(project);
    writeFileSync(path.join(project, "marker.txt"), "CHOSEN");
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const projectNames = () => texts(app.browser, '[data-testid="project-item"]');

  const openDialog = async () => {
    if (!(await (await app.browser.$('[data-testid="project-choose"]')).isDisplayed())) await click(app.browser, "add-project");
    await click(app.browser, "project-choose");
  };

  it("cancelling the dialog adds nothing and shows no error", async () => {
    // A first start offers the dialog right in the empty sidebar.
    await click(app.browser, "sidebar-choose");
    await answerFileDialog(app, "Add a project folder", null);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await projectNames(), []);
    assert.deepEqual(await texts(app.browser, '[data-testid="app-error"]'), []);
  });

  it("adds the folder chosen in the dialog as a project", async () => {
    await openDialog();
    await answerFileDialog(app, "Add a project folder", project, { shot: "native-folder-dialog" });
    await until(async () => (await projectNames()).includes("chosen-project"), "the chosen project in the sidebar", 20_000);
    await screenshot(app, "project-added-from-dialog");
    await openDialog();
    await answerFileDialog(app, "Add a project folder", project);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await projectNames(), ["chosen-project"], "the same folder twice is one project");
  });

  it("imports files and a folder chosen in the dialog into a knowledge library", async () => {
    await click(app.browser, "nav-knowledge");
    await (await app.browser.$('[data-testid="library-name"]')).setValue("Protocols");
    await click(app.browser, "library-create");
    await click(app.browser, "import-files");
    await answerFileDialog(app, "Import files into the library", path.join(ROOT, "fixtures/knowledge/ember-protocol.md"));
    await until(async () => /^Imported 1,/.test(await textOf(app.browser, "import-report")), "the file import report");
    await click(app.browser, "import-folder");
    await answerFileDialog(app, "Import a folder into the library", path.join(ROOT, "fixtures/knowledge/guides"));
    await until(async () => /^Imported [1-9]/.test(await textOf(app.browser, "import-report")), "the folder import report");
    await (await app.browser.$('[data-testid="knowledge-query"]')).setValue("ember handshake");
    await app.browser.keys("Enter");
    await until(async () => (await texts(app.browser, '[data-testid="knowledge-hit"]')).some((t) => t.includes("ember-protocol.md")), "a search hit in the imported file");
    await screenshot(app, "knowledge-view");
  });

  it("adds a skill package chosen in the dialog", async () => {
    await click(app.browser, "nav-tools");
    await click(app.browser, "skill-choose");
    await answerFileDialog(app, "Add a skill package (a folder with SKILL.md)", path.join(ROOT, "fixtures/skills/web-3d-game"));
    await until(async () => (await texts(app.browser, '[data-testid="skill-card"]')).some((t) => t.startsWith("web-3d-game")), "the skill card");
    await screenshot(app, "tools-view");
  });

  it("refuses the same skill again with a sentence and replaces it only when asked", async () => {
    await click(app.browser, "skill-choose");
    await answerFileDialog(app, "Add a skill package (a folder with SKILL.md)", path.join(ROOT, "fixtures/skills/web-3d-game"));
    await until(async () => (await textOf(app.browser, "skill-error")).includes("A skill named `web-3d-game` is already added; replace it"), "the refusal sentence");
    await screenshot(app, "skill-exists");
    await click(app.browser, "skill-replace");
    await until(async () => (await texts(app.browser, '[data-testid="skill-error"]')).length === 0, "the replacement done");
    assert.equal((await texts(app.browser, '[data-testid="skill-card"]')).filter((t) => t.startsWith("web-3d-game")).length, 1);
  });

  it("shows a bad package with its reason while the good one stays in use", async () => {
    const bad = path.join(app.dataDir, "skills", "no-description");
    mkdirSync(bad, { recursive: true });
    writeFileSync(path.join(bad, "SKILL.md"), "---\nname: no-description\n---\nBody\n");
    await until(async () => (await texts(app.browser, '[data-testid="skill-problem"]')).includes("The skill `no-description` has no description; the agent uses it to decide when to load the skill."), "the bad package's reason");
    assert.ok((await texts(app.browser, '[data-testid="skill-card"]')).some((t) => t.startsWith("web-3d-game —")), "the good skill is still listed as usable");
    await screenshot(app, "skill-problem");
  });
});
