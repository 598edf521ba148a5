// The first page: totals, and the broker's total depth over time while the page is open.
import { get } from "./api.js";
import { areaChart } from "./chart.js";
import { h, replace, setStatus } from "./dom.js";

const FIGURES = ["addresses", "queues", "messages", "consumers", "connections"];

export function mount(view, params, ctx) {
  const cards = h("div", { class: "cards" });
  const chart = h("div", { class: "chart", id: "overview-chart" });
  replace(view, h("h1", {}, "Overview"), cards, h("h2", {}, "Messages on all queues"), chart);
  let seq = 0;

  async function refresh() {
    const mine = ++seq;
    try {
      const o = await get("/api/overview");
      if (mine !== seq) return;
      document.getElementById("node").textContent = `${o.node} · hermod ${o.version}`;
      replace(cards, FIGURES.map((f) => h("div", { class: "card", "data-overview": f },
        h("span", { class: "figure", "data-field": f }, o[f] == null ? "–" : String(o[f])), h("span", { class: "what" }, f))));
      replace(chart, areaChart(ctx.history.add("\u0000total", o.messages)));
    } catch (e) {
      setStatus(`overview: ${e.message}`, "error");
    }
  }

  refresh();
  const timer = setInterval(refresh, ctx.refreshMs);
  return () => { clearInterval(timer); seq++; };
}
