// One queue: its figures, the actions (purge, move, retry, delete, each after a confirmation)
// and its messages by a non-destructive browse with every section shown readably.
import { del, get, post, q } from "./api.js";
import { renderBody } from "./body.js";
import { confirmAction } from "./confirm.js";
import { h, kvTable, replace, setStatus } from "./dom.js";

const BROWSE_LIMIT = 50;

export function mount(view, params, ctx) {
  const name = params.get("name");
  const info = h("div", { class: "info", id: "queue-info" });
  const list = h("div", { id: "messages" });
  const filter = h("input", { type: "search", id: "browse-filter", placeholder: "selector, e.g. colour = 'red'" });
  const moveTo = h("input", { type: "text", id: "move-to", placeholder: "target address" });
  let seq = 0;

  const act = (label, question, run) => h("button", { type: "button", "data-action": label, class: label === "delete" || label === "purge" ? "danger" : "",
    onclick: async () => {
      const text = question();
      if (!text || !(await confirmAction(text))) return;
      try {
        setStatus(await run(), "ok");
      } catch (e) {
        setStatus(`${label}: ${e.message}`, "error");
      }
      if (label !== "delete") refresh();
    } }, label);

  replace(view,
    h("h1", {}, "Queue ", h("span", { class: "name", "data-field": "queue-name" }, name)),
    info,
    h("div", { class: "toolbar actions" },
      act("purge", () => `Purge every waiting message of queue ${name}?`, async () => {
        const selector = filter.value.trim();
        const r = await post(`/api/queues/${q(name)}/purge`, selector ? { filter: selector } : {});
        return `purged ${r.removed} messages from ${name}`;
      }),
      moveTo,
      act("move", () => {
        if (!moveTo.value.trim()) { setStatus("move: name the target address", "error"); return null; }
        return `Move the waiting messages of ${name}${filter.value.trim() ? " that match the selector" : ""} to address ${moveTo.value.trim()}?`;
      }, async () => {
        const body = { to: moveTo.value.trim() };
        if (filter.value.trim()) body.filter = filter.value.trim();
        const r = await post(`/api/queues/${q(name)}/move`, body);
        return `moved ${r.moved} messages to ${body.to}`;
      }),
      act("retry", () => `Send the dead letters on ${name} back to the addresses they came from?`, async () => {
        const r = await post(`/api/queues/${q(name)}/retry`);
        return `retried ${r.moved} messages`;
      }),
      act("delete", () => `Delete queue ${name} and all its messages?`, async () => {
        await del(`/api/queues/${q(name)}`);
        location.hash = "#/queues";
        return `deleted queue ${name}`;
      }),
      h("a", { href: `#/send?queue=${q(name)}`, class: "button", "data-action": "send" }, "send a message")),
    h("h2", {}, "Messages ", h("small", {}, "(browse: nothing is taken)")),
    h("div", { class: "toolbar" }, filter, h("button", { type: "button", "data-action": "browse", onclick: () => refresh() }, "browse")),
    list);

  async function refresh() {
    const mine = ++seq;
    try {
      const queue = await get(`/api/queues/${q(name)}`);
      const selector = filter.value.trim();
      const messages = await get(`/api/queues/${q(name)}/messages?limit=${BROWSE_LIMIT}${selector ? `&filter=${q(selector)}` : ""}`);
      if (mine !== seq) return;
      if (!moveTo.value) moveTo.placeholder = "target address";
      replace(info, kvTable({ address: queue.address, "routing type": queue.routing_type, durable: queue.durable,
        messages: queue.messages, consumers: queue.consumers, delivering: queue.delivering, added: queue.added,
        acked: queue.acked, filter: queue.filter, purpose: queue.purpose }, "queue"));
      info.dataset.messages = String(queue.messages);
      replace(list, messages.length ? messages.map(renderMessage) : h("p", { class: "empty", "data-field": "no-messages" }, "no messages"));
      list.dataset.loaded = String(mine);
    } catch (e) {
      setStatus(`queue ${name}: ${e.message}`, "error");
    }
  }

  refresh();
  return () => { seq++; };
}

function renderMessage(m) {
  const header = { durable: m.durable, priority: m.priority, "delivery count": m.delivery_count,
    delivering: m.delivering };
  const section = (title, content) => h("section", {}, h("h3", {}, title), content);
  return h("article", { class: "message", "data-message-id": String(m.id) },
    h("h3", { class: "id" }, `#${m.id}`, m.message_id !== null && m.message_id !== undefined ? ` · ${m.message_id}` : ""),
    h("div", { class: "sections" },
      section("header", kvTable(header, "header")),
      section("message annotations", kvTable(m.annotations, "annotations")),
      section("properties", kvTable(m.amqp_properties, "amqp-properties")),
      section("application properties", kvTable(m.properties, "properties"))),
    section(`body (${m.body_encoding})`, renderBody(m)));
}
