// The buyer's purchases (linked from the purchase confirmation): each product with its
// download while the access lasts, its kind and where it comes from.
import { getMe } from "../api.js";
import { session } from "../auth.js";
import { source } from "../entitlements.js";
import { errorBox, h, begin, show, signedOut } from "../ui.js";

await begin();

async function main() {
  if (!session()) {
    show(signedOut("your purchases"));
    return;
  }
  let me;
  try {
    me = await getMe();
  } catch (error) {
    show(errorBox(error));
    return;
  }
  if (!me.entitlements.length) {
    show(h("p", {}, "No purchases yet. ", h("a", { href: "/#pricing" }, "See the plans")));
    return;
  }
  const rows = me.entitlements.map((e) =>
    h("tr", {},
      h("th", { scope: "row" }, e.product?.name || "A product no longer sold"),
      h("td", {}, source(e, me)),
      h("td", {}, e.active ? "Active" : "Ended"),
      h("td", {},
        e.product?.downloadUrl
          ? h("a", { href: e.product.downloadUrl, rel: "noopener" }, "Download")
          : e.active && e.product?.type === "github"
            ? h("a", { href: "/dashboard" }, "Claim the repository")
            : "—"),
    ));
  show(h("table", {},
    h("caption", {}, "Your purchases and subscriptions, newest first"),
    h("thead", {}, h("tr", {}, ...["Product", "From", "Status", "Get it"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, ...rows)));
}

main();
