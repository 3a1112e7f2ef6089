#!/usr/bin/env python3
"""Records what llama.cpp makes of an image with a synthetic projector.

usage: record.py PEERS_DIR N NAME=BASE.gguf,MMPROJ.gguf,IMAGE[,PROMPT_FILE] ... > llamacpp.json

For each case it runs PEERS_DIR/llama-mtmd-cli with MTMD_DEBUG_EMBEDDINGS=1
(which logs, for each picture it encodes, the first and last 16 values of
its first embedding and the mean, std, min, max and sum of all of them:
"embeddings" is the first picture's, "tiles" every picture's in order when
an image is more than one, as idefics3's tiles and overview), then starts
PEERS_DIR/llama-server with the model and --mmproj (f32 KV cache, no flash
attention, 2 threads) and asks /completion for N greedy tokens from the
prompt (the file's text; by default Gemma's turn around "<__media__>describe"),
the image given as multimodal_data where the prompt has <__media__>
(the server's own marker, read from /props), with n_probs 1: each
token's id and log-probability under the raw logits. (A real tower's
image tokens need a language model with room for them: `tessera synth
--context`.) A case whose NAME ends in -embeddings records the
embeddings only.
"""
import base64, json, os, re, subprocess, sys, time, urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in testdata
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ggufmeta import HEADER, entries, free_port, printable, set_token_types, strings  # noqa: E402

peers, n = sys.argv[1], int(sys.argv[2])
default_prompt = "<start_of_turn>user\n<__media__>describe<end_of_turn>\n<start_of_turn>model\n"
out = {"cases": {}}


def embeddings(base, mm, image):
    # llama.cpp logs from a thread of its own, and the CLI may exit before
    # the last picture's lines are out: a run counts when its log reaches
    # the timings printed after the generation (llama_perf_context_print's
    # "graphs reused"), which follow every picture's lines.
    for _ in range(3):
        pictures, whole = embeddings_once(base, mm, image)
        if whole:
            return pictures
    sys.exit("llama-mtmd-cli's log ended early three times")


def embeddings_once(base, mm, image):
    env = dict(os.environ, MTMD_DEBUG_EMBEDDINGS="1")
    r = subprocess.run([peers + "/llama-mtmd-cli", "-m", base, "--mmproj", mm, "--image", image, "-p", "<__media__>x",
                        "-n", "16", "--temp", "0", "-t", "2", "-c", "4096", "-ctk", "f32", "-ctv", "f32", "-fa", "off",
                        "--chat-template", "gemma", "-v"], env=env, capture_output=True, text=True, errors="replace")
    log = re.sub(r"\d+\.\d+\.\d+\.\d+ [IDWE] ", "", r.stderr + r.stdout)
    first = re.findall(r"Token 0 \(first 16 values\):([-\d.\s]+)", log)
    last = re.findall(r"Token 0 \(last 16 values\):([-\d.\s]+)", log)
    stats = re.findall(r"Stats: mean=([-\d.]+), std=([-\d.]+), min=([-\d.]+), max=([-\d.]+), sum=([-\d.]+)", log)
    n = min(len(first), len(last), len(stats))
    if n == 0:
        sys.exit("no MTMD_DEBUG_EMBEDDINGS in llama-mtmd-cli's log:\n" + log[-3000:])
    return [{"first16": [float(x) for x in f.split()], "last16": [float(x) for x in l.split()],
             "mean": float(st[0]), "std": float(st[1]), "min": float(st[2]), "max": float(st[3]), "sum": float(st[4])}
            for f, l, st in list(zip(first, last, stats))[:n]], "graphs reused" in log


def ascii_bytes(path):
    """Turns the ASCII byte pieces (<0x00>..<0x7F>) of printable()'s copy
    at path back into byte tokens (type 6), in place: alone they are
    UTF-8, and mtmd looks the newline up by its text ("\\n", which only
    the byte token reads as), so that the ids it finds are the original
    file's."""
    f = open(path, "r+b")
    data = bytearray(f.read(HEADER))
    at, _ = entries(data)
    pieces = strings(data, at["tokenizer.ggml.tokens"])

    def kind(i, t):
        m = re.fullmatch(r"<0x([0-9A-F]{2})>", pieces[i])
        return 6 if m and int(m.group(1), 16) < 0x80 else t
    set_token_types(data, at["tokenizer.ggml.token_type"], kind)
    f.seek(0)
    f.write(data)
    f.close()


for arg in sys.argv[3:]:
    name, files = arg.split("=", 1)
    parts = files.split(",")
    base, mm, image = parts[:3]
    prompt = open(parts[3]).read() if len(parts) > 3 else default_prompt
    tiles = embeddings(base, mm, image)
    case = {"prompt": prompt, "embeddings": tiles[0]}
    if len(tiles) > 1:
        case["tiles"] = tiles
    if name.endswith("-embeddings"):
        out["cases"][name] = case
        continue
    copy = printable(base)
    ascii_bytes(copy)
    port = free_port()
    srv = subprocess.Popen([peers + "/llama-server", "-m", copy, "--mmproj", mm, "-c", "4096", "-t", "2", "-ctk", "f32",
                            "-ctv", "f32", "-fa", "off", "--port", str(port), "--no-webui"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = "http://127.0.0.1:%d" % port
        for _ in range(600):
            try:
                props = json.load(urllib.request.urlopen(url + "/props"))
                break
            except Exception:
                time.sleep(0.5)
        marker = props["media_marker"]
        body = {"prompt": {"prompt_string": prompt.replace("<__media__>", marker),
                           "multimodal_data": [base64.b64encode(open(image, "rb").read()).decode()]},
                "n_predict": n, "temperature": 0, "n_probs": 1, "return_tokens": True, "cache_prompt": False,
                "ignore_eos": True}
        req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        r = json.load(urllib.request.urlopen(req, timeout=3600))
        case["prompt_tokens"] = r["tokens_evaluated"]
        case["tokens"] = r["tokens"]
        case["logprobs"] = [round(p["logprob"], 6) for p in r["completion_probabilities"]]
        out["llama.cpp"] = props.get("build_info", "")
    finally:
        srv.terminate()
        srv.wait()
        os.unlink(copy)
    out["cases"][name] = case
json.dump(out, sys.stdout, indent=1)
print()
