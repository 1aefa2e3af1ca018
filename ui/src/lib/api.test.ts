import { expect, it } from "vitest";
import { BackendError, unwrap } from "./api";

it("unwrap returns data or throws the backend's sentence", () => {
  expect(unwrap({ status: "ok", data: 7 })).toBe(7);
  expect(() => unwrap({ status: "error", error: { message: "The runtime is gone." } })).toThrow(
    new BackendError("The runtime is gone."),
  );
});
