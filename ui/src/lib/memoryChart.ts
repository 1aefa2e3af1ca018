import type { MemoryReport } from "./bindings";

const MIB = 1024 * 1024;
/** Headroom above the highest of the bound and the samples, so neither touches the top edge. */
const HEADROOM = 1.1;
/** How wide a lone reading is drawn, in the chart's units. */
const SINGLE_READING_WIDTH = 8;

export interface ChartGeometry {
  /** One SVG path per runtime process (a recycle starts the same runtime's line again). */
  lines: { ownerId: number; d: string }[];
  /** Height of the bound line, from the top. */
  boundY: number;
  /** Where each recycle happened, from the left. */
  recycles: { x: number; label: string }[];
  /** The top of the y axis, in MiB. */
  topMib: number;
  /** The newest reading, in MiB, if any. */
  latestMib: number | null;
}

/**
 * The memory chart drawn in a `width` × `height` box: the last `windowMs` run left to right (now at
 * the right edge), 0 to a little above the highest value bottom to top.
 */
export function chartGeometry(report: MemoryReport, width: number, height: number): ChartGeometry {
  const top = Math.max(report.boundBytes, ...report.samples.map((s) => s.rssBytes)) * HEADROOM;
  const x = (agoMs: number) => width * (1 - Math.min(agoMs, report.windowMs) / report.windowMs);
  const y = (bytes: number) => height * (1 - bytes / top);
  const owners = [...new Set(report.samples.map((s) => s.ownerId))];
  const lines = owners.map((ownerId) => {
    // Oldest first, as the report orders them.
    const own = report.samples.filter((s) => s.ownerId === ownerId);
    const points = own.map((s) => `${x(s.agoMs).toFixed(1)},${y(s.rssBytes).toFixed(1)}`);
    // A single reading is a point, which a stroke does not show: draw it as a short level line.
    if (own.length === 1) points.unshift(`${Math.max(0, x(own[0].agoMs) - SINGLE_READING_WIDTH).toFixed(1)},${y(own[0].rssBytes).toFixed(1)}`);
    return { ownerId, d: points.length ? `M${points.join(" L")}` : "" };
  });
  const recycles = report.recycles.map((r) => ({
    x: x(r.agoMs),
    label: `Replaced ${minutesAgo(r.agoMs)} (${r.reason === "memory" ? `${r.rssBytes === null ? "?" : Math.round(r.rssBytes / MIB)} MiB, past the bound` : "after freeing many projects"})`,
  }));
  const latest = report.samples.at(-1);
  return { lines, boundY: y(report.boundBytes), recycles, topMib: Math.round(top / MIB), latestMib: latest ? Math.round(latest.rssBytes / MIB) : null };
}

function minutesAgo(ms: number): string {
  const min = Math.round(ms / 60_000);
  return min < 1 ? "just now" : `${min} min ago`;
}
