// Values of the backend's generated types that UI tests share, so each test states only what it is
// about.
import type { AgentSummary, Conversation, Project, RegisteredRuntimeStatus } from "../lib/bindings";

/** A registered OpenCode runtime that has started `launches` times and whose last process ended as `lastExit`. */
export function runtimeProcess(launches: number, lastExit: string | null, recycles = 0): RegisteredRuntimeStatus {
  return {
    ownerId: 1,
    family: "opencode",
    slot: "opencode",
    key: "k",
    retired: false,
    facades: 1,
    activeRuns: 0,
    warmInstances: [],
    runtime: { running: true, pid: 4242, url: "http://127.0.0.1:1", version: "1.18.33", launches, recycles, lastExit, activeRuns: 0, openInstances: [], uptimeMs: 1000, host: null, hostMemory: null },
  };
}

/** A project on OpenCode's server, refusing reaches outside its folder. */
export function project(): Project {
  return { id: "p1", name: "demo", path: "/home/u/demo", host: null, addedAt: 1, lastOpenedAt: 1, outsideProject: "deny", runtime: { family: "openCode" } };
}

/** A new conversation of `project()` with no choices of its own. */
export function conversation(): Conversation {
  return {
    id: "c1",
    projectId: "p1",
    title: "Talk",
    createdAt: 1,
    updatedAt: 1,
    nativeSessionId: null,
    profileId: null,
    workMode: "execute",
    libraryIds: [],
    compactedAt: null,
    runtime: null,
  };
}

/** An ACP agent as the Runtime view lists it; with a `problem` it was not found. */
export function agent(id: string, name: string, problem: string | null = null, extra: Partial<AgentSummary> = {}): AgentSummary {
  return {
    choice: `acp:${id}`,
    name,
    kind: id === "opencode" ? "openCode" : "custom",
    binary: problem ? null : `/usr/bin/${id}`,
    problem,
    abilities: problem ? null : { continuesAfterRestart: true, images: true },
    abilitiesSeen: false,
    version: null,
    lastFailure: null,
    ...extra,
  };
}
