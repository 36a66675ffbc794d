// A team invitation's link: sign in as the invited address, then accept.
import { postInvitationsAccept } from "../api.js";
import { session } from "../auth.js";
import { busy, clearPending, errorBox, h, begin, setError, setPending, show } from "../ui.js";

await begin();

function main() {
  const token = new URLSearchParams(location.search).get("token");
  if (!token) {
    show(errorBox("This link has no invitation in it: open the link from the invitation e-mail."));
    return;
  }
  const current = session();
  if (!current) {
    // The e-mail link's round trip lands on /dashboard, which offers this invitation again.
    setPending({ kind: "invitation", token });
    show(h("p", {}, "You were invited to join a team. Sign in with the address the invitation was sent to, then accept."),
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
          show(h("p", { class: "granted", role: "status" }, `You joined the team as ${joined.role}.`),
            h("a", { class: "button", href: `/team?id=${encodeURIComponent(joined.teamId)}` }, "Open the team"));
        } catch (error) {
          setError(slot, error);
        }
      });
    },
  },
  h("p", {}, `Signed in as ${current.user?.email || "you"}. Accepting adds you to the team the invitation names.`),
  h("button", { type: "submit" }, "Accept the invitation"),
  slot);
  show(form);
}

main();
