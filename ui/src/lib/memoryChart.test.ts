import { describe, expect, it } from "vitest";
import type { MemoryReport } from "./bindings";
import { chartGeometry } from "./memoryChart";

const MIB = 1024 * 1024;
const HOUR = 3_600_000;

const report: MemoryReport = {
  boundBytes: 500 * MIB,
  afterDisposals: 24,
  windowMs: HOUR,
  samples: [
    { agoMs: HOUR, ownerId: 0, rssBytes: 300 * MIB },
    { agoMs: HOUR / 2, ownerId: 0, rssBytes: 1000 * MIB },
    { agoMs: 0, ownerId: 0, rssBytes: 250 * MIB },
  ],
  recycles: [{ agoMs: HOUR / 2, ownerId: 0, reason: "memory", rssBytes: 1000 * MIB }],
};

describe("chartGeometry", () => {
  it("puts now at the right edge, an hour ago at the left and the highest reading below the top", () => {
    const g = chartGeometry(report, 600, 100);
    expect(g.topMib).toBe(1100);
    expect(g.lines).toHaveLength(1);
    expect(g.lines[0].d).toBe("M0.0,72.7 L300.0,9.1 L600.0,77.3");
    expect(g.boundY).toBeCloseTo(100 * (1 - 500 / 1100));
    expect(g.latestMib).toBe(250);
  });

  it("marks each recycle where it happened, with why", () => {
    const [mark] = chartGeometry(report, 600, 100).recycles;
    expect(mark.x).toBe(300);
    expect(mark.label).toBe("Replaced 30 min ago (1000 MiB, past the bound)");
  });

  it("draws a lone reading as a short level line ending now", () => {
    const g = chartGeometry({ ...report, samples: [{ agoMs: 0, ownerId: 3, rssBytes: 550 * MIB }], recycles: [] }, 600, 100);
    expect(g.lines).toEqual([{ ownerId: 3, d: "M592.0,9.1 L600.0,9.1" }]);
  });

  it("keeps the bound in view when every reading is below it, and draws nothing without readings", () => {
    const g = chartGeometry({ ...report, samples: [], recycles: [] }, 600, 100);
    expect(g.topMib).toBe(550);
    expect(g.lines).toEqual([]);
    expect(g.latestMib).toBeNull();
  });
});
