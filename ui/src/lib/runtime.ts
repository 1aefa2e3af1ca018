import type { AgentSummary, BinaryCheck, RuntimeReport, RuntimeStatus, Source } from "./bindings";

const SOURCE_LABELS: Record<Source, string> = {
  environment: "from HEARTH_OPENCODE_BIN / HEARTH_RG_BIN",
  settings: "chosen by you in this view",
  bundled: "bundled with Hearth",
  nodeModules: "from node_modules (development checkout)",
  systemPath: "from PATH",
};

export function sourceLabel(source: Source): string {
  return SOURCE_LABELS[source];
}

export interface Summary {
  ok: boolean;
  headline: string;
  problems: string[];
}

/** One line for the top of the Runtime view, plus every problem as the backend worded it. */
export function summarize(report: RuntimeReport): Summary {
  const problems = [report.opencode, report.ripgrep]
    .filter((c): c is Extract<BinaryCheck, { status: "problem" }> => c.status === "problem")
    .map((c) => c.message);
  if (problems.length === 0 && report.opencode.status === "ready") {
    return { ok: true, headline: `Runtime ready — OpenCode ${report.opencode.version}`, problems };
  }
  const n = problems.length;
  return {
    ok: false,
    headline: `The runtime cannot start: ${n} problem${n === 1 ? "" : "s"} to fix`,
    problems,
  };
}

/**
 * How often a runtime process was started again after it ended without being asked to, or null when
 * it never was: "restarted 2 times; last exit: signal: 9 (SIGKILL)". Replacing an idle process to
 * give memory back (a recycle) is not a restart.
 */
export function restartSummary(status: Pick<RuntimeStatus, "launches" | "lastExit" | "recycles">): string | null {
  const n = status.launches - 1 - status.recycles;
  if (n <= 0) return null;
  const times = `restarted ${n} time${n === 1 ? "" : "s"}`;
  return status.lastExit ? `${times}; last exit: ${status.lastExit}` : times;
}

/** The runtime binary the user chose in the Runtime view (kept in settings). */
export interface BinaryChoice {
  /** The chosen path, or null when Hearth finds the runtime itself. */
  current: () => Promise<string | null>;
  /** Ask the user for a file (the native dialog); null when they cancelled. */
  choose: (near: string | null) => Promise<string | null>;
  /** Keep `path` as the choice (null clears it). */
  set: (path: string | null) => Promise<void>;
}

/** The ACP agents the Runtime view lists, and the custom ones the user adds and removes. */
export interface CustomAgents {
  list: () => Promise<AgentSummary[]>;
  /** Add an agent by its command line (program, then arguments). */
  add: (name: string, command: string[]) => Promise<void>;
  remove: (id: string) => Promise<void>;
}
