// Where a cancellation e-mail asks why: the reply goes to the founder's inbox.
import { CONFIG } from "../../config.js";
import { h, begin, show } from "../ui.js";

await begin();
const topic = new URLSearchParams(location.search).get("topic") || "feedback";
const address = CONFIG.supportEmail;
show(
  h("p", {}, topic === "cancellation"
    ? "Sorry to see you go. What made you cancel, and what would have kept you? One line helps."
    : "What should we improve? One line helps."),
  address
    ? h("p", {}, h("a", { class: "button", href: `mailto:${address}?subject=${encodeURIComponent(`Feedback: ${topic}`)}` }, `Write to ${address}`))
    : h("p", {}, "Reply to the e-mail that brought you here: it reaches us."),
);
