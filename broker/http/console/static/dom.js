// Building the page from data without ever parsing it as HTML: every value shown (queue names,
// message bodies, link filters) is hostile input, so it only ever becomes a text node or an
// attribute value set through the DOM: the console never hands a string to the HTML parser.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "value" && "value" in node) {
      node.value = value;
    } else {
      node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("td", {"data-field": "messages"}, 42). Children are nodes or text. */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, the same way. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function replace(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  return node;
}

export function setStatus(text, kind = "info") {
  const node = document.getElementById("status");
  node.dataset.kind = kind;
  node.textContent = text;
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** A key/value table of an object (properties, annotations); an empty one says so. */
export function kvTable(obj, field) {
  const entries = Object.entries(obj || {}).filter(([, v]) => v !== null && v !== undefined);
  if (!entries.length) return h("p", { class: "empty", "data-field": field }, "none");
  return h("table", { class: "kv", "data-field": field },
    entries.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v)))));
}
