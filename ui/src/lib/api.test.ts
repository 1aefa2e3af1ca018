import { expect, it } from "vitest";
import { BackendError, unwrap } from "./api";

it("unwrap returns data or throws the backend's code and sentence", () => {
  expect(unwrap({ status: "ok", data: 7 })).toBe(7);
  let thrown: unknown;
  try {
    unwrap({ status: "error", error: { code: "runtimeFailed", message: "The runtime is gone." } });
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(BackendError);
  expect((thrown as BackendError).code).toBe("runtimeFailed");
  expect((thrown as BackendError).message).toBe("The runtime is gone.");
});
