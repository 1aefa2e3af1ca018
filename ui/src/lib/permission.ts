// How a permission the runtime asks for is put to the user: what it means, in a sentence, and what
// each answer does. The permission's own name and paths are shown as the runtime sent them.

export interface PermissionText {
  /** One sentence saying what the agent wants. */
  headline: string;
  /** What the listed paths are. */
  pathsLabel: string;
}

const KNOWN: Record<string, PermissionText> = {
  external_directory: {
    headline: "The agent wants to reach outside this project folder.",
    pathsLabel: "It asks for",
  },
};

export function describePermission(permission: string): PermissionText {
  return KNOWN[permission] ?? { headline: `The agent asks for the permission “${permission}”.`, pathsLabel: "For" };
}

/** What each answer does, as the buttons' tooltips and the note under them say it. */
export const ANSWER_HELP = {
  once: "Allow this one request; the next one is asked again.",
  always: "Allow these paths for the rest of this conversation, without asking again (until Hearth closes or the project's setting changes). Other conversations are still asked.",
  reject: "The tool call fails and this reply stops.",
} as const;
