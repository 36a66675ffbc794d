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

/** @param {PublicProduct} product */
export function priceText(product) {
  const each = product.perSeat ? " per seat" : "";
  if (product.billingType === "subscription" && product.billingInterval) {
    return `${money(product.price)}${each} / ${product.billingInterval}`;
  }
  return `${money(product.price)}${each}, once`;
}

