// The web planner's page: a scenario form over the YAML, checked and advised through the API
// after each edit, with charts drawn here as SVG. No library, nothing loaded from elsewhere.
"use strict";

const DEBOUNCE_MS = 400;
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f5fbf", "#e8833a", "#2e9e6a", "#c0392b", "#8e6cc0", "#8c6d31", "#d45fa6",
                 "#7f8c8d", "#b8a92a", "#2bb5c4"];
const $ = (id) => document.getElementById(id);
const state = { seq: 0, timer: null, controller: null, partColours: {} };

// ---- API -------------------------------------------------------------------------------------

async function post(path, body, signal) {
  const init = { method: "POST", signal };
  if (body instanceof FormData) {
    init.body = body;
  } else {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const type = response.headers.get("content-type") || "";
  const doc = type.includes("json") ? await response.json() : await response.blob();
  return { status: response.status, doc };
}

function scenarioBody() {
  return { scenario: $("yaml").value, set: overrides() };
}

// ---- the form: each changed field is an override on the YAML ---------------------------------

function fields() {
  return Array.from(document.querySelectorAll("#form [data-key]"));
}

function fieldValue(el) {
  if (el.tagName === "FIELDSET") {
    const ids = Array.from(el.querySelectorAll("input:checked")).map((box) => box.value);
    return `[${ids.join(", ")}]`;
  }
  return el.value.trim();
}

function overrides() {
  return fields().filter((el) => el.dataset.dirty).map((el) => `${el.dataset.key}=${fieldValue(el)}`);
}

function lookup(obj, key) {
  return key.split(".").reduce((node, part) => (node == null ? undefined : node[part]), obj);
}

function fillForm(resolved) {
  for (const el of fields()) {
    if (el.dataset.dirty) continue;
    const value = lookup(resolved, el.dataset.key);
    if (el.tagName === "FIELDSET") {
      const chosen = new Set(value || []);
      for (const box of el.querySelectorAll("input")) box.checked = chosen.has(box.value);
    } else if (value === undefined || value === null) {
      el.value = "";
    } else {
      if (el.tagName === "SELECT" && !Array.from(el.options).some((o) => o.value === String(value))) {
        el.append(new Option(String(value)));
      }
      el.value = String(value);
    }
  }
}

function showOverrides() {
  const sets = overrides();
  $("cmdline").textContent = "fabricplan advise scenario.yaml" + sets.map((s) => ` --set ${s}`).join("");
  for (const el of fields()) {
    (el.tagName === "FIELDSET" ? el : el.parentElement).classList.toggle("overridden", !!el.dataset.dirty);
  }
}

function fill(select, values) {
  for (const v of values) select.append(new Option(v));
}

// ---- problems ---------------------------------------------------------------------------------

function clearProblems() {
  $("problems").replaceChildren();
  $("warnings").replaceChildren();
  for (const node of document.querySelectorAll(".field-problem")) node.remove();
  for (const node of document.querySelectorAll(".invalid")) node.classList.remove("invalid");
}

function showProblems(doc) {
  clearProblems();
  const list = $("problems");
  const head = document.createElement("li");
  head.textContent = doc.error || "invalid input";
  head.className = "headline";
  list.append(head);
  for (const p of doc.problems || []) {
    const item = document.createElement("li");
    item.textContent = p.text || `${p.field}: ${p.message}`;
    item.dataset.field = p.field;
    list.append(item);
    const el = fields().find((f) => p.field === f.dataset.key || p.field.startsWith(f.dataset.key + "["));
    if (el) {
      const holder = el.tagName === "FIELDSET" ? el : el.parentElement;
      holder.classList.add("invalid");
      const note = document.createElement("span");
      note.className = "field-problem";
      note.textContent = p.text;
      holder.append(note);
    }
  }
}

// What loads but is probably unintended (`scenario check`'s warnings), worded as the command
// line prints them: "warning: FIELD: MESSAGE (got VALUE)".
function showWarnings(warnings) {
  const list = $("warnings");
  list.replaceChildren();
  for (const w of warnings || []) {
    const item = document.createElement("li");
    const got = "value" in w ? ` (got ${pyRepr(w.value)})` : "";
    item.textContent = `warning: ${w.field}: ${w.message}${got}`;
    item.dataset.field = w.field;
    list.append(item);
  }
}

// A value as the command line quotes it (Python's repr): strings in single quotes.
function pyRepr(v) {
  return typeof v === "string" ? `'${v}'` : JSON.stringify(v);
}

// ---- updating after an edit -----------------------------------------------------------------

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
}

function schedule() {
  showOverrides();
  clearTimeout(state.timer);
  state.timer = setTimeout(update, DEBOUNCE_MS);
}

