// A plan as the pages say it and buy it: its price in words, and its checkout's request.
import { money } from "./ui.js";

/** @typedef {import("./api.js").PublicProduct} PublicProduct */

/**
 * POST /api/payments/create-checkout's body for `product`; a team's per-seat price with seats.
 * @param {PublicProduct} product
 * @param {number} quantity
 * @param {string | null} teamId
 * @returns {import("./api.js").CheckoutRequest}
 */
export function checkoutRequest(product, quantity, teamId) {
  const origin = location.origin;
  return {
    priceId: product.priceId,
    mode: product.billingType === "subscription" ? "subscription" : "payment",
    // Stripe fills {CHECKOUT_SESSION_ID} in the link back.
    successUrl: `${origin}/success?session_id={CHECKOUT_SESSION_ID}`,
    cancelUrl: teamId ? `${origin}/team?id=${encodeURIComponent(teamId)}` : `${origin}/#pricing`,
    teamId: teamId || null,
    quantity: teamId && product.perSeat ? quantity : null,
  };
}

// What the price says of tax, as Stripe's tax behaviour sets it; unspecified says nothing.
const TAX = { inclusive: " incl. tax", exclusive: " + tax", unspecified: "" };

/** @param {PublicProduct} product */
export function priceText(product) {
  const each = product.perSeat ? " per seat" : "";
  const amount = money(product.price, product.currency) + (TAX[product.taxBehavior] || "");
  if (product.billingType === "subscription" && product.billingInterval) {
    return `${amount}${each} / ${product.billingInterval}`;
  }
  return `${amount}${each}, once`;
}

