// Supabase Auth (GoTrue) over its documented HTTP endpoints, and the session kept in the
// cookie @supabase/ssr writes (`sb-<project>-auth-token`, "base64-" + base64url(JSON), split
// into `.0`, `.1`, ... past 3180 characters), the format the API's sign-in callback sets and
// reads. One format, whichever way the session came: the e-mail link's callback or a password.
import { CONFIG } from "../config.js";

const CHUNK_SIZE = 3180;
const MAX_AGE = 400 * 24 * 60 * 60; // @supabase/ssr's cookie lifetime
const REFRESH_MARGIN_SECONDS = 60;

export class AuthError extends Error {}

/** The cookie name supabase-js derives from the project URL. */
export function cookieName() {
  const host = new URL(CONFIG.supabaseUrl || "http://local").hostname;
  return `sb-${host.split(".")[0]}-auth-token`;
}

function cookies() {
  /** @type {Record<string, string>} */
  const found = {};
  for (const part of document.cookie.split(";")) {
    const at = part.indexOf("=");
    if (at > 0) found[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return found;
}

function setCookie(name, value, maxAge) {
  const parts = [`${name}=${value}`, "path=/", `max-age=${maxAge}`, "samesite=lax"];
  // COOKIE_DOMAIN: a frontend on a sibling host of the API shares the parent domain's cookies.
  if (CONFIG.cookieDomain) parts.push(`domain=${CONFIG.cookieDomain}`);
  if (location.protocol === "https:") parts.push("secure");
  document.cookie = parts.join("; ");
}

function encode(value) {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return "base64-" + btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decode(value) {
  if (!value.startsWith("base64-")) return JSON.parse(decodeURIComponent(value));
  const body = value.slice(7).replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(body + "=".repeat((4 - (body.length % 4)) % 4));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0))));
}

/** The stored session ({access_token, refresh_token, expires_at, user}), or null. */
export function session() {
  const name = cookieName();
  const all = cookies();
  let value = all[name];
  if (value === undefined) {
    const chunks = Object.keys(all)
      .filter((k) => k.startsWith(name + ".") && /^\d{1,3}$/.test(k.slice(name.length + 1)))
      .sort((a, b) => Number(a.slice(name.length + 1)) - Number(b.slice(name.length + 1)));
    value = chunks.map((k) => all[k]).join("") || undefined;
  }
  if (!value) return null;
  try {
    const found = decode(value);
    return found && typeof found.access_token === "string" ? found : null;
  } catch {
    return null;
  }
}

function clearSession() {
  const name = cookieName();
  for (const key of Object.keys(cookies())) {
    if (key === name || key.startsWith(name + ".")) setCookie(key, "", 0);
  }
}

// Told to the page (its header) whenever the session changes: signed out, or raised to aal2.
export const SESSION_CHANGED = "session-changed";

function changed() {
  window.dispatchEvent(new Event(SESSION_CHANGED));
}

/** The session forgotten here, without asking Auth: the API refused its token for good (an
 * account deleted), so there is nothing left to end there. */
export function forgetSession() {
  clearSession();
  changed();
}

export function storeSession(data) {
  clearSession();
  const value = encode(data);
  const name = cookieName();
  if (value.length <= CHUNK_SIZE) {
    setCookie(name, value, MAX_AGE);
    return;
  }
  for (let i = 0; i * CHUNK_SIZE < value.length; i++) {
    setCookie(`${name}.${i}`, value.slice(i * CHUNK_SIZE, (i + 1) * CHUNK_SIZE), MAX_AGE);
  }
}

/** The claims of the stored access token (what the API and Postgres read), or null. */
export function claims() {
  const found = session();
  if (!found) return null;
  try {
    const body = found.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(body + "=".repeat((4 - (body.length % 4)) % 4)));
  } catch {
    return null;
  }
}

async function gotrue(path, { method = "POST", body, token, query } = {}) {
  if (!CONFIG.supabaseUrl || !CONFIG.supabaseKey) {
    throw new AuthError("Sign-in is not configured: config.js names no Supabase project.");
  }
  const url = new URL(CONFIG.supabaseUrl.replace(/\/$/, "") + "/auth/v1" + path);
  for (const [k, v] of Object.entries(query || {})) url.searchParams.set(k, v);
  const headers = { apikey: CONFIG.supabaseKey, "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(url, { method, headers, body: body && JSON.stringify(body) });
  } catch {
    throw new AuthError("Supabase Auth could not be reached: try again in a moment.");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    // GoTrue states errors as {msg} (today) or {error_description} / {message} (older).
    const text = data.msg || data.error_description || data.message || data.error;
    throw new AuthError(text || `Supabase Auth answered ${response.status}`);
  }
  return data;
}

function base64url(bytes) {
  let binary = "";
  for (const b of new Uint8Array(bytes)) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** PKCE as supabase-js does it: the verifier in `<cookie>-code-verifier` (read by the API's
 * callback, which exchanges the code the e-mail link brings), its S256 challenge to Auth. */
async function pkce() {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(48)));
  setCookie(`${cookieName()}-code-verifier`, encode(verifier), 60 * 60);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return { code_challenge: base64url(digest), code_challenge_method: "s256" };
}

/** Where the e-mail link lands: the API's callback, which sets the session and sends the
 * browser on to SITE_URL + AUTH_CALLBACK_URL (/dashboard). */
function callbackUrl() {
  return (CONFIG.apiBase || location.origin).replace(/\/$/, "") + "/api/auth/callback";
}

export async function sendMagicLink(email) {
  const challenge = await pkce();
  await gotrue("/otp", {
    body: { email, create_user: true, ...challenge },
    query: { redirect_to: callbackUrl() },
  });
}

