// The dashboard: access and where it comes from, features, credits, purchases, the GitHub
// username of a repository product, the customer portal; the account's settings (its data
// downloaded, a second factor, its deletion); and what was picked before signing in, resumed.
import { deleteMe, getMe, getMeExport, getProductsPublic, postGithubAccess, postPaymentsCreateCheckout, postPaymentsCreatePortal } from "../api.js";
import { assuranceLevel, enrollTotp, listFactors, session, signOut, unenroll, verifyTotp } from "../auth.js";
import { checkoutRequest } from "../plans.js";
import { planControls } from "../plan_change.js";
import { source } from "../entitlements.js";
import { busy, clearPending, day, errorBox, h, begin, offer, pending, setError, show, signedOut } from "../ui.js";

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

/** @param {MeAnswer} me @param {import("../api.js").PublicProduct[]} products */
function access(me, products) {
  const held = me.entitlements.filter((e) => e.active);
  return h("section", { "aria-labelledby": "access-title" },
    h("h2", { id: "access-title" }, "Access"),
    h("p", { class: me.hasAccess ? "granted" : "muted", id: "access-state" },
      me.hasAccess ? "You have access." : "You have no access yet: pick a plan on the pricing page."),
    held.length
      ? h("ul", { class: "sources" }, ...held.map((e) => h("li", {}, h("strong", {}, e.product ? e.product.name : e.priceId || "A product"), ": ", source(e, me),
          planControls(e, me, products, main))))
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

/** A feature's key as words: "api-calls" is "Api calls". */
function featureName(key) {
  const words = key.replace(/[-_]+/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function count(n, one, many) {
  return `${n.toLocaleString("en")} ${n === 1 ? one : many}`;
}

/** What ends when: a period's credits reset with it; packs stay until used (or their end).
 * @param {import("../api.js").CreditsAnswer} c */
function creditsTold(c) {
  const packs = c.packs || 0;
  const kept = c.packsExpireAt ? `kept until ${day(c.packsExpireAt)}` : "kept until used";
  if (!c.resetsAt) return [`From packs: ${kept}.`];
  if (!packs) return [`This period's credits reset on ${day(c.resetsAt)}.`];
  return [`${count(c.balance - packs, "credit", "credits")} of this period's reset on ${day(c.resetsAt)}; `,
    h("span", { class: "packs" }, `${count(packs, "credit", "credits")} from packs`), `, ${kept}.`];
}

/** @param {MeAnswer} me */
function credits(me) {
  const held = me.credits || [];
  const teamName = (id) => me.teams.find((t) => t.id === id)?.name || "your team";
  return h("section", { "aria-labelledby": "credits-title" },
    h("h2", { id: "credits-title" }, "Credits"),
    held.length
      ? h("ul", { class: "credits", id: "credits" }, ...held.map((c) => h("li", {},
          h("strong", {}, featureName(c.feature)), c.teamId ? ` (${teamName(c.teamId)}'s, shared)` : "", ": ",
          h("span", { class: "balance" }, `${count(c.balance, "credit", "credits")} left`),
          ` of ${c.granted.toLocaleString("en")}, ${c.used.toLocaleString("en")} used. `,
          ...creditsTold(c))))
      : h("p", { class: "muted", id: "credits" }, "No credits yet."));
}

/** Download my data: GET /api/me/export, saved as a file. */
function exportData() {
  const slot = h("div", { "aria-live": "polite" });
  const button = h("button", {
    type: "button",
    onclick: async () => {
      setError(slot, null);
      try {
        const data = await getMeExport();
        const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
        const link = h("a", { href: url, download: "my-data.json" });
        document.body.append(link);
        link.click();
        link.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10_000);
        slot.replaceChildren(h("p", { role: "status" }, "Your data is downloaded: my-data.json."));
      } catch (error) {
        setError(slot, error);
      }
    },
  }, "Download my data");
  return h("div", { class: "setting" },
    h("h3", {}, "Your data"),
    h("p", {}, "Everything stored about you (profile, purchases, teams, e-mails sent), in one JSON file."),
    h("p", {}, button), slot);
}

/** A second factor (TOTP) through Supabase Auth's MFA API: enrolled, verified, removed. */
function secondFactor() {
  const box = h("div", { class: "setting", id: "second-factor" }, h("h3", {}, "Second factor"), h("p", { class: "muted" }, "Loading…"));
  const slot = h("div", { "aria-live": "polite" });

  function codeForm(factorId, label, done) {
    const input = h("input", { id: "totp-code", name: "code", required: true, inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}", maxlength: "6" });
    const form = h("form", {
      onsubmit: async (event) => {
        event.preventDefault();
        setError(slot, null);
        await busy(form, async () => {
          try {
            await verifyTotp(factorId, /** @type {HTMLInputElement} */ (input).value.trim());
            slot.replaceChildren(h("p", { role: "status" }, done));
            await render(false);
          } catch (error) {
            setError(slot, error);
          }
        });
      },
    }, h("p", {}, h("label", { for: "totp-code" }, "The 6-digit code your app shows"), input), h("button", { type: "submit" }, label));
    return form;
  }

  async function render(clear = true) {
    if (clear) setError(slot, null);
    let factors;
    try {
      factors = await listFactors();
    } catch (error) {
      box.replaceChildren(h("h3", {}, "Second factor"), errorBox(error));
      return;
    }
    const verified = factors.find((f) => f.factor_type === "totp" && f.status === "verified");
    const parts = [h("h3", {}, "Second factor")];
    if (!verified) {
      parts.push(
        h("p", { id: "factor-state" }, "Off. With an authenticator app, a sign-in also asks for a code from your phone (the support API asks admins for one)."),
        h("p", {}, h("button", {
          type: "button",
          onclick: async (event) => {
            setError(slot, null);
            event.target.disabled = true;
            try {
              const enrolled = await enrollTotp(`Authenticator ${new Date().toISOString().slice(0, 16)}`);
              const svg = `data:image/svg+xml;utf-8,${encodeURIComponent(enrolled.totp.qr_code)}`;
              box.replaceChildren(h("h3", {}, "Second factor"),
                h("p", {}, "Scan this code with your authenticator app, or type the key below into it."),
                h("img", { src: svg, alt: "QR code of your authenticator key", width: "180", height: "180", class: "qr" }),
                h("p", {}, "Key: ", h("code", { id: "totp-secret" }, enrolled.totp.secret)),
                codeForm(enrolled.id, "Turn on the second factor", "Second factor on: this session passed it."),
                slot);
            } catch (error) {
              event.target.disabled = false;
              setError(slot, error);
            }
          },
        }, "Add an authenticator app")));
    } else if (assuranceLevel() !== "aal2") {
      parts.push(
        h("p", { id: "factor-state" }, "On. This session has not passed it yet: enter a code from your app."),
        codeForm(verified.id, "Verify this session", "This session passed the second factor."));
    } else {
      parts.push(
        h("p", { id: "factor-state", class: "granted" }, "On, and this session passed it."),
        h("p", {}, h("button", {
          type: "button",
          class: "danger",
          onclick: async (event) => {
            if (!confirm("Remove the second factor? Sign-ins then ask for no code.")) return;
            setError(slot, null);
            event.target.disabled = true;
            try {
              await unenroll(verified.id);
              slot.replaceChildren(h("p", { role: "status" }, "Second factor removed."));
              await render(false);
            } catch (error) {
              event.target.disabled = false;
              setError(slot, error);
            }
          },
        }, "Remove the second factor")));
    }
    box.replaceChildren(...parts, slot);
  }

  render();
  return box;
}

/** Delete my account: DELETE /api/me with the address typed again, as the API asks. */
function deletion(me) {
  const slot = h("div", { "aria-live": "polite" });
  const input = h("input", { id: "delete-confirm", name: "confirm", type: "email", required: true, autocomplete: "off" });
  const form = h("form", {
    onsubmit: async (event) => {
      event.preventDefault();
      setError(slot, null);
      await busy(form, async () => {
        try {
          await deleteMe({ confirm: /** @type {HTMLInputElement} */ (input).value.trim() });
        } catch (error) {
          setError(slot, error);
          return;
        }
        // The account is gone (or going: its steps finish on their own): so is this session.
        await signOut();
        show(h("section", { class: "card", "aria-labelledby": "deleted-title" },
          h("h2", { id: "deleted-title" }, "Your account is deleted"),
          h("p", { role: "status" }, me.email
            ? `We are sending a confirmation to ${me.email}. Nothing more will be charged.`
            : "Nothing more will be charged."),
          h("p", {}, h("a", { href: "/" }, "Back to the home page"))));
      });
    },
  },
  h("p", {}, h("label", { for: "delete-confirm" }, "Type your e-mail address to confirm"), input),
  h("button", { type: "submit", class: "danger" }, "Delete my account"),
  slot);
  return h("div", { class: "setting" },
    h("h3", {}, "Delete my account"),
    h("p", {}, "Your subscriptions are cancelled at once, your data erased, your sign-in removed. Download your data first if you want to keep it. This cannot be undone."),
    form);
}

/** @param {MeAnswer} me */
function settings(me) {
  return h("section", { "aria-labelledby": "settings-title" },
    h("h2", { id: "settings-title" }, "Account settings"),
    exportData(), secondFactor(), deletion(me));
}

/** @param {string} [told] what the last change's answer said, shown above the rest */
async function main(told) {
  if (!session()) {
    show(signedOut("your dashboard"));
    return;
  }
  let me;
  // The plans a subscription may change to; without them, the page still shows the rest.
  const products = getProductsPublic().then((a) => a.products).catch(() => []);
  try {
    me = await getMe();
  } catch (error) {
    // A token the API refused signed the page out (http.js): say so as for a guest.
    show(errorBox(error), session() ? h("p", {}, h("a", { href: "/signin" }, "Sign in again")) : signedOut("your dashboard"));
    return;
  }
  show(
    resume(pending()),
    h("p", {}, `Signed in as ${me.email || me.id}.`),
    typeof told === "string" ? h("p", { class: "notice", role: "status", id: "plan-told" }, told) : null,
    access(me, await products),
    github(me),
    credits(me),
    billing(me),
    teams(me),
    settings(me),
  );
}

if (offered) show(offer(offered, () => main()));
else main();
