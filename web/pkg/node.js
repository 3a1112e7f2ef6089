// node.js runs the engine outside a browser: in Node (and Deno and Bun,
// which have node:worker_threads), index.js starts the engine in a
// worker thread (node-worker.js, which runs worker.js there) rather than
// a Web Worker. WebGPU comes from the `webgpu` npm package (Dawn) when it
// is installed and finds an adapter; otherwise the engine runs on its CPU
// backend. A model may be a file path, read lazily (fs.openAsBlob) in the
// worker, never whole into memory.
import { Worker } from "node:worker_threads";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// isNode reports whether this is a server-side runtime, not a page or a
// Web Worker.
export const isNode = typeof process !== "undefined" && !!(process.versions && process.versions.node) &&
  typeof window === "undefined" && typeof importScripts === "undefined";

// base is what relative URLs and paths are resolved against: the
// working directory.
export function base() {
  return pathToFileURL(process.cwd() + "/").href;
}

// nodeWorker starts node-worker.js on worker.js (workerURL) and gives it
// a Web Worker's face (postMessage, onmessage, onerror, terminate) for
// client.js.
export function nodeWorker(workerURL) {
  const w = new Worker(new URL("./node-worker.js", import.meta.url), { workerData: { url: workerURL.href } });
  const face = {
    onmessage: null,
    onerror: null,
    postMessage: (msg, transfer) => w.postMessage(msg, transfer),
    terminate: () => w.terminate(),
  };
  w.on("message", (data) => face.onmessage && face.onmessage({ data }));
  w.on("error", (err) => face.onerror && face.onerror({ message: err && err.message }));
  return face;
}

// toPath is the file a model string or file: URL names.
export function toPath(model) {
  return String(model).startsWith("file:") ? fileURLToPath(model) : resolve(String(model));
}
