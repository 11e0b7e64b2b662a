// inspo view: filters over the trajectories and predictions of a page, and the metric curves of a run's overview.
// Vendored with the package (no CDN); DOM APIs only, no innerHTML: every string on the page stays text.
"use strict";

function readHash() {
  const wanted = {};
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    const [key, value] = part.split("=");
    if (key) wanted[decodeURIComponent(key)] = decodeURIComponent(value || "1");
  }
  return wanted;
}

function setupFilters(form) {
  const items = Array.from(document.querySelectorAll(form.dataset.target));
  const shown = form.querySelector(".shown");
  const apply = (writeHash) => {
    const state = {};
    let visible = 0;
    for (const input of form.querySelectorAll("input[type=checkbox]")) if (input.checked) state[input.name] = "1";
    for (const select of form.querySelectorAll("select")) if (select.value) state[select.name] = select.value;
    for (const item of items) {
      let ok = true;
      for (const [key, value] of Object.entries(state)) {
        if (item.dataset[key] !== value) { ok = false; break; }
      }
      item.hidden = !ok;
      if (ok) visible += 1;
    }
    shown.textContent = `${visible} of ${items.length} on this page shown`;
    if (writeHash) {
      const hash = Object.entries(state).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
      history.replaceState(null, "", hash.length ? `#${hash.join("&")}` : location.pathname + location.search);
    }
  };
  const load = () => {
    const wanted = readHash();
    for (const input of form.querySelectorAll("input[type=checkbox]")) input.checked = wanted[input.name] === "1";
    for (const select of form.querySelectorAll("select")) {
      const value = wanted[select.name] || "";
      if (value && !Array.from(select.options).some((o) => o.value === value)) {
        const option = document.createElement("option");
        option.value = value;
        option.textContent = value;
        select.appendChild(option);
      }
      select.value = value;
    }
    apply(false);
  };
  form.addEventListener("change", () => apply(true));
  window.addEventListener("hashchange", load);
  load();
}

const SVG = "http://www.w3.org/2000/svg";

function svgElement(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

function format(value) {
  return Math.abs(value) >= 1000 || (value !== 0 && Math.abs(value) < 0.001) ? value.toExponential(2) : value.toFixed(3);
}

function chart(name, points, evolutions) {
  const width = 360, height = 180, left = 56, right = 10, top = 22, bottom = 26;
  const svg = svgElement("svg", { width, height, class: "chart", role: "img", "aria-label": name });
  const title = svgElement("text", { x: left, y: 14, class: "chart-title" });
  title.textContent = name;
  svg.appendChild(title);
  const steps = points.map((p) => p[0]), values = points.map((p) => p[1]);
  const x0 = Math.min(...steps), x1 = Math.max(...steps), y0 = Math.min(...values), y1 = Math.max(...values);
  const x = (s) => left + ((s - x0) / Math.max(x1 - x0, 1)) * (width - left - right);
  const y = (v) => top + (1 - (v - y0) / (y1 - y0 || 1)) * (height - top - bottom);
  svg.appendChild(svgElement("rect", { x: left, y: top, width: width - left - right, height: height - top - bottom,
                                       class: "frame" }));
  for (const step of evolutions) {
    if (step < x0 || step > x1) continue;
    svg.appendChild(svgElement("line", { x1: x(step), x2: x(step), y1: top, y2: height - bottom, class: "evolution" }));
  }
  for (const [value, at] of [[y1, top + 4], [y0, height - bottom]]) {
    const label = svgElement("text", { x: left - 4, y: at, class: "tick", "text-anchor": "end" });
    label.textContent = format(value);
    svg.appendChild(label);
  }
  for (const [step, anchor] of [[x0, "start"], [x1, "end"]]) {
    const label = svgElement("text", { x: x(step), y: height - 8, class: "tick", "text-anchor": anchor });
    label.textContent = `step ${step}`;
    svg.appendChild(label);
  }
  svg.appendChild(svgElement("polyline", { points: points.map((p) => `${x(p[0])},${y(p[1])}`).join(" "),
                                           class: "line" }));
  for (const [step, value] of points) {
    const dot = svgElement("circle", { cx: x(step), cy: y(value), r: 3, class: "dot" });
    const tip = svgElement("title", {});
    tip.textContent = `step ${step}: ${value}`;
    dot.appendChild(tip);
    svg.appendChild(dot);
  }
  return svg;
}

function setupCurves(section) {
  const data = JSON.parse(document.getElementById("curves-data").textContent);
  const charts = section.querySelector(".charts");
  const draw = () => {
    charts.replaceChildren();
    for (const input of section.querySelectorAll(".metric-list input")) {
      const points = data.series[input.value];
      if (input.checked && points && points.length) charts.appendChild(chart(input.value, points, data.evolutions));
    }
  };
  section.addEventListener("change", draw);
  draw();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form.filters")) setupFilters(form);
  for (const section of document.querySelectorAll("section.curves")) setupCurves(section);
});
