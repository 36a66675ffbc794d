// Where Stripe's checkout comes back: POST /api/payments/complete-checkout applies the paid
// session at once; a signed-in buyer's token is then refreshed so its claims carry the new
// access; a guest is told what they bought and how to sign in.
import { getMe, postPaymentsCompleteCheckout } from "../api.js";
import { claims, refresh, session } from "../auth.js";
import { errorBox, h, begin, show } from "../ui.js";
import { featureName, source } from "../entitlements.js";

await begin();

function retry() {
  return h("p", {}, h("button", { type: "button", onclick: () => main() }, "Try again"));
}

async function main() {
  const params = new URLSearchParams(location.search);
  const sessionId = params.get("session_id");
  if (!sessionId) {
    show(errorBox("This page is where a checkout comes back to, with its session_id: none is in this link."),
      h("p", {}, h("a", { href: "/#pricing" }, "See the plans")));
    return;
  }
  show(h("p", { class: "muted" }, "Confirming your checkout…"));
  let answer;
  try {
    answer = await postPaymentsCompleteCheckout({ sessionId, token: params.get("checkout_token") || null });
  } catch (error) {
    // 409: not paid yet (a bank payment under way), or a guest's account still being made;
    // access follows with Stripe's event, so a signed-in buyer's page watches GET /api/me for
    // it. Said in the page's words: the API's name the session and its Stripe status.
    const status = /** @type {any} */ (error).status;
    if (status === 409) {
      const signedIn = Boolean(session());
      show(h("p", { class: "muted", role: "status", id: "access-state" }, signedIn
        ? "Your payment has not cleared yet: your access follows as soon as Stripe confirms it. This page is watching for it."
        : "Your checkout is being confirmed: a sign-in link comes by e-mail to the address you gave at checkout as soon as it is."),
      signedIn ? null : retry());
      if (signedIn) await watch();
      return;
    }
    show(errorBox(error), retry());
    return;
  }
  if ("entitlements" in answer) {
    // The signed-in buyer: access at once; a fresh token carries it in its claims too.
    let note = null;
    if (session()) {
      try {
        await refresh();
        const features = claims()?.features;
        note = h("p", { class: "muted", id: "token-state" },
          Array.isArray(features) ? `Your session now carries: ${features.map((f) => featureName(f)).join(", ") || "no features"}.` : "Your session is refreshed.");
      } catch (error) {
        note = errorBox(error);
      }
    }
    // Newest change first: the grant this checkout just made leads, and says what it is (a
    // free trial is no payment).
    const held = answer.entitlements.filter((e) => e.active);
    const trial = held[0]?.status === "trialing";
    show(
      h("p", { class: answer.hasAccess ? "granted" : "muted", id: "access-state" },
        answer.hasAccess
          ? (trial ? "Your free trial has started: you have access now, and nothing was charged today." : "Paid: you have access now.")
          : "Done. Your access is on its way: your dashboard shows it as soon as it is applied."),
      held.length ? h("ul", { class: "sources" }, ...held.map((e) => h("li", {}, h("strong", {}, e.product?.name || "A product"), ": ", source(e, answer)))) : null,
      note,
      h("p", {}, h("a", { class: "button", href: "/dashboard" }, "Go to your dashboard")),
    );
    return;
  }
  // A guest: what this session bought, nothing of the account (its e-mail was typed on
  // Stripe's page and nobody verified it yet).
  const product = answer.product?.name || "your purchase";
  const trial = answer.label === "Free trial";
  show(
    h("p", { class: answer.hasAccess ? "granted" : "muted", id: "access-state" },
      answer.applied
        ? (trial ? `Your free trial of ${product} has started: nothing was charged today.` : `Paid: ${product} is yours.`)
        : "Done. We are applying your purchase: this takes a moment."),
    answer.summary ? h("p", { id: "grant-summary" }, answer.summary) : null,
    answer.features.length ? h("ul", { class: "features" }, ...answer.features.map((f) => h("li", {}, featureName(f)))) : null,
    h("p", {}, "We sent a sign-in link to the e-mail you gave at checkout. Open it to reach your dashboard, or sign in here with that address."),
    h("p", {}, h("a", { class: "button", href: "/signin" }, "Sign in")),
    answer.applied ? null : retry(),
  );
}

/** GET /api/me every few seconds for a minute, until the access shows. */
async function watch() {
  for (let n = 0; n < 20; n++) {
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const me = await getMe().catch(() => null);
    if (me && me.hasAccess) {
      await refresh().catch(() => undefined);
      show(h("p", { class: "granted", id: "access-state" }, "You have access now."),
        h("p", {}, h("a", { class: "button", href: "/dashboard" }, "Go to your dashboard")));
      return;
    }
  }
}

main();
