// Landing with pricing: GET /api/products/public (featured first), monthly or yearly, a
// quantity for per-seat prices, trials said as such; a plan's button opens its checkout.
import { getProductsPublic, postPaymentsCreateCheckout } from "../api.js";
import { session } from "../auth.js";
import { checkoutRequest, priceText } from "../plans.js";
import { begin, brandName, busy, errorBox, h, setError, setPending, show } from "../ui.js";
import { featureName, plural } from "../entitlements.js";

/** @typedef {import("../api.js").PublicProduct} PublicProduct */

// A sign-in link landing on the home page (Supabase's Site URL) is sent on to the dashboard,
// the sign-in callback page (AUTH_CALLBACK_URL), by `begin`.
await begin();

/** What a plan or a pack grants in credits, in words: `500 credits for Generations, once`.
 * @param {PublicProduct} product @param {PublicProduct["credits"][number]} c */
function creditsText(product, c) {
  const what = `${plural(c.amount, "credit")} for ${featureName(c.feature, product.featureNames)}`;
  if (c.period === "once") return `${what}, added once to your balance`;
  return product.billingInterval ? `${what} every ${product.billingInterval}` : what;
}

/** @param {PublicProduct} product */
function card(product, index, shown) {
  // Featured plans come first; only the first is called the most popular.
  const popular = product.isFeatured && shown.findIndex((p) => p.isFeatured) === index;
  const slot = h("div");
  const seats = h("input", { type: "number", id: `seats-${product.id}`, name: "quantity", min: "1", max: "10000", value: "3", required: true });
  const action = product.perSeat
    ? "Buy seats for a team"
    : product.trialDays
      ? `Start the ${product.trialDays}-day free trial`
      : `Buy ${product.name}`;
  const form = h(
    "form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        setError(slot, null);
        const quantity = Number(/** @type {HTMLInputElement} */ (seats).value);
        if (product.perSeat) {
          // Seats belong to a team: the team page creates one (or picks yours), then buys.
          setPending({ kind: "seats", product, quantity });
          location.assign(session() ? "/team" : "/signin");
          return;
        }
        if (!session()) {
          setPending({ kind: "checkout", product });
          location.assign("/signin");
          return;
        }
        await busy(form, async () => {
          try {
            const { url } = await postPaymentsCreateCheckout(checkoutRequest(product, quantity, null));
            if (url) location.assign(url);
          } catch (error) {
            setError(slot, error);
          }
        });
      },
    },
    product.perSeat ? h("p", {}, h("label", { for: `seats-${product.id}` }, "Seats "), seats) : null,
    h("button", { type: "submit" }, action),
    slot,
  );
  return h(
    "article",
    { class: product.isFeatured ? "plan featured" : "plan", "aria-labelledby": `plan-${product.id}` },
    popular ? h("p", { class: "badge" }, "Most popular") : null,
    h("h3", { id: `plan-${product.id}` }, product.name),
    h("p", { class: "price" }, priceText(product)),
    product.trialDays ? h("p", { class: "trial" }, `${product.trialDays}-day free trial: nothing is charged until it ends.`) : null,
    h("p", {}, product.description),
    product.credits.length ? h("ul", { class: "credits" }, ...product.credits.map((c) => h("li", {}, creditsText(product, c)))) : null,
    product.features.length ? h("ul", { class: "features" }, ...product.features.map((f) => h("li", {}, featureName(f, product.featureNames)))) : null,
    form,
  );
}

async function main() {
  const hero = h(
    "section",
    { class: "hero" },
    h("h1", {}, brandName()),
    h("p", {}, "Pick a plan below. Pay once or by the month; teams buy seats for their members."),
  );
  const pricing = h("section", { id: "pricing", "aria-labelledby": "pricing-title" }, h("h2", { id: "pricing-title" }, "Pricing"));
  let products;
  try {
    ({ products } = await getProductsPublic());
  } catch (error) {
    pricing.append(errorBox(error));
    show(hero, pricing);
    return;
  }
  if (!products.length) {
    pricing.append(h("p", {}, "Nothing is on sale yet: the catalogue is empty."));
    show(hero, pricing);
    return;
  }
  const intervals = [...new Set(products.filter((p) => p.billingType === "subscription").map((p) => p.billingInterval))];
  const grid = h("div", { class: "plans" });
  const render = (interval) => {
    const shown = products.filter((p) => p.billingType !== "subscription" || !interval || p.billingInterval === interval);
    grid.replaceChildren(...shown.map(card)); // the API's order: featured first
  };
  if (intervals.includes("month") && intervals.includes("year")) {
    const choice = (value, label) =>
      h("label", {}, h("input", { type: "radio", name: "interval", value, checked: value === "month", onchange: () => render(value) }), ` ${label}`);
    pricing.append(h("fieldset", { class: "interval" }, h("legend", {}, "Billing"), choice("month", "Monthly"), choice("year", "Yearly")));
    render("month");
  } else {
    render(null);
  }
  pricing.append(grid);
  show(hero, pricing);
  if (location.hash === "#pricing") pricing.scrollIntoView();
}

main();
