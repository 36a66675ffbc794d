import { h, begin, show } from "../ui.js";

await begin();
show(h("p", {}, "Nothing is at this address. ", h("a", { href: "/" }, "Go to the home page")));
