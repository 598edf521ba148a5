// Live connections with their links (credit, unsettled deliveries, the filter a consumer
// carries); closing one (amqp:connection:forced) after a confirmation.
import { del, get } from "./api.js";
import { confirmAction } from "./confirm.js";
import { h, replace, setStatus } from "./dom.js";

const LINK_FIELDS = ["name", "role", "address", "credit", "unsettled", "filter"];

export function mount(view, params, ctx) {
  const body = h("div", { id: "connections" });
  replace(view, h("h1", {}, "Connections"), body);
  let seq = 0;
  let shown = null; // the list last drawn, as JSON: redrawn only when it changed (a click survives)

  async function close(c) {
    if (!(await confirmAction(`Close connection ${c.id} from ${c.remote}${c.container_id ? ` (${c.container_id})` : ""}?`))) return;
    try {
      await del(`/api/connections/${encodeURIComponent(c.id)}`);
      setStatus(`closed connection ${c.id}`, "ok");
    } catch (e) {
      setStatus(`close: ${e.message}`, "error");
    }
    refresh();
  }

  const card = (c) => h("section", { class: "connection", "data-connection": c.id, "data-container": c.container_id ?? "" },
    h("h2", {}, `#${c.id} `, h("span", { "data-field": "remote" }, c.remote), " ",
      h("small", {}, `container ${c.container_id ?? "?"}${c.user ? `, user ${c.user}` : ""}`), " ",
      h("button", { type: "button", class: "danger", "data-action": "close", onclick: () => close(c) }, "close")),
    c.links.length
      ? h("table", { class: "grid links" },
        h("thead", {}, h("tr", {}, LINK_FIELDS.map((f) => h("th", {}, f)))),
        h("tbody", {}, c.links.map((l) => h("tr", { "data-link": l.name ?? "" },
          LINK_FIELDS.map((f) => h("td", { "data-field": f }, l[f] === null || l[f] === undefined ? "" : String(l[f])))))))
      : h("p", { class: "empty" }, "no links"));

  async function refresh() {
    const mine = ++seq;
    try {
      const list = await get("/api/connections");
      if (mine !== seq) return;
      const json = JSON.stringify(list);
      if (json === shown) return;
      shown = json;
      replace(body, list.length ? list.map(card) : h("p", { class: "empty" }, "no connections"));
      body.dataset.loaded = String(mine);
    } catch (e) {
      setStatus(`connections: ${e.message}`, "error");
    }
  }

  refresh();
  const timer = setInterval(refresh, ctx.refreshMs);
  return () => { clearInterval(timer); seq++; };
}
