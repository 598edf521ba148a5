// A message body, readable by type: text as text, AMQP maps and lists (amqp-value,
// amqp-sequence) as indented JSON, binary as a hex and ASCII dump.
import { h } from "./dom.js";

// C0 controls other than tab, line feed, carriage return; and DEL
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const HEX_LIMIT = 64 * 1024; // bytes dumped; the rest is counted, not shown

export function renderBody(message) {
  const encoding = message.body_encoding;
  let content;
  if (encoding === "none" || message.body === null || message.body === undefined) {
    content = h("p", { class: "empty" }, "no body");
  } else if (encoding === "text" && !CONTROL.test(message.body)) {
    content = h("pre", { class: "text" }, message.body);
  } else if (encoding === "text") {
    // UTF-8 that is not text (NUL and other control characters): bytes, shown as bytes
    content = hexDump(new TextEncoder().encode(message.body));
  } else if (encoding === "base64") {
    content = hexDump(fromBase64(message.body));
  } else {
    content = h("pre", { class: "json" }, JSON.stringify(message.body, null, 2));
  }
  return h("div", { class: "body", "data-field": "body", "data-encoding": encoding }, content);
}

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** Sixteen bytes a line: offset, hex, and the printable ASCII (a dot for the rest). */
export function hexDump(bytes) {
  const lines = [];
  const shown = Math.min(bytes.length, HEX_LIMIT);
  for (let off = 0; off < shown; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, shown));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > shown) lines.push(`… ${bytes.length - shown} more bytes`);
  return h("pre", { class: "hex", "data-bytes": bytes.length }, lines.join("\n"));
}
