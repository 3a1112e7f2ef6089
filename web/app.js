// app.js wires the demo page to the engine through the package's public
// API (pkg/index.js: createEngine → worker.js → wasm), as any page would:
// the model panel (catalogue, file, progress), the settings, the
// completion playground, errors, shortcuts; the chat is chat.js. The ids
// it uses and the URL parameters it reads are listed in README.md.
import { createEngine, TesseraError } from "./pkg/index.js";
import { Chat } from "./chat.js";

const $ = (id) => document.getElementById(id);
const el = {
  adapter: $("adapter"), adapterText: $("adapter-text"), menu: $("menu"), sidebar: $("sidebar"),
  notice: $("notice"), noticeText: $("notice-text"), noticeDetail: $("notice-detail"), useCPU: $("use-cpu"),
  loadAnyway: $("load-anyway"), noticeClearCache: $("notice-clear-cache"), noticeClose: $("notice-close"),
  modelPanel: $("model-panel"), modelSummary: $("model-summary"),
  modelForm: $("model-form"), modelURL: $("model-url"), modelList: $("model-list"), load: $("load"), projectorURL: $("projector-url"),
  file: $("model-file"), drop: $("drop-zone"), quant: $("quant"), useCache: $("use-cache"), clearCache: $("clear-cache"),
  progress: $("progress"), progressLabel: $("progress-label"), modelInfo: $("model-info"),
  prompt: $("prompt"), generate: $("generate"), stop: $("stop"),
  temperature: $("temperature"), topK: $("top-k"), topP: $("top-p"), maxTokens: $("max-tokens"), seed: $("seed"),
  responseFormat: $("response-format"), jsonSchema: $("json-schema"), jsonSchemaField: $("json-schema-field"),
  ttft: $("ttft"), tps: $("tps"), tokens: $("tokens"),
  promptEcho: $("prompt-echo"), output: $("output"), status: $("status"),
  catalogue: $("catalogue"), catalogueAbout: $("catalogue-about"), estimate: $("estimate"),
  modeChat: $("mode-chat"), modeCompletion: $("mode-completion"), chat: $("chat"), completion: $("completion"),
  system: $("system-prompt"), chatTemplate: $("chat-template"), chatLog: $("chat-log"), chatEmpty: $("chat-empty"),
  chatInput: $("chat-input"), composer: $("composer"), send: $("send"), regenerate: $("regenerate"), clearChat: $("clear-chat"),
  attachments: $("attachments"), imageFile: $("image-file"), attach: $("attach"),
  replyActions: $("reply-actions"), stopReply: $("stop-reply"), copyReply: $("copy-reply"),
  conversations: $("conversations"), newChat: $("new-chat"), storeNote: $("store-note"),
  shortcuts: $("shortcuts"), shortcutsOpen: $("shortcuts-open"),
};
const textBox = document.querySelector(".text");

// What tests and curious users can look at: every progress event, the last
// stats and model, the errors shown, the chat's messages.
const demo = (window.tesseraDemo = { progress: [], stats: null, model: null, errors: [], messages: [], estimate: null });
let engine = null; // one engine (one worker) for the page's life; models load into it
let running = null; // the AbortController of the load or generation under way

let device = "webgpu";
let choice = { kind: "url" }; // or {kind: "file", file, files, projector} (files: a split model's parts; projector: an mmproj File or null)
let loaded = null; // {key, info}
let shownError = false;
let webgpuOK = null; // what info() found: true, false, or not asked yet
let adapterInfo = null;
let force = false; // "Load it anyway": the next load skips the memory check

// ---- URL parameters and remembered settings --------------------------------

