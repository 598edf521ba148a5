// The console's router: `#/view?params` picks a view module; each view returns a function that
// stops its refresh timer when another view replaces it. `?refresh=MS` on the page URL sets the
// refresh period (default 2 s).
import { get } from "./api.js";
import { History } from "./chart.js";
import { setStatus } from "./dom.js";
import * as addresses from "./addresses.js";
import * as connections from "./connections.js";
import * as explain from "./explain.js";
import * as overview from "./overview.js";
import * as queue from "./queue.js";
import * as queues from "./queues.js";
import * as send from "./send.js";

const VIEWS = { overview, queues, queue, addresses, connections, send, explain };
const refreshMs = Math.max(200, Number(new URLSearchParams(location.search).get("refresh")) || 2000);
const ctx = { refreshMs, history: new History() };
let dispose = null;

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = [hash.split("?")[0], hash.includes("?") ? hash.slice(hash.indexOf("?") + 1) : ""];
  const [first, ...rest] = path.split("/");
  const params = new URLSearchParams(query);
  let name = first || "overview";
  if (name === "queue") params.set("name", decodeURIComponent(rest.join("/")));
  if (!VIEWS[name]) name = "overview";
  if (dispose) dispose();
  dispose = null;
  setStatus("");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.dataset.nav === name);
  const view = document.getElementById("view");
  view.dataset.view = name;
  dispose = VIEWS[name].mount(view, params, ctx) || null;
}

window.addEventListener("hashchange", route);
route();
get("/api/overview").then((o) => { document.getElementById("node").textContent = `${o.node} · hermod ${o.version}`; },
  (e) => setStatus(`overview: ${e.message}`, "error"));
