import { describe, expect, it } from "vitest";
import type { ConversationUpdate, Message } from "./bindings";
import { contextTokens, initialState, isBusy, openFrom, reduce } from "./conversation";

const reply = (over: Partial<Message> = {}): Message => ({
  id: "r1", conversationId: "c1", role: "assistant", text: "", status: "streaming", error: null,
  createdAt: 1, updatedAt: 1, toolCalls: [], attachments: [], usage: null, changes: null, ...over,
});
let seq = 0;
const ev = (kind: ConversationUpdate["kind"]): ConversationUpdate => ({ conversationId: "c1", seq: ++seq, kind });
const rt = (event: any) => ev({ type: "runtime", messageId: "r1", event });

describe("conversation reducer", () => {
  it("streams text and tool calls into the reply, then finishes", () => {
    let s = reduce(initialState([]), ev({ type: "messageStored", message: reply() }));
    expect(isBusy(s)).toBe(true);
    s = reduce(s, rt({ type: "toolStarted", callId: "c", tool: "read", input: { filePath: "a" } }));
    s = reduce(s, rt({ type: "toolFinished", callId: "c", tool: "read", input: { filePath: "a" }, output: "1: x", error: null }));
    s = reduce(s, rt({ type: "textDelta", text: "PRO" }));
    s = reduce(s, rt({ type: "textDelta", text: "JECT" }));
    s = reduce(s, rt({ type: "usage", inputTokens: 100, outputTokens: 5, reasoningTokens: 0, cacheReadTokens: 20 }));
    expect(s.messages[0].text).toBe("PROJECT");
    expect(s.messages[0].toolCalls).toEqual([{ callId: "c", tool: "read", input: { filePath: "a" }, output: "1: x", error: null, status: "done" }]);
    expect(contextTokens(s)).toBe(125);
    s = reduce(s, ev({ type: "turnFinished", message: reply({ text: "PROJECT", status: "done" }) }));
    expect(isBusy(s)).toBe(false);
  });

  it("a turn's end says how it ended: done with the stored text, cancelled, or failed with its sentence", () => {
    let s = reduce(initialState([reply({ text: "PROJ" })]), rt({ type: "ended", end: { outcome: "done", nativeSessionId: "ses_1", text: "PROJECT_7" } }));
    expect(s.messages[0]).toMatchObject({ status: "done", text: "PROJECT_7" });
    s = reduce(initialState([reply()]), rt({ type: "ended", end: { outcome: "cancelled" } }));
    expect(s.messages[0].status).toBe("cancelled");
    s = reduce(initialState([reply()]), rt({ type: "ended", end: { outcome: "failed", kind: "model", message: "The model run failed: boom" } }));
    expect(s.messages[0]).toMatchObject({ status: "error", error: "The model run failed: boom" });
  });

  it("permission requests and retries are surfaced until answered or superseded", () => {
    let s = reduce(initialState([reply()]), rt({ type: "permissionAsked", permissionId: "p1", permission: "external_directory", patterns: ["/etc/*"] }));
    expect(s.permissions).toHaveLength(1);
    s = reduce(s, rt({ type: "retrying", attempt: 2, message: "Connection refused" }));
    expect(s.retrying).toContain("attempt 2");
    s = reduce(s, rt({ type: "textDelta", text: "ok" }));
    expect(s.retrying).toBeNull();
    s = reduce(s, ev({ type: "turnFinished", message: reply({ status: "done" }) }));
    expect(s.permissions).toHaveLength(0);
  });

  it("a view opened while a reply streams shows its text once: the snapshot, then only later updates", () => {
    const before = [rt({ type: "textDelta", text: "PRO" }), rt({ type: "textDelta", text: "JE" })];
    // The snapshot was read after both: the stored reply has their text, and says so.
    const snapshot = { messages: [reply({ text: "PROJE" })], updateSeq: before[1].seq };
    const after = [rt({ type: "textDelta", text: "CT" }), rt({ type: "toolStarted", callId: "c", tool: "read", input: {} })];
    // Updates that arrived while it loaded, some contained in it and some not, in order.
    let s = openFrom(snapshot, [...before, after[0]]);
    expect(s.messages[0].text).toBe("PROJECT");
    s = reduce(s, after[1]);
    s = reduce(s, after[0]); // delivered again: already seen
    expect(s.messages[0].text).toBe("PROJECT");
    expect(s.messages[0].toolCalls).toHaveLength(1);
    expect(s.seenSeq).toBe(after[1].seq);
  });
});