const params = new URLSearchParams(location.search);
const settingInputs = { temperature: el.temperature, topk: el.topK, topp: el.topP, steps: el.maxTokens, seed: el.seed, format: el.responseFormat };
try {
  const saved = JSON.parse(localStorage.getItem("tessera-settings") || "{}");
  for (const [k, input] of Object.entries(settingInputs)) if (saved[k] != null) input.value = saved[k];
} catch {}
for (const [k, input] of Object.entries(settingInputs)) if (params.has(k)) input.value = params.get(k);
if (params.has("model")) el.modelURL.value = params.get("model");
if (params.has("projector")) el.projectorURL.value = params.get("projector");
if (params.has("prompt")) el.prompt.value = params.get("prompt");
if (params.has("quant")) el.quant.value = params.get("quant");
if (params.get("cache") === "0") el.useCache.checked = false;
if (params.get("device") === "cpu") device = "cpu";
if (params.has("system")) el.system.value = params.get("system");

function saveSettings() {
  const s = {};
  for (const [k, input] of Object.entries(settingInputs)) s[k] = input.value;
  try {
    localStorage.setItem("tessera-settings", JSON.stringify(s));
  } catch {}
}
for (const input of Object.values(settingInputs)) input.addEventListener("change", saveSettings);
el.responseFormat.addEventListener("change", () => (el.jsonSchemaField.hidden = el.responseFormat.value !== "json_schema"));
el.jsonSchemaField.hidden = el.responseFormat.value !== "json_schema";

// ---- State ------------------------------------------------------------------

function setState(state) {
  document.body.dataset.state = state;
  const working = state === "loading" || state === "generating";
  for (const b of [el.generate, el.load, el.file, el.clearCache, el.send, el.regenerate, el.clearChat, el.newChat]) b.disabled = working;
  el.stop.disabled = !working;
  el.stopReply.hidden = state !== "generating";
  el.regenerate.hidden = state === "generating";
  el.generate.textContent = state === "generating" ? "Generating…" : "Generate";
}

const busy = () => ["loading", "generating"].includes(document.body.dataset.state);

function say(text) {
  el.status.textContent = text;
}

