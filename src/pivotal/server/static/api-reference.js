// Swagger UI (swagger-ui-bundle.js, loaded just before this file) over the server's OpenAPI
// document. A file, not a script in the page: the page's Content-Security-Policy runs
// scripts of this origin only. No validator badge: the page asks no other host anything.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  deepLinking: true,
  validatorUrl: null,
});
