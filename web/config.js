// Where this frontend finds the API and Supabase Auth. A deployed host serves this file as
// written here (docs/deploy/); `make run` serves its own, from its settings (dev/web.py).
export const CONFIG = {
  // The API's origin; "" when it is this page's origin (the same host, or a rewrite to it).
  apiBase: "",
  // SUPABASE_URL and SUPABASE_PUBLISHABLE_KEY (public: a browser sends them anyway).
  supabaseUrl: null,
  supabaseKey: null,
  // COOKIE_DOMAIN: set when this frontend and the API are sibling hosts (app. and api.).
  cookieDomain: null,
  brand: "Your SaaS",
  currency: "usd",
  supportEmail: null,
};
