// The queue table: one page of queues from the server (search, sort and paging are done there,
// so 10,000 queues cost the browser one page), refreshed in place with each queue's depth over
// time. Each row is `tr[data-queue=NAME]` with its count in `td[data-field=messages]`.
import { api, q } from "./api.js";
import { sparkline } from "./chart.js";
import { debounce, h, replace, setStatus } from "./dom.js";

const PAGE = 50;
const FIELDS = ["address", "routing_type", "durable", "messages", "consumers", "added", "acked"];

export function mount(view, params, ctx) {
  const state = { search: params.get("search") || "", sort: params.get("sort") || "name", offset: 0, seq: 0, total: 0 };
  const rows = new Map();
  const tbody = h("tbody");
  const pager = h("span", { class: "pager", "data-field": "pager" });
  const search = h("input", { type: "search", id: "queue-filter", placeholder: "filter by queue or address name",
    value: state.search, oninput: debounce(() => { state.search = search.value; state.offset = 0; refresh(); }, 150) });
  const sort = h("select", { id: "queue-sort", onchange: () => { state.sort = sort.value; state.offset = 0; refresh(); } },
    h("option", { value: "name" }, "by name"), h("option", { value: "messages" }, "deepest first"));
  sort.value = state.sort;
  const prev = h("button", { type: "button", "data-action": "prev", onclick: () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); } }, "‹ prev");
  const next = h("button", { type: "button", "data-action": "next", onclick: () => { if (state.offset + PAGE < state.total) { state.offset += PAGE; refresh(); } } }, "next ›");

  replace(view,
    h("h1", {}, "Queues"),
    h("div", { class: "toolbar" }, search, sort, prev, pager, next),
    h("table", { class: "grid", id: "queues" },
      h("thead", {}, h("tr", {}, h("th", {}, "queue"), FIELDS.map((f) => h("th", {}, f.replace("_", " "))), h("th", {}, "depth over time"))),
      tbody));

  function row(queue) {
    let tr = rows.get(queue.name);
    if (!tr) {
      tr = h("tr", { "data-queue": queue.name },
        h("td", {}, h("a", { href: `#/queue/${q(queue.name)}` }, queue.name)),
        FIELDS.map((f) => h("td", { "data-field": f })),
        h("td", { "data-field": "depth" }));
      rows.set(queue.name, tr);
    }
    for (const f of FIELDS) {
      const cell = tr.querySelector(`td[data-field="${f}"]`);
      const text = String(queue[f]);
      if (cell.textContent !== text) cell.textContent = text;
    }
    replace(tr.querySelector('td[data-field="depth"]'), sparkline(ctx.history.add(queue.name, queue.messages)));
    return tr;
  }

  async function refresh() {
    const seq = ++state.seq;
    const query = `search=${q(state.search)}&sort=${state.sort}&offset=${state.offset}&limit=${PAGE}`;
    try {
      const { data, headers } = await api("GET", `/api/queues?${query}`);
      if (seq !== state.seq) return; // a newer request (filter typed, page turned) answers instead
      state.total = Number(headers.get("X-Total-Count") || data.length);
      const names = new Set(data.map((x) => x.name));
      for (const name of rows.keys()) if (!names.has(name)) rows.delete(name);
      replace(tbody, data.map(row));
      const last = Math.min(state.offset + data.length, state.total);
      pager.textContent = state.total ? `${state.offset + 1}–${last} of ${state.total}` : "no queues";
      view.dataset.loaded = String(seq);
      ctx.history.keepOnly(names);
    } catch (e) {
      setStatus(`queues: ${e.message}`, "error");
    }
  }

  refresh();
  const timer = setInterval(refresh, ctx.refreshMs);
  return () => clearInterval(timer);
}