export async function signInWithPassword(email, password) {
  const data = await gotrue("/token", {
    body: { email, password },
    query: { grant_type: "password" },
  });
  storeSession(data);
  return data;
}

/** A new account; with e-mail confirmation on, no session until the link in the mail. */
export async function signUp(email, password) {
  const challenge = await pkce();
  const data = await gotrue("/signup", {
    body: { email, password, ...challenge },
    query: { redirect_to: callbackUrl() },
  });
  if (data.access_token) storeSession(data);
  return Boolean(data.access_token);
}

/** A new access token from the refresh token: its claims read the database again (the custom
 * access token hook), so a purchase's access shows in the token at once. */
export function refresh() {
  // One refresh at a time: a refresh token is single use, and presenting it twice ends the
  // whole session (Supabase's reuse detection), so calls made meanwhile share this one.
  refreshing ||= (async () => {
    const found = session();
    if (!found || !found.refresh_token) throw new AuthError("Not signed in");
    const data = await gotrue("/token", {
      body: { refresh_token: found.refresh_token },
      query: { grant_type: "refresh_token" },
    });
    storeSession(data);
    return data;
  })().finally(() => {
    refreshing = null;
  });
  return refreshing;
}

/** @type {Promise<any> | null} */
let refreshing = null;

/** The access token to send, refreshed first when it is about to expire; null signed out. */
export async function accessToken() {
  const found = session();
  if (!found) return null;
  const expiresAt = Number(found.expires_at || 0);
  if (expiresAt && found.refresh_token && expiresAt - Date.now() / 1000 < REFRESH_MARGIN_SECONDS) {
    try {
      return (await refresh()).access_token;
    } catch {
      return found.access_token; // the API says what is wrong with it
    }
  }
  return found.access_token;
}

export async function signOut() {
  const found = session();
  clearSession();
  changed();
  if (found && CONFIG.supabaseUrl) {
    await gotrue("/logout", { token: found.access_token }).catch(() => undefined);
  }
}

/** Whether the address's fragment carries a session or a sign-in's failure. */
export function hasFragmentSession() {
  return /(^#|&)(access_token|error|error_description)=/.test(location.hash);
}

// A second factor, through Supabase Auth's MFA API as supabase-js's `auth.mfa` calls it: a TOTP
// factor enrolled (its secret, URI and QR code), challenged and verified with a code from an
// authenticator app, which raises the session to `aal2` (the support API asks for it).

async function signedInToken() {
  const token = await accessToken();
  if (!token) throw new AuthError("Not signed in");
  return token;
}

/** The user's factors ({id, friendly_name, factor_type, status}), as Auth lists them. */
export async function listFactors() {
  const user = await gotrue("/user", { method: "GET", token: await signedInToken() });
  return Array.isArray(user.factors) ? user.factors : [];
}

/** The session's assurance level (`aal1`, `aal2`), from its access token. */
export function assuranceLevel() {
  const found = claims();
  return found && typeof found.aal === "string" ? found.aal : null;
}

/** A new TOTP factor, unverified until a code verifies it: {id, totp: {qr_code, secret, uri}}. */
export async function enrollTotp(friendlyName) {
  return gotrue("/factors", {
    body: { factor_type: "totp", friendly_name: friendlyName },
    token: await signedInToken(),
  });
}

/** A code from the app checked against a new challenge of the factor: the session Auth answers
 * (now `aal2`) is kept. */
export async function verifyTotp(factorId, code) {
  const token = await signedInToken();
  const id = encodeURIComponent(factorId);
  const challenge = await gotrue(`/factors/${id}/challenge`, { body: {}, token });
  const data = await gotrue(`/factors/${id}/verify`, {
    body: { challenge_id: challenge.id, code },
    token,
  });
  storeSession(data);
  changed();
  return data;
}

/** The factor removed (a verified one only from an `aal2` session); the session refreshed, so
 * that its token says what is left. */
export async function unenroll(factorId) {
  await gotrue(`/factors/${encodeURIComponent(factorId)}`, {
    method: "DELETE",
    token: await signedInToken(),
  });
  await refresh();
  changed();
}

/** A sign-in link made by Supabase's admin API (a guest buyer's) is implicit-flow: it lands
 * with the session in the address's fragment (`#access_token=...&refresh_token=...`), or the
 * reason it failed (`#error_description=...`). Such a link proves nothing about who opens it:
 * anyone can hand a victim a link carrying the attacker's own session (login CSRF), and no
 * sign-in this browser starts ever lands so (a password answers here, an e-mail link goes
 * through the API's PKCE callback). So the fragment is removed from the address (and so from
 * the history) and what it offers is returned, never kept: `adoptOffered` keeps it, once the
 * person chose to continue as the account it names. Null when the fragment offers nothing. */
export async function offeredSession() {
  if (!hasFragmentSession()) return null;
  const fragment = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, "", location.pathname + location.search);
  const failed = fragment.get("error_description") || fragment.get("error");
  if (failed) throw new AuthError(failed);
  const accessToken = fragment.get("access_token");
  const refreshToken = fragment.get("refresh_token");
  if (!accessToken || !refreshToken) return null;
  const user = await gotrue("/user", { method: "GET", token: accessToken });
  return {
    access_token: accessToken,
    refresh_token: refreshToken,
    token_type: fragment.get("token_type") || "bearer",
    expires_in: Number(fragment.get("expires_in") || 3600),
    expires_at: Number(fragment.get("expires_at") || 0) || Math.floor(Date.now() / 1000) + 3600,
    user,
  };
}

/** An offered session kept: the person chose it (or it is the account already signed in). */
export function adoptOffered(offered) {
  storeSession(offered);
}
