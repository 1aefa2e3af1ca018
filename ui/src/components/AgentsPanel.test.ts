import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/svelte";
import AgentsPanel from "./AgentsPanel.svelte";
import { agent, runtimeProcess } from "../testing/fixtures";

const custom = { list: async () => [], add: async () => {}, remove: async () => {} };

describe("AgentsPanel", () => {
  it("shows each agent's process, version, what it can do and its last failure", async () => {
    const opencode = agent("opencode", "OpenCode (ACP)", null, { abilitiesSeen: true, version: "1.18.33" });
    const claude = agent("claude-code", "Claude Code", null, { lastFailure: "Claude Code stopped unexpectedly (exit status: 1)." });
    const codex = agent("codex", "Codex", "Codex was not found on this machine (looked for `codex-acp` on PATH).", { abilities: null });
    const process = { ...runtimeProcess(1, null), family: "acp", slot: "acp:opencode" };
    render(AgentsPanel, { agents: [opencode, claude, codex], processes: [process], custom, onchanged: () => {} });
    const rows = await screen.findAllByTestId("agent-row");
    expect(rows.map((r) => r.dataset.found)).toEqual(["true", "true", "false"]);
    expect(rows[0].querySelector('[data-testid="agent-process"]')?.textContent).toBe("running · pid 4242 · 1.18.33 · 0 project(s)");
    expect(rows[0].querySelector('[data-testid="agent-abilities"]')?.textContent).toBe("Continues conversations after a restart · takes images · version 1.18.33");
    expect(rows[1].querySelector('[data-testid="agent-not-running"]')).not.toBeNull();
    expect(rows[1].querySelector('[data-testid="agent-abilities"]')?.textContent).toContain("(as tested; confirmed when it starts)");
    expect(rows[1].querySelector('[data-testid="agent-last-failure"]')?.textContent).toBe("Last time: Claude Code stopped unexpectedly (exit status: 1).");
    expect(rows[2].querySelector('[data-testid="agent-problem"]')?.textContent).toContain("was not found");
  });
});
