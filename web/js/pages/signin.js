// Sign in with Supabase Auth: an e-mail link (PKCE; it lands on the API's callback, which sets
// the session and sends the browser to /dashboard) or a password; a new account by password.
import { postPaymentsCreateCheckout } from "../api.js";
import { sendMagicLink, session, signInWithPassword, signUp } from "../auth.js";
import { checkoutRequest } from "../plans.js";
import { busy, h, begin, pending, setError, show } from "../ui.js";

await begin();

function field(id, label, attrs) {
  return h("p", {}, h("label", { for: id }, label), h("input", { id, name: id, required: true, ...attrs }));
}

function linkForm() {
  const slot = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    {
      "aria-labelledby": "link-title",
      onsubmit: async (event) => {
        event.preventDefault();
        const email = /** @type {HTMLInputElement} */ (form.querySelector("#link-email")).value.trim();
        setError(slot, null);
        await busy(form, async () => {
          try {
            await sendMagicLink(email);
            slot.replaceChildren(
              h("p", { class: "notice", role: "status" }, `Check your inbox: we sent a sign-in link to ${email}. It brings you to your dashboard.`),
            );
          } catch (error) {
            setError(slot, error);
          }
        });
      },
    },
    h("h2", { id: "link-title" }, "E-mail me a sign-in link"),
    field("link-email", "E-mail", { type: "email", autocomplete: "email" }),
    h("button", { type: "submit" }, "Send the link"),
    slot,
  );
  return form;
}

function passwordForm() {
  const slot = h("div", { "aria-live": "polite" });
  const read = () => ({
    email: /** @type {HTMLInputElement} */ (form.querySelector("#password-email")).value.trim(),
    password: /** @type {HTMLInputElement} */ (form.querySelector("#password")).value,
  });
  const form = h(
    "form",
    {
      "aria-labelledby": "password-title",
      onsubmit: async (event) => {
        event.preventDefault();
        const { email, password } = read();
        const creating = /** @type {SubmitEvent} */ (event).submitter?.getAttribute("value") === "signup";
        setError(slot, null);
        await busy(form, async () => {
          try {
            if (creating) {
              const signedIn = await signUp(email, password);
              if (!signedIn) {
                slot.replaceChildren(h("p", { class: "notice", role: "status" }, `Check your inbox: confirm ${email} with the link we sent.`));
                return;
              }
            } else {
              await signInWithPassword(email, password);
            }
            location.assign("/dashboard");
          } catch (error) {
            setError(slot, error);
          }
        });
      },
    },
    h("h2", { id: "password-title" }, "Or use a password"),
    field("password-email", "E-mail", { type: "email", autocomplete: "email" }),
    field("password", "Password", { type: "password", autocomplete: "current-password", minlength: "6" }),
    h("p", { class: "actions" },
      h("button", { type: "submit", name: "action", value: "signin" }, "Sign in"),
      h("button", { type: "submit", name: "action", value: "signup", class: "secondary" }, "Create an account"),
    ),
    slot,
  );
  return form;
}

function guestCheckout(chosen) {
  const slot = h("div");
  const button = h("button", {
    type: "button",
    class: "secondary",
    onclick: async () => {
      setError(slot, null);
      try {
        const { url } = await postPaymentsCreateCheckout(checkoutRequest(chosen.product, 1, null));
        if (url) location.assign(url);
      } catch (error) {
        setError(slot, error);
      }
    },
  }, "Buy as a guest");
  return h(
    "section",
    { class: "card", "aria-labelledby": "chosen-title" },
    h("h2", { id: "chosen-title" }, `You picked ${chosen.product.name}`),
    h("p", {}, "Sign in and your dashboard takes you on to its checkout. Or pay now with just an e-mail: we send that address a sign-in link once it is paid."),
    button,
    slot,
  );
}

function main() {
  const chosen = pending();
  const current = session();
  show(
    current ? h("p", { class: "notice" }, "You are signed in. ", h("a", { href: "/dashboard" }, "Go to your dashboard")) : null,
    chosen && chosen.kind === "checkout" && !current ? guestCheckout(chosen) : null,
    h("div", { class: "columns" }, linkForm(), passwordForm()),
  );
}

main();
