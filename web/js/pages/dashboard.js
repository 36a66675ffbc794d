// The dashboard: access and where it comes from, features, purchases, the GitHub username of a
// repository product, the customer portal; and what was picked before signing in, resumed.
import { getMe, postGithubAccess, postPaymentsCreateCheckout, postPaymentsCreatePortal } from "../api.js";
import { session } from "../auth.js";
import { checkoutRequest } from "../plans.js";
import { source } from "../entitlements.js";
import { busy, clearPending, errorBox, h, begin, offer, pending, setError, show, signedOut } from "../ui.js";

/** @typedef {import("../api.js").MeAnswer} MeAnswer */
/** @typedef {import("../api.js").EntitlementAnswer} EntitlementAnswer */

// The sign-in callback page: a session a link offers is kept only once its account is chosen.
const offered = await begin({ callback: true });

function resume(chosen) {
  if (!chosen) return null;
  const slot = h("div");
  if (chosen.kind === "invitation") {
    return h("section", { class: "card notice" },
      h("p", {}, "You were invited to a team."),
      h("a", { class: "button", href: `/invitations/accept?token=${encodeURIComponent(chosen.token)}` }, "Open the invitation"));
  }
  if (chosen.kind === "seats") {
    return h("section", { class: "card notice" },
      h("p", {}, `You picked ${chosen.product.name} for a team.`),
      h("a", { class: "button", href: "/team" }, "Choose the team"));
  }
  const button = h("button", {
    type: "button",
    onclick: async () => {
      setError(slot, null);
      try {
        const { url } = await postPaymentsCreateCheckout(checkoutRequest(chosen.product, 1, null));
        clearPending();
        if (url) location.assign(url);
      } catch (error) {
        setError(slot, error);
      }
    },
  }, `Continue to checkout: ${chosen.product.name}`);
  const drop = h("button", { type: "button", class: "link", onclick: () => { clearPending(); main(); } }, "Not now");
  return h("section", { class: "card notice", "aria-label": "Your chosen plan" }, h("p", {}, "You picked a plan before signing in."), button, " ", drop, slot);
}

/** @param {MeAnswer} me */
function access(me) {
  const held = me.entitlements.filter((e) => e.active);
  return h("section", { "aria-labelledby": "access-title" },
    h("h2", { id: "access-title" }, "Access"),
    h("p", { class: me.hasAccess ? "granted" : "muted", id: "access-state" },
      me.hasAccess ? "You have access." : "You have no access yet: pick a plan on the pricing page."),
    held.length
      ? h("ul", { class: "sources" }, ...held.map((e) => h("li", {}, h("strong", {}, e.product ? e.product.name : e.priceId || "A product"), ": ", source(e, me))))
      : h("p", {}, h("a", { href: "/#pricing" }, "See the plans")),
    h("h3", {}, "Features"),
    me.features.length
      ? h("ul", { class: "features", id: "features" }, ...me.features.map((f) => h("li", {}, f)))
      : h("p", { class: "muted" }, "No features yet."),
  );
}

/** @param {MeAnswer} me */
function github(me) {
  const repos = me.entitlements.filter((e) => e.active && e.product && e.product.type === "github");
  if (!repos.length) return null;
  const slot = h("div", { "aria-live": "polite" });
  const input = h("input", { id: "github-username", name: "username", required: true, maxlength: "39", autocomplete: "username" });
  const form = h("form", {
    onsubmit: async (event) => {
      event.preventDefault();
      setError(slot, null);
      await busy(form, async () => {
        try {
          const teamId = repos.find((e) => e.teamId)?.teamId || null;
          const answer = await postGithubAccess({ username: /** @type {HTMLInputElement} */ (input).value.trim(), teamId: repos.some((e) => !e.teamId) ? null : teamId });
          slot.replaceChildren(h("p", { class: "notice", role: "status" },
            `Invited to ${answer.repositories.join(", ")}: accept the invitation GitHub e-mails you.`));
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  },
  h("p", {}, h("label", { for: "github-username" }, "Your GitHub username"), input),
  h("button", { type: "submit" }, "Invite me to the repository"),
  slot);
  return h("section", { "aria-labelledby": "github-title" }, h("h2", { id: "github-title" }, "Repository"),
    h("p", {}, `Your purchase includes ${repos.map((e) => e.product?.name).join(", ")}: GitHub invites your account.`), form);
}

/** @param {MeAnswer} me */
function billing(me) {
  const slot = h("div");
  const button = h("button", {
    type: "button",
    onclick: async () => {
      setError(slot, null);
      try {
        const { url } = await postPaymentsCreatePortal({ returnUrl: `${location.origin}/dashboard` });
        if (url) location.assign(url);
      } catch (error) {
        setError(slot, error);
      }
    },
  }, "Manage billing");
  return h("section", { "aria-labelledby": "billing-title" }, h("h2", { id: "billing-title" }, "Billing"),
    h("p", {}, h("a", { href: "/dashboard/products" }, "Your purchases and downloads")),
    me.portalAvailable ? h("p", {}, button) : h("p", { class: "muted" }, "No billing to manage yet."),
    slot);
}

/** @param {MeAnswer} me */
function teams(me) {
  return h("section", { "aria-labelledby": "teams-title" }, h("h2", { id: "teams-title" }, "Teams"),
    me.teams.length
      ? h("ul", {}, ...me.teams.map((t) => h("li", {}, h("a", { href: `/team?id=${encodeURIComponent(t.id)}` }, t.name),
          ` (${t.role}${t.hasSeat ? ", with a seat" : ", no seat"}${t.hasAccess ? ", access" : ""})`)))
      : h("p", { class: "muted" }, "You are in no team."),
    h("p", {}, h("a", { href: "/team" }, "Create a team")));
}

async function main() {
  if (!session()) {
    show(signedOut("your dashboard"));
    return;
  }
  let me;
  try {
    me = await getMe();
  } catch (error) {
    show(errorBox(error), h("p", {}, h("a", { href: "/signin" }, "Sign in again")));
    return;
  }
  show(
    resume(pending()),
    h("p", {}, `Signed in as ${me.email || me.id}.`),
    access(me),
    github(me),
    billing(me),
    teams(me),
  );
}

if (offered) show(offer(offered, main));
else main();
