// The one place a page's call reaches the API (the generated client, api.js, calls it): the
// signed-in user's access token as a bearer, cookies sent too (CORS with credentials when the
// API is on another origin), and the API's own `{"error": ...}` raised as an ApiError.
import { CONFIG } from "../config.js";
import { accessToken, forgetSession } from "./auth.js";

export class ApiError extends Error {
  /** @param {number} status @param {string} message @param {any} [body] the answer's JSON
   * (a stale preview's 409 carries the fresh one) */
  constructor(status, message, body = null) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/**
 * @param {string} method
 * @param {string} path
 * @param {{ body?: unknown, query?: Record<string, unknown> }} [options]
 * @returns {Promise<any>}
 */
export async function request(method, path, { body, query } = {}) {
  const url = new URL((CONFIG.apiBase || location.origin).replace(/\/$/, "") + path);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  /** @type {Record<string, string>} */
  const headers = { Accept: "application/json" };
  const token = await accessToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "include",
    });
  } catch {
    throw new ApiError(0, "The service could not be reached: check your connection and retry.");
  }
  if (response.status === 204) return undefined;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const said = data && typeof data.error === "string" ? data.error : null;
    // The API refused the token itself (its account deleted, or the session no longer good):
    // the page is signed out, as the API already treats it.
    if (response.status === 401 && token) forgetSession();
    // Without the API's own words (a proxy's error page), people are told what to do, not a
    // status code.
    throw new ApiError(response.status, said || "Something went wrong on our side: please try again in a moment.", data);
  }
  return data;
}
