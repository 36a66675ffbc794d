// A subscription's plan changed, cancelled or resumed from the dashboard: every change is
// previewed first (what is charged now, each line, the next charge), then confirmed; a preview
// that no longer holds answers a fresh one, shown to confirm again. Every date and amount shown
// is the API's own.
import { CONFIG } from "../config.js";
import { getTeams, postPaymentsCancel, postPaymentsChangePlan, postPaymentsPreviewChange, postPaymentsResume } from "./api.js";
import { plural } from "./entitlements.js";
import { busy, day, h, money, setError } from "./ui.js";

/** @typedef {import("./api.js").EntitlementAnswer} EntitlementAnswer */
/** @typedef {import("./api.js").MeAnswer} MeAnswer */
/** @typedef {import("./api.js").PreviewAnswer} PreviewAnswer */
/** @typedef {import("./api.js").PublicProduct} PublicProduct */
/** @typedef {import("./api.js").OfferFacts} OfferFacts */

// Stripe's cancellation_details.feedback values, in the words its own portal asks them.
export const REASONS = {
  too_expensive: "It's too expensive",
  unused: "I don't use it enough",
  missing_features: "Some features are missing",
  switched_service: "I'm switching to another service",
  too_complex: "It's too hard to use",
  low_quality: "The quality was less than expected",
  customer_service: "Customer service was less than expected",
  other: "Another reason",
};

/** An amount in the currency's minor unit (as Stripe counts it), in that currency. */
export function minorMoney(amount, currency) {
  const unit = currency || CONFIG.currency || "usd";
  const digits = new Intl.NumberFormat("en", { style: "currency", currency: unit }).resolvedOptions().maximumFractionDigits ?? 2;
  return money(amount / 10 ** digits, unit);
}

/** A Unix time (seconds) as a day. */
function unixDay(seconds) {
  return day(new Date(seconds * 1000).toISOString());
}

/** Whether the user may change this subscription: their own, or a team they own or administer. */
function manages(e, me) {
  if (!e.teamId) return true;
  const team = me.teams.find((t) => t.id === e.teamId);
  return Boolean(team && (team.role === "owner" || team.role === "admin"));
}

function planName(priceId, products) {
  return products.find((p) => p.priceId === priceId)?.name || priceId;
}

/** What a preview says: charged now (each line), from when, and the next charge. @param {PreviewAnswer} p */
function previewTold(p) {
  const parts = [];
  if (p.effective === "period_end") {
    parts.push(h("p", { class: "effective" }, `The change takes effect from ${unixDay(p.effectiveAt)}; your plan stays as it is until then.`));
  }
  parts.push(h("p", { class: "amount-due" }, `Charged now: ${minorMoney(p.amountDue, p.currency)}`));
  if (p.lines.length) {
    parts.push(h("ul", { class: "lines" }, ...p.lines.map((l) => h("li", {}, `${l.description}: ${minorMoney(l.amount, p.currency)}`))));
  }
  if (p.nextCharge) {
    parts.push(h("p", { class: "next-charge" }, `Next charge: ${minorMoney(p.nextCharge.amount, p.currency)} on ${unixDay(p.nextCharge.at)}`));
  }
  return parts;
}

