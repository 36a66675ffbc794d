// The documentation pages the e-mails link to (getting started; a repository's quick start
// and deployment): the product's own guides go here.
import { h, begin, show } from "../ui.js";

await begin();
const GUIDES = {
  "/docs/getting-started": [
    "Sign in with the e-mail you bought with: the sign-in page sends you a link.",
    "Your dashboard shows your access, where it comes from, and your purchases with their downloads.",
    "A repository product: enter your GitHub username on the dashboard and accept GitHub's invitation.",
  ],
  "/docs/quick-start": [
    "Accept the invitation GitHub e-mailed you, then clone the repository.",
    "Its README says how to run it locally in one command.",
  ],
  "/docs/deploy": [
    "The repository's docs say how to deploy it: one command builds and deploys the whole service.",
  ],
};
const steps = GUIDES[location.pathname.replace(/\/$/, "")] || [];
show(h("ol", {}, ...steps.map((s) => h("li", {}, s))), h("p", {}, h("a", { href: "/dashboard" }, "Go to your dashboard")));
