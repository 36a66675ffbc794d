// A team invitation's link: what it invites to (the team, the role, who sent it), then sign in
// as the invited address and accept.
import { postInvitationsAccept, postInvitationsLookup } from "../api.js";
import { session } from "../auth.js";
import { busy, clearPending, errorBox, h, begin, setError, setPending, show } from "../ui.js";

await begin();

const ROLE_NAMES = { member: "a member", admin: "an admin", owner: "an owner" };

/** `Olga Ivanova (olga@example.com) invited you to join the team “Olga's team” as a member.` */
function invitedWords(invited) {
  const by = invited.invitedBy;
  const who = by ? (by.name ? `${by.name} (${by.email})` : by.email) : "Someone";
  return `${who} invited you to join the team “${invited.teamName}” as ${ROLE_NAMES[invited.role] || invited.role}.`;
}

async function main() {
  const token = new URLSearchParams(location.search).get("token");
  if (!token) {
    show(errorBox("This link has no invitation in it: open the link from the invitation e-mail."));
    return;
  }
  let invited;
  try {
    invited = await postInvitationsLookup({ token });
  } catch (error) {
    show(errorBox(error));
    return;
  }
  const current = session();
  if (!current) {
    // The e-mail link's round trip lands on /dashboard, which offers this invitation again.
    setPending({ kind: "invitation", token });
    show(h("p", { id: "invited" }, invitedWords(invited)),
      h("p", {}, "Sign in with the address the invitation was sent to, then accept."),
      h("a", { class: "button", href: "/signin" }, "Sign in to accept"));
    return;
  }
  const slot = h("div", { "aria-live": "polite" });
  const form = h("form", {
    onsubmit: async (event) => {
      event.preventDefault();
      setError(slot, null);
      await busy(form, async () => {
        try {
          const joined = await postInvitationsAccept({ token });
          clearPending();
          show(h("p", { class: "granted", role: "status" }, `You joined ${invited.teamName} as ${ROLE_NAMES[joined.role] || joined.role}.`),
            h("a", { class: "button", href: `/team?id=${encodeURIComponent(joined.teamId)}` }, "Open the team"));
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  },
  h("p", { id: "invited" }, invitedWords(invited)),
  h("p", {}, `Signed in as ${current.user?.email || "you"}.`),
  h("button", { type: "submit" }, "Accept the invitation"),
  slot);
  show(form);
}

main();
