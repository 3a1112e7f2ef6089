"""GGUF metadata for testdata's record.py scripts (families/, vision/),
which mark a synthetic model's byte tokens before llama.cpp's tools read
it, and a free port for the llama-server they start."""
import shutil, socket, struct, tempfile

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
HEADER = 256 << 20  # bytes that hold a GGUF's metadata: megabytes at most


def string(data, off):
    """The string at off, and the offset after it."""
    (n,) = struct.unpack_from("<Q", data, off)
    return data[off + 8:off + 8 + n].decode(), off + 8 + n


def _skip(data, t, off):
    if t == 8:
        return string(data, off)[1]
    if t == 9:
        (et, n) = struct.unpack_from("<IQ", data, off)
        off += 12
        for _ in range(n):
            off = _skip(data, et, off)
        return off
    return off + _SIZES[t]


def entries(data):
    """The metadata's key-value pairs as {key: offset of its value} (after
    the type), and the offset where the metadata ends."""
    (n_kv,) = struct.unpack_from("<Q", data, 16)
    off, at = 24, {}
    for _ in range(n_kv):
        key, off = string(data, off)
        (t,) = struct.unpack_from("<I", data, off)
        at[key] = off + 4
        off = _skip(data, t, off + 4)
    return at, off


def strings(data, off):
    """The array of strings at off."""
    (_, n) = struct.unpack_from("<IQ", data, off)
    out, off = [], off + 12
    for _ in range(n):
        s, off = string(data, off)
        out.append(s)
    return out


def set_token_types(data, at, kinds):
    """Sets token i's type to kinds(i, type) in the token_type array at at."""
    (_, n) = struct.unpack_from("<IQ", data, at)
    for i in range(n):
        p = at + 12 + 4 * i
        struct.pack_into("<i", data, p, kinds(i, struct.unpack_from("<i", data, p)[0]))


def printable(path, in_place=False):
    """A copy of the GGUF at path whose byte tokens (type 6) are normal
    tokens: llama-server refuses to return text that is not UTF-8, and a
    random model emits lone bytes. Only the token types change (the pieces
    "<0xNN>" stay, so the vocabulary still finds its newline); the weights
    and every id are the same. in_place edits path itself (a real shape's
    file may not fit twice on disk) and returns it."""
    src = open(path, "rb")
    data = bytearray(src.read(HEADER))
    at, end = entries(data)
    set_token_types(data, at["tokenizer.ggml.token_type"], lambda i, t: 1 if t == 6 else t)
    if in_place:
        src.close()
        with open(path, "r+b") as f:  # the header's length is unchanged
            f.write(data[:end])
        return path
    f = tempfile.NamedTemporaryFile(suffix=".gguf", delete=False)
    f.write(data)
    shutil.copyfileobj(src, f, 64 << 20)  # the tensors, streamed
    f.close()
    src.close()
    return f.name


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