function formatBytes(n) {
  if (!(n >= 0)) return "?";
  const units = ["B", "KB", "MB", "GB", "TB"];
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

// ---- Errors: what went wrong, in words, and what to do ---------------------

const advice = {
  "no-webgpu": ["This browser cannot run the model on the GPU.",
    "WebGPU is not available here. Use a recent Chrome or Edge, Safari 26 or Firefox 141 or later, open the page over https or from localhost, and check that hardware acceleration is on. Or run it on the CPU, slowly."],
  "adapter-limits": ["Your GPU cannot hold this model.", "Try int4 weights, or a smaller model from the catalogue."],
  "out-of-memory": ["The GPU ran out of memory.", "Try a smaller model, int4 weights or a shorter context, and close other tabs that use the GPU."],
  "too-big": ["This model is too big for this device.", ""],
  "storage": ["The browser's storage is full, or refused the download.",
    "Clear the cache of earlier models, free some disk space, or untick “Keep downloads” to load it without keeping it."],
  "integrity": ["The downloaded file is not the one its publisher lists.",
    "Its SHA-256 differs from the catalogue's, so the copy was deleted. Try again later; if it keeps happening the file on the server changed."],
  "network": ["The model could not be downloaded.", "Check the connection and the address, then load it again: a download resumes where it stopped."],
  "bad-model": ["This file is not a model Tessera can run.", "Tessera reads GGUF files of the Llama family and its relatives."],
  "bad-source": ["Choose a model first.", ""],
  "no-model": ["Load a model first.", ""],
  "no-wasm": ["The engine could not start.", "Reload the page; if it keeps failing, this browser cannot run WebAssembly here."],
};

function showNotice(title, detail, actions = {}) {
  el.noticeText.textContent = title;
  el.noticeDetail.textContent = detail || "";
  el.useCPU.hidden = !actions.cpu;
  el.loadAnyway.hidden = !actions.anyway;
  el.noticeClearCache.hidden = !actions.clearCache;
  el.notice.hidden = false;
}

function showError(err) {
  const code = err.code || "error";
  demo.errors.push({ code, message: err.message, param: err.param });
  if (code === "aborted") {
    say("Stopped.");
    setState(document.body.dataset.state === "loading" && !loaded ? "idle" : "done");
    return;
  }
  if (document.body.dataset.state === "loading") {
    el.progress.value = 0;
    el.progressLabel.textContent = "The model is not loaded.";
  }
  const [title, detail] = advice[code] || [];
  if (code === "bad-request" && err.param) {
    say(`The setting “${err.param}” is not valid: ${err.message}`);
  } else if (title && code !== "bad-source" && code !== "no-model") {
    showNotice(title, code === "too-big" ? err.message : `${detail} (${err.message})`, {
      cpu: code === "no-webgpu" && device !== "cpu",
      anyway: code === "too-big" && err.anyway !== false, // a catalogue pick names no file to load anyway
      clearCache: code === "storage",
    });
    say(title);
  } else {
    say(title ? `${title} ${err.message}` : err.message);
  }
  shownError = true;
  setState("error");
}

el.noticeClose.addEventListener("click", () => (el.notice.hidden = true));
el.useCPU.addEventListener("click", () => {
  device = "cpu";
  el.notice.hidden = true;
  showAdapter({});
  say("The model will run on the CPU: expect it to be slow.");
  if (document.body.dataset.state === "error") setState(loaded ? "done" : "idle");
});
el.loadAnyway.addEventListener("click", () => {
  el.notice.hidden = true;
  force = true;
  if (document.body.dataset.state === "error") setState(loaded ? "done" : "idle");
  loadOnly();
});
el.noticeClearCache.addEventListener("click", async () => {
  el.notice.hidden = true;
  await clearCache();
});

// ---- The adapter, and what fits it -------------------------------------------

function showAdapter(info) {
  el.adapter.classList.remove("ok", "bad");
  if (device === "cpu") {
    el.adapterText.textContent = "CPU (no WebGPU)";
    el.adapter.classList.add("ok");
    return;
  }
  if (!info.webgpu || !info.adapter) {
    el.adapterText.textContent = "No WebGPU";
    el.adapter.classList.add("bad");
    showNotice(advice["no-webgpu"][0], `${advice["no-webgpu"][1]} (${info.error || "no adapter"})`, { cpu: true });
    return;
  }
  const a = info.adapter;
  el.adapterText.textContent = `${a.name || "WebGPU adapter"} · ${a.path}`;
  el.adapter.title = `${a.vendor} ${a.architecture} (${a.deviceType}); shader-f16: ${a.shaderF16 ? "yes" : "no"}; subgroups: ${a.subgroups ? "yes" : "no"}; ` +
    `max buffer ${formatBytes(a.maxBufferSize)}, max storage binding ${formatBytes(a.maxStorageBufferBindingSize)}; ` +
    `about ${formatBytes(budget())} for models on this device`;
  el.adapter.classList.add("ok");
}

// budget is the GPU memory a model may take here. WebGPU does not tell a
// GPU's memory; navigator.deviceMemory (the RAM in GiB, at most 8 as
// Chrome reports it) bounds the shared-memory GPUs most people have, and
// half of it leaves room for the browser. The CPU backend's weights live
// in wasm memory, which stops at 4 GiB.
function budget() {
  const ram = (navigator.deviceMemory || 4) * 2 ** 30;
  return device === "cpu" ? Math.min(2 ** 31, ram / 2) : ram / 2;
}

function fits(memory) {
  return memory <= budget();
}

// ---- Loading ------------------------------------------------------------------

function currentKey() {
  const src = choice.kind === "file"
    ? choice.files.map((f) => `file:${f.name}:${f.size}:${f.lastModified}`).join(",")
    : `url:${new URL(el.modelURL.value.trim(), location.href).href}`;
  return `${src}|${projectorSource() ? projectorKey() : ""}|${el.quant.value}|${device}`;
}

// projectorSource is the vision projector to load beside the model: the
// mmproj file picked with it, or the projector URL; null for none.
function projectorSource() {
  if (choice.kind === "file") return choice.projector || null;
  const raw = el.projectorURL.value.trim();
  return raw ? new URL(raw, location.href).href : null;
}

function projectorKey() {
  const p = projectorSource();
  return typeof p === "string" ? `url:${p}` : `file:${p.name}:${p.size}:${p.lastModified}`;
}

// onProgress shows a load's phase with bytes and, for a download, speed.
let phaseStart = null;
function onProgress(p) {
  demo.progress.push(p);
  const now = performance.now();
  if (!phaseStart || phaseStart.phase !== p.phase) phaseStart = { phase: p.phase, t: now, done: p.done };
  const frac = p.total > 0 ? Math.min(1, p.done / p.total) : null;
  if (frac === null) el.progress.removeAttribute("value");
  else el.progress.value = frac;
  const pct = frac === null ? "" : ` · ${Math.round(frac * 100)}%`;
  const of = p.total > 0 ? `${formatBytes(p.done)} of ${formatBytes(p.total)}` : formatBytes(p.done);
  const secs = (now - phaseStart.t) / 1000;
  const speed = secs > 0.3 ? ` · ${formatBytes((p.done - phaseStart.done) / secs)}/s` : "";
  el.progressLabel.textContent = {
    download: `Downloading: ${of}${pct}${speed}`,
    verify: `Checking the cached copy: ${of}${pct}`,
    upload: device === "cpu" ? `Reading weights: ${of}${pct}` : `Uploading weights to the GPU: ${of}${pct}${speed}`,
    projector: `Downloading the vision projector: ${of}${pct}${speed}`,
  }[p.phase] || `${p.phase}: ${of}`;
}

function catalogueEntry(url) {
  return (demo.catalogue || []).find((m) => new URL(m.url, location.href).href === url);
}

async function load() {
  if (device === "webgpu" && webgpuOK === false) {
    throw Object.assign(new Error(el.noticeDetail.textContent || "no WebGPU adapter"), { code: "no-webgpu" });
  }
  const key = currentKey();
  let source;
  let label;
  if (choice.kind === "file") {
    source = choice.files.length > 1 ? choice.files : choice.file;
    label = choice.files.length > 1 ? `${choice.file.name} (${choice.files.length} parts)` : choice.file.name;
  } else {
    const raw = el.modelURL.value.trim();
    if (!raw) throw new TesseraError("no model URL", "bad-source");
    source = new URL(raw, location.href).href;
    label = raw.split("/").pop();
  }
  setState("loading");
  el.notice.hidden = true;
  el.progress.value = 0;
  el.progressLabel.textContent = `Loading ${label}…`;
  el.modelInfo.textContent = "";
  phaseStart = null;
  say("");
  loaded = null;
  running = new AbortController();
  const signal = running.signal;
  // The memory it will take, from the file's header alone (a URL by range
  // requests), before the download starts; a model that cannot fit is
  // refused unless the user insists.
  try {
    const est = await engine.inspect(source, { quant: el.quant.value, device });
    demo.estimate = est;
    showEstimate(est);
    if (!force && !fits(est.memory.total)) {
      throw new TesseraError(`${est.name} needs about ${formatBytes(est.memory.total)} of GPU memory; this device offers about ${formatBytes(budget())}. ` +
        "A smaller model, or int4 weights, would fit.", "too-big");
    }
  } catch (err) {
    if (err.code === "bad-model" || err.code === "too-big") throw err;
    el.estimate.textContent = "";
  }
  force = false;
  if (signal.aborted) throw new TesseraError("stopped", "aborted");
  const entry = typeof source === "string" ? catalogueEntry(source) : null;
  const options = { quant: el.quant.value, cache: el.useCache.checked, device, onProgress, signal };
  if (entry && entry.sha256) options.sha256 = entry.sha256;
  const projector = projectorSource();
  if (projector) options.projector = entry && entry.projector && entry.projectorSha256 && new URL(entry.projector, location.href).href === projector
    ? { url: projector, sha256: entry.projectorSha256 } : projector;
  const info = await engine.load(source, options);
  loaded = { key, info };
  demo.model = info;
  el.progress.value = 1;
  const where = info.source === "url" ? (info.cached ? "from the browser's cache" : "downloaded") : "from your disk";
  const checked = info.verified ? ", its SHA-256 checked" : "";
  el.progressLabel.textContent = `Loaded ${info.name} in ${(info.loadMs / 1000).toFixed(2)} s, ${where}${checked}.` +
    (info.discarded ? ` The cached copy was damaged: ${info.discarded}` : "");
  el.modelSummary.textContent = info.name;
  el.modelInfo.textContent = [
    `${formatCount(info.params)} parameters`,
    `${info.layers} layers`,
    `context ${info.context}`,
    `weights ${formatBytes(info.weightBytes)} (${info.quant})`,
    info.backend === "webgpu" ? `${info.path} kernels` : "CPU",
    ...(info.vision ? [`images (${info.projector.imageTokens} tokens each)`] : []),
  ].map((item) => item.replaceAll(" ", "\u00a0")).join(" · ");
  el.attach.hidden = !info.vision;
  if (!info.vision) chat.clearImages();
  el.chatTemplate.textContent = info.chatTemplate ? "Chat uses the model's own template (from the GGUF)."
    : "This model has no chat template: chat uses plain “User: … Assistant:” lines.";
  return info;
}

function showEstimate(est) {
  const m = est.memory;
  const fit = fits(m.total) ? "fits this device" : `more than this device offers (about ${formatBytes(budget())})`;
  el.estimate.textContent = `${est.name}: ${formatCount(est.params)} parameters, ${formatBytes(est.size)} file; ` +
    `needs about ${formatBytes(m.total)} of GPU memory (${m.quant} weights ${formatBytes(m.weights)}, ` +
    `KV cache ${formatBytes(m.kv)} for ${m.context} tokens): ${fit}.`;
}

async function loadOnly() {
  try {
    await load();
    setState("idle");
    say(el.modeChat.checked ? "Ready. Write a message." : "Ready. Write a prompt, or just press Generate.");
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
// (NAME-00001-of-0000N.gguf…) picked together; a file named like
// llama.cpp's projectors (mmproj…) is the model's vision projector.
// Dropped images go to the chat's message instead.
function pickFile(list) {
  const all = Array.from(list || []);
  const images = all.filter((f) => f.type.startsWith("image/"));
  if (images.length) {
    chat.addImages(images);
    if (images.length === all.length) return;
  }
  const ggufs = all.filter((f) => !f.type.startsWith("image/")).sort((a, b) => a.name.localeCompare(b.name));
  const projector = ggufs.find((f) => /mmproj/i.test(f.name)) || null;
  const files = ggufs.filter((f) => f !== projector);
  if (!files.length || busy()) return;
  choice = { kind: "file", file: files[0], files, projector };
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

async function clearCache() {
  try {
    const r = await engine.clearCache();
    say(r.removed ? `Removed ${r.removed} model${r.removed > 1 ? "s" : ""} (${formatBytes(r.bytes)}) from browser storage.`
      : "The cache was already empty.");
  } catch (err) {
    showError(err);
  }
}
el.clearCache.addEventListener("click", clearCache);

// ---- Generating -----------------------------------------------------------------

function number(input, fallback) {
  const v = parseFloat(input.value);
  return Number.isFinite(v) ? v : fallback;
}

// settings are the request's fields, in OpenAI's names; the engine checks
// them (a bad one comes back as a TesseraError naming it). chat adds the
// structured-output choice.
function settings(chat) {
  const opts = {
    temperature: Math.max(0, number(el.temperature, 0.8)),
    top_k: Math.max(0, Math.round(number(el.topK, 0))),
    top_p: Math.min(1, Math.max(0.01, number(el.topP, 1))),
    max_tokens: Math.max(1, Math.round(number(el.maxTokens, 512))),
  };
  const seed = parseInt(el.seed.value, 10);
  if (Number.isFinite(seed) && seed >= 0) opts.seed = seed;
  if (chat && el.responseFormat.value === "json_object") opts.response_format = { type: "json_object" };
  if (chat && el.responseFormat.value === "json_schema") {
    let schema;
    try {
      schema = JSON.parse(el.jsonSchema.value);
    } catch (err) {
      throw new TesseraError(`the JSON schema is not JSON: ${err.message}`, "bad-request", "response_format");
    }
    opts.response_format = { type: "json_schema", json_schema: { name: "reply", schema } };
  }
  return opts;
}

function showLive(count, t0, tFirst, now) {
  el.tokens.textContent = String(count);
  if (tFirst !== null) el.ttft.textContent = `${Math.round(tFirst - t0)} ms`;
  if (count > 1 && now > tFirst) el.tps.textContent = ((count - 1) / ((now - tFirst) / 1000)).toFixed(1);
}

// generate streams a completion (input.prompt) or a chat reply
// (input.messages) and resolves to the stats. view.update(text,
// reasoning) shows what came so far, once per animation frame.
async function generate(input, view) {
  el.ttft.textContent = "–";
  el.tps.textContent = "–";
  el.tokens.textContent = "0";
  delete document.body.dataset.stopped;
  const chat = !!input.messages;
  const request = { ...input, ...settings(chat), stream: true };
  say("Generating…");
  setState("generating");
  running = new AbortController();
  request.signal = running.signal;
  const t0 = performance.now();
  let tFirst = null;
  let count = 0;
  let text = "";
  let reasoning = "";
  let frame = 0;
  const scroller = view.scroller;
  const flush = () => {
    frame = 0;
    const stick = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60;
    view.update(text, reasoning);
    if (stick) scroller.scrollTop = scroller.scrollHeight;
    showLive(count, t0, tFirst, performance.now());
  };
  let stats;
  try {
    const stream = chat ? await engine.chat.completions.create(request) : await engine.completions.create(request);
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (chunk.tessera && chunk.tessera.token_id >= 0) {
        if (tFirst === null) tFirst = performance.now();
        count++;
      }
      text += (chat ? c.delta.content : c.text) || "";
      reasoning += (chat && c.delta.reasoning_content) || "";
      if (!frame) frame = requestAnimationFrame(flush);
    }
    stats = stream.stats;
  } catch (err) {
    if (err.code !== "aborted" || !err.stats) {
      if (frame) cancelAnimationFrame(frame);
      flush();
      throw err;
    }
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
    complete: "the structured output is complete",
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
  if (busy()) return;
  if (el.modeChat.checked) return chat.send();
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
    await generate({ prompt }, { update: (text) => (el.output.textContent = text), scroller: textBox });
  } catch (err) {
    showError(err);
  }
}

const stop = () => running && running.abort();

// ---- Chat and modes ---------------------------------------------------------------

const sidebarWide = window.matchMedia("(min-width: 900px)");
function closeSidebar() {
  if (sidebarWide.matches) return;
  document.body.classList.remove("sidebar-open");
  el.menu.setAttribute("aria-expanded", "false");
}
el.menu.addEventListener("click", () => {
  const open = document.body.classList.toggle("sidebar-open");
  el.menu.setAttribute("aria-expanded", String(open));
});

const chat = new Chat({ el, demo, ensureLoaded, generate, settings, showError, say, busy, closeSidebar });

function setMode() {
  const isChat = el.modeChat.checked;
  el.chat.hidden = !isChat;
  el.completion.hidden = isChat;
  document.body.dataset.mode = isChat ? "chat" : "completion";
}
el.modeChat.addEventListener("change", setMode);
el.modeCompletion.addEventListener("change", setMode);
if (params.get("mode") === "completion") el.modeCompletion.checked = true;
setMode();

el.composer.addEventListener("submit", (ev) => {
  ev.preventDefault();
  chat.send();
});
el.regenerate.addEventListener("click", () => chat.regenerate());
el.clearChat.addEventListener("click", () => chat.clear());
el.newChat.addEventListener("click", () => chat.newChat());
el.copyReply.addEventListener("click", () => chat.copy());
el.stopReply.addEventListener("click", stop);
el.system.addEventListener("change", () => chat.save());
el.chatInput.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    chat.send();
  }
});

