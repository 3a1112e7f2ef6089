// app.js wires the demo page to the engine through the package's public
// API (pkg/index.js: createEngine → worker.js → wasm), as any page would.
// The ids it uses and the URL parameters it reads are listed in README.md.
import { createEngine, TesseraError } from "./pkg/index.js";

const $ = (id) => document.getElementById(id);
const el = {
  adapter: $("adapter"), adapterText: $("adapter-text"),
  notice: $("notice"), noticeText: $("notice-text"), noticeDetail: $("notice-detail"), useCPU: $("use-cpu"),
  modelForm: $("model-form"), modelURL: $("model-url"), modelList: $("model-list"), load: $("load"),
  file: $("model-file"), drop: $("drop-zone"), quant: $("quant"), useCache: $("use-cache"), clearCache: $("clear-cache"),
  progress: $("progress"), progressLabel: $("progress-label"), modelInfo: $("model-info"),
  prompt: $("prompt"), generate: $("generate"), stop: $("stop"),
  temperature: $("temperature"), topK: $("top-k"), topP: $("top-p"), maxTokens: $("max-tokens"), seed: $("seed"),
  ttft: $("ttft"), tps: $("tps"), tokens: $("tokens"),
  promptEcho: $("prompt-echo"), output: $("output"), status: $("status"),
  catalogue: $("catalogue"), catalogueAbout: $("catalogue-about"), estimate: $("estimate"),
  modeChat: $("mode-chat"), modeCompletion: $("mode-completion"), chat: $("chat"), completion: $("completion"),
  system: $("system-prompt"), chatTemplate: $("chat-template"), chatLog: $("chat-log"), chatInput: $("chat-input"),
  send: $("send"), regenerate: $("regenerate"), clearChat: $("clear-chat"),
};
const textBox = document.querySelector(".text");

// What tests and curious users can look at: every progress event, the last
// stats and model, and the errors shown.
const demo = (window.tesseraDemo = { progress: [], stats: null, model: null, errors: [], messages: [], estimate: null });
let engine = null; // one engine (one worker) for the page's life; models load into it
let running = null; // the AbortController of the load or generation under way

let device = "webgpu";
let choice = { kind: "url" }; // or {kind: "file", file, files} (files: a split model's parts)
let loaded = null; // {key, info}
let shownError = false;
let webgpuOK = null; // what info() found: true, false, or not asked yet

// ---- URL parameters -------------------------------------------------------

const params = new URLSearchParams(location.search);
const setFrom = (name, input) => {
  if (params.has(name)) input.value = params.get(name);
};
setFrom("model", el.modelURL);
setFrom("prompt", el.prompt);
setFrom("temperature", el.temperature);
setFrom("topk", el.topK);
setFrom("topp", el.topP);
setFrom("steps", el.maxTokens);
setFrom("seed", el.seed);
setFrom("quant", el.quant);
if (params.get("cache") === "0") el.useCache.checked = false;
if (params.get("device") === "cpu") device = "cpu";
if (params.has("system")) el.system.value = params.get("system");

// ---- State ------------------------------------------------------------------

function setState(state) {
  document.body.dataset.state = state;
  const working = state === "loading" || state === "generating";
  el.generate.disabled = working;
  el.load.disabled = working;
  el.file.disabled = working;
  el.clearCache.disabled = working;
  el.stop.disabled = !working;
  el.send.disabled = working;
  el.regenerate.disabled = working;
  el.clearChat.disabled = working;
  el.generate.textContent = state === "generating" ? "Generating…" : "Generate";
}

function say(text) {
  el.status.textContent = text;
}

