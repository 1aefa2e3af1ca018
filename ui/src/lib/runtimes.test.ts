import { describe, expect, it } from "vitest";
import { choiceKey, effectiveChoice, parseChoice, runtimeLabel, runtimeOptions, splitCommandLine } from "./runtimes";
import { agent, conversation, project } from "../testing/fixtures";

describe("runtime choices", () => {
  it("round-trip through their stored form", () => {
    for (const key of ["opencode", "acp:claude-code", "acp:custom-1"]) expect(choiceKey(parseChoice(key))).toBe(key);
    expect(parseChoice("acp:")).toEqual({ family: "openCode" });
  });

  it("list the server first, then each agent, a missing one with its problem", () => {
    const options = runtimeOptions([agent("opencode", "OpenCode (ACP)"), agent("codex", "Codex", "Codex was not found on this machine.")]);
    expect(options.map((o) => o.key)).toEqual(["opencode", "acp:opencode", "acp:codex"]);
    expect(options[2]).toEqual({ key: "acp:codex", label: "Codex (not found)", problem: "Codex was not found on this machine." });
    expect(runtimeLabel({ family: "acp", agent: "opencode" }, [agent("opencode", "OpenCode (ACP)")])).toBe("OpenCode (ACP)");
  });

  it("a conversation follows its project until it chooses", () => {
    const p = { ...project(), runtime: { family: "acp" as const, agent: "claude-code" } };
    expect(effectiveChoice(conversation(), p)).toEqual(p.runtime);
    expect(effectiveChoice({ ...conversation(), runtime: { family: "openCode" } }, p)).toEqual({ family: "openCode" });
  });

  it("split a command line, quotes keeping spaces", () => {
    expect(splitCommandLine(`  my-agent --acp "two words" 'x y' ''  `)).toEqual(["my-agent", "--acp", "two words", "x y", ""]);
  });
});
