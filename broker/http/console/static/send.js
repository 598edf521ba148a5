// Sending a test message to an address: a text body, application properties, durable or not.
import { get, post, q } from "./api.js";
import { h, replace, setStatus } from "./dom.js";

export function mount(view, params) {
  const address = h("input", { type: "text", id: "send-address", required: true });
  const routing = h("select", { id: "send-routing-type" },
    h("option", { value: "" }, "address default"), h("option", { value: "anycast" }, "anycast"),
    h("option", { value: "multicast" }, "multicast"));
  const durable = h("input", { type: "checkbox", id: "send-durable" });
  const properties = h("textarea", { id: "send-properties", rows: 3, placeholder: "one key=value a line (numbers and true/false are typed)" });
  const body = h("textarea", { id: "send-body", rows: 6 });
  const result = h("p", { id: "send-result" });
  const queue = params.get("queue");
  if (params.get("address")) address.value = params.get("address");
  if (queue) get(`/api/queues/${q(queue)}`).then((x) => { if (!address.value) address.value = x.address; }).catch(() => {});

  const form = h("form", { class: "form", id: "send-form", onsubmit: async (event) => {
    event.preventDefault();
    let props;
    try {
      props = parseProperties(properties.value);
    } catch (e) {
      setStatus(e.message, "error");
      return;
    }
    const request = { body: body.value, properties: props, durable: durable.checked };
    if (routing.value) request.routing_type = routing.value;
    try {
      const r = await post(`/api/addresses/${q(address.value.trim())}/messages`, request);
      result.textContent = r.routed_to.length ? `routed to ${r.routed_to.join(", ")}` : "routed to no queue";
      setStatus(`sent to ${address.value.trim()}`, "ok");
    } catch (e) {
      result.textContent = "";
      setStatus(`send: ${e.message}`, "error");
    }
  } },
  h("label", {}, "address", address), h("label", {}, "routing type", routing),
  h("label", { class: "inline" }, durable, "durable"),
  h("label", {}, "application properties", properties), h("label", {}, "body (text)", body),
  h("button", { type: "submit", "data-action": "send" }, "send"));
  replace(view, h("h1", {}, "Send a test message"), form, result);
}

/** `key=value` lines to an object: integers, decimals, true and false are typed, the rest text. */
export function parseProperties(text) {
  const out = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`property line "${line}": expected key=value`);
    const key = line.slice(0, at).trim();
    const value = line.slice(at + 1).trim();
    if (/^-?\d+$/.test(value) && Number.isSafeInteger(Number(value))) out[key] = Number(value);
    else if (/^-?\d+\.\d+$/.test(value)) out[key] = Number(value);
    else if (value === "true" || value === "false") out[key] = value === "true";
    else out[key] = value;
  }
  return out;
}
