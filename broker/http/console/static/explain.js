// `explain` drawn as the route: the address a message is sent to, the diverts, composites and
// virtual topics it passes (each forward leading on to its target address), and the queues,
// the ones that would get the message highlighted. Boxes and arrows in SVG.
import { get, q } from "./api.js";
import { h, replace, s, setStatus } from "./dom.js";
import { parseProperties } from "./send.js";

const BOX_W = 210, BOX_H = 54, GAP_X = 56, GAP_Y = 14, PAD = 10;

export function mount(view, params) {
  const address = h("input", { type: "text", id: "explain-address", required: true, value: params.get("address") || "" });
  const routing = h("select", { id: "explain-routing-type" },
    h("option", { value: "" }, "address default"), h("option", { value: "anycast" }, "anycast"),
    h("option", { value: "multicast" }, "multicast"));
  const properties = h("textarea", { id: "explain-properties", rows: 3, placeholder: "one key=value a line" });
  const picture = h("div", { id: "explain-route" });
  const form = h("form", { class: "form", id: "explain-form", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const props = parseProperties(properties.value);
      let path = `/api/explain?address=${q(address.value.trim())}&properties=${q(JSON.stringify(props))}`;
      if (routing.value) path += `&routing_type=${routing.value}`;
      replace(picture, draw(await get(path)));
    } catch (e) {
      replace(picture);
      setStatus(`explain: ${e.message}`, "error");
    }
  } },
  h("label", {}, "address", address), h("label", {}, "routing type", routing),
  h("label", {}, "message application properties", properties),
  h("button", { type: "submit", "data-action": "explain" }, "explain"));
  replace(view, h("h1", {}, "Explain a route"), form, picture);
}

/** The walk's flat step list back into a tree: an address owns the steps after it up to the
 *  next address; a forward owns the addresses it names in `to`, which the walk visits next. */
export function routeTree(steps) {
  let i = 0;
  function address() {
    const node = { step: steps[i++], children: [] };
    while (i < steps.length && steps[i].kind !== "address") {
      const child = { step: steps[i++], children: [] };
      node.children.push(child);
      for (const target of child.step.to || []) {
        if (i < steps.length && steps[i].kind === "address" && steps[i].name === target) child.children.push(address());
      }
    }
    return node;
  }
  return steps.length ? address() : null;
}

function label(step) {
  const kind = step.kind === "address" ? `address${step.routing_type ? ` (${step.routing_type})` : ""}`
    : step.exclusive ? `${step.kind}, exclusive` : step.kind;
  const detail = step.filter ? `filter: ${step.filter}` : step.detail || (step.to ? `to ${step.to.join(", ") || "nowhere"}` : "");
  return { kind, name: step.name, detail };
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

export function draw(result) {
  const root = routeTree(result.steps);
  if (!root) return h("p", { class: "empty" }, "no route");
  const chosen = new Set(result.queues);
  const boxes = [];
  const arrows = [];
  let rows = 0;
  (function place(node, depth) {
    const row = rows;
    node.children.forEach((child) => place(child, depth + 1));
    if (!node.children.length) rows++;
    node.x = PAD + depth * (BOX_W + GAP_X);
    node.y = PAD + row * (BOX_H + GAP_Y);
    boxes.push(node);
    for (const child of node.children) arrows.push([node, child]);
  })(root, 0);
  const width = PAD * 2 + (Math.max(...boxes.map((b) => b.x)) + BOX_W);
  const height = PAD * 2 + rows * (BOX_H + GAP_Y);
  const svg = s("svg", { class: "route", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `route of a message sent to ${result.address}` },
  s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
    s("path", { d: "M 0 0 L 10 5 L 0 10 z" }))),
  arrows.map(([a, b]) => s("path", { class: `arrow${b.step.passed === false ? " blocked" : ""}`, "marker-end": "url(#arrow)",
    d: `M ${a.x + BOX_W} ${a.y + BOX_H / 2} C ${a.x + BOX_W + GAP_X / 2} ${a.y + BOX_H / 2}, ${b.x - GAP_X / 2} ${b.y + BOX_H / 2}, ${b.x} ${b.y + BOX_H / 2}` })),
  boxes.map((b) => {
    const { kind, name, detail } = label(b.step);
    const gets = b.step.kind === "queue" && chosen.has(b.step.name) && b.step.passed !== false;
    return s("g", { class: `step ${b.step.kind}${b.step.passed === false ? " blocked" : ""}${gets ? " chosen" : ""}`,
      "data-kind": b.step.kind, "data-name": b.step.name, "data-passed": String(b.step.passed !== false), transform: `translate(${b.x},${b.y})` },
    s("title", {}, `${kind} ${name}${detail ? `\n${detail}` : ""}`),
    s("rect", { width: BOX_W, height: BOX_H, rx: 6 }),
    s("text", { x: 8, y: 15, class: "kind" }, kind),
    s("text", { x: 8, y: 31, class: "label" }, clip(name, 26)),
    detail ? s("text", { x: 8, y: 47, class: "detail" }, clip(detail, 34)) : null);
  }));
  const summary = result.queues.length ? `goes to ${result.queues.join(", ")}` : "goes to no queue";
  return h("figure", {}, svg, h("figcaption", { "data-field": "route-queues" },
    `${result.created ? "the address would be created; " : ""}${summary}`));
}
