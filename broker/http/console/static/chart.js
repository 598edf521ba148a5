// Depth over time: the console samples each visible queue's depth on every refresh and keeps
// the last HISTORY samples (in the page only: the broker keeps no history).
import { s } from "./dom.js";

export const HISTORY = 60;

export class History {
  constructor() {
    this.series = new Map();
  }

  add(name, value) {
    let values = this.series.get(name);
    if (!values) this.series.set(name, (values = []));
    values.push(value);
    if (values.length > HISTORY) values.shift();
    return values;
  }

  get(name) {
    return this.series.get(name) || [];
  }

  /** Forget queues not seen for a while so that paging through 10,000 stays bounded. */
  keepOnly(names) {
    if (this.series.size <= 2000) return;
    for (const name of this.series.keys()) if (!names.has(name)) this.series.delete(name);
  }
}

/** A small SVG line of `values`, scaled to its own maximum; the last value labels it. */
export function sparkline(values, width = 120, height = 24) {
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? width / (HISTORY - 1) : 0;
  const offset = width - step * (values.length - 1);
  const points = values.map((v, i) => `${(offset + i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`);
  return s("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, "data-points": values.length,
    role: "img", "aria-label": `depth over time, max ${max}` },
  s("title", {}, `max ${max}, now ${values.length ? values[values.length - 1] : 0}`),
  values.length > 1 ? s("polyline", { points: points.join(" ") }) : s("circle", { cx: width - 2, cy: height - 2, r: 2 }));
}

/** A bigger chart (the overview's total depth) with an axis label. */
export function areaChart(values, width = 600, height = 120) {
  const max = Math.max(1, ...values);
  const step = width / (HISTORY - 1);
  const offset = width - step * (values.length - 1);
  const pts = values.map((v, i) => [offset + i * step, height - (v / max) * (height - 10)]);
  const line = pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  const area = pts.length > 1 ? `${pts[0][0].toFixed(1)},${height} ${line} ${pts[pts.length - 1][0].toFixed(1)},${height}` : "";
  return s("svg", { class: "area", width, height: height + 4, viewBox: `0 0 ${width} ${height + 4}`, role: "img" },
    s("text", { x: 4, y: 12 }, `max ${max}`),
    area ? s("polygon", { points: area }) : null,
    pts.length > 1 ? s("polyline", { points: line }) : null);
}
