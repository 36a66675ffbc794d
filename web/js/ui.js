// What every page shares: building elements (text always as text, never as HTML), the site's
// header, the loading, error and signed-out states, and what a person chose before signing in.
import { CONFIG } from "../config.js";
import { SESSION_CHANGED, adoptOffered, claims, hasFragmentSession, offeredSession, session, signOut } from "./auth.js";

/**
 * An element with attributes (on* as listeners) and children (strings become text).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

/** The page's content area, emptied and filled with `nodes`. */
export function show(...nodes) {
  const page = /** @type {HTMLElement} */ (document.getElementById("page"));
  page.replaceChildren(...nodes.filter(Boolean));
  page.setAttribute("aria-busy", "false");
  return page;
}

export function loading(text = "Loading…") {
  const page = /** @type {HTMLElement} */ (document.getElementById("page"));
  page.setAttribute("aria-busy", "true");
  page.replaceChildren(h("p", { class: "muted" }, text));
}

/** An error as the API (or Auth) stated it, announced to screen readers. */
export function errorBox(error) {
  const text = error && error.message ? error.message : String(error);
  return h("p", { class: "error", role: "alert" }, text);
}

/** A form's error slot: cleared, or set to the error. */
export function setError(slot, error) {
  slot.replaceChildren(...(error ? [errorBox(error)] : []));
}

export function signedOut(what = "this page") {
  return h(
    "section",
    { class: "card" },
    h("p", {}, `Sign in to see ${what}.`),
    h("a", { class: "button", href: "/signin" }, "Sign in"),
  );
}

/** Disable a form's controls while `work` runs, so a second press sends nothing twice. */
export async function busy(form, work) {
  const controls = form.querySelectorAll("button, input, select");
  controls.forEach((c) => (c.disabled = true));
  try {
    return await work();
  } finally {
    controls.forEach((c) => (c.disabled = false));
  }
}

/** An amount in its ISO currency (the product's, as Stripe gives it; else the site's). */
export function money(amount, currency) {
  return new Intl.NumberFormat("en", {
    style: "currency",
    currency: currency || CONFIG.currency || "usd",
  }).format(amount);
}

export function day(iso) {
  return iso ? new Date(iso).toLocaleDateString("en", { dateStyle: "medium" }) : "";
}

// What a person picked before signing in (a plan, an invitation), carried across the e-mail
// link's round trip, which lands on /dashboard.
const PENDING = "pending";

export function setPending(value) {
  localStorage.setItem(PENDING, JSON.stringify(value));
}

export function pending() {
  try {
    return JSON.parse(localStorage.getItem(PENDING) || "null");
  } catch {
    return null;
  }
}

export function clearPending() {
  localStorage.removeItem(PENDING);
}

/** The product's name as the settings give it (BRAND_NAME, written into config.js). */
export function brandName() {
  return CONFIG.brand || "Your SaaS";
}

/** A page's title, then the brand (what a tab, a bookmark and the history show). */
export function titled(title) {
  const suffix = ` · ${brandName()}`;
  document.title = title.endsWith(suffix) ? title : `${title}${suffix}`;
}

export function header() {
  const current = session();
  const email = current && current.user ? current.user.email : null;
  const links = [
    ["/#pricing", "Pricing"],
    ["/dashboard", "Dashboard"],
    ["/team", "Teams"],
  ];
  const nav = h(
    "nav",
    { "aria-label": "Main" },
    h(
      "ul",
      {},
      ...links.map(([href, label]) =>
        h("li", {}, h("a", { href, "aria-current": location.pathname === href ? "page" : null }, label)),
      ),
    ),
  );
  const account = current
    ? h(
        "div",
        { class: "account" },
        email ? h("span", {}, `Signed in as ${email}`) : null,
        h(
          "button",
          {
            type: "button",
            class: "link",
            onclick: async () => {
              await signOut();
              location.assign("/");
            },
          },
          "Sign out",
        ),
      )
    : h("div", { class: "account" }, h("a", { href: "/signin" }, "Sign in"));
  const name = brandName();
  const brand = h("a", { class: "brand", href: "/" }, name);
  document.getElementById("site-header")?.replaceChildren(brand, nav, account);
  titled(document.title);
}

/** Every page's start, then the header. Only the sign-in callback page (the dashboard:
 * AUTH_CALLBACK_URL) looks at a session arriving in the address's fragment (a guest's sign-in
 * link, made by Supabase's admin API), and keeps it only when the person chooses to continue
 * as the account it names, or it is the account signed in already; any other page sends such
 * an address on to the dashboard unread (a link landing on Supabase's Site URL, the home
 * page). On the callback page: the offered session, when one waits for the person's choice. */
export async function begin({ callback = false } = {}) {
  if (!callback && hasFragmentSession()) {
    location.replace("/dashboard" + location.hash);
    await new Promise(() => {}); // this page is being left
  }
  let offered = null;
  if (callback) {
    try {
      offered = await offeredSession();
    } catch (error) {
      document.getElementById("page")?.before(errorBox(error));
    }
    if (offered && offered.user && offered.user.id === claims()?.sub) {
      adoptOffered(offered); // fresh tokens of the account signed in already
      offered = null;
    }
  }
  header();
  // Signed out (by the button, or because the API refused the token) or raised to aal2: the
  // header says so at once.
  window.addEventListener(SESSION_CHANGED, header);
  return offered;
}

/** What a session offered by a link asks before it is kept: whose it is, and a choice. */
export function offer(offered, done) {
  const who = offered.user?.email || offered.user?.id || "another account";
  return h(
    "section",
    { class: "card notice", "aria-label": "Sign-in link" },
    h("p", {}, `This link signs you in as ${who}.`),
    h("button", { type: "button", onclick: () => { adoptOffered(offered); header(); done(); } }, `Continue as ${who}`),
    " ",
    h("button", { type: "button", class: "link", onclick: () => done() }, "Not me"),
  );
}
