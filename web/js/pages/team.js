// Teams: create one; for a team, its seats (buy them, change how many), its members with their
// roles and seats (change a role, remove), its invitations (invite by e-mail, resend, revoke).
// Controls show by role; the API decides, and its refusal is shown as it states it. Removing a
// member asks first; inviting with no free seat says so before anything is sent.
import {
  deleteTeamsInvitations, deleteTeamsMembers, getMe, getProductsPublic, getTeams, patchTeamsMembers,
  patchTeamsSeats, postPaymentsCreateCheckout, postPaymentsCreatePortal, postTeams, postTeamsInvitations,
  postTeamsInvitationsResend,
} from "../api.js";
import { claims, session } from "../auth.js";
import { checkoutRequest, priceText } from "../plans.js";
import { busy, clearPending, day, errorBox, h, begin, pending, setError, show, signedOut, titled } from "../ui.js";
import { plural } from "../entitlements.js";

/** @typedef {import("../api.js").TeamDetailAnswer} TeamDetailAnswer */

await begin();
const ROLES = ["member", "admin", "owner"];

/** A form whose submit runs `work(form)`; its error slot shows what the API said. */
function action(attrs, work, ...children) {
  const slot = h("div", { "aria-live": "polite" });
  const form = h("form", {
    ...attrs,
    onsubmit: async (event) => {
      event.preventDefault();
      setError(slot, null);
      await busy(form, async () => {
        try {
          await work(form);
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  }, ...children, slot);
  return form;
}

const value = (form, name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value;

const ROLE_NAMES = { member: "Member", admin: "Admin", owner: "Owner" };

function roleSelect(id, selected, allowed = ROLES) {
  return h("select", { id, name: "role" }, ...allowed.map((r) => h("option", { value: r, selected: r === selected }, ROLE_NAMES[r])));
}

/** A dangerous action that asks first: its button shows the question, and only the second
 * button does it (Cancel puts the first back). */
function askFirst(attrs, label, question, yes, work) {
  const first = h("button", { type: "button", class: "danger" }, label);
  const confirm = h("span", { class: "confirm", hidden: true }, h("span", {}, question, " "),
    h("button", { type: "submit", class: "danger" }, yes), " ",
    h("button", { type: "button", class: "secondary", onclick: () => { confirm.hidden = true; first.hidden = false; } }, "Cancel"));
  first.addEventListener("click", () => { first.hidden = true; confirm.hidden = false; });
  return action(attrs, work, first, confirm);
}

async function teamList() {
  const me = await getMe();
  const chosen = pending();
  const create = action({ "aria-labelledby": "create-title" }, async (form) => {
    const team = await postTeams({ name: value(form, "name").trim() });
    location.assign(`/team?id=${encodeURIComponent(team.id)}`);
  },
  h("h2", { id: "create-title" }, "Create a team"),
  h("p", {}, h("label", { for: "team-name" }, "Team name"), h("input", { id: "team-name", name: "name", required: true, maxlength: "60" })),
  h("button", { type: "submit" }, "Create the team"));
  show(
    chosen && chosen.kind === "seats" ? h("p", { class: "notice" }, `You picked ${chosen.product.name}: open a team you manage (or create one) to buy its seats.`) : null,
    h("section", { "aria-labelledby": "yours-title" }, h("h2", { id: "yours-title" }, "Your teams"),
      me.teams.length
        ? h("ul", {}, ...me.teams.map((t) => h("li", {}, h("a", { href: `/team?id=${encodeURIComponent(t.id)}` }, t.name), ` (${t.role})`)))
        : h("p", { class: "muted" }, "You are in no team yet.")),
    create,
  );
}

/** @param {TeamDetailAnswer} team */
async function seatsSection(team, manager, reload) {
  const section = h("section", { "aria-labelledby": "seats-title" }, h("h2", { id: "seats-title" }, "Seats"));
  if (team.seats) {
    // `used`: members plus pending invitations, each of which takes a seat when accepted.
    const holders = team.members.filter((m) => m.hasSeat).length;
    const waiting = team.invitations.length;
    section.append(h("p", { id: "seat-count" },
      `${plural(team.seats.total, "seat")}, ${holders} held by members`,
      waiting ? `, ${plural(waiting, "pending invitation")} waiting for one` : "",
      `; ${team.seats.used >= team.seats.total ? "none free" : `${team.seats.total - team.seats.used} free`}.`));
    if (manager) {
      section.append(action({ "aria-label": "Change seats" }, async (form) => {
        await patchTeamsSeats(team.id, { quantity: Number(value(form, "quantity")) });
        await reload();
      },
      h("p", {}, h("label", { for: "seat-quantity" }, "Seats"),
        h("input", { id: "seat-quantity", name: "quantity", type: "number", min: "1", max: "10000", required: true, value: String(team.seats.total) })),
      h("button", { type: "submit" }, "Change seats")));
      section.append(action({ "aria-label": "Billing" }, async () => {
        const { url } = await postPaymentsCreatePortal({ returnUrl: location.href, teamId: team.id });
        if (url) location.assign(url);
      }, h("button", { type: "submit", class: "secondary" }, "Manage the team's billing")));
    }
    return section;
  }
  if (!manager) {
    section.append(h("p", { class: "muted" }, "The team has no seats yet: an owner or admin buys them."));
    return section;
  }
  const { products } = await getProductsPublic();
  const perSeat = products.filter((p) => p.perSeat);
  if (!perSeat.length) {
    section.append(h("p", { class: "muted" }, "Nothing is sold per seat."));
    return section;
  }
  const chosen = pending();
  const wanted = chosen && chosen.kind === "seats" ? chosen : null;
  section.append(action({ "aria-label": "Buy seats" }, async (form) => {
    const product = perSeat.find((p) => p.priceId === value(form, "price"));
    const { url } = await postPaymentsCreateCheckout(checkoutRequest(product, Number(value(form, "quantity")), team.id));
    clearPending();
    if (url) location.assign(url);
  },
  h("p", {}, h("label", { for: "seat-price" }, "Plan"),
    h("select", { id: "seat-price", name: "price" }, ...perSeat.map((p) =>
      h("option", { value: p.priceId, selected: wanted?.product.priceId === p.priceId }, `${p.name}: ${priceText(p)}`)))),
  h("p", {}, h("label", { for: "seat-quantity" }, "Seats"),
    h("input", { id: "seat-quantity", name: "quantity", type: "number", min: String(Math.max(1, team.members.length)), max: "10000", required: true,
      value: String(Math.max(wanted?.quantity || 1, team.members.length)) })),
  h("button", { type: "submit" }, "Buy seats")));
  return section;
}

/** @param {TeamDetailAnswer} team */
function membersSection(team, me, manager, reload) {
  const rows = team.members.map((m) => {
    const self = m.userId === me;
    const cells = [];
    if (team.role === "owner" && !self) {
      cells.push(action({ class: "inline", "aria-label": `Role of ${m.email}` }, async (form) => {
        await patchTeamsMembers(team.id, m.userId, { role: /** @type {any} */ (value(form, "role")) });
        await reload();
      }, h("label", { for: `role-${m.userId}`, class: "visually-hidden" }, `Role of ${m.email}`), roleSelect(`role-${m.userId}`, m.role),
      h("button", { type: "submit" }, "Change role")));
    }
    if ((manager && !self) || (self && m.role !== "owner")) {
      const who = m.email || "this member";
      cells.push(askFirst({ class: "inline", "aria-label": `Remove ${m.email}` },
        self ? "Leave the team" : "Remove",
        self ? `Leave ${team.name}? You lose its access.` : `Remove ${who} from ${team.name}? They lose its access at once.`,
        self ? "Yes, leave" : "Yes, remove",
        async () => {
          await deleteTeamsMembers(team.id, m.userId);
          if (self) location.assign("/dashboard");
          else await reload();
        }));
    }
    return h("tr", {},
      h("th", { scope: "row" }, m.email || m.userId, self ? " (you)" : ""),
      h("td", {}, ROLE_NAMES[m.role] || m.role),
      h("td", {}, m.hasSeat ? "Seat" : "No seat"),
      h("td", {}, ...cells));
  });
  return h("section", { "aria-labelledby": "members-title" }, h("h2", { id: "members-title" }, "Members"),
    h("table", { id: "members" },
      h("thead", {}, h("tr", {}, ...["Member", "Role", "Seat", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...rows)));
}

/** @param {TeamDetailAnswer} team */
function invitationsSection(team, manager, reload) {
  const section = h("section", { "aria-labelledby": "invitations-title" }, h("h2", { id: "invitations-title" }, "Invitations"));
  section.append(team.invitations.length
    ? h("ul", { id: "invitations" }, ...team.invitations.map((i) => h("li", {},
        `${i.email} as ${(ROLE_NAMES[i.role] || i.role).toLowerCase()}, until ${day(i.expiresAt)} `,
        manager ? action({ class: "inline", "aria-label": `Resend to ${i.email}` }, async () => {
          await postTeamsInvitationsResend(team.id, i.id);
          await reload();
        }, h("button", { type: "submit", class: "secondary" }, "Resend")) : null,
        manager ? action({ class: "inline", "aria-label": `Revoke ${i.email}` }, async () => {
          await deleteTeamsInvitations(team.id, i.id);
          await reload();
        }, h("button", { type: "submit", class: "danger" }, "Revoke")) : null)))
    : h("p", { class: "muted" }, "No invitations waiting."));
  if (manager) {
    // Said before anything is sent: an invitation takes a seat when accepted.
    const full = team.seats && team.seats.used >= team.seats.total;
    const holdsNothing = !team.seats && !team.entitlements.some((e) => e.active);
    const note = full
      ? h("p", { class: "notice", id: "seat-note" }, `All ${plural(team.seats.total, "seat")} are taken by members and pending invitations: add seats above, or revoke an invitation, to invite someone.`)
      : holdsNothing
        ? h("p", { class: "notice", id: "seat-note" }, "The team has no plan yet: whoever you invite joins it, and gets its access once the team buys one.")
        : null;
    section.append(action({ "aria-labelledby": "invite-title" }, async (form) => {
      await postTeamsInvitations(team.id, { email: value(form, "email").trim(), role: /** @type {any} */ (value(form, "role")) });
      await reload();
    },
    h("h3", { id: "invite-title" }, "Invite by e-mail"),
    note,
    h("p", {}, h("label", { for: "invite-email" }, "E-mail"), h("input", { id: "invite-email", name: "email", type: "email", required: true })),
    h("p", {}, h("label", { for: "invite-role" }, "Role"), roleSelect("invite-role", "member", team.role === "owner" ? ROLES : ["member", "admin"])),
    h("button", { type: "submit", disabled: Boolean(full) }, "Send the invitation")));
  }
  return section;
}

async function teamPage(id) {
  const reload = () => teamPage(id);
  let team;
  try {
    team = await getTeams(id);
  } catch (error) {
    show(errorBox(error), h("p", {}, h("a", { href: "/team" }, "Your teams")));
    return;
  }
  titled(`${team.name}: team`);
  const manager = team.role === "owner" || team.role === "admin";
  const me = claims()?.sub;
  const active = team.entitlements.filter((e) => e.active);
  show(
    h("h2", { id: "team-name" }, team.name),
    h("p", {}, `Your role: ${ROLE_NAMES[team.role].toLowerCase()}.`, " ", active.length ? "The team holds:" : "The team holds nothing yet."),
    active.length ? h("ul", { class: "sources", id: "team-holds" }, ...active.map((e) => h("li", {}, h("strong", {}, e.product?.name || "A plan"), ": ", e.summary))) : null,
    await seatsSection(team, manager, reload).catch(errorBox),
    membersSection(team, me, manager, reload),
    invitationsSection(team, manager, reload),
  );
}

async function main() {
  if (!session()) {
    show(signedOut("your teams"));
    return;
  }
  const id = new URLSearchParams(location.search).get("id");
  try {
    await (id ? teamPage(id) : teamList());
  } catch (error) {
    show(errorBox(error));
  }
}

main();
