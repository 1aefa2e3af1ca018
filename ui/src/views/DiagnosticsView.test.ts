import { describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import type { DiagnosticsStatus, MemoryReport } from "../lib/bindings";
import { runtimeProcess } from "../testing/fixtures";

const diagnosticsStatus = vi.fn();
const runSelftest = vi.fn();
const RUNTIMES = [
  { choice: { family: "openCode" }, label: "OpenCode (server)", problem: null },
  { choice: { family: "acp", agent: "opencode" }, label: "OpenCode (ACP)", problem: null },
  { choice: { family: "acp", agent: "claude-code" }, label: "Claude Code", problem: "Claude Code was not found on this machine" },
];
vi.mock("../lib/bindings", () => ({
  commands: {
    diagnosticsStatus: () => diagnosticsStatus(),
    selftestRuntimes: async () => RUNTIMES,
    runSelftest: (request: unknown) => runSelftest(request),
  },
}));
vi.mock("@tauri-apps/api/core", () => ({ Channel: class {} }));

const { default: DiagnosticsView } = await import("./DiagnosticsView.svelte");

const MIB = 1024 * 1024;
const noHistory: MemoryReport = { boundBytes: 640 * MIB, afterDisposals: 24, windowMs: 3_600_000, samples: [], recycles: [] };

function status(launches: number, lastExit: string | null, recycles = 0, memoryHistory = noHistory): DiagnosticsStatus {
  return { runtimes: [runtimeProcess(launches, lastExit, recycles)], memory: [], memoryHistory, mcpServers: [], logTail: "", logDir: "/d/logs", selftestRunning: false };
}

describe("DiagnosticsView", () => {
  it("shows restarts and the last exit only when the runtime was started more than once", async () => {
    diagnosticsStatus.mockResolvedValue({ status: "ok", data: status(1, null) });
    const first = render(DiagnosticsView);
    await screen.findByTestId("runtime-uptime");
    expect(screen.queryByTestId("runtime-restarts")).toBeNull();
    first.unmount();

    diagnosticsStatus.mockResolvedValue({ status: "ok", data: status(2, "signal: 9 (SIGKILL)") });
    render(DiagnosticsView);
    expect((await screen.findByTestId("runtime-restarts")).textContent).toBe("restarted 1 time; last exit: signal: 9 (SIGKILL)");
  });

  it("charts the last hour's memory with the bound and each replacement, which is not a restart", async () => {
    const history: MemoryReport = {
      ...noHistory,
      samples: [
        { agoMs: 600_000, ownerId: 1, rssBytes: 700 * MIB },
        { agoMs: 0, ownerId: 1, rssBytes: 310 * MIB },
      ],
      recycles: [{ agoMs: 300_000, ownerId: 1, reason: "memory", rssBytes: 700 * MIB }],
    };
    diagnosticsStatus.mockResolvedValue({ status: "ok", data: status(2, null, 1, history) });
    render(DiagnosticsView);
    const chart = await screen.findByTestId("memory-chart");
    expect(chart.dataset.samples).toBe("2");
    expect(chart.textContent).toContain("bound 640 MiB");
    expect(screen.getByTestId("memory-recycles").textContent).toBe("1 replaced: memory");
    expect(chart.querySelector("line.recycle title")?.textContent).toBe("Replaced 5 min ago (700 MiB, past the bound)");
    expect(screen.queryByTestId("runtime-restarts")).toBeNull();
  });

  it("checks the runtimes chosen, shows each one's checks apart, and says which could not be checked", async () => {
    diagnosticsStatus.mockResolvedValue({ status: "ok", data: status(1, null) });
    const check = (name: string, runtime: string) => ({ name, runtime, passed: true, cancelled: false, error: null, assertions: [{ name: "One runtime launch", passed: true, detail: "" }], figures: [], durationMs: 1 });
    runSelftest.mockResolvedValue({
      status: "ok",
      data: { passed: true, cancelled: false, checks: [check("reuse", "OpenCode (ACP)"), check("isolation", "OpenCode (ACP)")], skipped: [], startedAt: "", durationMs: 10, hearthVersion: "0", runtimeVersion: "1.18.33" },
    });
    render(DiagnosticsView);
    const options = await screen.findAllByTestId("selftest-runtime");
    expect(options.map((o) => o.dataset.available)).toEqual(["true", "true", "false"]);
    expect(options[2].textContent).toContain("not installed");
    await fireEvent.click(options[0].querySelector("input")!);
    await fireEvent.click(screen.getByTestId("selftest-run"));
    await waitFor(() => expect(runSelftest).toHaveBeenCalled());
    expect(runSelftest.mock.calls[0][0].runtimes).toEqual([{ family: "acp", agent: "opencode" }]);
    const checks = await screen.findAllByTestId("selftest-check");
    expect(checks.map((c) => c.textContent)).toEqual(["OpenCode (ACP) · reuse ✓", "OpenCode (ACP) · isolation ✓"]);
  });

  it("runs the checks on a host the user names, with the one runtime remote projects run", async () => {
    diagnosticsStatus.mockResolvedValue({ status: "ok", data: status(1, null) });
    runSelftest.mockReset();
    runSelftest.mockResolvedValue({ status: "ok", data: { passed: true, cancelled: false, checks: [], skipped: [], startedAt: "", durationMs: 1, hearthVersion: "0", runtimeVersion: null } });
    render(DiagnosticsView);
    await screen.findAllByTestId("selftest-runtime");
    await fireEvent.input(screen.getByTestId("selftest-host"), { target: { value: " build-box " } });
    const options = screen.getAllByTestId("selftest-runtime");
    expect(options.map((o) => o.dataset.available)).toEqual(["true", "false", "false"]);
    expect(options[1].textContent).toContain("this machine only");
    await fireEvent.click(screen.getByTestId("selftest-run"));
    await waitFor(() => expect(runSelftest).toHaveBeenCalled());
    expect(runSelftest.mock.calls[0][0]).toMatchObject({ host: "build-box", runtimes: [{ family: "openCode" }] });
  });
});
