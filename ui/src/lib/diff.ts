// A file's difference as the diff view shows it: unified rows as they come, or side-by-side rows
// where each run of removed lines faces the run of added lines that replaced it.
import hljs from "highlight.js/lib/common";
import type { DiffLine } from "./bindings";

export type SplitRow =
  | { kind: "hunk"; text: string }
  | { kind: "pair"; left: DiffLine | null; right: DiffLine | null };

export function splitRows(lines: DiffLine[]): SplitRow[] {
  const rows: SplitRow[] = [];
  let removed: DiffLine[] = [];
  let added: DiffLine[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(removed.length, added.length); i++) {
      rows.push({ kind: "pair", left: removed[i] ?? null, right: added[i] ?? null });
    }
    removed = [];
    added = [];
  };
  for (const line of lines) {
    if (line.kind === "removed") {
      // A removal after additions starts a new run.
      if (added.length) flush();
      removed.push(line);
    } else if (line.kind === "added") {
      added.push(line);
    } else {
      flush();
      rows.push(line.kind === "hunk" ? { kind: "hunk", text: line.text } : { kind: "pair", left: line, right: line });
    }
  }
  flush();
  return rows;
}

const EXTENSION_LANGUAGES: Record<string, string> = { rs: "rust", ts: "typescript", js: "javascript", py: "python", sh: "bash", md: "markdown", yml: "yaml", h: "c", hpp: "cpp" };

/** The highlight.js language for a path, if it knows one. */
export function languageOf(path: string): string | undefined {
  const ext = path.split(".").pop()?.toLowerCase() ?? "";
  const name = EXTENSION_LANGUAGES[ext] ?? ext;
  return name && hljs.getLanguage(name) ? name : undefined;
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** One line as highlighted HTML (escaped when the language is unknown). Lines are highlighted
 * one by one: a construct spanning lines may be coloured as plain text, never wrongly escaped. */
export function highlightLine(text: string, language: string | undefined): string {
  if (!language) return escape(text);
  return hljs.highlight(text, { language, ignoreIllegals: true }).value;
}
