import { describe, expect, it, vi } from "vitest";
import { render, screen } from "@testing-library/svelte";
import type { DiagnosticsStatus } from "../lib/bindings";
import { runtimeProcess } from "../testing/fixtures";

const diagnosticsStatus = vi.fn();
vi.mock("../lib/bindings", () => ({ commands: { diagnosticsStatus: () => diagnosticsStatus() } }));
vi.mock("@tauri-apps/api/core", () => ({ Channel: class {} }));

const { default: DiagnosticsView } = await import("./DiagnosticsView.svelte");

function status(launches: number, lastExit: string | null): DiagnosticsStatus {
  return { runtimes: [runtimeProcess(launches, lastExit)], memory: [], mcpServers: [], logTail: "", logDir: "/d/logs", selftestRunning: false };
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
});
