import type { BinaryCheck, RuntimeReport, Source } from "./bindings";

const SOURCE_LABELS: Record<Source, string> = {
  environment: "from HEARTH_OPENCODE_BIN / HEARTH_RG_BIN",
  settings: "from settings",
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