async function update() {
  const seq = ++state.seq;
  if (state.controller) state.controller.abort();
  const controller = (state.controller = new AbortController());
  const body = scenarioBody();
  setStatus("checking…", "busy");
  document.body.dataset.state = "busy";
  try {
    const check = await post("/api/scenario/check", body, controller.signal);
    if (seq !== state.seq) return;
    if (check.status !== 200) {
      showProblems(check.doc);
      $("results").classList.add("stale");
      setStatus("the scenario has problems: see the fields marked", "bad");
      document.body.dataset.state = "invalid";
      return;
    }
    clearProblems();
    showWarnings(check.doc.warnings);
    fillForm(check.doc.scenario);
    setStatus("computing…", "busy");
    const advice = await post("/api/advise", body, controller.signal);
    if (seq !== state.seq) return;
    if (advice.status !== 200) {
      showProblems(advice.doc);
      setStatus("the model cannot price this scenario", "bad");
      document.body.dataset.state = "invalid";
      return;
    }
    render(advice.doc, check.doc.scenario);
    const n = (check.doc.warnings || []).length;
    setStatus(n ? `up to date, with ${n} warning${n > 1 ? "s" : ""} under the fields` : "up to date");
    document.body.dataset.state = "ready";
  } catch (err) {
    if (err.name !== "AbortError") {
      setStatus(`no answer from the server (${err.message})`, "bad");
      document.body.dataset.state = "error";
    }
  }
}

// ---- results ----------------------------------------------------------------------------------

