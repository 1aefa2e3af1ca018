import { describe, expect, it } from "vitest";
import type { RuntimeReport } from "./bindings";
import { restartSummary, sourceLabel, summarize } from "./runtime";

const ready: RuntimeReport = {
  pinnedVersion: "1.18.33",
  opencode: { status: "ready", path: "/n/opencode", version: "1.18.33", source: "nodeModules" },
  ripgrep: { status: "ready", path: "/usr/bin/rg", version: "13.0.0", source: "systemPath" },
  dataDir: "/d",
  logDir: "/d/logs",
};

describe("summarize", () => {
  it("reports ready with the runtime version", () => {
    expect(summarize(ready)).toEqual({ ok: true, headline: "Runtime ready — OpenCode 1.18.33", problems: [] });
  });

  it("lists every problem with the backend's sentence", () => {
    const s = summarize({
      ...ready,
      opencode: { status: "problem", path: null, message: "The OpenCode runtime was not found." },
      ripgrep: { status: "problem", path: null, message: "ripgrep (rg) was not found." },
    });
    expect(s.ok).toBe(false);
    expect(s.headline).toBe("The runtime cannot start: 2 problems to fix");
    expect(s.problems).toEqual(["The OpenCode runtime was not found.", "ripgrep (rg) was not found."]);
  });

  it("a missing rg alone blocks the runtime", () => {
    const s = summarize({ ...ready, ripgrep: { status: "problem", path: null, message: "no rg" } });
    expect(s).toMatchObject({ ok: false, headline: "The runtime cannot start: 1 problem to fix" });
  });
});

it("labels every source", () => {
  expect(sourceLabel("bundled")).toBe("bundled with Hearth");
  expect(sourceLabel("nodeModules")).toContain("node_modules");
});

describe("restartSummary", () => {
  it("says nothing for a runtime started once (or not yet)", () => {
    expect(restartSummary({ launches: 0, lastExit: null, recycles: 0 })).toBeNull();
    expect(restartSummary({ launches: 1, lastExit: null, recycles: 0 })).toBeNull();
  });

  it("counts restarts and names how the last process ended", () => {
    expect(restartSummary({ launches: 2, lastExit: "signal: 9 (SIGKILL)", recycles: 0 })).toBe("restarted 1 time; last exit: signal: 9 (SIGKILL)");
    expect(restartSummary({ launches: 4, lastExit: "exit status: 1", recycles: 0 })).toBe("restarted 3 times; last exit: exit status: 1");
    expect(restartSummary({ launches: 3, lastExit: null, recycles: 0 })).toBe("restarted 2 times");
  });

  it("does not count a process replaced to give memory back", () => {
    expect(restartSummary({ launches: 3, lastExit: null, recycles: 2 })).toBeNull();
    expect(restartSummary({ launches: 4, lastExit: "exit status: 1", recycles: 2 })).toBe("restarted 1 time; last exit: exit status: 1");
  });
});
