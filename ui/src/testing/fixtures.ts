// Values of the backend's generated types that UI tests share, so each test states only what it is
// about.
import type { RegisteredRuntimeStatus } from "../lib/bindings";

/** A registered OpenCode runtime that has started `launches` times and whose last process ended as `lastExit`. */
export function runtimeProcess(launches: number, lastExit: string | null): RegisteredRuntimeStatus {
  return {
    ownerId: 1,
    family: "opencode",
    key: "k",
    retired: false,
    facades: 1,
    activeRuns: 0,
    warmInstances: [],
    runtime: { running: true, pid: 4242, url: "http://127.0.0.1:1", version: "1.18.33", launches, lastExit, activeRuns: 0, openInstances: [], uptimeMs: 1000 },
  };
}
