// What a grant is, in words: the API's own (GET /api/me's `summary`, decided in one place on
// the server for every kind of grant), so the dashboard, the products and the success page say
// the same; and the counts and names a page shows buyers, never a raw key.

/** @typedef {import("./api.js").MeAnswer} MeAnswer */
/** @typedef {import("./api.js").EntitlementAnswer} EntitlementAnswer */

/** What an entitlement is and what comes next, in words. @param {EntitlementAnswer} e */
export function source(e, _me) {
  return e.summary;
}

/** `1 seat`, `3 seats`. @param {number} count @param {string} one @param {string} [many] */
export function plural(count, one, many) {
  return `${count.toLocaleString("en")} ${count === 1 ? one : many || `${one}s`}`;
}

/** A feature as a buyer reads it: its display name when the catalogue has one; a repository
 * feature, the repository; else its key. @param {string} key @param {Record<string, string>} [names] */
export function featureName(key, names) {
  if (names && names[key]) return names[key];
  if (key.startsWith("github:")) return `the ${key.slice("github:".length)} repository`;
  return key;
}