/** The change form: a plan (and seats for a per-seat plan), previewed, then confirmed. */
function changeForm(e, products, done) {
  const slot = h("div", { "aria-live": "polite" });
  const plans = products.filter((p) => p.billingType === "subscription");
  const current = products.find((p) => p.priceId === e.priceId);
  const id = `plan-${e.priceId}-${e.teamId || "own"}`;
  const select = /** @type {HTMLSelectElement} */ (h("select", { id, name: "plan" },
    ...plans.map((p) => h("option", { value: p.priceId, selected: p.priceId === e.priceId }, p.name))));
  const seats = /** @type {HTMLInputElement} */ (h("input", { id: `${id}-seats`, name: "seats", type: "number", min: "1", step: "1" }));
  const seatsRow = h("p", {}, h("label", { for: `${id}-seats` }, "Seats"), seats);
  const perSeat = () => Boolean(e.teamId && products.find((p) => p.priceId === select.value)?.perSeat);
  const showSeats = () => { seatsRow.hidden = !perSeat(); };
  select.addEventListener("change", showSeats);
  showSeats();
  if (e.teamId && current?.perSeat) {
    getTeams(e.teamId).then((team) => { if (team.seats && !seats.value) seats.value = String(team.seats.total); }).catch(() => {});
  }

  /** @returns {import("./api.js").PreviewRequest} */
  function body() {
    return {
      priceId: e.priceId || "",
      teamId: e.teamId || null,
      newPriceId: select.value !== e.priceId ? select.value : null,
      quantity: perSeat() && seats.value ? Number(seats.value) : null,
    };
  }

  /** The preview and its confirmation; a stale one (409) is replaced by the fresh one the API gave. */
  function offerPreview(asked, preview, note) {
    const confirm = h("button", {
      type: "button",
      onclick: async (event) => {
        setError(slot, null);
        event.target.disabled = true;
        try {
          await postPaymentsChangePlan({ ...asked, prorationDate: preview.prorationDate });
          await done();
        } catch (error) {
          event.target.disabled = false;
          const fresh = error && error.status === 409 && error.body && error.body.preview;
          if (fresh) offerPreview(asked, fresh, error.message);
          else setError(slot, error);
        }
      },
    }, preview.effective === "now" ? "Confirm and pay" : "Confirm the change");
    slot.replaceChildren(h("div", { class: "preview", role: "region", "aria-label": "Preview of the change" },
      note ? h("p", { class: "error", role: "alert" }, note) : null,
      ...previewTold(preview), confirm));
  }

  const form = h("form", {
    "aria-label": "Change plan",
    onsubmit: async (event) => {
      event.preventDefault();
      setError(slot, null);
      const asked = body();
      await busy(form, async () => {
        try {
          offerPreview(asked, await postPaymentsPreviewChange(asked), null);
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  },
  h("p", {}, h("label", { for: id }, "Plan"), select),
  seatsRow,
  h("button", { type: "submit" }, "Preview the change"));
  return h("div", { class: "plan-change" }, form, slot);
}

/** What an offer gives, in words. @param {OfferFacts} o @param {string | null} currency */
function offerTold(o, currency) {
  const off = o.percentOff ? `${o.percentOff}% off` : `${minorMoney(o.amountOff || 0, currency)} off`;
  if (o.duration === "forever") return `${off} for as long as you keep the plan`;
  if (o.duration === "repeating" && o.durationInMonths) return `${off} for ${plural(o.durationInMonths, "month")}`;
  return `${off} your next invoice`;
}

/** The cancel form: a reason and a comment; a retention offer, when one comes back, to take or refuse. */
function cancelForm(e, products, done) {
  const slot = h("div", { "aria-live": "polite" });
  const id = `cancel-${e.priceId}-${e.teamId || "own"}`;
  const reason = /** @type {HTMLSelectElement} */ (h("select", { id: `${id}-reason`, name: "reason", required: true },
    h("option", { value: "" }, "Choose a reason"),
    ...Object.entries(REASONS).map(([value, words]) => h("option", { value }, words))));
  const comment = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: `${id}-comment`, name: "comment", maxlength: "500", rows: "2" }));
  const currency = products.find((p) => p.priceId === e.priceId)?.currency || null;

  async function send(offer) {
    setError(slot, null);
    const answer = await postPaymentsCancel({
      priceId: e.priceId || "",
      teamId: e.teamId || null,
      reason: /** @type {any} */ (reason.value),
      comment: comment.value.trim() || null,
      offer,
    });
    if (answer.offer && !answer.kept && !offer) {
      const choose = (choice) => async (event) => {
        event.target.disabled = true;
        try {
          await send(choice);
        } catch (error) {
          event.target.disabled = false;
          setError(slot, error);
        }
      };
      slot.replaceChildren(h("div", { class: "notice", role: "region", "aria-label": "An offer to stay" },
        h("p", { class: "offer" }, `Before you go: ${offerTold(answer.offer, currency)}.`),
        h("button", { type: "button", onclick: choose("accept") }, "Keep my plan with the offer"), " ",
        h("button", { type: "button", class: "danger", onclick: choose("decline") }, "Cancel anyway")));
      return;
    }
    const name = planName(e.priceId, products);
    if (answer.kept && answer.offer) await done(`You keep ${name} with ${offerTold(answer.offer, currency)}.`);
    else if (answer.cancelAt) await done(`Cancelled: ${name} ends on ${unixDay(answer.cancelAt)}.`);
    else await done();
  }

  const form = h("form", {
    "aria-label": "Cancel the plan",
    onsubmit: async (event) => {
      event.preventDefault();
      await busy(form, async () => {
        try {
          await send(null);
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  },
  h("p", {}, h("label", { for: `${id}-reason` }, "Why are you cancelling?"), reason),
  h("p", {}, h("label", { for: `${id}-comment` }, "Anything to add (optional)"), comment),
  h("button", { type: "submit", class: "danger" }, "Cancel at the end of the period"));
  return h("div", { class: "plan-cancel" }, form, slot);
}

/** What is scheduled for this subscription, with the button undoing it. */
/** @param {EntitlementAnswer} e @param {PublicProduct[]} products @param {(told?: string) => Promise<void>} done */
function scheduled(e, products, done) {
  const slot = h("span");
  const undo = (label) => h("button", {
    type: "button",
    class: "link",
    onclick: async (event) => {
      setError(slot, null);
      event.target.disabled = true;
      try {
        const { resumed } = await postPaymentsResume({ priceId: e.priceId || "", teamId: e.teamId || null });
        await done(resumed === "cancellation" ? "Your cancellation is undone." : "The scheduled change is undone.");
      } catch (error) {
        event.target.disabled = false;
        setError(slot, error);
      }
    },
  }, label);
  if (e.cancelAt) {
    return h("p", { class: "scheduled" }, `Cancelled: ends on ${day(e.cancelAt)}. `, undo("Resume"), slot);
  }
  const change = e.scheduledChange;
  if (change) {
    const product = products.find((p) => p.priceId === change.priceId);
    const what = product?.perSeat ? `${planName(change.priceId, products)}, ${plural(change.quantity, "seat")}` : planName(change.priceId, products);
    return h("p", { class: "scheduled" }, `Changes to ${what} on ${day(change.at)}. `, undo("Undo"), slot);
  }
  return null;
}

/** The controls of one held subscription: what is scheduled, "Change plan" and "Cancel".
 * @param {EntitlementAnswer} e @param {MeAnswer} me @param {PublicProduct[]} products
 * @param {(told?: string) => Promise<void>} done the dashboard drawn again from GET /api/me, with
 * what the API answered (Stripe's event may reach GET /api/me a moment later) */
export function planControls(e, me, products, done) {
  if (e.kind !== "subscription" || !e.active || !e.priceId || !manages(e, me)) return null;
  const name = planName(e.priceId, products);
  const panel = h("div");
  const open = (label, build) => h("button", {
    type: "button",
    "aria-label": `${label}: ${name}`,
    onclick: () => panel.replaceChildren(build(e, products, done)),
  }, label);
  return h("div", { class: "plan-controls" },
    scheduled(e, products, done),
    h("p", {}, open("Change plan", changeForm), " ", e.cancelAt ? null : open("Cancel", cancelForm)),
    panel);
}
