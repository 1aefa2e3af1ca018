// Thin helper over the generated bindings: commands resolve to `{status:"ok",data}` or
// `{status:"error",error}`; the UI wants a value, or an Error carrying the backend's stable code
// (to branch on) and its sentence (to show).
import type { CommandError, ErrorCode } from "./bindings";

export type CommandResult<T> = { status: "ok"; data: T } | { status: "error"; error: CommandError };

export class BackendError extends Error {
  constructor(readonly code: ErrorCode, message: string) {
    super(message);
  }
}

export function unwrap<T>(result: CommandResult<T>): T {
  if (result.status === "ok") return result.data;
  throw new BackendError(result.error.code, result.error.message);
}
