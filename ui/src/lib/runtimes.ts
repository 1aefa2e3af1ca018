// The runtime a project or conversation runs on — OpenCode's server or an ACP agent — as the
// window offers it: one option per runtime, with why an agent cannot run when it cannot.
import type { AgentSummary, Conversation, Project, RuntimeChoice } from "./bindings";

/** The stored form of a choice ("opencode", "acp:<agent>"): what `AgentSummary.choice` carries. */
export function choiceKey(c: RuntimeChoice): string {
  return c.family === "acp" ? `acp:${c.agent}` : "opencode";
}

export function parseChoice(key: string): RuntimeChoice {
  return key.startsWith("acp:") && key.length > 4 ? { family: "acp", agent: key.slice(4) } : { family: "openCode" };
}

export interface RuntimeOption {
  key: string;
  label: string;
  /** Why it cannot run here (missing, and how to install it); null when it can. */
  problem: string | null;
}

export const SERVER_LABEL = "OpenCode (server)";

/** OpenCode's server first, then every agent, each with its problem if it has one. */
export function runtimeOptions(agents: AgentSummary[]): RuntimeOption[] {
  return [
    { key: "opencode", label: SERVER_LABEL, problem: null },
    ...agents.map((a) => ({ key: a.choice, label: a.problem ? `${a.name} (not found)` : a.name, problem: a.problem })),
  ];
}

/** The name of the runtime a choice names ("Claude Code"), or its key when it is unknown. */
export function runtimeLabel(c: RuntimeChoice, agents: AgentSummary[]): string {
  const key = choiceKey(c);
  if (key === "opencode") return SERVER_LABEL;
  return agents.find((a) => a.choice === key)?.name ?? key;
}

/** What runs the conversation: its own choice, else its project's. */
export function effectiveChoice(conversation: Conversation, project: Project | undefined): RuntimeChoice {
  return conversation.runtime ?? project?.runtime ?? { family: "openCode" };
}

/** "custom agent" command lines: split on spaces, quotes keep spaces ("a b" 'c d'). */
export function splitCommandLine(line: string): string[] {
  const out: string[] = [];
  let current = "";
  let quote: string | null = null;
  let started = false;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = null;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      started = true;
    } else if (/\s/.test(ch)) {
      if (started || current) out.push(current);
      current = "";
      started = false;
    } else {
      current += ch;
      started = true;
    }
  }
  if (started || current) out.push(current);
  return out;
}
