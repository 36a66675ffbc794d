import { h, header, show } from "../ui.js";

header();
show(h("p", {}, "Nothing is at this address. ", h("a", { href: "/" }, "Go to the home page")));
