// The JSON API of the contract (`/api/...`), same origin: the browser sends the HTTP Basic
// credentials it prompted for with every fetch.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(method, path, body) {
  // Every POST and DELETE says it is JSON, with or without a body: the listener refuses any
  // other (a page on another site cannot send this type without a preflight it never gets).
  const init = { method, headers: {} };
  if (method !== "GET" && method !== "HEAD") {
    init.headers["Content-Type"] = "application/json";
  }
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  // Against the origin, not the page's URL: a page opened as http://user:pw@host/ has the
  // credentials in its URL, and fetch refuses URLs with credentials (the browser has them cached).
  const response = await fetch(new URL(path, location.origin), init);
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    const message = data && typeof data === "object" && data.error ? data.error : `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return { data, headers: response.headers };
}

export const get = async (path) => (await api("GET", path)).data;
export const post = async (path, body) => (await api("POST", path, body ?? {})).data;
export const del = async (path) => (await api("DELETE", path)).data;
export const q = encodeURIComponent;