el.generate.addEventListener("click", run);
el.stop.addEventListener("click", stop);
el.prompt.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    run();
  }
});

// Shortcuts: Esc stops; Alt+R regenerates; Alt+N starts a chat; "/"
// focuses the message box and "?" lists them, when not typing.
el.shortcutsOpen.addEventListener("click", () => el.shortcuts.showModal());
document.addEventListener("keydown", (ev) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName);
  if (ev.key === "Escape" && busy()) {
    stop();
  } else if (ev.altKey && !ev.ctrlKey && ev.code === "KeyR" && el.modeChat.checked) {
    ev.preventDefault();
    chat.regenerate();
  } else if (ev.altKey && !ev.ctrlKey && ev.code === "KeyN") {
    ev.preventDefault();
    chat.newChat();
  } else if (!typing && ev.key === "/" && el.modeChat.checked) {
    ev.preventDefault();
    el.chatInput.focus();
  } else if (!typing && ev.key === "?") {
    el.shortcuts.showModal();
  }
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

// The catalogue: models.json, GGUF files on the Hugging Face Hub, each
// with its size, the memory it needs, and whether that fits this device
// (a model that does not is listed but cannot be picked).
async function listCatalogue() {
  try {
    const r = await fetch("models.json");
    if (!r.ok) return;
    demo.catalogue = (await r.json()).models;
  } catch {
    return; // No catalogue: the URL field and the file picker still work.
  }
  for (const m of demo.catalogue) {
    const opt = document.createElement("option");
    opt.value = m.url;
    const ok = fits(m.memory);
    opt.textContent = `${m.name} · ${formatBytes(m.size)} · needs ${formatBytes(m.memory)}${ok ? "" : " · too big here"}`;
    opt.disabled = !ok;
    opt.dataset.fits = String(ok);
    el.catalogue.append(opt);
  }
}
el.catalogue.addEventListener("change", () => {
  const m = (demo.catalogue || []).find((m) => m.url === el.catalogue.value);
  if (!m) return;
  if (!fits(m.memory)) { // picked anyway (a script, or a stale list)
    el.catalogueAbout.textContent = `${m.name} needs about ${formatBytes(m.memory)} of GPU memory; this device offers about ${formatBytes(budget())}.`;
    el.catalogue.value = "";
    showError(Object.assign(new TesseraError(el.catalogueAbout.textContent + " Pick a smaller model.", "too-big"), { anyway: false }));
    return;
  }
  el.modelURL.value = m.url;
  el.projectorURL.value = m.projector || "";
  choice = { kind: "url" };
  el.catalogueAbout.textContent = `${m.about} ${formatBytes(m.size)} download, about ${formatBytes(m.memory)} of GPU memory: fits this device.`;
  if (m.chat && !el.modeChat.checked) {
    el.modeChat.checked = true;
    setMode();
  }
});

async function boot() {
  setState("idle");
  listModels();
  const opened = chat.open();
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
  adapterInfo = info.adapter || null;
  demo.adapter = adapterInfo;
  webgpuOK = !!(info.webgpu && info.adapter);
  showAdapter(info);
  await listCatalogue();
  await opened;
  demo.ready = true;
  if (!shownError) say(info.webgpu ? "Pick a model, or send a message to use the one in the model panel." : "");
  if (params.get("autostart") === "1") run();
}

boot();
