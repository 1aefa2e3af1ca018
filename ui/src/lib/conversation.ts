// The conversation view's state: the stored messages, kept current by the backend's events while a
// turn streams. Pure functions, so the streaming logic is unit-tested without a window.
import type { ConversationSnapshot, ConversationUpdate, Message, RuntimeEvent } from "./bindings";

export interface PendingPermission {
  messageId: string;
  permissionId: string;
  permission: string;
  patterns: string[];
}

export interface ConversationState {
  messages: Message[];
  permissions: PendingPermission[];
  /** The last retry notice of the running turn, if the provider is failing. */
  retrying: string | null;
  /** The newest backend update already in `messages`: older ones are skipped, since a streamed
   * text delta applied twice would show twice. */
  seenSeq: number;
}

export function initialState(messages: Message[], seenSeq = 0): ConversationState {
  return { messages, permissions: [], retrying: null, seenSeq };
}

/** The state of a conversation opened from its snapshot, with the updates that arrived while the
 * snapshot loaded: those it already contains are skipped, the rest applied in order. */
export function openFrom(snapshot: ConversationSnapshot, early: ConversationUpdate[]): ConversationState {
  return early.reduce(reduce, initialState(snapshot.messages, snapshot.updateSeq));
}

function upsert(messages: Message[], message: Message): Message[] {
  const i = messages.findIndex((m) => m.id === message.id);
  if (i === -1) return [...messages, message];
  const next = messages.slice();
  next[i] = message;
  return next;
}

function applyRuntime(m: Message, ev: RuntimeEvent): Message {
  switch (ev.type) {
    case "textDelta":
      return { ...m, text: m.text + ev.text, status: "streaming" };
    case "toolStarted":
      if (m.toolCalls.some((t) => t.callId === ev.callId)) return m;
      return { ...m, status: "streaming", toolCalls: [...m.toolCalls, { callId: ev.callId, tool: ev.tool, input: ev.input, output: null, error: null, status: "running" }] };
    case "toolFinished": {
      const call = { callId: ev.callId, tool: ev.tool, input: ev.input, output: ev.output, error: ev.error, status: ev.error ? ("error" as const) : ("done" as const) };
      const exists = m.toolCalls.some((t) => t.callId === ev.callId);
      return { ...m, toolCalls: exists ? m.toolCalls.map((t) => (t.callId === ev.callId ? call : t)) : [...m.toolCalls, call] };
    }
    case "usage":
      return { ...m, usage: { inputTokens: ev.inputTokens, outputTokens: ev.outputTokens, reasoningTokens: ev.reasoningTokens, cacheReadTokens: ev.cacheReadTokens } };
    case "ended":
      switch (ev.end.outcome) {
        case "done":
          // The text the runtime stored for this turn is the reply, whatever streamed.
          return { ...m, status: "done", text: ev.end.text };
        case "cancelled":
          return { ...m, status: "cancelled" };
        case "failed":
          return { ...m, status: "error", error: ev.end.message };
      }
      return m;
    default:
      return m;
  }
}

/** Apply one backend event. Events of other conversations are the caller's to filter. */
export function reduce(state: ConversationState, event: ConversationUpdate): ConversationState {
  if (event.seq <= state.seenSeq) return state;
  return { ...apply(state, event), seenSeq: event.seq };
}

function apply(state: ConversationState, event: ConversationUpdate): ConversationState {
  const k = event.kind;
  switch (k.type) {
    case "messageStored":
      return { ...state, messages: upsert(state.messages, k.message) };
    case "turnFinished":
      return {
        ...state,
        messages: upsert(state.messages, k.message),
        permissions: state.permissions.filter((p) => p.messageId !== k.message.id),
        retrying: null,
      };
    case "runtime": {
      const ev = k.event;
      if (ev.type === "permissionAsked") {
        return { ...state, permissions: [...state.permissions, { messageId: k.messageId, permissionId: ev.permissionId, permission: ev.permission, patterns: ev.patterns }] };
      }
      if (ev.type === "retrying") {
        return { ...state, retrying: `The model provider failed (attempt ${ev.attempt}): ${ev.message}. Retrying…` };
      }
      const messages = state.messages.map((m) => (m.id === k.messageId ? applyRuntime(m, ev) : m));
      return { ...state, messages, retrying: ev.type === "textDelta" || ev.type === "toolStarted" ? null : state.retrying };
    }
  }
}

/** Is a reply of this conversation still running? */
export function isBusy(state: ConversationState): boolean {
  return state.messages.some((m) => m.role === "assistant" && (m.status === "pending" || m.status === "sending" || m.status === "streaming"));
}

/** Tokens of the latest step: what the context holds now. */
export function contextTokens(state: ConversationState): number | null {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const u = state.messages[i].usage;
    if (u) return u.inputTokens + u.outputTokens + u.cacheReadTokens;
  }
  return null;
}
