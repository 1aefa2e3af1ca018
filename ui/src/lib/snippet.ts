// Search snippets come from SQLite FTS5 with the matched words between « and »: the agent reads
// them as text, the window shows them highlighted.

export interface SnippetPart {
  text: string;
  hit: boolean;
}

/** Split a snippet into plain and matched parts; an unpaired marker is kept as text. */
export function snippetParts(snippet: string): SnippetPart[] {
  const parts: SnippetPart[] = [];
  const push = (text: string, hit: boolean) => {
    if (!text) return;
    const last = parts.at(-1);
    if (last && last.hit === hit) last.text += text;
    else parts.push({ text, hit });
  };
  let rest = snippet;
  while (rest) {
    const open = rest.indexOf("«");
    const close = open < 0 ? -1 : rest.indexOf("»", open + 1);
    if (open < 0 || close < 0) {
      push(rest, false);
      break;
    }
    push(rest.slice(0, open), false);
    push(rest.slice(open + 1, close), true);
    rest = rest.slice(close + 1);
  }
  return parts;
}