function formatBytes(n) {
  if (!(n >= 0)) return "?";
  const units = ["B", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${n.toFixed(i === 0 || n >= 100 ? 0 : 1)} ${units[i]}`;
}

function formatCount(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

// ---- Errors -----------------------------------------------------------------

const advice = {
  "no-webgpu": "This browser cannot run the model on the GPU: WebGPU is not available. " +
    "Use a recent Chrome or Edge, Safari 26 or Firefox 141 or later, serve the page over https or from localhost, " +
    "and check that hardware acceleration is on.",
  "adapter-limits": "Your GPU adapter cannot hold this model. Try int4 weights or a smaller model.",
  "out-of-memory": "The GPU ran out of memory for this model. Try int4 weights, a shorter context or a smaller model.",
  "no-wasm": "The engine could not start.",
  "network": "The model could not be downloaded.",
  "storage": "The browser's storage refused the model. Clear the cache or untick “Keep downloads”.",
  "bad-model": "This file is not a model Tessera can run.",
  "bad-source": "Choose a model first.",
  "no-model": "Load a model first.",
};

function showNotice(text, detail, offerCPU) {
  el.noticeText.textContent = text;
  el.noticeDetail.textContent = detail || "";
  el.useCPU.hidden = !offerCPU;
  el.notice.hidden = false;
}

function showError(err) {
  const code = err.code || "error";
  demo.errors.push({ code, message: err.message });
  if (code === "aborted") {
    say("Stopped.");
    setState(document.body.dataset.state === "loading" && !loaded ? "idle" : "done");
    return;
  }
  const lead = advice[code];
  if (document.body.dataset.state === "loading") {
    el.progress.value = 0;
    el.progressLabel.textContent = "The model is not loaded.";
  }
  if (code === "no-webgpu" || code === "adapter-limits" || code === "out-of-memory" || code === "no-wasm") {
    showNotice(lead || err.message, lead ? err.message : "", code === "no-webgpu" && device !== "cpu");
    say(code === "no-webgpu" ? "WebGPU is not available: see above." : lead || err.message);
  } else {
    say(lead ? `${lead} (${err.message})` : err.message);
  }
  shownError = true;
  setState("error");
}

// ---- The adapter badge -------------------------------------------------------

function showAdapter(info) {
  el.adapter.classList.remove("ok", "bad");
  if (device === "cpu") {
    el.adapterText.textContent = "CPU (Go in wasm, no WebGPU)";
    el.adapter.classList.add("ok");
    return;
  }
  if (!info.webgpu || !info.adapter) {
    el.adapterText.textContent = "No WebGPU";
    el.adapter.classList.add("bad");
    showNotice(advice["no-webgpu"], info.error || "no adapter", true);
    return;
  }
  const a = info.adapter;
  const name = a.name || "WebGPU adapter";
  el.adapterText.textContent = `${name} · ${a.path} kernels`;
  el.adapter.title = `${a.vendor} ${a.architecture} (${a.deviceType}); shader-f16: ${a.shaderF16 ? "yes" : "no"}; ` +
    `max buffer ${formatBytes(a.maxBufferSize)}, max storage binding ${formatBytes(a.maxStorageBufferBindingSize)}`;
  el.adapter.classList.add("ok");
}

el.useCPU.addEventListener("click", () => {
  device = "cpu";
  el.notice.hidden = true;
  showAdapter({});
  say("The model will run on the CPU: expect it to be slow.");
  if (document.body.dataset.state === "error") setState(loaded ? "done" : "idle");
});

// ---- Loading ------------------------------------------------------------------

function currentKey() {
  const src = choice.kind === "file"
    ? choice.files.map((f) => `file:${f.name}:${f.size}:${f.lastModified}`).join(",")
    : `url:${new URL(el.modelURL.value.trim(), location.href).href}`;
  return `${src}|${el.quant.value}|${device}`;
}

function onProgress(p) {
  demo.progress.push(p);
  const frac = p.total > 0 ? Math.min(1, p.done / p.total) : null;
  if (frac === null) el.progress.removeAttribute("value");
  else el.progress.value = frac;
  const pct = frac === null ? "" : ` ${Math.round(frac * 100)}%`;
  const of = p.total > 0 ? `${formatBytes(p.done)} of ${formatBytes(p.total)}` : formatBytes(p.done);
  el.progressLabel.textContent = {
    download: `Downloading: ${of}${pct ? " ·" + pct : ""}`,
    verify: `Checking the cached copy:${pct}`,
    upload: device === "cpu" ? `Reading weights: ${of}` : `Uploading weights to the GPU: ${of}`,
  }[p.phase] || `${p.phase}: ${of}`;
}

async function load() {
  if (device === "webgpu" && webgpuOK === false) {
    throw Object.assign(new Error(el.noticeDetail.textContent || "no WebGPU adapter"), { code: "no-webgpu" });
  }
  const key = currentKey();
  let source;
  let label;
  if (choice.kind === "file") {
    source = choice.files.length > 1 ? { files: choice.files } : { file: choice.file };
    label = choice.files.length > 1 ? `${choice.file.name} (${choice.files.length} parts)` : choice.file.name;
  } else {
    const raw = el.modelURL.value.trim();
    if (!raw) throw Object.assign(new Error("no model URL"), { code: "bad-source" });
    source = { url: new URL(raw, location.href).href };
    label = raw.split("/").pop();
  }
  setState("loading");
  el.progress.value = 0;
  el.progressLabel.textContent = `Loading ${label}…`;
  el.modelInfo.textContent = "";
  say("");
  loaded = null;
  running = new AbortController();
  const signal = running.signal;
  // The memory it will take, from the file's header alone (a URL by range
  // requests), before the download starts.
  try {
    const est = await engine.inspect(source.url || source.files || source.file, { quant: el.quant.value, device });
    demo.estimate = est;
    showEstimate(est);
  } catch (err) {
    if (err.code === "bad-model") throw err;
    el.estimate.textContent = "";
  }
  if (signal.aborted) throw new TesseraError("stopped", "aborted");
  const options = { quant: el.quant.value, cache: el.useCache.checked, device, onProgress, signal };
  const info = await engine.load(source.url || source.files || source.file, options);
  loaded = { key, info };
  demo.model = info;
  el.progress.value = 1;
  const where = info.source === "url" ? (info.cached ? "from the browser's cache" : "downloaded") : "from your disk";
  el.progressLabel.textContent = `Loaded ${info.name} in ${(info.loadMs / 1000).toFixed(2)} s, ${where}.`;
  el.modelInfo.textContent = [
    `${formatCount(info.params)} parameters`,
    `${info.layers} layers`,
    `context ${info.context}`,
    `weights ${formatBytes(info.weightBytes)} (${info.quant})`,
    info.backend === "webgpu" ? `${info.path} kernels` : "CPU",
  ].map((item) => item.replaceAll(" ", "\u00a0")).join(" · ");
  el.chatTemplate.textContent = info.chatTemplate ? "Chat uses the model's own template (from the GGUF)."
    : "This model has no chat template: chat uses plain “User: … Assistant:” lines.";
  return info;
}

function showEstimate(est) {
  const m = est.memory;
  el.estimate.textContent = `${est.name}: ${formatCount(est.params)} parameters, ${formatBytes(est.size)} file; ` +
    `needs about ${formatBytes(m.total)} of GPU memory (${m.quant} weights ${formatBytes(m.weights)}, ` +
    `KV cache ${formatBytes(m.kv)} for ${m.context} tokens).`;
}

async function loadOnly() {
  try {
    await load();
    setState("idle");
    say("Ready. Write a prompt, or just press Generate.");
  } catch (err) {
    showError(err);
  }
}

el.modelForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  choice = { kind: "url" };
  loadOnly();
});
el.modelURL.addEventListener("input", () => {
  choice = { kind: "url" };
});

// pickFile loads a picked or dropped file, or the parts of a split model
// (NAME-00001-of-0000N.gguf…) picked together.
function pickFile(list) {
  const files = Array.from(list || []).sort((a, b) => a.name.localeCompare(b.name));
  if (!files.length) return;
  if (document.body.dataset.state === "loading" || document.body.dataset.state === "generating") return;
  choice = { kind: "file", file: files[0], files };
  loadOnly();
}

el.file.addEventListener("change", () => pickFile(el.file.files));

// Drop a file anywhere on the page; the drop zone lights up.
let dragDepth = 0;
window.addEventListener("dragenter", (ev) => {
  if (!ev.dataTransfer || !Array.from(ev.dataTransfer.types).includes("Files")) return;
  dragDepth++;
  el.drop.classList.add("over");
});
window.addEventListener("dragleave", () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (dragDepth === 0) el.drop.classList.remove("over");
});
window.addEventListener("dragover", (ev) => ev.preventDefault());
window.addEventListener("drop", (ev) => {
  ev.preventDefault();
  dragDepth = 0;
  el.drop.classList.remove("over");
  pickFile(ev.dataTransfer && ev.dataTransfer.files);
});

el.clearCache.addEventListener("click", async () => {
  try {
    const r = await engine.clearCache();
    say(r.removed ? `Removed ${r.removed} model${r.removed > 1 ? "s" : ""} (${formatBytes(r.bytes)}) from browser storage.`
      : "The cache was already empty.");
  } catch (err) {
    showError(err);
  }
});

// ---- Generating -----------------------------------------------------------------

function number(input, fallback) {
  const v = parseFloat(input.value);
  return Number.isFinite(v) ? v : fallback;
}

// samplingOptions are the settings, in OpenAI's names.
function samplingOptions() {
  const opts = {
    temperature: Math.max(0, number(el.temperature, 0.8)),
    top_k: Math.max(0, Math.round(number(el.topK, 0))),
    top_p: Math.min(1, Math.max(0, number(el.topP, 1))),
    max_tokens: Math.max(1, Math.round(number(el.maxTokens, 256))),
  };
  const seed = parseInt(el.seed.value, 10);
  if (Number.isFinite(seed) && seed >= 0) opts.seed = seed;
  return opts;
}

function showLive(count, t0, tFirst, now) {
  el.tokens.textContent = String(count);
  if (tFirst !== null) el.ttft.textContent = `${Math.round(tFirst - t0)} ms`;
  if (count > 1 && now > tFirst) el.tps.textContent = ((count - 1) / ((now - tFirst) / 1000)).toFixed(1);
}

// generate streams a completion (input.prompt) or a chat reply
// (input.messages) into out, a text node's parent, and resolves to the stats.
async function generate(input, out) {
  el.ttft.textContent = "–";
  el.tps.textContent = "–";
  el.tokens.textContent = "0";
  delete document.body.dataset.stopped;
  say("Generating…");
  setState("generating");
  running = new AbortController();
  const t0 = performance.now();
  let tFirst = null;
  let count = 0;
  let pending = "";
  let frame = 0;
  const scroller = input.messages ? el.chatLog : textBox;
  // A reasoning model's thinking (reasoning_content) goes in a dimmed
  // block of its own before the reply.
  let thinking = null;
  let pendingThought = "";
  const flush = () => {
    frame = 0;
    if (pending || pendingThought) {
      const stick = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
      if (pendingThought) {
        if (!thinking) {
          thinking = document.createElement("span");
          thinking.className = "reasoning";
          out.append(thinking);
        }
        thinking.append(pendingThought);
        pendingThought = "";
      }
      out.append(pending);
      pending = "";
      if (stick) scroller.scrollTop = scroller.scrollHeight;
    }
    showLive(count, t0, tFirst, performance.now());
  };
  const params = { ...input, ...samplingOptions(), stream: true, signal: running.signal };
  let stats;
  try {
    const stream = input.messages ? await engine.chat.completions.create(params) : await engine.completions.create(params);
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      const text = input.messages ? c.delta.content : c.text;
      const thought = input.messages ? c.delta.reasoning_content : "";
      if (chunk.tessera && chunk.tessera.token_id >= 0) {
        if (tFirst === null) tFirst = performance.now();
        count++;
      }
      if (text || thought) {
        pending += text || "";
        pendingThought += thought || "";
        if (!frame) frame = requestAnimationFrame(flush);
      }
    }
    stats = stream.stats;
  } catch (err) {
    if (frame) cancelAnimationFrame(frame);
    flush();
    if (err.code !== "aborted" || !err.stats) throw err;
    stats = err.stats; // stopped: keep what came
  }
  if (frame) cancelAnimationFrame(frame);
  flush();
  demo.stats = stats;
  el.tokens.textContent = String(stats.generated);
  el.ttft.textContent = `${Math.round(stats.ttftMs)} ms`;
  if (stats.decodeTps > 0) el.tps.textContent = stats.decodeTps.toFixed(1);
  document.body.dataset.stopped = stats.stopped;
  const why = {
    max: "reached the token limit",
    eos: "the model ended the text",
    stop: "reached a stop string",
    length: "the context is full",
    abort: "stopped",
  }[stats.stopped];
  say(`${stats.generated} tokens in ${(stats.totalMs / 1000).toFixed(2)} s: ${why}.`);
  setState("done");
  return stats;
}

async function ensureLoaded() {
  if (!loaded || loaded.key !== currentKey()) await load();
}

async function run() {
  const state = document.body.dataset.state;
  if (state === "loading" || state === "generating") return;
  if (el.modeChat.checked) return sendChat();
  try {
    await ensureLoaded();
  } catch (err) {
    showError(err);
    return;
  }
  const prompt = el.prompt.value;
  el.promptEcho.textContent = prompt;
  el.output.textContent = "";
  try {
    await generate({ prompt }, el.output);
  } catch (err) {
    showError(err);
  }
}

// ---- Chat ---------------------------------------------------------------------

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  const r = document.createElement("span");
  r.className = "role";
  r.textContent = role === "user" ? "You" : "Model";
  const body = document.createElement("span");
  body.className = "content";
  body.textContent = text;
  div.append(r, body);
  el.chatLog.append(div);
  el.chatLog.scrollTop = el.chatLog.scrollHeight;
  return body;
}

function conversation() {
  const sys = el.system.value.trim();
  return (sys ? [{ role: "system", content: sys }] : []).concat(demo.messages);
}

// reply asks the model for the next assistant turn of the conversation.
async function reply() {
  const body = bubble("assistant", "");
  const before = demo.messages.length;
  try {
    await generate({ messages: conversation() }, body);
    if (demo.messages.length === before) demo.messages.push({ role: "assistant", content: body.textContent });
  } catch (err) {
    body.parentElement.remove();
    showError(err);
  }
}

async function sendChat() {
  const state = document.body.dataset.state;
  if (state === "loading" || state === "generating") return;
  const text = el.chatInput.value.trim();
  try {
    await ensureLoaded();
  } catch (err) {
    showError(err);
    return;
  }
  if (text) {
    demo.messages.push({ role: "user", content: text });
    bubble("user", text);
    el.chatInput.value = "";
  }
  if (!demo.messages.length || demo.messages[demo.messages.length - 1].role !== "user") {
    say("Write a message first.");
    return;
  }
  await reply();
}

async function regenerate() {
  const state = document.body.dataset.state;
  if (state === "loading" || state === "generating") return;
  if (demo.messages.length && demo.messages[demo.messages.length - 1].role === "assistant") {
    demo.messages.pop();
    el.chatLog.lastElementChild && el.chatLog.lastElementChild.remove();
  }
  if (!demo.messages.length) {
    say("Nothing to regenerate.");
    return;
  }
  try {
    await ensureLoaded();
  } catch (err) {
    showError(err);
    return;
  }
  await reply();
}

function setMode() {
  const chat = el.modeChat.checked;
  el.chat.hidden = !chat;
  el.completion.hidden = chat;
  document.body.dataset.mode = chat ? "chat" : "completion";
}
el.modeChat.addEventListener("change", setMode);
el.modeCompletion.addEventListener("change", setMode);
if (params.get("mode") === "chat") el.modeChat.checked = true;
setMode();
el.send.addEventListener("click", sendChat);
el.regenerate.addEventListener("click", regenerate);
el.clearChat.addEventListener("click", () => {
  demo.messages = [];
  el.chatLog.textContent = "";
  say("Conversation cleared.");
});
el.chatInput.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    sendChat();
  }
});

el.generate.addEventListener("click", run);
const stop = () => running && running.abort();
el.stop.addEventListener("click", stop);
el.prompt.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    run();
  }
});
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && !el.stop.disabled) stop();
});

// ---- Start --------------------------------------------------------------------

async function listModels() {
  try {
    const r = await fetch("models/", { headers: { Accept: "application/json" } });
    if (!r.ok) return;
    for (const m of await r.json()) {
      const opt = document.createElement("option");
      opt.value = `/models/${m.name}`;
      opt.label = `${m.name} (${formatBytes(m.size)})`;
      el.modelList.append(opt);
    }
  } catch {
    // No model folder on this server: the URL field still works.
  }
}

// The catalogue: models.json, GGUF files on the Hugging Face Hub.
async function listCatalogue() {
  try {
    const r = await fetch("models.json");
    if (!r.ok) return;
    const cat = await r.json();
    demo.catalogue = cat.models;
    for (const m of cat.models) {
      const opt = document.createElement("option");
      opt.value = m.url;
      opt.textContent = `${m.name} · ${formatBytes(m.size)} · needs ~${formatBytes(m.memory)}`;
      el.catalogue.append(opt);
    }
  } catch {
    // No catalogue: the URL field and the file picker still work.
  }
}
el.catalogue.addEventListener("change", () => {
  const m = (demo.catalogue || []).find((m) => m.url === el.catalogue.value);
  if (!m) return;
  el.modelURL.value = m.url;
  choice = { kind: "url" };
  el.catalogueAbout.textContent = `${m.about} ${formatBytes(m.size)} download, about ${formatBytes(m.memory)} of GPU memory.`;
  if (m.chat) {
    el.modeChat.checked = true;
    setMode();
  }
});

async function boot() {
  setState("idle");
  listModels();
  listCatalogue();
  try {
    engine = await createEngine({});
    demo.engine = engine;
    demo.client = engine.client;
  } catch (err) {
    el.adapterText.textContent = "Engine failed to start";
    el.adapter.classList.add("bad");
    showError(Object.assign(err, { code: err.code || "no-wasm" }));
    return;
  }
  let info;
  try {
    info = await engine.info();
  } catch (err) {
    info = { webgpu: false, error: err.message };
  }
  webgpuOK = !!(info.webgpu && info.adapter);
  showAdapter(info);
  if (!shownError) say(info.webgpu ? "Pick a model, or press Generate to use the one above." : "");
  if (params.get("autostart") === "1") run();
}

boot();
