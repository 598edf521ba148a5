// Addresses with their routing types and queues; read once when the page opens (and on
// "refresh"), filtered and paged here.
import { get, q } from "./api.js";
import { debounce, h, replace, setStatus } from "./dom.js";

const PAGE = 50;

export function mount(view) {
  let all = [];
  let offset = 0;
  const tbody = h("tbody");
  const pager = h("span", { class: "pager" });
  const search = h("input", { type: "search", id: "address-filter", placeholder: "filter by name",
    oninput: debounce(() => { offset = 0; show(); }, 150) });
  const prev = h("button", { type: "button", onclick: () => { offset = Math.max(0, offset - PAGE); show(); } }, "‹ prev");
  const next = h("button", { type: "button", onclick: () => { offset += PAGE; show(); } }, "next ›");
  replace(view, h("h1", {}, "Addresses"),
    h("div", { class: "toolbar" }, search, prev, pager, next, h("button", { type: "button", onclick: () => load() }, "refresh")),
    h("table", { class: "grid", id: "addresses" }, h("thead", {}, h("tr", {},
      ["address", "routing types", "queues", "auto-created", ""].map((t) => h("th", {}, t)))), tbody));

  function show() {
    const needle = search.value.toLowerCase();
    const matched = needle ? all.filter((a) => a.name.toLowerCase().includes(needle)) : all;
    offset = Math.min(offset, Math.max(0, matched.length - 1 - ((matched.length - 1) % PAGE)));
    const page = matched.slice(offset, offset + PAGE);
    replace(tbody, page.map((a) => h("tr", { "data-address": a.name },
      h("td", {}, a.name), h("td", {}, a.routing_types.join(", ")),
      h("td", {}, a.queues.map((name, i) => [i ? ", " : "", h("a", { href: `#/queue/${q(name)}` }, name)])),
      h("td", {}, a.auto_created ? "yes" : "no"),
      h("td", {}, h("a", { href: `#/send?address=${q(a.name)}` }, "send"), " ",
        h("a", { href: `#/explain?address=${q(a.name)}` }, "explain")))));
    pager.textContent = matched.length ? `${offset + 1}–${offset + page.length} of ${matched.length}` : "no addresses";
  }

  async function load() {
    try {
      all = await get("/api/addresses");
      show();
    } catch (e) {
      setStatus(`addresses: ${e.message}`, "error");
    }
  }
  load();
}