function money(v) {
  if (v == null) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return `$${(v / 1e9).toFixed(2)}B`;
  if (a >= 1e6) return `$${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e3) return `$${(v / 1e3).toFixed(1)}k`;
  return `$${v.toFixed(2)}`;
}

function num(v, digits) {
  return v == null ? "–" : Number(v).toFixed(digits);
}

function render(advice, resolved) {
  const rec = advice.recommendation;
  const results = $("results");
  results.classList.remove("stale");
  results.dataset.gpus = String(resolved.cluster.gpus);
  results.dataset.fabric = rec.fabric;
  $("rec-fabric").textContent = rec.fabric;
  $("rec-confidence").textContent =
    `on ${rec.topology}; confidence ${rec.confidence}: cheapest in ` +
    `${(rec.p_cheapest * 100).toFixed(0)} % of ${advice.uncertainty.samples.toLocaleString("en")} ` +
    `Monte Carlo samples`;
  $("reasons").replaceChildren(...rec.reasons.map((r) => {
    const li = document.createElement("li");
    li.textContent = r;
    return li;
  }));
  const headline = advice.costing.headline;
  const table = $("fabric-table");
  const head = ["fabric", "step (s)", "days (ideal)", advice.costing.meaning, "P(cheapest)"];
  const rows = advice.fabrics.map((f) => [
    f.fabric, num(f.step_time_s, 3), num(f.time_to_train_days, 1), money(f[headline]),
    `${((advice.uncertainty.p_cheapest[f.fabric] || 0) * 100).toFixed(0)} %`,
  ]);
  table.replaceChildren(tableRow(head, "th"), ...rows.map((r) => tableRow(r, "td")));
  const partsOf = (f) => Object.entries(f.breakdown || {})
    .filter(([k]) => !k.endsWith("_total_s"))
    .map(([k, v]) => ({ name: k.replace(/_s$/, ""), value: v }));
  drawBars($("chart-step"), advice.fabrics.map((f) => ({ label: f.fabric, parts: partsOf(f) })),
           (v) => `${v.toFixed(3)} s`, "step");
  $("cost-caption").textContent = `Cost per fabric: ${advice.costing.meaning}`;
  drawBars($("chart-cost"), advice.fabrics.map((f) => ({
    label: f.fabric, parts: [{ name: headline, value: f[headline] || 0 }],
  })), money, "cost", rec.fabric);
}

function tableRow(cells, tag) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const cell = document.createElement(tag);
    cell.textContent = c;
    tr.append(cell);
  }
  return tr;
}

function svgNode(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function colour(part) {
  if (!(part in state.partColours)) {
    state.partColours[part] = PALETTE[Object.keys(state.partColours).length % PALETTE.length];
  }
  return state.partColours[part];
}

// Horizontal bars, one per fabric, stacked by part (step) with a legend, or one bar each (cost,
// the recommended fabric's in the accent colour).
function drawBars(svg, rows, show, kind, recommended) {
  const width = Math.max(svg.clientWidth || 0, 360);
  const labelW = 110, valueW = 90, rowH = 26, barW = width - labelW - valueW;
  const max = Math.max(...rows.map((r) => r.parts.reduce((s, p) => s + p.value, 0)), 1e-12);
  const names = [...new Set(rows.flatMap((r) => r.parts.filter((p) => p.value > 0).map((p) => p.name)))];
  const legend = kind === "step" ? names : [];
  const height = rows.length * rowH + (legend.length ? 18 * Math.ceil(legend.length / 4) + 6 : 0);
  svg.replaceChildren();
  svg.setAttribute("height", String(height));
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  rows.forEach((row, i) => {
    const y = i * rowH + 4;
    svg.append(svgNode("text", { x: 0, y: y + 13 }, row.label));
    let x = labelW;
    let total = 0;
    for (const p of row.parts) {
      const w = (p.value / max) * barW;
      total += p.value;
      if (w <= 0) continue;
      const fill = kind === "cost" ? (row.label === recommended ? "#1f5fbf" : "#9aa5b5") : colour(p.name);
      const rect = svgNode("rect", {
        x, y, width: w.toFixed(2), height: rowH - 10, fill,
        "data-fabric": row.label, "data-part": p.name, "data-value": String(p.value),
      });
      rect.append(svgNode("title", {}, `${row.label} ${p.name}: ${show(p.value)}`));
      svg.append(rect);
      x += w;
    }
    svg.append(svgNode("text", { x: x + 6, y: y + 13, "data-total": String(total) }, show(total)));
  });
  legend.forEach((name, i) => {
    const x = (i % 4) * (width / 4), y = rows.length * rowH + 8 + 18 * Math.floor(i / 4);
    svg.append(svgNode("rect", { x, y, width: 10, height: 10, fill: colour(name) }));
    svg.append(svgNode("text", { x: x + 14, y: y + 9 }, name));
  });
}

// ---- grading a log ----------------------------------------------------------------------------

async function grade(event) {
  event.preventDefault();
  const out = $("grade-result");
  const file = $("log-file").files[0];
  if (!file) {
    out.textContent = "choose an nccl-tests log first";
    return;
  }
  const form = new FormData();
  form.append("log", file);
  form.append("scenario", $("yaml").value);
  for (const s of overrides()) form.append("set", s);
  if ($("grade-nodes").value) form.append("nodes", $("grade-nodes").value);
  if ($("grade-fabric").value) form.append("fabric", $("grade-fabric").value);
  out.textContent = "grading…";
  out.dataset.state = "busy";
  try {
    const { status, doc } = await post("/api/grade", form);
    out.replaceChildren();
    if (status !== 200) {
      out.append(paragraph(doc.error || `error ${status}`, "verdict-fail"));
      for (const p of doc.problems || []) out.append(paragraph(p.text || `${p.field}: ${p.message}`));
      out.dataset.state = "invalid";
      return;
    }
    const verdict = paragraph(`Verdict: ${doc.verdict.toUpperCase()}`, `verdict-${doc.verdict}`);
    verdict.id = "grade-verdict";
    out.append(verdict);
    for (const run of doc.runs) {
      const bw = run.bandwidth_ratio == null ? "–" : `${(run.bandwidth_ratio * 100).toFixed(0)} %`;
      const l = run.layout;
      out.append(paragraph(
        `${run.label} (${run.op}, ${l.nodes} x ${l.gpus_per_node} GPUs): ${run.verdict}; ` +
        `large-message busbw ${bw} of expected`, `verdict-${run.verdict}`));
      for (const f of run.findings) out.append(paragraph(`${f.severity} ${f.code}: ${f.message}`, "finding"));
    }
    out.dataset.state = "ready";
  } catch (err) {
    out.textContent = `no answer from the server (${err.message})`;
    out.dataset.state = "error";
  }
}

function paragraph(text, cls) {
  const p = document.createElement("p");
  p.textContent = text;
  if (cls) p.className = cls;
  return p;
}

// ---- the report -------------------------------------------------------------------------------

async function download() {
  const note = $("download-status");
  note.textContent = "building the report…";
  note.dataset.state = "busy";
  try {
    const { status, doc } = await post("/api/report", { ...scenarioBody() });
    if (status !== 200) {
      note.textContent = doc.error || `error ${status}`;
      note.dataset.state = "invalid";
      return;
    }
    const url = URL.createObjectURL(doc);
    const a = document.createElement("a");
    a.href = url;
    a.download = "fabricplan-report.html";
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    note.textContent = "report downloaded";
    note.dataset.state = "ready";
  } catch (err) {
    note.textContent = `no answer from the server (${err.message})`;
    note.dataset.state = "error";
  }
}

// ---- start ------------------------------------------------------------------------------------

async function start() {
  const [options, demo] = await Promise.all([
    fetch("/api/options").then((r) => r.json()),
    fetch("/static/demo.yaml").then((r) => r.text()),
  ]);
  fill($("f-gpu"), options.gpu);
  fill($("f-model"), options.model);
  fill($("f-design"), options.design);
  fill($("f-maturity"), options.network_maturity);
  for (const f of options.fabric) {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = f.id;
    label.append(box, ` ${f.id}`);
    $("f-fabric").append(label);
    $("grade-fabric").append(new Option(f.id));
  }
  for (const el of fields()) {
    el.addEventListener(el.tagName === "SELECT" || el.tagName === "FIELDSET" ? "change" : "input", () => {
      el.dataset.dirty = "1";
      schedule();
    });
  }
  $("yaml").addEventListener("input", schedule);
  $("reset").addEventListener("click", () => {
    for (const el of fields()) delete el.dataset.dirty;
    schedule();
  });
  $("grade-form").addEventListener("submit", grade);
  $("download").addEventListener("click", download);
  $("yaml").value = demo;
  showOverrides();
  update();
}

document.addEventListener("DOMContentLoaded", start);
