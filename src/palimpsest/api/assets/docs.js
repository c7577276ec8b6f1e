// Renders /openapi.json as a readable page. Shipped with the server; loads nothing else.
// Every piece of text from the document goes in through textContent, never as markup.
"use strict";

const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
};

function resolve(doc, schema, seen) {
  if (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/components/schemas/")) {
    const name = schema.$ref.slice("#/components/schemas/".length);
    if (seen.has(name)) return { name, schema: null };
    return { name, schema: (doc.components && doc.components.schemas || {})[name] || null };
  }
  return { name: null, schema };
}

// A compact text form of a JSON Schema: names, types, bounds, required marks; $refs expanded
// two levels deep (deeper ones by name only).
function describe(doc, schema, depth = 0, seen = new Set()) {
  const pad = "  ".repeat(depth);
  const { name, schema: s } = resolve(doc, schema, seen);
  if (!s) return `${pad}${name || "any"}`;
  const next = new Set(seen);
  if (name) next.add(name);
  if (name && depth > 1) return `${pad}${name}`;
  const lines = [];
  const label = name ? `${name}: ` : "";
  const variants = s.anyOf || s.oneOf;
  if (variants) {
    lines.push(`${pad}${label}one of`);
    for (const v of variants) lines.push(describe(doc, v, depth + 1, next));
    return lines.join("\n");
  }
  const type = Array.isArray(s.type) ? s.type.join(" | ") : (s.type || (s.const !== undefined
    ? `const ${JSON.stringify(s.const)}` : (s.enum ? "enum" : "any")));
  const bounds = [];
  for (const key of ["minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
                     "pattern", "format"]) {
    if (s[key] !== undefined) bounds.push(`${key} ${s[key]}`);
  }
  if (s.enum) bounds.push(s.enum.map((v) => JSON.stringify(v)).join(" | "));
  lines.push(`${pad}${label}${type}${bounds.length ? `  (${bounds.join(", ")})` : ""}`);
  if (s.properties) {
    const required = new Set(s.required || []);
    for (const [prop, sub] of Object.entries(s.properties)) {
      const inner = describe(doc, sub, depth + 2, next).trimStart();
      lines.push(`${pad}  ${prop}${required.has(prop) ? " *" : ""}: ${inner}`);
    }
  }
  if (s.items) lines.push(`${pad}  items: ${describe(doc, s.items, depth + 2, next).trimStart()}`);
  return lines.join("\n");
}

function operationNode(doc, path, method, op) {
  const isPublic = Array.isArray(op.security) && op.security.length === 0;
  const summary = el("summary", {},
    el("span", { class: `method ${method}` }, method.toUpperCase()),
    el("span", { class: "path" }, path),
    el("span", { class: "muted" }, op.summary || ""),
    isPublic ? el("span", { class: "public", title: "no credential needed" }, "public") : null);
  const body = el("div", { class: "body" });
  if (op.description) body.append(el("p", {}, op.description));
  const params = op.parameters || [];
  if (params.length) {
    const rows = params.map((p) => el("tr", {},
      el("td", {}, el("code", {}, p.name)), el("td", {}, p.in),
      el("td", {}, p.required ? "required" : ""),
      el("td", {}, el("code", {}, describe(doc, p.schema || {})))));
    body.append(el("h3", {}, "Parameters"),
      el("table", {}, el("tr", {}, el("th", {}, "name"), el("th", {}, "in"),
        el("th", {}, ""), el("th", {}, "schema")), ...rows));
  }
  const content = op.requestBody && op.requestBody.content;
  if (content) {
    body.append(el("h3", {}, "Request body"));
    for (const [media, entry] of Object.entries(content)) {
      body.append(el("div", { class: "muted" }, media),
                  el("div", { class: "schema" }, describe(doc, entry.schema || {})));
    }
  }
  const responses = op.responses || {};
  body.append(el("h3", {}, "Responses"));
  for (const [status, response] of Object.entries(responses)) {
    const media = response.content ? Object.entries(response.content)[0] : null;
    body.append(el("div", {}, el("code", {}, status), " ", response.description || ""));
    if (media && media[1].schema) {
      body.append(el("div", { class: "schema" }, `${media[0]}\n${describe(doc, media[1].schema)}`));
    }
  }
  const node = el("details", { class: "op" }, summary, body);
  node.dataset.search = `${method} ${path} ${op.summary || ""} ${(op.tags || []).join(" ")}`
    .toLowerCase();
  return node;
}

function render(doc) {
  document.getElementById("title").textContent = `${doc.info.title} ${doc.info.version}`;
  document.getElementById("summary").textContent = doc.info.description || "";
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!["get", "put", "post", "patch", "delete"].includes(method)) continue;
      const tag = (op.tags && op.tags[0]) || "other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operationNode(doc, path, method, op));
    }
  }
  const main = document.getElementById("operations");
  main.replaceChildren();
  for (const [tag, nodes] of groups) {
    const section = el("section", { "data-tag": tag }, el("h2", {}, tag), ...nodes);
    main.append(section);
  }
  const count = [...groups.values()].reduce((n, nodes) => n + nodes.length, 0);
  main.dataset.operations = String(count);
  const filter = document.getElementById("filter");
  filter.addEventListener("input", () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const node of main.querySelectorAll("details.op")) {
      node.hidden = !words.every((w) => node.dataset.search.includes(w));
    }
  });
}

fetch("/openapi.json", { credentials: "omit" })
  .then((r) => { if (!r.ok) throw new Error(`HTTP ${r.status}`); return r.json(); })
  .then(render)
  .catch((e) => {
    document.getElementById("summary").textContent = `Could not load /openapi.json (${e.message}).`;
  });
