// Where an entitlement comes from, in words (the dashboard and the success page say it alike).
import { day } from "./ui.js";

/** @typedef {import("./api.js").MeAnswer} MeAnswer */
/** @typedef {import("./api.js").EntitlementAnswer} EntitlementAnswer */

/** Where an entitlement comes from, in words. @param {EntitlementAnswer} e @param {MeAnswer} me */
export function source(e, me) {
  const team = e.teamId ? me.teams.find((t) => t.id === e.teamId) : null;
  const whose = team ? `through the team ${team.name}` : "your own";
  if (e.kind === "purchase") return `A one-time purchase, ${whose}; yours for good.`;
  if (e.trialEnd && e.status === "trialing") return `A free trial, ${whose}, until ${day(e.trialEnd)}.`;
  if (e.cancelAtPeriodEnd) return `A subscription, ${whose}, cancelled: it ends on ${day(e.currentPeriodEnd)}.`;
  if (!e.active) return `A subscription, ${whose}, ${e.status}${e.endedAt ? ` since ${day(e.endedAt)}` : ""}.`;
  return `A subscription, ${whose}, renewing on ${day(e.currentPeriodEnd)}.`;
}

