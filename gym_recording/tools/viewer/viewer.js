/*
 * gym-recording trace viewer: a reader of FORMAT.md in plain JavaScript (no build step, no
 * dependencies), and the page that shows what it reads.
 *
 * Data flow: /api/files lists the trace files -> each writer's manifest -> its batch JSON files
 * -> every ndarray reference is validated (FORMAT.md §6, §8) before a byte of a blob is read ->
 * the rewards are read with HTTP Range requests to fill the episode table -> for the chosen
 * episode, the observation and action arrays are read the same way (frames of image
 * observations one range at a time, as they are shown).
 */
(() => {
  "use strict";

  // ---------------------------------------------------------------------------------------
  // Constants
  // ---------------------------------------------------------------------------------------

  const POLL_MS = 2000;
  // The most batches one poll reads before the episodes they hold are shown.
  const BATCHES_A_POLL = 64;
  const MAX_COMPONENTS = 64; // per array field: more components are described, not plotted
  const MAX_TEXT = 200; // characters shown for a non-numeric value
  const RANGE_GAP = 64 * 1024; // byte ranges closer than this are fetched as one
  const MAX_RANGE = 32 * 1024 * 1024; // ... unless the merged range would exceed this
  const MAX_INFLIGHT = 6; // concurrent HTTP requests
  const FRAME_CACHE = 600; // decoded frames kept in memory
  const MIN_PICTURE_SIDE = 16; // smaller uint8 arrays are grids, not pictures (Episode.frames)
  const MAX_STACK = 16; // the most frames of a frame stack
  const ZSTD_CACHE = 4; // decompressed arrays of frames kept in memory
  const MAX_RATIO = 32768; // the most a zstd frame expands (FORMAT.md §6.2)
  const ITEMSIZE = {
    bool: 1, int8: 1, int16: 2, int32: 4, int64: 8, uint8: 1, uint16: 2, uint32: 4, uint64: 8,
    float16: 2, float32: 4, float64: 8, complex64: 8, complex128: 16,
  };
  const ALIGN = { complex64: 4, complex128: 8 }; // typed-array alignment, if not the item size
  const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  const WRITER_ID_RE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
  const MANIFEST_RE = /^openaigym\.trace\.(.*)\.manifest\.json$/s;
  const SVGNS = "http://www.w3.org/2000/svg";

  /** A file breaks FORMAT.md: the message names the file and the problem. */
  class TraceFormatError extends Error {
    constructor(file, message) {
      super(`${file}: ${message}`);
      this.name = "TraceFormatError";
      this.file = file;
    }
  }

  /** The server could not be reached or answered with an HTTP error (retried on next poll). */
  class FetchError extends Error {
    constructor(message) {
      super(message);
      this.name = "FetchError";
    }
  }

  // ---------------------------------------------------------------------------------------
  // HTTP: a small request limiter, text, HEAD sizes and byte ranges
  // ---------------------------------------------------------------------------------------

  let inflight = 0;
  const waiting = [];
  async function limited(fn) {
    if (inflight >= MAX_INFLIGHT) await new Promise((resolve) => waiting.push(resolve));
    inflight++;
    try {
      return await fn();
    } finally {
      inflight--;
      const next = waiting.shift();
      if (next) next();
    }
  }

  function fileUrl(name) {
    return `files/${encodeURIComponent(name)}`;
  }

  async function request(url, init) {
    let response;
    try {
      response = await fetch(url, { cache: "no-store", ...init });
    } catch (err) {
      throw new FetchError(`cannot reach the viewer's server (${err.message})`);
    }
    return response;
  }

  async function getJsonListing() {
    const response = await limited(() => request("api/files"));
    if (!response.ok) {
      // (the server says why: the directory replaced since it started, say)
      const why = (await response.text()).trim().slice(0, 300);
      throw new FetchError(`api/files: HTTP ${response.status}${why ? `: ${why}` : ""}`);
    }
    return response.json();
  }

  /** Fetch a trace file's bytes (Uint8Array); null if the server does not serve it. */
  async function getBytes(name) {
    return limited(async () => {
      const response = await request(fileUrl(name));
      if (response.status === 404) return null;
      if (!response.ok) throw new FetchError(`${name}: HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    });
  }

  /** Why the server refuses to serve a trace-named entry (a link out, a directory), if it does. */
  function refusedReason(name) {
    return state.refused.get(name) || null;
  }

  const blobSizes = new Map(); // blob name -> length in bytes (blobs never change once written)
  async function blobSize(name) {
    if (blobSizes.has(name)) return blobSizes.get(name);
    const listed = state.listed.get(name); // (in the last poll's listing: no request needed)
    if (listed !== undefined) {
      blobSizes.set(name, listed);
      return listed;
    }
    return limited(async () => {
      const response = await request(fileUrl(name), { method: "HEAD" });
      if (response.status === 404) return undefined;
      if (!response.ok) throw new FetchError(`${name}: HTTP ${response.status}`);
      const size = Number(response.headers.get("Content-Length"));
      if (!Number.isSafeInteger(size)) throw new FetchError(`${name}: no Content-Length`);
      blobSizes.set(name, size);
      return size;
    });
  }

  /** Fetch bytes [start, end) of a blob with a Range request; returns an ArrayBuffer. */
  async function getRange(name, start, end) {
    return limited(async () => {
      const response = await request(fileUrl(name), {
        headers: { Range: `bytes=${start}-${end - 1}` },
      });
      if (response.status === 416 || response.status === 404) {
        throw new TraceFormatError(name, `bytes ${start}..${end} cannot be read (the file is shorter or gone)`);
      }
      if (!response.ok) throw new FetchError(`${name}: HTTP ${response.status}`);
      let buffer = await response.arrayBuffer();
      if (response.status === 200) {
        buffer = buffer.slice(start, end); // the server ignored the range: cut it out ourselves
      } else {
        const match = /^bytes (\d+)-(\d+)\//.exec(response.headers.get("Content-Range") || "");
        if (!match || Number(match[1]) !== start) {
          throw new FetchError(`${name}: unexpected Content-Range for bytes ${start}..${end}`);
        }
      }
      if (buffer.byteLength !== end - start) {
        throw new TraceFormatError(name, `is shorter than its references say (wanted bytes ${start}..${end})`);
      }
      return buffer;
    });
  }

  /**
   * Fetch many byte spans ({file, off, size}) with as few Range requests as is sensible: spans of
   * one file closer than RANGE_GAP are merged. Returns a Map span -> {buffer, offset}.
   */
  async function fetchSpans(spans) {
    const result = new Map();
    const byFile = new Map();
    for (const span of spans) {
      if (span.size === 0) {
        result.set(span, { buffer: new ArrayBuffer(0), offset: 0 });
        continue;
      }
      if (!byFile.has(span.file)) byFile.set(span.file, []);
      byFile.get(span.file).push(span);
    }
    const groups = [];
    for (const [file, list] of byFile) {
      list.sort((a, b) => a.off - b.off);
      let group = null;
      for (const span of list) {
        const end = span.off + span.size;
        if (group && span.off <= group.end + RANGE_GAP && Math.max(group.end, end) - group.start <= MAX_RANGE) {
          group.end = Math.max(group.end, end);
          group.spans.push(span);
        } else {
          group = { file, start: span.off, end, spans: [span] };
          groups.push(group);
        }
      }
    }
    await Promise.all(groups.map(async (group) => {
      const buffer = await getRange(group.file, group.start, group.end);
      for (const span of group.spans) result.set(span, { buffer, offset: span.off - group.start });
    }));
    return result;
  }

  // ---------------------------------------------------------------------------------------
  // FORMAT.md: JSON, names, values, ndarray references — the same rules as the Python reader
  // ---------------------------------------------------------------------------------------

  const MAX_NESTING = 100; // fields and values (§5, §6)
  const MAX_JSON_DEPTH = 512; // lists and objects in one JSON file
  const MAX_NDIM = 32;
  const MAX_INT_DIGITS = 4300; // of a JSON int (§9)
  const MAX_DECODED_BYTES = 256 * 1024 * 1024; // per batch, for JSON-encoded arrays ...
  const JSONARRAY_RATIO = 16; // ... and at most this many times the batch JSON's bytes
  const JSONARRAY_KINDS = "biufcUSMmO";
  const INT_RANGE = {
    int8: [-(2 ** 7), 2 ** 7 - 1], int16: [-(2 ** 15), 2 ** 15 - 1], int32: [-(2 ** 31), 2 ** 31 - 1],
    int64: [-(2 ** 63), 2 ** 63 - 1], uint8: [0, 2 ** 8 - 1], uint16: [0, 2 ** 16 - 1],
    uint32: [0, 2 ** 32 - 1], uint64: [0, 2 ** 64 - 1],
  };

  // A Number *object* marks a JSON number written as a float ("16.0", "1e3"): it is not an int
  // where FORMAT.md wants one, but it is still a number. (Needs JSON.parse source text access.)
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Number);
  const isNumber = (v) => typeof v === "number" || v instanceof Number;
  const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
  const isRef = (v) => isObject(v) && v.__type === "ndarray";
  const product = (shape) => shape.reduce((a, b) => a * b, 1);
  /** A short JSON rendering of a value for messages (floats that look like ints keep ".0"). */
  const show = (v) => {
    const mark = (key, x) => {
      if (typeof x === "bigint") return `\u0000${x}`;
      if (x instanceof Number) return `\u0000${Number.isInteger(x.valueOf()) ? x.valueOf().toFixed(1) : x.valueOf()}`;
      if (isObject(x) && x.__type === "overflow") return `\u0000<an integer of ${x.digits || "many"} digits>`;
      return x;
    };
    let text = JSON.stringify(v, mark);
    if (text === undefined) return String(v);
    text = text.replace(/"\\u0000([^"]*)"/g, "$1");
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  };

  // Set on a parsed document that held NaN/Infinity tokens: only version 1 files may (§2).
  const NON_FINITE_TOKENS = Symbol("NaN or Infinity tokens");

  /** Replace the NaN/Infinity tokens that version 1 files may hold (§2) by §6 float objects. */
  function replaceNonFinite(text) {
    const out = [];
    let last = 0;
    let i = 0;
    const tokens = [["-Infinity", "-inf"], ["Infinity", "inf"], ["NaN", "nan"]];
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i++;
        while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
        i++;
        continue;
      }
      let matched = false;
      for (const [token, value] of tokens) {
        if (text.startsWith(token, i)) {
          out.push(text.slice(last, i), `{"__type":"float","value":"${value}"}`);
          i += token.length;
          last = i;
          matched = true;
          break;
        }
      }
      if (!matched) i++;
    }
    if (last === 0) return null;
    out.push(text.slice(last));
    return out.join("");
  }

  /**
   * Mark numbers the way Python's json module would see them: an integer literal too large for
   * a float becomes {"__type": "overflow"} (Python keeps the int and later fails to use it), and
   * an integral float literal becomes a Number object (a float, not an int).
   */
  function revive(key, value, context) {
    if (typeof value !== "number") return value;
    const source = context && typeof context.source === "string" ? context.source : null;
    // An episode's seed past 2 ** 53 keeps its digits (a BigInt): it is shown, to be reused.
    if (key === "seed" && source !== null && /^-?\d+$/.test(source) && !Number.isSafeInteger(value) &&
        isObject(this) && Object.hasOwn(this, "rewards") && Object.hasOwn(this, "observations")) {
      return BigInt(source); // (a value with these keys too: shown by displayValue as JSON does)
    }
    if (!Number.isFinite(value) && (source === null || !/[.eE]/.test(source))) {
      return { __type: "overflow", digits: source ? source.length : null, text: source };
    }
    // eslint-disable-next-line no-new-wrappers
    if (source !== null && Number.isInteger(value) && /[.eE]/.test(source)) return new Number(value);
    return value;
  }

  function checkDepth(doc, file) {
    const stack = [[doc, 1]];
    while (stack.length) {
      const [value, depth] = stack.pop();
      if (depth > MAX_JSON_DEPTH) throw new TraceFormatError(file, `JSON nests deeper than ${MAX_JSON_DEPTH} levels`);
      const children = Array.isArray(value) ? value : Object.values(value);
      for (const child of children) if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }

  /** Parse a trace JSON file's bytes: strict UTF-8, JSON (NaN tokens tolerated), depth-limited. */
  function parseJson(bytes, file) {
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (_) {
      throw new TraceFormatError(file, "is not UTF-8 text");
    }
    let doc;
    try {
      doc = JSON.parse(text, revive);
    } catch (err) {
      const fixed = replaceNonFinite(text);
      try {
        if (fixed === null) throw err;
        doc = JSON.parse(fixed, revive);
        if (doc !== null && typeof doc === "object") doc[NON_FINITE_TOKENS] = true;
      } catch (_) {
        if (err instanceof RangeError) throw new TraceFormatError(file, "JSON nests too deeply to be a trace file");
        throw new TraceFormatError(file, `is not valid JSON (${err.message.slice(0, 160)})`);
      }
    }
    if (doc !== null && typeof doc === "object") checkDepth(doc, file);
    return doc;
  }

  const utf8 = new TextEncoder();
  function isPlainName(name) {
    if (typeof name !== "string" || name === "." || name === ".." || !/^[^/\\\0]+$/.test(name)) return false;
    if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(name)) return false; // lone surrogate
    return utf8.encode(name).length <= 255;
  }

  function checkPlainName(name, file, what) {
    if (!isPlainName(name)) {
      throw new TraceFormatError(file, `${what} ${show(name)} is not a plain file name in the recording's directory`);
    }
  }

  function collectRefs(value, out) {
    const stack = [value];
    while (stack.length) {
      const v = stack.pop();
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push(v[i]);
      } else if (isObject(v)) {
        if (isRef(v)) out.push(v);
        else {
          const keys = Object.keys(v);
          for (let i = keys.length - 1; i >= 0; i--) stack.push(v[keys[i]]);
        }
      }
    }
    return out;
  }

  /** Check one ndarray reference against §6.1; `sizes` maps blob names to their lengths. */
  function checkRef(ref, file, sizes) {
    const at = `ndarray ${isPlainName(ref.npyfile) ? `in ${ref.npyfile} ` : ""}at npyoff ${show(ref.npyoff)}`;
    if (!Array.isArray(ref.shape) || ref.shape.length > MAX_NDIM || !ref.shape.every(isCount)) {
      throw new TraceFormatError(file, `${at}: shape ${show(ref.shape)} is not a list of at most ${MAX_NDIM} non-negative ints`);
    }
    if (typeof ref.dtype !== "string" || !Object.hasOwn(ITEMSIZE, ref.dtype)) {
      throw new TraceFormatError(file, `${at}: dtype ${show(ref.dtype)} is not one of ${Object.keys(ITEMSIZE).join(" ")}`);
    }
    if ("order" in ref && ref.order !== "C") {
      throw new TraceFormatError(file, `${at}: order ${show(ref.order)} is not "C"`);
    }
    checkPlainName(ref.npyfile, file, "npyfile");
    if (!isCount(ref.npyoff)) throw new TraceFormatError(file, `${at}: npyoff is not a non-negative int`);
    if (!isCount(ref.size)) throw new TraceFormatError(file, `${at}: size ${show(ref.size)} is not a non-negative int`);
    const expected = product(ref.shape) * ITEMSIZE[ref.dtype];
    if (!Number.isSafeInteger(expected)) {
      throw new TraceFormatError(file, `${at}: shape ${show(ref.shape)} of ${ref.dtype} is too large to exist`);
    }
    if (isCompressed(ref)) { // FORMAT.md §6.2
      if (!("codec" in ref) || !("rawsize" in ref)) {
        throw new TraceFormatError(file, `${at}: a compressed array needs both "codec" and "rawsize"`);
      }
      if (ref.codec !== "zstd") throw new TraceFormatError(file, `${at}: unknown codec ${show(ref.codec)} (this viewer knows zstd)`);
      if (ref.rawsize !== expected) {
        throw new TraceFormatError(file, `${at}: rawsize ${show(ref.rawsize)} is not prod(shape ${show(ref.shape)}) * ${ITEMSIZE[ref.dtype]} (${ref.dtype}) = ${expected}`);
      }
      if (ref.rawsize > MAX_RATIO * ref.size) {
        throw new TraceFormatError(file, `${at}: rawsize ${ref.rawsize} is more than a ${ref.size}-byte zstd frame can hold`);
      }
    } else if (expected !== ref.size) {
      throw new TraceFormatError(file, `${at}: size ${ref.size} is not prod(shape ${show(ref.shape)}) * ${ITEMSIZE[ref.dtype]} (${ref.dtype}) = ${expected}`);
    }
    const blob = sizes.get(ref.npyfile);
    if (blob === undefined) throw new TraceFormatError(file, `${at}: the blob ${ref.npyfile} ${refusedReason(ref.npyfile) || "does not exist"}`);
    if (ref.npyoff + ref.size > blob) {
      throw new TraceFormatError(file, `${at}: npyoff ${ref.npyoff} + size ${ref.size} is past the end of ${ref.npyfile} (${blob} bytes)`);
    }
    if (ref.size > 0 && ref.npyoff % 8 !== 0) {
      throw new TraceFormatError(file, `${at}: npyoff ${ref.npyoff} of a non-empty array is not a multiple of 8`);
    }
  }

  /** No two arrays of one batch may share bytes (FORMAT.md §9, as the Python reader requires). */
  function checkOverlaps(refs, file, at) {
    const byFile = new Map();
    for (const ref of refs) {
      if (ref.size === 0) continue;
      if (!byFile.has(ref.npyfile)) byFile.set(ref.npyfile, []);
      byFile.get(ref.npyfile).push(ref);
    }
    for (const [name, list] of byFile) {
      list.sort((a, b) => a.npyoff - b.npyoff);
      for (let i = 1; i < list.length; i++) {
        const prev = list[i - 1];
        if (list[i].npyoff < prev.npyoff + prev.size) {
          throw new TraceFormatError(file, `${at}: array bytes ${list[i].npyoff}..${list[i].npyoff + list[i].size} of ${name} overlap another array of the batch`);
        }
      }
    }
  }

  /** numpy dtype strings a jsonarray may name: {kind, itemsize}, or null if not understood. */
  function parseNumpyDtype(text) {
    const names = {
      bool: "b1", bool_: "b1", int8: "i1", int16: "i2", int32: "i4", int64: "i8", int: "i8",
      uint8: "u1", uint16: "u2", uint32: "u4", uint64: "u8", uint: "u8", float16: "f2",
      float32: "f4", float64: "f8", float: "f8", float128: "f16", longdouble: "f16",
      complex64: "c8", complex128: "c16", complex: "c16", complex256: "c32", object: "O",
      object_: "O", str: "U", str_: "U", unicode: "U", bytes: "S", bytes_: "S", void: "V",
      datetime64: "M8", timedelta64: "m8",
    };
    const time = /^[<>=|]?(datetime64|timedelta64|M8|m8)(\[[A-Za-z0-9]+\])?$/.exec(text);
    if (time) return { kind: "dM".includes(time[1][0]) ? "M" : "m", itemsize: 8 };
    const code = Object.hasOwn(names, text) ? names[text] : text.replace(/^[<>=|]/, "");
    const match = /^([biufcUSVOMm])(\d*)$/.exec(code);
    if (!match) return null;
    const kind = match[1];
    const n = match[2] === "" ? null : Number(match[2]);
    if (n !== null && !Number.isSafeInteger(n)) return null;
    const sizes = { b: [1], i: [1, 2, 4, 8], u: [1, 2, 4, 8], f: [2, 4, 8, 16], c: [8, 16, 32] };
    if (sizes[kind]) {
      const size = n === null ? { b: 1, i: 8, u: 8, f: 8, c: 16 }[kind] : n;
      return sizes[kind].includes(size) ? { kind, itemsize: size } : null;
    }
    if (kind === "O") return n === null || n === 8 ? { kind, itemsize: 8 } : null;
    if (kind === "U") return { kind, itemsize: 4 * (n || 0) };
    return { kind, itemsize: n || 0 }; // S, V
  }

  function hashable(v, top) {
    if (Array.isArray(v)) return top && v.every((x) => hashable(x, false));
    if (!isObject(v)) return true;
    if (v.__type === "tuple") return Array.isArray(v.items) && v.items.every((x) => hashable(x, false));
    return !(v.__type === undefined || v.__type === "mapping" || v.__type === "ndarray" || v.__type === "jsonarray");
  }

  /** Whether a bool or float scalar of `dtype` holds `n` exactly, as FORMAT.md §9 asks. */
  function holdsExactly(dtype, n) {
    if (dtype === "bool") return n === 0 || n === 1;
    if (!Number.isFinite(n) || n === 0) return true; // (NaN is NaN in every float dtype)
    if (dtype === "float32" || dtype === "complex64") return Math.fround(n) === n;
    if (dtype !== "float16") return true;
    const a = Math.abs(n); // float16: an integer times 2 ** (e - 10), e its exponent (>= -14)
    if (a > 65504) return false;
    let e = Math.max(-14, Math.floor(Math.log2(a)));
    if (e > -14 && 2 ** e > a) e -= 1; // (log2 rounded up near a power of two)
    return Number.isInteger(a / 2 ** (e - 10));
  }

  /** A decoded §6 value's number (for scalars and complex parts), or undefined. */
  function plainNumber(v) {
    if (isNumber(v)) return Number(v);
    if (typeof v === "boolean") return v ? 1 : 0;
    if (isObject(v) && v.__type === "float") return toNumber(v);
    return undefined;
  }

  /**
   * Check a §6 value as the Python reader decodes it: nesting, known types, well-formed
   * wrappers. ndarray references are checked separately (checkRef).
   */
  function checkValue(v, file, where, depth, budget) {
    const fail = (problem) => new TraceFormatError(file, `${where}: ${problem}`);
    if (depth > MAX_NESTING) throw fail(`values nest deeper than ${MAX_NESTING} levels`);
    if (Array.isArray(v)) {
      for (const x of v) checkValue(x, file, where, depth + 1, budget);
      return;
    }
    if (!isObject(v)) return;
    const t = v.__type;
    switch (t) {
      case undefined:
        for (const key of Object.keys(v)) checkValue(v[key], file, where, depth + 1, budget);
        return;
      case "ndarray":
        return;
      case "overflow": // (an int past a double: Python's reader keeps it, up to §9's digits)
        if (v.digits !== null && v.digits <= MAX_INT_DIGITS) return; // (its sign counts)
        throw fail(`an integer of ${v.digits === null ? "many" : v.digits} characters is more than the ${MAX_INT_DIGITS} readers accept`);
      case "float":
        if (!["nan", "inf", "-inf"].includes(v.value)) throw fail(`a non-finite float must be "nan", "inf" or "-inf", not ${show(v.value)}`);
        return;
      case "scalar": {
        if (typeof v.dtype !== "string" || !Object.hasOwn(ITEMSIZE, v.dtype)) throw fail(`scalar dtype ${show(v.dtype)} is not on the allow-list`);
        checkValue(v.value, file, where, depth + 1, budget);
        const isComplex = isObject(v.value) && v.value.__type === "complex";
        const n = plainNumber(v.value);
        if (n === undefined && !isComplex) throw fail(`a ${v.dtype} scalar needs a number, not ${show(v.value)}`);
        const range = INT_RANGE[v.dtype];
        if (range && n !== undefined && (!Number.isInteger(n) || n < range[0] || n > range[1])) {
          throw fail(`scalar ${show(v.value)} is not a valid ${v.dtype}`);
        }
        if (n !== undefined && !holdsExactly(v.dtype, n)) {
          throw fail(`scalar ${show(v.value)} does not fit dtype ${v.dtype}`);
        }
        return;
      }
      case "complex":
        for (const part of [v.real, v.imag]) {
          checkValue(part, file, where, depth + 1, budget);
          if (!isNumber(part) && !(isObject(part) && part.__type === "float")) {
            throw fail("a complex value needs numbers as real and imag");
          }
        }
        return;
      case "tuple":
        if (!Array.isArray(v.items)) throw fail(`a tuple's items must be a list, not ${show(v.items)}`);
        for (const x of v.items) checkValue(x, file, where, depth + 1, budget);
        return;
      case "mapping":
        if (!Array.isArray(v.items) || !v.items.every((p) => Array.isArray(p) && p.length === 2)) {
          throw fail("a mapping's items must be a list of [key, value] pairs");
        }
        for (const [key, value] of v.items) {
          checkValue(key, file, where, depth + 1, budget);
          if (!hashable(key, true)) throw fail(`mapping key ${show(key)} cannot be a dict key`);
          checkValue(value, file, where, depth + 1, budget);
        }
        return;
      case "bytes":
        if (typeof v.base64 === "string" && !/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(v.base64)) {
          throw fail("bytes are not valid base64");
        }
        return;
      case "repr":
        if (typeof v.repr !== "string") throw fail("a repr value needs a string");
        return;
      case "jsonarray":
        checkJsonArray(v, fail, file, where, depth, budget);
        return;
      default:
        throw fail(`unknown value type ${show(t)}`);
    }
  }

  function checkJsonArray(v, fail, file, where, depth, budget) {
    if (typeof v.dtype !== "string" || v.dtype.length > 32) throw fail(`a jsonarray needs a dtype string, not ${show(v.dtype)}`);
    if (!Array.isArray(v.shape) || v.shape.length > MAX_NDIM || !v.shape.every(isCount)) {
      throw fail(`a jsonarray shape must be at most ${MAX_NDIM} non-negative ints, not ${show(v.shape)}`);
    }
    const dt = parseNumpyDtype(v.dtype);
    if (dt === null || !JSONARRAY_KINDS.includes(dt.kind)) throw fail(`jsonarray dtype ${show(v.dtype)} is not allowed`);
    if ("US".includes(dt.kind) && !dt.itemsize) throw fail(`a jsonarray dtype needs its width, not ${show(v.dtype)}`);
    let level = [v.data];
    for (const n of v.shape) {
      const next = [];
      for (const item of level) {
        if (!Array.isArray(item) || item.length !== n) throw fail(`jsonarray data does not have the shape ${show(v.shape)} it declares`);
        for (const x of item) next.push(x);
      }
      level = next;
    }
    budget.bytes += level.length * Math.max(dt.itemsize, 8);
    if (budget.bytes > budget.limit) throw fail(`the batch's JSON-encoded arrays need more than ${budget.limit} bytes (FORMAT.md §9)`);
    for (const x of level) {
      checkValue(x, file, where, depth + 1, budget);
      if (dt.kind !== "O" && (Array.isArray(x) || (isObject(x) && !["float", "scalar", "complex", "bytes", "repr"].includes(x.__type)))) {
        throw fail(`a jsonarray of ${v.dtype} needs a scalar for every element`);
      }
      if (!exactElement(x, dt)) throw fail(`jsonarray element ${show(x)} is not a ${v.dtype} value`);
    }
  }

  /** Whether a jsonarray element is of its dtype's kind and held exactly (FORMAT.md §9). */
  function exactElement(x, dt) {
    const name = (dt.kind === "f" ? { 2: "float16", 4: "float32" } : { 8: "complex64" })[dt.itemsize];
    const exact = (part) => {
      const n = isNumber(part) || (isObject(part) && part.__type === "float") ? toNumber(part) : undefined;
      return n !== undefined && holdsExactly(name || "float64", n);
    };
    switch (dt.kind) {
      case "b": return typeof x === "boolean";
      case "i": case "u": {
        const range = INT_RANGE[`${dt.kind === "i" ? "int" : "uint"}${8 * dt.itemsize}`];
        return typeof x === "number" && Number.isInteger(x) && x >= range[0] && x <= range[1];
      }
      case "f": return exact(x);
      case "c": return isObject(x) && x.__type === "complex" ? exact(x.real) && exact(x.imag) : exact(x);
      case "U": return typeof x === "string" && [...x].length <= dt.itemsize / 4 && !x.endsWith("\0");
      case "S": {
        if (!isObject(x) || x.__type !== "bytes" || typeof x.base64 !== "string") return false;
        const raw = atob(x.base64); // (numpy cuts a longer value, and drops trailing NULs)
        return raw.length <= dt.itemsize && !raw.endsWith("\0");
      }
      default: return true; // (datetime, timedelta, object: as checkValue found them)
    }
  }

  // ---------------------------------------------------------------------------------------
  // Decoding arrays (all §6.1 dtypes, little-endian) into numbers
  // ---------------------------------------------------------------------------------------

  function halfToFloat(h) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
    if (exp === 31) return frac ? NaN : sign * Infinity;
    return sign * 2 ** (exp - 15) * (1 + frac / 1024);
  }

  function readWithDataView(view, dtype, count) {
    // Portable path (big-endian hosts): read each element little-endian through a DataView.
    const complex = dtype.startsWith("complex");
    const out = dtype === "bool" || dtype === "uint8" ? new Uint8Array(count) : new Float64Array(complex ? 2 * count : count);
    const n = complex ? 2 * count : count;
    for (let i = 0; i < n; i++) {
      switch (dtype) {
        case "bool": case "uint8": out[i] = view.getUint8(i); break;
        case "int8": out[i] = view.getInt8(i); break;
        case "int16": out[i] = view.getInt16(2 * i, true); break;
        case "uint16": out[i] = view.getUint16(2 * i, true); break;
        case "int32": out[i] = view.getInt32(4 * i, true); break;
        case "uint32": out[i] = view.getUint32(4 * i, true); break;
        case "int64": out[i] = Number(view.getBigInt64(8 * i, true)); break;
        case "uint64": out[i] = Number(view.getBigUint64(8 * i, true)); break;
        case "float16": out[i] = halfToFloat(view.getUint16(2 * i, true)); break;
        case "float32": case "complex64": out[i] = view.getFloat32(4 * i, true); break;
        default: out[i] = view.getFloat64(8 * i, true); break; // float64, complex128
      }
    }
    return out;
  }

  /**
   * Decode `ref` (already validated) from `buffer` at byte `offset` into a numeric typed array
   * (uint8/bool stay Uint8Array; 64-bit ints and float16 become Float64Array/Float32Array of
   * Numbers; complex values are interleaved re, im). Unaligned data is copied first.
   */
  function decodeArray(buffer, offset, ref) {
    const count = product(ref.shape);
    const dtype = ref.dtype;
    const size = rawSize(ref);
    if (!LITTLE_ENDIAN) return readWithDataView(new DataView(buffer, offset, size), dtype, count);
    const align = ALIGN[dtype] || ITEMSIZE[dtype];
    if (offset % align !== 0) {
      buffer = buffer.slice(offset, offset + size);
      offset = 0;
    }
    switch (dtype) {
      case "bool": case "uint8": return new Uint8Array(buffer, offset, count);
      case "int8": return new Int8Array(buffer, offset, count);
      case "int16": return new Int16Array(buffer, offset, count);
      case "uint16": return new Uint16Array(buffer, offset, count);
      case "int32": return new Int32Array(buffer, offset, count);
      case "uint32": return new Uint32Array(buffer, offset, count);
      case "float32": return new Float32Array(buffer, offset, count);
      case "float64": return new Float64Array(buffer, offset, count);
      case "complex64": return new Float32Array(buffer, offset, 2 * count);
      case "complex128": return new Float64Array(buffer, offset, 2 * count);
      case "int64": case "uint64": {
        const big = dtype === "int64" ? new BigInt64Array(buffer, offset, count) : new BigUint64Array(buffer, offset, count);
        const out = new Float64Array(count);
        for (let i = 0; i < count; i++) out[i] = Number(big[i]);
        return out;
      }
      case "float16": {
        const half = new Uint16Array(buffer, offset, count);
        const out = new Float32Array(count);
        for (let i = 0; i < count; i++) out[i] = halfToFloat(half[i]);
        return out;
      }
      default:
        throw new Error(`unknown dtype ${dtype}`);
    }
  }

  const spanOf = (ref) => ({ file: ref.npyfile, off: ref.npyoff, size: ref.size });
  const isCompressed = (ref) => "codec" in ref || "rawsize" in ref;
  const rawSize = (ref) => (isCompressed(ref) ? ref.rawsize : ref.size);

  /** The content size a zstd frame's header declares (-1: none), or null if it is not a frame. */
  function zstdContentSize(b) {
    if (b.length < 6 || b[0] !== 0x28 || b[1] !== 0xb5 || b[2] !== 0x2f || b[3] !== 0xfd) return null;
    const fhd = b[4];
    const single = (fhd >> 5) & 1;
    const fcsFlag = fhd >> 6;
    let at = 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3];
    const n = fcsFlag === 0 ? single : [0, 2, 4, 8][fcsFlag];
    if (n === 0) return -1;
    if (at + n > b.length) return null;
    let size = 0;
    for (let i = n - 1; i >= 0; i--) size = size * 256 + b[at + i];
    return n === 2 ? size + 256 : size;
  }

  /** The length of the zstd frame `b` starts with, from its header and block headers (RFC 8878 §3.1.1), or null if it is cut short. */
  function zstdFrameLength(b) {
    const fhd = b[4];
    const single = (fhd >> 5) & 1;
    const fcsFlag = fhd >> 6;
    let at = 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3] + (fcsFlag === 0 ? single : [0, 2, 4, 8][fcsFlag]);
    for (;;) {
      if (at + 3 > b.length) return null;
      const header = b[at] | (b[at + 1] << 8) | (b[at + 2] << 16);
      const type = (header >> 1) & 3;
      at += 3 + (type === 1 ? 1 : header >>> 3);
      if (header & 1) break;
    }
    at += fhd & 4 ? 4 : 0;
    return at <= b.length ? at : null;
  }

  // XXH64 (xxhash-wasm, vendored), which checks the zstd frames' content checksums: its
  // WebAssembly is compiled once, as the first compressed array comes.
  let hasherMade = null;
  const zstdHasher = () => (hasherMade ||= xxhash());
  const CHECKSUM_CHUNK = 1 << 20; // bytes hashed a call (its memory holds one such chunk)
  const hex32 = (n) => `0x${n.toString(16).padStart(8, "0")}`;

  /**
   * The raw bytes of a validated ref whose stored bytes are at `offset` of `buffer`: those
   * bytes, or a compressed array's frame decompressed (fzstd, vendored), checked against its
   * rawsize before and after, and against its content checksum if it has one, with `hasher`
   * (zstdHasher's) (FORMAT.md §6.2). Returns {buffer, offset}.
   */
  function rawBytes(buffer, offset, ref, hasher) {
    if (!isCompressed(ref)) return { buffer, offset };
    const frame = new Uint8Array(buffer, offset, ref.size);
    const at = `compressed array at npyoff ${ref.npyoff}`;
    const declared = zstdContentSize(frame);
    if (declared !== ref.rawsize) {
      const what = declared === null ? "is not a zstd frame" : declared < 0 ? "declares no content size" : `declares ${declared} bytes`;
      throw new TraceFormatError(ref.npyfile, `${at}: the frame ${what}, expected rawsize ${ref.rawsize}`);
    }
    // (decoders let a cut frame of no bytes, or a piece of a frame after one, pass: its length says)
    const length = zstdFrameLength(frame);
    if (length !== frame.length) {
      const what = length === null ? "a frame cut short" : `${frame.length - length} bytes after it`;
      throw new TraceFormatError(ref.npyfile, `${at}: expected one whole zstd frame, got ${what}`);
    }
    const out = new Uint8Array(ref.rawsize);
    let got;
    try {
      got = fzstd.decompress(frame, out);
    } catch (err) {
      throw new TraceFormatError(ref.npyfile, `${at}: the zstd frame does not decompress: ${err.message}`);
    }
    if (got.buffer !== out.buffer || got.length !== ref.rawsize) {
      throw new TraceFormatError(ref.npyfile, `${at}: the zstd frame holds ${got.length} bytes, expected rawsize ${ref.rawsize}`);
    }
    if (frame[4] & 4) {
      // (Content_Checksum_flag: the frame ends with the low 32 bits of its content's XXH64)
      const n = frame.length;
      const stored = (frame[n - 4] | (frame[n - 3] << 8) | (frame[n - 2] << 16) | (frame[n - 1] << 24)) >>> 0;
      const hash = hasher.create64(0n);
      for (let i = 0; i < out.length; i += CHECKSUM_CHUNK) hash.update(out.subarray(i, i + CHECKSUM_CHUNK));
      const sum = Number(hash.digest() & 0xffffffffn);
      if (sum !== stored) {
        throw new TraceFormatError(ref.npyfile, `${at}: expected content whose checksum is ${hex32(stored)} (the frame's), got ${hex32(sum)}: the file is damaged; restore it from a copy`);
      }
    }
    return { buffer: out.buffer, offset: 0 };
  }

  /** Fetch and decode validated refs; returns Map ref -> typed array. */
  async function fetchRefs(refs) {
    const spans = refs.map((ref) => ({ ...spanOf(ref), ref }));
    const got = await fetchSpans(spans);
    const hasher = refs.some(isCompressed) ? await zstdHasher() : null;
    const out = new Map();
    for (const span of spans) {
      const stored = got.get(span);
      const { buffer, offset } = rawBytes(stored.buffer, stored.offset, span.ref, hasher);
      out.set(span.ref, decodeArray(buffer, offset, span.ref));
    }
    return out;
  }

  /** A §6 value as a number, or undefined if it is not numeric. */
  function toNumber(v) {
    if (typeof v === "number") return v;
    if (v instanceof Number) return v.valueOf();
    if (typeof v === "boolean") return v ? 1 : 0;
    if (isObject(v) && v.__type === "float") {
      return v.value === "nan" ? NaN : v.value === "inf" ? Infinity : v.value === "-inf" ? -Infinity : undefined;
    }
    if (isObject(v) && v.__type === "scalar") return toNumber(v.value);
    return undefined;
  }

  // ---------------------------------------------------------------------------------------
  // Manifests, batches, episode objects, fields (§3-§5)
  // ---------------------------------------------------------------------------------------

  function parseManifest(doc, name) {
    if (!isObject(doc)) throw new TraceFormatError(name, "is not a JSON object");
    const version = "format_version" in doc ? doc.format_version : "1";
    if (typeof version !== "string" || version.length > 20 || !/^\d+(\.\d+)*$/.test(version)) {
      throw new TraceFormatError(name, `format_version ${show(version)} is not a version like "2.0"`);
    }
    const major = Number(version.split(".")[0]);
    if (major > 2) {
      throw new TraceFormatError(name, `format_version ${version} is newer than this viewer knows (2.3)`);
    }
    if (major < 1 || (major === 1 && version !== "1")) {
      throw new TraceFormatError(name, `expected format_version "1" or "2.<minor>", got unknown version ${show(version)}`);
    }
    if (major > 1 && doc.format !== "gym-recording") {
      throw new TraceFormatError(name, `expected format "gym-recording" beside format_version ${version}, got ${show(doc.format ?? "none")}`);
    }
    if (doc[NON_FINITE_TOKENS] && version !== "1") {
      throw new TraceFormatError(name, "holds a NaN or Infinity token, which only version 1 files may (FORMAT.md §2)");
    }
    if (version !== "1" && doc.render_fps !== undefined && doc.render_fps !== null &&
        !(isNumber(doc.render_fps) && doc.render_fps > 0 && doc.render_fps <= 1e6)) {
      throw new TraceFormatError(name, `render_fps ${show(doc.render_fps)} is not a number in (0, 1000000] (FORMAT.md §3)`);
    }
    if (!Array.isArray(doc.batches)) throw new TraceFormatError(name, 'has no "batches" list');
    const seen = new Set();
    const prefix = name.slice(0, -".manifest.json".length);
    let expectFirst = 0;
    let prevContinues = false;
    const batches = doc.batches.map((batch, i) => {
      const at = `batches[${i}]`;
      if (!isObject(batch)) throw new TraceFormatError(name, `${at} is not an object`);
      if (!isCount(batch.first) || !isCount(batch.len)) {
        throw new TraceFormatError(name, `${at} needs non-negative int "first" and "len", got ${show(batch.first)}, ${show(batch.len)}`);
      }
      if (batch.first !== expectFirst) {
        throw new TraceFormatError(name, `${at} starts at episode ${batch.first}, expected ${expectFirst} (${i === 0 ? "the first batch starts at 0" : "previous first + len"})`);
      }
      expectFirst = batch.first + batch.len;
      checkPlainName(batch.fn, name, `${at} "fn"`);
      if (seen.has(batch.fn)) throw new TraceFormatError(name, `${at}: batch file ${batch.fn} is listed twice`);
      seen.add(batch.fn);
      // FORMAT.md §1: a manifest lists its writer's own batch files, named by their first episode.
      const own = `${prefix}.ep${String(batch.first).padStart(9, "0")}`;
      if (batch.fn !== `${own}.json`) {
        throw new TraceFormatError(name, `${at}: expected "fn" to be the writer's own name ${own}.json, got ${show(batch.fn)}`);
      }
      const bin = batch.bin === undefined || batch.bin === null ? null : batch.bin;
      if (bin !== null) checkPlainName(bin, name, `${at} "bin"`);
      if (bin !== null && bin !== `${own}.bin`) {
        throw new TraceFormatError(name, `${at}: expected "bin" to be the writer's own name ${own}.bin, got ${show(bin)}`);
      }
      for (const key of ["steps", "bytes"]) {
        if (batch[key] !== undefined && batch[key] !== null && !isCount(batch[key])) {
          throw new TraceFormatError(name, `${at}: "${key}" ${show(batch[key])} is not a non-negative int`);
        }
      }
      const continues = "continues" in batch ? batch.continues : false;
      if (typeof continues !== "boolean") throw new TraceFormatError(name, `${at}: "continues" ${show(continues)} is not true or false`);
      if ((prevContinues && batch.len < 1) || (continues && batch.len < 1)) {
        throw new TraceFormatError(name, `${at}: batch ${batch.fn} is listed as continuing an episode but holds no episode`);
      }
      prevContinues = continues;
      return {
        first: batch.first, len: batch.len, fn: batch.fn, bin, blob: `${own}.bin`, continues, legacy: version === "1",
        steps: isCount(batch.steps) ? batch.steps : null, bytes: isCount(batch.bytes) ? batch.bytes : null,
      };
    });
    const id = MANIFEST_RE.exec(name)[1];
    return {
      batches,
      created: typeof doc.created === "string" ? doc.created : "",
      writer: typeof doc.writer === "string" && WRITER_ID_RE.test(doc.writer) ? doc.writer : id,
      segment: isCount(doc.segment) ? doc.segment : 0,
      envId: typeof doc.env_id === "string" ? doc.env_id : null,
      // FORMAT.md §3 (2.2): the env's frame rate, the player's default speed for rendered frames.
      renderFps: version !== "1" && isNumber(doc.render_fps) ? Number(doc.render_fps) : null, // (checked above)
      version,
    };
  }

  function isLegacyEmpty(v) {
    return isRef(v) && Array.isArray(v.shape) && v.shape.length === 2 && v.shape[0] === 1 && v.shape[1] === 0;
  }

  /** Parse a §5 field that must hold `steps` values (checked by the caller: stepsOf). */
  function parseField(value, file, what, depth, budget) {
    if (depth > MAX_NESTING) throw new TraceFormatError(file, `${what}: fields nest deeper than ${MAX_NESTING} levels`);
    if (isRef(value)) {
      if (value.shape.length < 1) throw new TraceFormatError(file, `${what}: an ndarray field needs a step axis, got shape ${show(value.shape)}`);
      return { kind: "array", ref: value, sub: value.shape.slice(1), dtype: value.dtype, steps: value.shape[0] };
    }
    if (isObject(value) && value.__type === "dict") {
      if (!isObject(value.fields)) throw new TraceFormatError(file, `${what}: a dict field needs an object "fields"`);
      const keys = Object.keys(value.fields);
      return { kind: "dict", keys, children: keys.map((k) => parseField(value.fields[k], file, `${what}.${k}`, depth + 1, budget)) };
    }
    if (isObject(value) && value.__type === "tuple") {
      if (!Array.isArray(value.fields)) throw new TraceFormatError(file, `${what}: a tuple field needs a list "fields"`);
      return { kind: "tuple", children: value.fields.map((f, i) => parseField(f, file, `${what}[${i}]`, depth + 1, budget)) };
    }
    if (Array.isArray(value)) {
      for (const item of value) checkValue(item, file, what, depth + 1, budget);
      return { kind: "list", items: value, steps: value.length };
    }
    throw new TraceFormatError(file, `${what} is not a field (an ndarray reference, a dict, a tuple or a list)`);
  }

  /** The number of steps of a field: null when its leaves disagree (or it has none). */
  function stepsOf(node) {
    if (node.kind === "empty") return 0;
    if (node.kind === "array" || node.kind === "list") return node.steps;
    const counts = node.children.map(stepsOf);
    return counts.length && counts.every((c) => c === counts[0]) ? counts[0] : null;
  }

  /**
   * How the fields of an episode's parts join (FORMAT.md §4, §9 Parts), as format/fields.py's
   * join_fields joins them for the Python reader: leaf by leaf, where every part has the same
   * dict keys, tuple lengths, and array dtypes and per-step shapes; where any part holds a list
   * of per-step values, every part's field there joins as per-step values ({kind: "list"}).
   * Returns the joined structure, in which {kind: "conflict"} marks a place the parts do not
   * join at (unless a part joined later holds per-step values there).
   */
  function joinStructure(a, b) {
    if (a.kind === "list" || b.kind === "list") return LIST_JOIN;
    if (a.kind === "conflict" || b.kind === "conflict" || a.kind !== b.kind) return CONFLICT;
    switch (a.kind) {
      case "array":
        return a.dtype === b.dtype && a.sub.length === b.sub.length && a.sub.every((d, i) => d === b.sub[i]) ? a : CONFLICT;
      case "dict":
        if (a.keys.length !== b.keys.length || a.keys.some((k, i) => k !== b.keys[i])) return CONFLICT;
        return { kind: "dict", keys: a.keys, children: a.children.map((c, i) => joinStructure(c, b.children[i])) };
      case "tuple":
        if (a.children.length !== b.children.length) return CONFLICT;
        return { kind: "tuple", children: a.children.map((c, i) => joinStructure(c, b.children[i])) };
      default:
        return a; // (empty)
    }
  }

  /** A field's structure as text, for messages: dtypes and per-step shapes, keys, lengths. */
  function structureText(node) {
    switch (node.kind) {
      case "array": return `${node.dtype}[${node.sub.join(", ")}]`;
      case "dict": return `{${node.keys.map((k, i) => `${JSON.stringify(k)}: ${structureText(node.children[i])}`).join(", ")}}`;
      case "tuple": return `(${node.children.map(structureText).join(", ")})`;
      case "list": return "per-step values";
      default: return node.kind;
    }
  }

  const LIST_JOIN = { kind: "list" };
  const CONFLICT = { kind: "conflict" };

  /** Whether a joined structure (joinStructure) has a place where the parts do not join. */
  function conflicts(joined) {
    if (joined.kind === "conflict") return true;
    return (joined.kind === "dict" || joined.kind === "tuple") && joined.children.some(conflicts);
  }

  /**
   * The episode object's keys that hold one JSON value each (FORMAT.md §4), as
   * format/wire.py's EpisodeKeys declares them for the Python reader: the value a missing key
   * has, what a value must be, which part of a split episode gives the value ("first" or
   * "last"), and, for those the episode's facts show, the label and the text shown.
   */
  const EPISODE_KEYS = {
    terminated: { missing: false, valid: (v) => typeof v === "boolean", expected: "true or false", part: "last" },
    truncated: { missing: false, valid: (v) => typeof v === "boolean", expected: "true or false", part: "last" },
    seed: {
      missing: null, valid: (v) => v === null || typeof v === "bigint" || (typeof v === "number" && Number.isInteger(v)), expected: "an int or null",
      part: "first", label: "seed", text: String,
    },
    started_at: {
      missing: null, valid: (v) => v === null || isNumber(v), expected: "a unix time or null", part: "first",
      label: "started", text: (v) => {
        const date = new Date(Number(v) * 1000);
        return Number.isNaN(date.getTime()) ? String(v) : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
      },
    },
    ended_at: { missing: null, valid: (v) => v === null || isNumber(v), expected: "a unix time or null", part: "last" },
  };

  function parseEpisodeObject(obj, file, position, sizes, blob, budget) {
    const at = `episodes[${position}]`;
    const fail = (problem) => new TraceFormatError(file, `${at}: ${problem}`);
    if (!isObject(obj)) throw fail(`is not an episode object, got ${show(obj)}`);
    for (const key of ["observations", "actions", "rewards"]) {
      if (!(key in obj)) throw fail(`has no "${key}"`);
    }
    for (const ref of collectRefs(obj, [])) {
      checkPlainName(ref.npyfile, file, "npyfile");
      if (ref.npyfile !== blob) throw fail(`expected npyfile to be the batch's blob ${blob}, got ${show(ref.npyfile)}`);
      checkRef(ref, file, sizes);
    }
    const observations = parseField(obj.observations, file, `${at}.observations`, 0, budget);
    const actions = isLegacyEmpty(obj.actions) ? { kind: "empty" } : parseField(obj.actions, file, `${at}.actions`, 0, budget);
    const rewards = obj.rewards;
    let steps;
    if (isLegacyEmpty(rewards)) {
      steps = 0; // version 1 zero-step episode
    } else if (isRef(rewards)) {
      if (rewards.shape.length !== 1 || rewards.dtype.startsWith("complex")) {
        throw fail(`rewards must be a 1-D numeric array, got ${rewards.dtype}[${rewards.shape.join(", ")}]`);
      }
      steps = rewards.shape[0];
    } else if (Array.isArray(rewards)) {
      for (const r of rewards) {
        checkValue(r, file, `${at}.rewards`, 1, budget);
        if (typeof r !== "boolean" && plainNumber(r) === undefined) throw fail("rewards must be numbers");
      }
      steps = rewards.length;
    } else {
      throw fail("rewards must be a 1-D numeric array");
    }
    const nObs = stepsOf(observations);
    const nAct = stepsOf(actions);
    if (nObs !== steps + 1 || nAct !== steps) {
      throw fail(`expected N+1 observations and N actions for N=${steps} rewards, got ${nObs} observations and ${nAct} actions`);
    }
    if ("continues" in obj && typeof obj.continues !== "boolean") throw fail(`"continues" must be true or false, got ${show(obj.continues)}`);
    if ("part" in obj && !isCount(obj.part)) throw fail(`"part" must be a non-negative int, got ${show(obj.part)}`);
    const keys = {};
    for (const [key, spec] of Object.entries(EPISODE_KEYS)) {
      const value = key in obj ? obj[key] : spec.missing;
      if (!spec.valid(value)) throw fail(`"${key}" must be ${spec.expected}, got ${show(value)}`);
      keys[key] = value;
    }
    checkValue(obj.options, file, `${at}.options`, 0, budget);
    if (obj.infos !== undefined && obj.infos !== null) {
      if (!Array.isArray(obj.infos) || obj.infos.length !== steps + 1) throw fail(`"infos" must be a list of N+1 = ${steps + 1} values`);
      for (const info of obj.infos) checkValue(info, file, `${at}.infos`, 0, budget);
    }
    if (obj.info_columns !== undefined && obj.info_columns !== null) checkInfoColumns(obj, steps, fail);
    const render = obj.render_frames === undefined || obj.render_frames === null ? null : obj.render_frames;
    if (render !== null) {
      const shape = isRef(render) ? render.shape : null;
      if (!shape || render.dtype !== "uint8" || shape.length !== 4 || shape[3] !== 3 || shape[0] !== steps + 1) {
        throw fail(`expected "render_frames" to be uint8[N + 1 = ${steps + 1}, H, W, 3] frames, got ${isRef(render) ? `${render.dtype}[${shape.join(", ")}]` : show(render)}`);
      }
      if (!shape[1] || !shape[2]) throw fail(`"render_frames" of ${shape[1]}×${shape[2]} pixels`);
    }
    return {
      file,
      position,
      steps,
      observations,
      actions,
      frameSize: render ? render.shape.slice(1).join("x") : "",
      render,
      rewardsNode: rewards,
      rewards: null,
      keys,
      continues: obj.continues === true,
      part: isCount(obj.part) ? obj.part : 0,
      hasInfos: obj.infos !== undefined && obj.infos !== null,
    };
  }

  /** The step infos' keys stored as columns (FORMAT.md §4, version 2.1), as the Python reader checks them. */
  function checkInfoColumns(obj, steps, fail) {
    const ic = obj.info_columns;
    if (obj.infos === undefined || obj.infos === null) throw fail('has "info_columns" but no "infos"');
    if (!isObject(ic) || !Array.isArray(ic.order) || !ic.order.every((k) => typeof k === "string") ||
        new Set(ic.order).size !== ic.order.length || !isObject(ic.columns)) {
      throw fail('"info_columns" must hold an "order" of distinct keys and "columns"');
    }
    const names = Object.keys(ic.columns);
    for (const key of names) {
      const c = ic.columns[key];
      if (!ic.order.includes(key)) throw fail(`info column ${show(key)} is not in "order"`);
      if (!isObject(c) || !["float", "int", "bool", "scalar", "array"].includes(c.kind) || !isRef(c.data)) {
        throw fail(`info column ${show(key)} needs a "kind" and an ndarray "data"`);
      }
      const want = { float: "float64", int: "int64", bool: "bool" }[c.kind];
      const nd = c.data.shape.length;
      if (nd < 1 || c.data.shape[0] !== steps || (want && (c.data.dtype !== want || nd !== 1)) ||
          (c.kind === "scalar" && nd !== 1) || (c.kind === "array" && nd < 2)) {
        throw fail(`info column ${show(key)}: expected ${steps} ${c.kind} values, got ${c.data.dtype}[${c.data.shape.join(", ")}]`);
      }
    }
    // Each step info holds the keys of "order" that are not columns, then (version 2.3) its own.
    const others = ic.order.filter((k) => !Object.hasOwn(ic.columns, k));
    obj.infos.slice(1).forEach((info, t) => {
      const plain = isObject(info) && info.__type === undefined;
      if (!plain || others.some((k) => !Object.hasOwn(info, k)) ||
          Object.keys(info).some((k) => Object.hasOwn(ic.columns, k))) {
        throw fail(`step info ${t + 1} does not hold the other keys of "order"`);
      }
    });
  }

  /** The steps a batch's episode objects hold, from their rewards (null if unclear). */
  function batchSteps(episodes) {
    let total = 0;
    for (const o of episodes) {
      const r = isObject(o) ? o.rewards : undefined;
      if (Array.isArray(r)) total += r.length;
      else if (isLegacyEmpty(r)) continue;
      else if (isRef(r) && Array.isArray(r.shape) && r.shape.length === 1 && isCount(r.shape[0])) total += r.shape[0];
      else return null;
    }
    return total;
  }

  /** Read, validate and parse one batch, and read its rewards. */
  async function loadBatch(entry) {
    const file = entry.fn;
    const bytes = await getBytes(file);
    if (bytes === null) throw new TraceFormatError(file, `is listed in the manifest but ${refusedReason(file) || "does not exist"}`);
    const doc = parseJson(bytes, file);
    if (!isObject(doc) || !Array.isArray(doc.episodes)) throw new TraceFormatError(file, 'is not an object with an "episodes" list');
    if (doc[NON_FINITE_TOKENS] && !entry.legacy) {
      throw new TraceFormatError(file, "holds a NaN or Infinity token, which only version 1 files may (FORMAT.md §2)");
    }
    if (doc.episodes.length !== entry.len) {
      throw new TraceFormatError(file, `holds ${doc.episodes.length} episode objects; the manifest says ${entry.len}`);
    }
    if (entry.steps !== null) {
      const steps = batchSteps(doc.episodes);
      if (steps !== null && steps !== entry.steps) {
        throw new TraceFormatError(file, `holds ${steps} steps; the manifest says ${entry.steps}`);
      }
    }
    const refs = collectRefs(doc.episodes, []);
    const names = new Set(refs.map((r) => r.npyfile).filter((n) => n === entry.blob));
    // (the blob whose size `bytes` counts: a batch that names none and holds no array has none)
    const counted = entry.bin !== null ? entry.bin : refs.length ? entry.blob : null;
    if (entry.bytes !== null && counted !== null) names.add(counted);
    const sizes = new Map();
    await Promise.all([...names].map(async (name) => {
      const size = await blobSize(name);
      if (size !== undefined) sizes.set(name, size);
    }));
    if (entry.bytes !== null) {
      const size = counted === null ? 0 : sizes.get(counted);
      if (size === undefined) throw new TraceFormatError(file, `its blob ${counted} ${refusedReason(counted) || "does not exist"}`);
      if (bytes.byteLength + size !== entry.bytes) {
        throw new TraceFormatError(file, `the manifest gives ${entry.bytes} bytes for this batch and its blob ${counted}, but they hold ${bytes.byteLength + size} (a truncated or altered file)`);
      }
    }
    const budget = { bytes: 0, limit: Math.min(MAX_DECODED_BYTES, JSONARRAY_RATIO * bytes.byteLength) };
    const objects = doc.episodes.map((obj, k) => parseEpisodeObject(obj, file, k, sizes, entry.blob, budget));
    checkOverlaps(refs, file, "episodes");
    objects.forEach((o, k) => {
      o.position = entry.first + k;
      if (o.continues && k < objects.length - 1) {
        throw new TraceFormatError(file, `episodes[${k}] continues, but only a batch's last episode can continue in the next batch`);
      }
    });
    const last = objects[objects.length - 1];
    if (last && last.continues !== entry.continues) {
      throw new TraceFormatError(file, last.continues
        ? "its last episode continues in the next batch, but the manifest does not say so"
        : "the manifest says this batch continues an episode, but its last episode does not");
    }
    // (a compressed empty array is read too: its frame is checked like every other)
    const rewardRefs = objects.filter((o) => isRef(o.rewardsNode) && (o.steps > 0 || isCompressed(o.rewardsNode))).map((o) => o.rewardsNode);
    const decoded = await fetchRefs(rewardRefs);
    for (const o of objects) {
      if (o.steps === 0) o.rewards = new Float64Array(0);
      else if (isRef(o.rewardsNode)) o.rewards = Float64Array.from(decoded.get(o.rewardsNode));
      else o.rewards = Float64Array.from(o.rewardsNode, toNumber);
    }
    return { objects };
  }

  // ---------------------------------------------------------------------------------------
  // Tracks: what a field turns into on the page (series of numbers, frames, text, notes)
  // ---------------------------------------------------------------------------------------

  /**
   * Whether a uint8 array's steps are pictures, and which bytes of a step are shown (the rule
   * of Episode.frames): images [H, W] or [H, W, C] (C 1, 3, 4), and frame stacks [k, H, W]
   * or [k, H, W, C] (2 <= k <= 16, C 1 or 3), of which the newest is shown; sides of fewer
   * than 16 pixels are symbolic grids (MiniGrid), not pictures. null if not pictures.
   */
  function pictureOf(dtype, sub) {
    if (dtype !== "uint8") return null;
    let dims = sub;
    let skip = 0;
    const isStack = (k) => k >= 2 && k <= MAX_STACK;
    if (sub.length === 3 && ![1, 3, 4].includes(sub[2]) && isStack(sub[0])) {
      dims = [sub[1], sub[2], 1];
      skip = (sub[0] - 1) * sub[1] * sub[2];
    } else if (sub.length === 4 && [1, 3].includes(sub[3]) && isStack(sub[0])) {
      dims = sub.slice(1);
      skip = (sub[0] - 1) * product(dims);
    } else if (sub.length === 2) {
      dims = [sub[0], sub[1], 1];
    }
    const [h, w, c] = dims;
    if (dims.length !== 3 || ![1, 3, 4].includes(c) || Math.min(h, w) < MIN_PICTURE_SIDE) return null;
    return { h, w, c, skip };
  }

  function componentLabels(name, sub, complex) {
    const labels = [];
    const count = product(sub);
    for (let i = 0; i < count; i++) {
      let label = name;
      if (sub.length > 0) {
        const idx = [];
        let rest = i;
        for (let d = sub.length - 1; d >= 0; d--) {
          idx.unshift(rest % sub[d]);
          rest = Math.floor(rest / sub[d]);
        }
        label = `${name}[${idx.join(",")}]`;
      }
      if (complex) labels.push(`${label}.re`, `${label}.im`);
      else labels.push(label);
    }
    return labels;
  }

  /**
   * A part's field with each place where the episode's parts join as per-step values
   * (joinStructure's "list", as load() joins them) made a list of per-step values, so that
   * the page shows it as it shows an episode of one part of such values.
   */
  function asJoined(node, joined) {
    if (joined.kind === "list") return node.kind === "list" ? node : { kind: "list", items: stepValues(node), steps: stepsOf(node) };
    if (node.kind === "dict" || node.kind === "tuple") return { ...node, children: node.children.map((c, i) => asJoined(c, joined.children[i])) };
    return node;
  }

  /** A field's per-step values (§6): an array's rows (rowRef), a dict's or tuple's steps. */
  function stepValues(node) {
    const steps = stepsOf(node) || 0;
    switch (node.kind) {
      case "array": return Array.from({ length: steps }, (_, t) => rowRef(node.ref, node.sub, t));
      case "list": return node.items;
      case "dict": {
        const columns = node.children.map(stepValues);
        const plain = !node.keys.includes("__type"); // (§6: a dict of that key is a mapping)
        return Array.from({ length: steps }, (_, t) => (plain
          ? Object.fromEntries(node.keys.map((k, i) => [k, columns[i][t]]))
          : { __type: "mapping", items: node.keys.map((k, i) => [k, columns[i][t]]) }));
      }
      case "tuple": {
        const columns = node.children.map(stepValues);
        return Array.from({ length: steps }, (_, t) => ({ __type: "tuple", items: columns.map((c) => c[t]) }));
      }
      default: return [];
    }
  }

  /**
   * Row t of a stacked array as a reference of its own: the array's ref with the row's shape,
   * and rowOf/row, by which the array is fetched and the row cut from it (addRef, loadDetail).
   */
  function rowRef(ref, sub, t) {
    return { ...ref, shape: sub, rowOf: ref, row: t };
  }

  /** Have a ref fetched (an array's row: the array, the row cut from it once fetched). */
  function addRef(plan, ref) {
    plan.refs.add(ref.rowOf || ref);
    if (ref.rowOf) plan.rows.add(ref);
  }

  /**
   * Decide how a field node is shown and which refs must be fetched whole (plan.refs).
   * Image frames are not fetched here: they are read one range per frame when shown.
   */
  function planField(node, name, plan) {
    switch (node.kind) {
      case "empty":
        return { type: "empty", name };
      case "dict":
        return { type: "group", children: node.keys.map((k, i) => planField(node.children[i], `${name}.${k}`, plan)) };
      case "tuple":
        return { type: "group", children: node.children.map((c, i) => planField(c, `${name}[${i}]`, plan)) };
      case "array":
        return planArray(name, node.dtype, node.sub, [node.ref], true, plan);
      case "list": {
        const items = node.items;
        const first = items[0];
        const stackable = items.length > 0 && items.every((it) => isRef(it) && it.dtype === first.dtype &&
          it.shape.length === first.shape.length && it.shape.every((d, i) => d === first.shape[i]));
        if (stackable) return planArray(name, first.dtype, first.shape, items, false, plan, items);
        const refs = [];
        collectRefs(items, refs);
        const bytes = [...new Set(refs.map((r) => r.rowOf || r))].reduce((a, r) => a + rawSize(r), 0);
        if (bytes > MAX_RANGE) return { type: "note", name, text: `${name}: values with ${bytes} bytes of arrays; not shown`, items };
        for (const ref of refs) addRef(plan, ref);
        return { type: "values", name, items };
      }
      default:
        throw new Error(`unknown field kind ${node.kind}`);
    }
  }

  /**
   * refs: one ref holding all steps (stacked=true) or one ref per step. items: the per-step
   * values the refs are, when they are (joinParts shows them as text if another part's are not
   * plotted alike), else null.
   */
  function planArray(name, dtype, sub, refs, stacked, plan, items = null) {
    const picture = pictureOf(dtype, sub);
    if (picture) return { type: "image", name, dtype, sub, refs, stacked, picture, items };
    const complex = dtype.startsWith("complex");
    const width = product(sub) * (complex ? 2 : 1);
    if (width > MAX_COMPONENTS) {
      return { type: "note", name, text: `${name}: ${dtype}[${sub.join(", ")}] per step — ${width} components, too many to plot`, items };
    }
    for (const ref of refs) addRef(plan, ref);
    return { type: "series", name, dtype, sub, refs, stacked, complex, width, items };
  }

  /** The keys that make a track of per-step values (joinParts shows them as text): its field's name and values. */
  const valuesOf = (spec) => (spec.items ? { group: spec.name, items: spec.items } : {});

  /** Flatten a §6 value into [path, number] pairs; null if it holds a non-numeric leaf. */
  function flattenValue(value, decoded, path, out) {
    const n = toNumber(value);
    if (n !== undefined) {
      out.push([path, n]);
      return out;
    }
    if (isRef(value)) {
      const data = decoded.get(value);
      const labels = componentLabels(path, value.shape, value.dtype.startsWith("complex"));
      labels.forEach((label, i) => out.push([label, data[i]]));
      return out;
    }
    if (Array.isArray(value) || (isObject(value) && value.__type === "tuple" && Array.isArray(value.items))) {
      const list = Array.isArray(value) ? value : value.items;
      for (let i = 0; i < list.length; i++) if (flattenValue(list[i], decoded, `${path}[${i}]`, out) === null) return null;
      return out;
    }
    if (isObject(value) && value.__type === undefined) {
      for (const key of Object.keys(value)) if (flattenValue(value[key], decoded, `${path}.${key}`, out) === null) return null;
      return out;
    }
    return null;
  }

  /** A number as the text shows it: NaN and infinities as Python writes them, -0 with its sign. */
  function numberText(n) {
    if (Number.isNaN(n)) return "nan";
    if (n === Infinity || n === -Infinity) return n > 0 ? "inf" : "-inf";
    return Object.is(n, -0) ? "-0" : String(n);
  }

  /**
   * An array reference's numbers, nested by its shape, each as a token displayValue unquotes
   * (complex as a+bj, bool as true/false); null when they are not fetched (decoded) or are more
   * than MAX_COMPONENTS.
   */
  function refNumbers(ref, decoded) {
    const data = decoded ? decoded.get(ref) : undefined;
    if (!data || product(ref.shape) > MAX_COMPONENTS) return null;
    const complex = ref.dtype.startsWith("complex");
    const token = (i) => {
      if (complex) {
        const im = numberText(data[2 * i + 1]);
        return `\u0000${numberText(data[2 * i])}${im.startsWith("-") ? "" : "+"}${im}j`;
      }
      return `\u0000${ref.dtype === "bool" ? String(data[i] !== 0) : numberText(data[i])}`;
    };
    const nest = (dim, at) => (dim === ref.shape.length ? token(at)
      : Array.from({ length: ref.shape[dim] }, (_, i) => nest(dim + 1, at * ref.shape[dim] + i)));
    return nest(0, 0);
  }

  /** A §6 value as text; an array reference's numbers when `decoded` holds them, else its dtype and shape. */
  function displayValue(value, decoded = null) {
    if (isObject(value)) {
      switch (value.__type) {
        case "float": return value.value;
        case "scalar": return displayValue(value.value, decoded);
        case "tuple": return `(${(value.items || []).map((x) => displayValue(x, decoded)).join(", ")})`;
        case "bytes": return `b64:${value.base64}`;
        case "repr": return value.repr;
        case "overflow": if (value.text) return value.text; break;
        default: break;
      }
    }
    if (typeof value === "bigint") return String(value);
    const text = JSON.stringify(value, (key, x) => {
      if (isRef(x)) return refNumbers(x, decoded) || `\u0000${x.dtype}[${x.shape.join(", ")}]`;
      if (isObject(x) && x.__type === "scalar") return x.value; // (a NumPy scalar: its value, as an array's)
      if (typeof x === "bigint") return `\u0000${x}`; // (its digits, unquoted below)
      if (isObject(x) && x.__type === "overflow" && x.text) return `\u0000${x.text}`;
      if (isObject(x) && x.__type === "float") return `\u0000${x.value}`; // (nan, inf, -inf)
      if (isNumber(x) && Object.is(Number(x), -0)) return "\u0000-0";
      return x;
    });
    return text === undefined ? String(value) : text.replace(/"\\u0000([^"]*)"/g, "$1");
  }

  /** Turn a planned field into tracks for one episode part (numbers read, frames located). */
  function buildTracks(spec, decoded, steps, out) {
    switch (spec.type) {
      case "empty":
        return out;
      case "group":
        for (const child of spec.children) buildTracks(child, decoded, steps, out);
        return out;
      case "note":
        out.push({ kind: "note", name: spec.name, text: spec.text, ...valuesOf(spec) });
        return out;
      case "image": {
        const { h, w, c, skip } = spec.picture;
        const stepBytes = product(spec.sub);
        const frameBytes = h * w * c;
        const frames = [];
        for (let t = 0; t < steps; t++) {
          const ref = spec.stacked ? spec.refs[0] : spec.refs[t];
          const at = (spec.stacked ? t : ref.rowOf ? ref.row : 0) * stepBytes + skip; // (rowRef: a row of its array)
          // A compressed array's frames are cut from it once it is decompressed (zref).
          frames.push(isCompressed(ref)
            ? { file: ref.npyfile, off: ref.npyoff, size: ref.size, zref: ref, at, len: frameBytes }
            : { file: ref.npyfile, off: ref.npyoff + at, size: frameBytes });
        }
        out.push({ kind: "image", name: spec.name, h, w, c, stack: skip > 0 ? spec.sub[0] : 0, frames, ...valuesOf(spec) });
        return out;
      }
      case "series": {
        const labels = componentLabels(spec.name, spec.sub, spec.complex);
        const columns = labels.map(() => new Float64Array(steps));
        for (let t = 0; t < steps; t++) {
          const data = spec.stacked ? decoded.get(spec.refs[0]) : decoded.get(spec.refs[t]);
          const base = spec.stacked ? t * spec.width : 0;
          for (let k = 0; k < spec.width; k++) columns[k][t] = data[base + k];
        }
        labels.forEach((label, k) => out.push({ kind: "series", name: label, dtype: spec.dtype, values: columns[k], ...valuesOf(spec) }));
        return out;
      }
      case "values": {
        const flat = spec.items.map((item) => flattenValue(item, decoded, spec.name, []));
        const same = flat.length > 0 && flat.every((f) => f !== null && f.length === flat[0].length &&
          f.every(([p], i) => p === flat[0][i][0]));
        // (group and items: a part whose values are laid out otherwise joins as text, joinParts)
        if (same && flat[0].length > 0 && flat[0].length <= MAX_COMPONENTS) {
          flat[0].forEach(([label], k) => out.push({
            kind: "series", name: label, dtype: "value", values: Float64Array.from(flat, (f) => f[k][1]),
            group: spec.name, items: spec.items,
          }));
        } else {
          out.push(valuesText(spec.name, spec.items, decoded));
        }
        return out;
      }
      default:
        throw new Error(`unknown plan ${spec.type}`);
    }
  }

  /** Per-step values shown as text, one line a step (arrays' numbers: decoded, displayValue). */
  function valuesText(name, items, decoded) {
    return { kind: "text", name, group: name, items, values: items.map((v) => {
      const text = displayValue(v, decoded);
      return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text;
    }) };
  }

  /** A part's tracks with each field of per-step values as one text track (see joinParts). */
  function valuesAsText(tracks, decoded) {
    const out = [];
    const seen = new Set();
    for (const t of tracks) {
      if (t.group === undefined) out.push(t);
      else if (!seen.has(t.group)) {
        seen.add(t.group);
        out.push(t.kind === "text" ? t : valuesText(t.group, t.items, decoded));
      }
    }
    return out;
  }

  function trackLength(track) {
    return track.kind === "image" ? track.frames.length : track.kind === "note" ? null : track.values.length;
  }

  function dropFirst(track) {
    const items = track.items ? { items: track.items.slice(1) } : {};
    if (track.kind === "image") return { ...track, frames: track.frames.slice(1), ...items };
    if (track.kind === "series") return { ...track, values: track.values.subarray(1), ...items };
    if (track.kind === "text") return { ...track, values: track.values.slice(1), ...items };
    return { ...track, ...items };
  }

  function concatTracks(a, b) {
    const items = a.items && b.items ? { items: a.items.concat(b.items) } : {};
    if (a.kind === "image") return { ...a, frames: a.frames.concat(b.frames), ...items };
    if (a.kind === "text") return { ...a, values: a.values.concat(b.values), ...items };
    if (a.kind === "series") {
      const values = new Float64Array(a.values.length + b.values.length);
      values.set(a.values);
      values.set(b.values, a.values.length);
      return { ...a, values, ...items };
    }
    return { ...a, ...items };
  }

  /** Whether two parts' tracks are laid out alike (the same kinds and names, frames of one size). */
  function sameLayout(a, b) {
    return a.length === b.length && a.every((t, i) => t.kind === b[i].kind && t.name === b[i].name &&
      (t.kind !== "image" || (t.h === b[i].h && t.w === b[i].w && t.c === b[i].c)));
  }

  /** Whether a part's first step repeats the last of the part before (FORMAT.md §4: a copy). */
  function repeats(before, after) {
    const n = trackLength(before);
    if (before.kind !== after.kind || before.name !== after.name || !n || !trackLength(after)) {
      return true; // (nothing to compare: a structure that differs is said by the join)
    }
    if (before.kind === "series") {
      const [a, b] = [before.values[n - 1], after.values[0]];
      return a === b || (Number.isNaN(a) && Number.isNaN(b));
    }
    return before.kind !== "text" || before.values[n - 1] === after.values[0];
  }

  /**
   * Join the tracks of an episode's parts (§4); observation parts after the first lose step 0,
   * once it is found a copy of the step the part before ends with. Per-step values laid out
   * otherwise in some part (plotted in one, text in another) are text in every part.
   */
  function joinParts(perPart, parts, isObservation, decoded) {
    const trim = (all) => all.map((tracks, k) => (isObservation && k > 0 ? tracks.map(dropFirst) : tracks));
    const hasData = (tracks) => tracks.some((t) => trackLength(t) > 0);
    const withData = trim(perPart).filter(hasData);
    const shown = withData.every((tracks) => sameLayout(tracks, withData[0]))
      ? perPart : perPart.map((tracks) => valuesAsText(tracks, decoded));
    for (let k = 1; isObservation && k < shown.length; k++) {
      const before = shown[k - 1];
      if (before.length === shown[k].length && !shown[k].every((t, i) => repeats(before[i], t))) {
        throw new TraceFormatError(parts[k].file, `part ${parts[k].part} of the episode does not begin with the observation the part before ends with`);
      }
    }
    const kept = trim(shown).map((tracks, k) => [tracks, k]).filter(([tracks]) => hasData(tracks));
    if (kept.length === 0) return trim(shown)[0] || [];
    let joined = kept[0][0];
    for (const [tracks, k] of kept.slice(1)) {
      if (!sameLayout(tracks, joined)) {
        throw new TraceFormatError(parts[k].file, `part ${parts[k].part} of the episode does not have the same ${isObservation ? "observation" : "action"} structure as the part before`);
      }
      joined = joined.map((t, i) => concatTracks(t, tracks[i]));
    }
    return joined;
  }

  // ---------------------------------------------------------------------------------------
  // State, polling, episode assembly
  // ---------------------------------------------------------------------------------------

  const state = {
    directory: "",
    writers: new Map(), // manifest name -> writer
    errors: new Map(), // key -> message
    episodes: [],
    byKey: new Map(),
    sort: { key: "index", dir: 1 },
    selectedKey: null,
    detail: null,
    detailToken: 0,
    step: 0,
    playing: false,
    timer: null,
    fps: 15,
    fpsChosen: false, // the reader picked a speed: it holds for every episode
    polls: 0,
    unfinished: [], // step counts of episodes still being recorded (not listed)
    refused: new Map(), // trace-named entries the server refuses to serve -> why
    listed: new Map(), // trace file name -> its size, as the last poll's listing gave it
    readingOn: false, // batches are left that the last poll did not read: the next comes at once
    rendered: 0, // episodes the table showed when last drawn
  };

  function setError(key, message) {
    state.errors.set(key, message);
  }

  function describe(err) {
    return err instanceof TraceFormatError ? err.message : `${err.name || "Error"}: ${err.message}`;
  }

  async function poll() {
    const listing = await getJsonListing();
    state.directory = listing.directory || "";
    // Trace-named entries the server will not serve (links leading out, directories, ...).
    state.refused = new Map((listing.refused || []).map((r) => [r.name, r.reason]));
    for (const key of [...state.errors.keys()]) if (key.startsWith("refused:")) state.errors.delete(key);
    for (const [name, reason] of state.refused) {
      if (MANIFEST_RE.test(name)) setError(`refused:${name}`, `${name}: ${reason}; not read`);
    }
    const stamps = new Map(listing.files.map((f) => [f.name, `${f.size}:${f.mtime}`]));
    state.listed = new Map(listing.files.map((f) => [f.name, f.size]));
    const names = [...stamps.keys()].filter((n) => MANIFEST_RE.test(n)).sort();
    let changed = false;
    const stale = []; // the writers whose manifest changed since the last poll
    for (const name of names) {
      const id = MANIFEST_RE.exec(name)[1];
      let writer = state.writers.get(name);
      if (!writer) {
        writer = { name, id, manifest: null, stamp: null, batches: new Map() };
        state.writers.set(name, writer);
        changed = true;
      }
      if (!WRITER_ID_RE.test(id)) {
        setError(name, `${name}: writer id ${show(id)} does not match [A-Za-z0-9_-]+(.[A-Za-z0-9_-]+)*`);
      } else if (writer.stamp !== stamps.get(name)) {
        stale.push(writer);
      }
    }
    // Their manifests are fetched side by side (as many at once as `limited` lets through).
    // (all fetched before any is taken, in name order: none is left running when one fails)
    const fetched = await Promise.allSettled(stale.map((writer) => getBytes(writer.name)));
    let failure = null;
    stale.forEach((writer, i) => {
      const { name } = writer;
      const got = fetched[i];
      if (got.status === "rejected") {
        failure = failure || got.reason; // (retried at the next poll: not stamped)
        return;
      }
      writer.stamp = stamps.get(name);
      if (got.value === null) return;
      try {
        writer.manifest = parseManifest(parseJson(got.value, name), name);
        state.errors.delete(name);
      } catch (err) {
        writer.manifest = null; // refused, as the Python reader refuses it
        setError(name, describe(err));
      }
      changed = true;
    });
    if (failure) throw failure;
    // Load the batches not read yet (batch files never change once listed; see FORMAT.md §2),
    // at most BATCHES_A_POLL of them, each writer's in order: the episodes they complete are
    // shown while the next poll, at once, reads on.
    const todo = [];
    for (const writer of state.writers.values()) {
      if (!writer.manifest) continue;
      for (const entry of writer.manifest.batches) {
        const known = writer.batches.get(batchKey(entry));
        if (!(known && (known.objects || known.error))) todo.push([writer, entry]);
      }
    }
    state.readingOn = todo.length > BATCHES_A_POLL;
    const jobs = todo.slice(0, BATCHES_A_POLL).map(([writer, entry]) => (async () => {
      try {
        writer.batches.set(batchKey(entry), await loadBatch(entry));
      } catch (err) {
        if (err instanceof FetchError) throw err; // retried at the next poll
        if (!(err instanceof TraceFormatError)) console.error(err);
        writer.batches.set(batchKey(entry), { error: describe(err) });
        setError(entry.fn, describe(err));
      }
    })());
    if (jobs.length) {
      setStatus(`Reading ${todo.length} batch${todo.length === 1 ? "" : "es"}…`);
      const results = await Promise.allSettled(jobs);
      changed = true;
      const failure = results.find((r) => r.status === "rejected");
      if (failure) throw failure.reason;
    }
    return changed;
  }

  const batchKey = (entry) => `${entry.fn}@${entry.first}+${entry.len}`;

  const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

  // The time a manifest's `created` names, in ms (naive: UTC; "...Z" and "...+00:00" alike);
  // none first, one that is not a time last (as the Python reader orders them).
  function createdTime(created) {
    if (created === "") return -Infinity;
    const t = Date.parse(/([zZ]|[+-]\d\d:?\d\d)$/.test(created) ? created : `${created}Z`);
    return Number.isNaN(t) ? Infinity : t;
  }

  function assembleEpisodes() {
    // Writers in reading order (§8): creation time, writer id, segment, file name.
    const writers = [...state.writers.values()].filter((w) => w.manifest);
    writers.sort((a, b) => compare(createdTime(a.manifest.created), createdTime(b.manifest.created)) ||
      compare(a.manifest.created, b.manifest.created) || compare(a.manifest.writer, b.manifest.writer) ||
      a.manifest.segment - b.manifest.segment || compare(a.name, b.name));
    const listedBy = new Map();
    const episodes = [];
    writers.forEach((writer, writerOrder) => {
      const claimed = writer.manifest.batches.find((e) => listedBy.has(e.fn) && listedBy.get(e.fn) !== writer.name);
      if (claimed) {
        setError(`claim:${writer.name}`, `${writer.name}: batch ${claimed.fn} is also listed by ${listedBy.get(claimed.fn)}; not read`);
        return;
      }
      for (const entry of writer.manifest.batches) listedBy.set(entry.fn, writer.name);
      let current = null;
      for (const entry of writer.manifest.batches) {
        const batch = writer.batches.get(batchKey(entry));
        if (!batch || !batch.objects) {
          // A damaged batch breaks an episode's chain of parts: the parts before it are a
          // fragment, not an episode being recorded (one not read yet is only not read yet).
          if (batch && batch.error && current && current.parts[current.parts.length - 1].continues) {
            current.broken = true;
          }
          current = null;
          continue;
        }
        for (const obj of batch.objects) {
          const where = `${obj.file}#${obj.position}`;
          const prev = current ? current.parts[current.parts.length - 1] : null;
          if (prev && prev.continues) {
            if (obj.part !== prev.part + 1) {
              setError(where, `${obj.file}: expected part ${prev.part + 1} of an episode at its start, found part ${obj.part}`);
              current.broken = true;
            }
            const { joined } = current;
            joined.observations = joinStructure(joined.observations, obj.observations);
            joined.actions = joinStructure(joined.actions, obj.actions);
            const conflict = conflicts(joined.observations) || conflicts(joined.actions);
            if (obj.frameSize !== current.parts[0].frameSize) {
              setError(where, `${obj.file}: part ${obj.part} of an episode does not join the part before it (rendered frames of another size)`);
              current.broken = true;
            } else if (obj.hasInfos !== current.parts[0].hasInfos) {
              setError(where, `${obj.file}: part ${obj.part} of an episode does not join the part before it (infos are recorded in some parts only)`);
              current.broken = true;
            } else if (conflict && !current.conflictAt) {
              current.conflictAt = obj; // (judged once the episode is whole: a later part of per-step values joins it)
            }
            current.parts.push(obj);
          } else {
            // A part no part precedes is a fragment of an episode: its parts are taken and
            // left out of the list, as a part that does not join (broken).
            const orphan = obj.part !== 0;
            if (orphan) {
              setError(where, `${obj.file}: episodes[${obj.position - entry.first}] is part ${obj.part} of an episode, but no part precedes it`);
            }
            current = {
              writer: writer.manifest.writer, writerName: writer.name, writerOrder, envId: writer.manifest.envId, renderFps: writer.manifest.renderFps,
              version: writer.manifest.version, position: obj.position, parts: [obj], broken: orphan,
              joined: { observations: obj.observations, actions: obj.actions }, conflictAt: null, // (joinStructure)
            };
            episodes.push(current);
          }
        }
      }
    });
    // Parts whose fields do not join (FORMAT.md §9 Parts): an error, and no episode of the list.
    for (const ep of episodes) {
      if (ep.broken || ep.parts[ep.parts.length - 1].continues) continue;
      if (conflicts(ep.joined.observations) || conflicts(ep.joined.actions)) {
        const obj = ep.conflictAt;
        const what = conflicts(ep.joined.observations) ? "observations" : "actions";
        const [first, got] = [ep.parts[0][what], obj[what]].map(structureText);
        setError(`${obj.file}#${obj.position}`, `${obj.file}: part ${obj.part} of an episode does not join the part before it: expected ${what} of the first part's structure ${first} (or per-step values), got ${got}`);
        ep.broken = true;
      }
    }
    // Like the Python reader, hide an episode whose last part is not written yet.
    const unfinished = episodes.filter((ep) => !ep.broken && ep.parts[ep.parts.length - 1].continues);
    state.unfinished = unfinished.map((ep) => ep.parts.reduce((a, p) => a + p.steps, 0));
    const complete = episodes.filter((ep) => !ep.broken && !ep.parts[ep.parts.length - 1].continues);
    const byKey = new Map();
    complete.forEach((ep, index) => {
      const last = ep.parts[ep.parts.length - 1];
      ep.index = index;
      ep.key = `${ep.writerName}/${ep.position}`;
      ep.length = ep.parts.reduce((a, p) => a + p.steps, 0);
      ep.return = ep.parts.reduce((a, p) => a + p.rewards.reduce((x, y) => x + y, 0), 0);
      for (const [key, spec] of Object.entries(EPISODE_KEYS)) ep[key] = (spec.part === "first" ? ep.parts[0] : last).keys[key];
      ep.inProgress = last.continues;
      ep.signature = `${ep.parts.length}:${ep.length}:${ep.inProgress}`;
      byKey.set(ep.key, ep);
    });
    state.episodes = complete;
    state.byKey = byKey;
  }

  async function pollLoop() {
    try {
      const changed = await poll();
      if (changed || state.polls === 0) {
        assembleEpisodes();
        // While the batches are read poll after poll, the table (drawn whole) is drawn again
        // once the episodes have doubled: drawn after each poll, its cost grew with the
        // square of the recording's batches.
        if (!state.readingOn || state.episodes.length >= 2 * state.rendered) {
          state.rendered = state.episodes.length;
          render();
        }
      }
      const open = state.unfinished.length
        ? ` · ${state.unfinished.length} episode${state.unfinished.length === 1 ? "" : "s"} being recorded (${state.unfinished.join(", ")} steps so far)`
        : "";
      if (state.readingOn) setStatus(`Reading the recording: ${state.episodes.length} episodes so far…`);
      else setStatus(`${state.episodes.length || open ? "Live" : "Waiting for a recording"}${open} · checked ${new Date().toLocaleTimeString()}`, "live");
    } catch (err) {
      state.readingOn = false; // (the next poll tries again after POLL_MS)
      setStatus(err instanceof FetchError ? `Offline: ${err.message}; retrying` : describe(err), "offline");
      if (!(err instanceof FetchError)) console.error(err);
    } finally {
      state.polls++;
      document.body.dataset.polls = String(state.polls);
      document.body.dataset.state = "ready";
      setTimeout(pollLoop, state.readingOn ? 0 : POLL_MS);
    }
  }

  // ---------------------------------------------------------------------------------------
  // Rendering helpers
  // ---------------------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "className") node.className = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function svg(tag, attrs = {}, parent = null) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (parent) parent.append(node);
    return node;
  }

  function fmt(x) {
    if (x === undefined || x === null) return "";
    if (!Number.isFinite(x) || Object.is(x, -0) || (Number.isInteger(x) && Math.abs(x) < 1e9)) return numberText(x);
    const a = Math.abs(x);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(3);
    return String(Number(x.toPrecision(5)));
  }

  function setStatus(text, cls = "") {
    const node = $("status");
    node.textContent = text;
    node.className = `status ${cls}`;
  }

  // ---------------------------------------------------------------------------------------
  // Episode table
  // ---------------------------------------------------------------------------------------

  const SORT_KEYS = {
    index: (e) => e.index,
    writer: (e) => e.writerOrder * 1e12 + e.position,
    length: (e) => e.length,
    return: (e) => (Number.isNaN(e.return) ? -Infinity : e.return),
    terminated: (e) => (e.terminated ? 1 : 0),
    truncated: (e) => (e.truncated ? 1 : 0),
  };

  function sortedEpisodes() {
    const key = SORT_KEYS[state.sort.key];
    const dir = state.sort.dir;
    return [...state.episodes].sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      return ka < kb ? -dir : ka > kb ? dir : a.index - b.index;
    });
  }

  function renderTable() {
    const rows = $("episode-rows");
    const fragment = document.createDocumentFragment();
    for (const ep of sortedEpisodes()) {
      const flag = (on, cls, label) => (on ? el("span", { className: cls, text: label }) : el("span", { className: "muted", text: "·" }));
      const row = el("tr", {
        "data-testid": "episode-row",
        "data-key": ep.key,
        "data-index": ep.index,
        "data-writer": ep.writer,
        "data-length": ep.length,
        "data-return": String(ep.return),
        "data-terminated": String(ep.terminated),
        "data-truncated": String(ep.truncated),
        "aria-selected": ep.key === state.selectedKey ? "true" : "false",
        title: ep.envId ? `${ep.envId} · writer ${ep.writer}` : `writer ${ep.writer}`,
      },
      el("td", { className: "num", text: ep.index }),
      el("td", { className: "writer mono", text: ep.writer }),
      el("td", { className: "num", text: ep.inProgress ? `${ep.length}+` : ep.length }),
      el("td", { className: "num", text: fmt(ep.return) }),
      el("td", {}, ep.inProgress ? el("span", { className: "flag-live", text: "recording" }) : flag(ep.terminated, "flag-term", "✓")),
      el("td", {}, ep.inProgress ? null : flag(ep.truncated, "flag-trunc", "✓")));
      row.addEventListener("click", () => select(ep.key));
      fragment.append(row);
    }
    rows.replaceChildren(fragment);
    for (const th of document.querySelectorAll("th[data-sort]")) {
      const active = th.dataset.sort === state.sort.key;
      if (active) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    $("episode-count").textContent = String(state.episodes.length);
    const writerCount = new Set(state.episodes.map((e) => e.writer)).size;
    $("writer-count").textContent = writerCount ? `from ${writerCount} writer${writerCount === 1 ? "" : "s"}` : "";
    $("no-episodes").hidden = state.episodes.length > 0;
  }

  function renderErrors() {
    const box = $("errors");
    const list = $("error-list");
    list.replaceChildren(...[...state.errors.values()].map((m) => el("li", { text: m })));
    box.hidden = state.errors.size === 0;
  }

  function render() {
    $("directory").textContent = state.directory;
    $("directory").title = state.directory;
    renderErrors();
    renderTable();
    if (state.selectedKey && !state.byKey.has(state.selectedKey)) state.selectedKey = null;
    if (!state.selectedKey && state.episodes.length) {
      const wanted = /episode=(\d+)/.exec(location.hash);
      const fromHash = wanted ? state.episodes[Number(wanted[1])] : null;
      if (wanted && !fromHash && state.readingOn) return; // (its batch is read by a later poll)
      select((fromHash || sortedEpisodes()[0]).key);
      return;
    }
    const ep = state.byKey.get(state.selectedKey);
    if (ep && state.detail && state.detail.episode.key === ep.key && state.detail.signature !== ep.signature) {
      loadDetail(ep, state.step); // the episode grew while being recorded
    }
  }

  function select(key) {
    const ep = state.byKey.get(key);
    if (!ep) return;
    state.selectedKey = key;
    for (const row of $("episode-rows").children) {
      row.setAttribute("aria-selected", row.dataset.key === key ? "true" : "false");
      if (row.dataset.key === key) row.scrollIntoView({ block: "nearest" });
    }
    history.replaceState(null, "", `#episode=${ep.index}`);
    pause();
    loadDetail(ep, 0);
  }

  // ---------------------------------------------------------------------------------------
  // Episode detail: loading
  // ---------------------------------------------------------------------------------------

  async function loadDetail(ep, step) {
    const token = ++state.detailToken;
    const detail = $("detail");
    detail.dataset.status = "loading";
    try {
      const plan = { refs: new Set(), rows: new Set() };
      const specs = ep.parts.map((p) => ({
        obs: planField(asJoined(p.observations, ep.joined.observations), "obs", plan),
        act: planField(asJoined(p.actions, ep.joined.actions), "action", plan),
      }));
      const decoded = await fetchRefs([...plan.refs]);
      if (token !== state.detailToken) return;
      for (const row of plan.rows) {
        const data = decoded.get(row.rowOf);
        const width = data.length / row.rowOf.shape[0];
        decoded.set(row, data.subarray(row.row * width, (row.row + 1) * width));
      }
      const observations = joinParts(ep.parts.map((p, k) => buildTracks(specs[k].obs, decoded, p.steps + 1, [])), ep.parts, true, decoded);
      const actions = joinParts(ep.parts.map((p, k) => buildTracks(specs[k].act, decoded, p.steps, [])), ep.parts, false, decoded);
      const rendered = renderedTracks(ep);
      const rewards = new Float64Array(ep.length);
      let at = 0;
      for (const p of ep.parts) {
        rewards.set(p.rewards, at);
        at += p.rewards.length;
      }
      // As plotted, at the observation each arrives with (the step label's): the reward of
      // step t at t + 1 (none at the reset), and the return collected so far (0 at the reset).
      const arrived = new Float64Array(rewards.length + 1);
      arrived[0] = NaN;
      arrived.set(rewards, 1);
      const returns = new Float64Array(rewards.length + 1);
      let sum = 0;
      rewards.forEach((r, i) => { sum += r; returns[i + 1] = sum; });
      state.detail = { episode: ep, signature: ep.signature, steps: ep.length, observations, actions, rendered, rewards, arrived, returns };
      renderDetail();
      setStep(Math.min(step, ep.length));
      detail.dataset.status = "ready";
    } catch (err) {
      if (token !== state.detailToken) return;
      setError(`detail:${ep.key}`, describe(err));
      renderErrors();
      detail.replaceChildren(el("p", { className: "muted placeholder", text: `Episode ${ep.index} cannot be shown.` }));
      detail.dataset.status = "error";
      if (!(err instanceof TraceFormatError)) console.error(err);
    }
  }

  /** The episode's rendered frames (FORMAT.md §4, version 2.2) as one image track, or none. */
  function renderedTracks(ep) {
    const with_ = ep.parts.filter((p) => p.render !== null).length;
    if (with_ === 0) return [];
    if (with_ !== ep.parts.length) {
      throw new TraceFormatError(ep.parts[0].file, "the parts of the episode do not join: render_frames are recorded in some only");
    }
    const perPart = ep.parts.map((p) => {
      const sub = p.render.shape.slice(1);
      const spec = { type: "image", name: "render", dtype: "uint8", sub, refs: [p.render], stacked: true,
        picture: { h: sub[0], w: sub[1], c: 3, skip: 0 } };
      return buildTracks(spec, null, p.steps + 1, []);
    });
    return joinParts(perPart, ep.parts, true, null);
  }

  // ---------------------------------------------------------------------------------------
  // Episode detail: plots, frames, player
  // ---------------------------------------------------------------------------------------

  const LEFT = 58; // room for the y labels
  const RIGHT = 10;
  let views = []; // things to update when the step changes

  /** An SVG path through `values` at x = 0..n-1 (min/max per pixel column when dense). */
  function linePath(values, xOf, yOf, plotWidth) {
    const n = values.length;
    const parts = [];
    let pen = false;
    const point = (t, v) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      parts.push(`${pen ? "L" : "M"}${xOf(t).toFixed(2)},${yOf(v).toFixed(2)}`);
      pen = true;
    };
    if (n <= plotWidth * 2) {
      for (let t = 0; t < n; t++) point(t, values[t]);
    } else {
      const per = n / plotWidth;
      for (let col = 0; col < plotWidth; col++) {
        const a = Math.floor(col * per);
        const b = Math.min(n, Math.floor((col + 1) * per));
        let lo = Infinity;
        let hi = -Infinity;
        let loAt = a;
        let hiAt = a;
        for (let t = a; t < b; t++) {
          const v = values[t];
          if (v < lo) { lo = v; loAt = t; }
          if (v > hi) { hi = v; hiAt = t; }
        }
        if (lo === Infinity) { pen = false; continue; }
        if (loAt <= hiAt) { point(loAt, lo); point(hiAt, hi); } else { point(hiAt, hi); point(loAt, lo); }
      }
    }
    return parts.join("");
  }

  function extent(values) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values) {
      if (Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    if (lo === Infinity) return [0, 1];
    if (lo === hi) { // (a pad of 1 is lost beside 2 ** 53 and more)
      const pad = Math.max(1, Math.abs(lo) * 1e-6);
      return [lo - pad, hi + pad];
    }
    const pad = (hi - lo) * 0.05;
    return [lo - pad, hi + pad];
  }

  /**
   * Draw one panel (a series over the shared step axis 0..xMax) into `root` at `top`.
   * Returns a function that moves the panel's cursor to a step.
   */
  function drawPanel(root, width, top, height, values, xMax, color, title, showDots, first = 0) {
    const plotWidth = width - LEFT - RIGHT;
    const xOf = (t) => LEFT + (xMax > 0 ? (t / xMax) * plotWidth : 0);
    const [lo, hi] = extent(values);
    const y0 = top + 18;
    const y1 = top + height - 16;
    const yOf = (v) => y1 - ((v - lo) / (hi - lo)) * (y1 - y0);
    const titleNode = svg("text", { x: LEFT, y: top + 12, class: "title" }, root);
    titleNode.textContent = title;
    const readout = svg("text", { x: width - RIGHT, y: top + 12, "text-anchor": "end" }, root);
    svg("rect", { x: LEFT, y: y0, width: plotWidth, height: y1 - y0, class: "axis" }, root);
    if (lo < 0 && hi > 0) svg("line", { x1: LEFT, x2: LEFT + plotWidth, y1: yOf(0), y2: yOf(0), class: "zero" }, root);
    for (const [v, y] of [[hi, y0 + 4], [lo, y1]]) {
      const label = svg("text", { x: LEFT - 6, y, "text-anchor": "end" }, root);
      const a = Math.abs(v);
      label.textContent = a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(1) : String(Number(v.toPrecision(3)));
    }
    for (const [t, anchor] of [[0, "start"], [xMax, "end"]]) {
      const label = svg("text", { x: xOf(t), y: y1 + 12, "text-anchor": anchor }, root);
      label.textContent = String(t);
    }
    svg("path", { d: linePath(values, xOf, yOf, plotWidth), class: "series" }, root).style.stroke = color;
    if (showDots && values.length <= 120) {
      for (let t = 0; t < values.length; t++) {
        if (Number.isFinite(values[t])) svg("circle", { cx: xOf(t), cy: yOf(values[t]), r: 1.8 }, root).style.fill = color;
      }
    }
    const cursor = svg("line", { x1: LEFT, x2: LEFT, y1: y0, y2: y1, class: "cursor" }, root);
    const hit = svg("rect", { x: LEFT, y: y0, width: plotWidth, height: y1 - y0, class: "hit" }, root);
    hit.addEventListener("click", (event) => {
      const box = root.getBoundingClientRect();
      const x = ((event.clientX - box.left) / box.width) * width;
      pause();
      setStep(Math.round(((x - LEFT) / plotWidth) * xMax));
    });
    return (step) => {
      const x = xOf(Math.min(step, xMax));
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      const shown = step >= first && step < values.length; // (values from index first on)
      readout.textContent = shown ? `${fmt(values[step])} @ ${step}` : "";
      return shown ? values[step] : undefined;
    };
  }

  function rewardPlot(d) {
    const height = 120;
    const width = 640;
    const root = svg("svg", {
      class: "plot",
      viewBox: `0 0 ${width} ${2 * height}`,
      "data-testid": "reward-plot",
      "data-points": d.rewards.length,
      role: "img",
      "aria-label": `rewards and return over ${d.rewards.length} steps`,
    });
    const xMax = Math.max(1, d.steps);
    const setReward = drawPanel(root, width, 0, height, d.arrived, xMax, "var(--reward)", "reward", true, 1);
    const setReturn = drawPanel(root, width, height, height, d.returns, xMax, "var(--return)", "return (cumulative)", false);
    views.push((step) => { setReward(step); setReturn(step); });
    return root;
  }

  function componentPlot(track, xMax, color) {
    const box = el("div", { className: "component", "data-testid": "component-plot", "data-name": track.name });
    const width = 300;
    const root = svg("svg", { class: "plot", viewBox: `0 0 ${width} 120`, role: "img", "aria-label": track.name });
    const setCursor = drawPanel(root, width, 0, 120, track.values, xMax, color, `${track.name}  (${track.dtype})`, true);
    box.append(root);
    views.push((step) => {
      const v = setCursor(step);
      box.dataset.value = v === undefined ? "" : Object.is(v, -0) ? "-0" : String(v);
    });
    return box;
  }

  function textTrack(track) {
    const code = el("code");
    const box = el("div", { className: "component text", "data-testid": "text-track", "data-name": track.name },
      el("div", { className: "label", text: track.name }), code);
    views.push((step) => { code.textContent = step < track.values.length ? track.values[step] : "—"; });
    return box;
  }

  function trackSection(title, tracks, xMax, color) {
    const fragment = document.createDocumentFragment();
    const plotted = tracks.filter((t) => t.kind === "series" || t.kind === "text");
    const notes = tracks.filter((t) => t.kind === "note");
    if (!plotted.length && !notes.length) return fragment;
    fragment.append(el("h3", { text: title }));
    for (const note of notes) fragment.append(el("p", { className: "note", text: note.text }));
    if (plotted.length) {
      const grid = el("div", { className: "grid" });
      for (const track of plotted) grid.append(track.kind === "series" ? componentPlot(track, xMax, color) : textTrack(track));
      fragment.append(grid);
    }
    return fragment;
  }

  // Frames: one Range request per frame (a few frames ahead are fetched along).
  const frameCache = new Map(); // frameKey(span) -> Uint8Array
  const zstdCache = new Map(); // "file:off" -> a compressed array's bytes, decompressed
  const frameKey = (span) => `${span.file}:${span.off}:${span.size}${span.zref ? `:${span.at}` : ""}`;

  async function ensureFrames(track, from, count) {
    const wanted = [];
    for (let t = from; t < Math.min(track.frames.length, from + count); t++) {
      const span = track.frames[t];
      if (!frameCache.has(frameKey(span))) wanted.push(span);
    }
    if (!wanted.length) return;
    const fetch = [];
    const seen = new Set();
    for (const span of wanted) {
      const key = `${span.file}:${span.off}`;
      if (span.zref && (zstdCache.has(key) || seen.has(key))) continue;
      seen.add(key);
      fetch.push(span);
    }
    const got = await fetchSpans(fetch);
    const hasher = fetch.some((span) => span.zref) ? await zstdHasher() : null;
    for (const span of wanted) {
      let pixels;
      if (span.zref) {
        const key = `${span.file}:${span.off}`;
        if (!zstdCache.has(key)) {
          const stored = got.get(span);
          const { buffer } = rawBytes(stored.buffer, stored.offset, span.zref, hasher);
          zstdCache.set(key, new Uint8Array(buffer));
          while (zstdCache.size > ZSTD_CACHE) zstdCache.delete(zstdCache.keys().next().value);
        }
        pixels = zstdCache.get(key).subarray(span.at, span.at + span.len);
      } else {
        const { buffer, offset } = got.get(span);
        pixels = new Uint8Array(buffer, offset, span.size);
      }
      frameCache.set(frameKey(span), pixels);
    }
    while (frameCache.size > FRAME_CACHE) frameCache.delete(frameCache.keys().next().value);
  }

  function frameView(track) {
    const scale = Math.max(1, Math.min(12, Math.floor(Math.min(360 / track.w, 280 / track.h))));
    const canvas = el("canvas", {
      className: "frame-canvas",
      width: track.w,
      height: track.h,
      "data-testid": "frame-canvas",
      "data-name": track.name,
      "data-source": track.rendered ? "render" : "observation",
      "aria-label": `${track.rendered ? "rendered" : track.name} frame`,
    });
    canvas.style.width = `${track.w * scale}px`;
    const ctx = canvas.getContext("2d", { willReadFrequently: true });
    const image = ctx.createImageData(track.w, track.h);
    const what = track.name === "render" && track.rendered ? "rendered frame" : track.name;
    const stack = track.stack ? ` (newest of a stack of ${track.stack})` : "";
    const caption = el("figcaption", { text: `${what} · ${track.h}×${track.w}${track.c > 1 ? `×${track.c}` : ""} uint8${stack}${track.c === 4 ? " (alpha not shown)" : ""}` });
    const figure = el("figure", { className: "frame" }, caption, canvas);
    let wanted = -1;
    const draw = (t, pixels) => {
      const rgba = image.data;
      const n = track.w * track.h;
      const c = track.c;
      for (let i = 0; i < n; i++) {
        const src = i * c;
        const dst = i * 4;
        if (c >= 3) {
          rgba[dst] = pixels[src];
          rgba[dst + 1] = pixels[src + 1];
          rgba[dst + 2] = pixels[src + 2];
        } else {
          rgba[dst] = rgba[dst + 1] = rgba[dst + 2] = pixels[src];
        }
        rgba[dst + 3] = 255;
      }
      ctx.putImageData(image, 0, 0);
      canvas.dataset.step = String(t);
    };
    views.push((step) => {
      const t = Math.min(step, track.frames.length - 1);
      if (t < 0) return;
      wanted = t;
      const span = track.frames[t];
      const cached = frameCache.get(frameKey(span));
      if (cached) {
        draw(t, cached);
        ensureFrames(track, t + 1, state.playing ? 24 : 4).catch(() => {});
        return;
      }
      ensureFrames(track, t, state.playing ? 24 : 4).then(() => {
        if (wanted !== t) return;
        const pixels = frameCache.get(frameKey(span));
        if (pixels) draw(t, pixels);
      }).catch((err) => {
        setError(`frame:${span.file}`, describe(err));
        renderErrors();
      });
    });
    return figure;
  }

  function renderDetail() {
    const d = state.detail;
    const ep = d.episode;
    views = [];
    const detail = $("detail");
    const end = ep.inProgress ? "still being recorded" : ep.terminated ? "terminated" : ep.truncated ? "truncated"
      : ep.version === "1" ? "not recorded (version 1 file)" : "cut by a reset or close";
    const facts = el("p", { className: "facts" });
    const fact = (label, value) => {
      facts.append(`${label} `, el("b", { text: value }), "   ");
    };
    fact("writer", ep.writer);
    if (ep.envId) fact("env", ep.envId);
    fact("steps", String(ep.length));
    fact("return", fmt(ep.return));
    fact("end", end);
    for (const [key, spec] of Object.entries(EPISODE_KEYS)) {
      if (spec.label && ep[key] !== spec.missing) fact(spec.label, spec.text(ep[key]));
    }
    if (ep.parts.length > 1) fact("parts", String(ep.parts.length));

    const play = el("button", { type: "button", id: "play", "aria-label": "play", text: "▶ play" });
    play.addEventListener("click", () => togglePlay());
    const slider = el("input", {
      type: "range", min: 0, max: d.steps, step: 1, value: 0,
      id: "step-slider", "data-testid": "step-slider", "aria-label": "step",
    });
    slider.addEventListener("input", () => {
      pause();
      setStep(Number(slider.value));
    });
    const label = el("span", { className: "step-label", id: "step-label" });
    // Rendered frames play at the env's own rate (its metadata["render_fps"]) until a speed is picked.
    if (!state.fpsChosen) state.fps = d.rendered.length && ep.renderFps ? ep.renderFps : 15;
    const speed = el("select", { id: "fps", "data-testid": "fps", "aria-label": "frames per second" });
    const rates = [2, 5, 10, 15, 30, 60];
    if (!rates.includes(state.fps)) rates.push(state.fps);
    for (const fps of rates.sort((a, b) => a - b)) speed.append(el("option", { value: fps, text: `${fmt(fps)} fps`, selected: fps === state.fps }));
    speed.addEventListener("change", () => {
      state.fps = Number(speed.value);
      state.fpsChosen = true;
      if (state.playing) { pause(); togglePlay(); }
    });
    const player = el("div", { className: "player" }, play, slider, label, speed);

    // Rendered frames first (what the episode looked like), then image observations.
    const images = [...d.rendered.map((t) => ({ ...t, rendered: true })), ...d.observations.filter((t) => t.kind === "image")];
    const frames = el("div", { className: "frames", "data-testid": "frames" });
    for (const track of images) frames.append(frameView(track));

    const xMax = Math.max(1, d.steps);
    const plots = el("div", { className: "plots" },
      el("h3", { text: "Reward and return" }),
      rewardPlot(d),
      trackSection("Observations", d.observations, xMax, "var(--obs)"),
      trackSection("Actions", d.actions, xMax, "var(--action)"));
    const children = [
      el("h2", { text: `Episode ${ep.index}` }),
      facts,
      player,
      images.length ? el("div", { className: "detail-body" }, frames, plots) : plots,
    ];
    detail.replaceChildren(...children.filter(Boolean));
    detail.dataset.episode = String(ep.index);
    views.push((step) => {
      slider.value = String(step);
      const reward = step > 0 && step <= d.rewards.length ? ` · reward ${fmt(d.rewards[step - 1])}` : "";
      label.textContent = `step ${step} / ${d.steps}${reward}`;
      detail.dataset.step = String(step);
    });
  }

  function setStep(step) {
    const d = state.detail;
    if (!d) return;
    state.step = Math.max(0, Math.min(d.steps, Number.isFinite(step) ? step : 0));
    for (const view of views) view(state.step);
  }

  function pause() {
    state.playing = false;
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
    const button = $("play");
    if (button) {
      button.textContent = "▶ play";
      button.setAttribute("aria-label", "play");
    }
  }

  function togglePlay() {
    const d = state.detail;
    if (!d) return;
    if (state.playing) {
      pause();
      return;
    }
    if (state.step >= d.steps) setStep(0);
    state.playing = true;
    const button = $("play");
    if (button) {
      button.textContent = "❚❚ pause";
      button.setAttribute("aria-label", "pause");
    }
    state.timer = setInterval(() => {
      if (!state.detail || state.step >= state.detail.steps) {
        pause();
        return;
      }
      setStep(state.step + 1);
    }, 1000 / state.fps);
  }

  // ---------------------------------------------------------------------------------------
  // Events
  // ---------------------------------------------------------------------------------------

  function moveSelection(delta) {
    const order = sortedEpisodes();
    if (!order.length) return;
    const at = order.findIndex((e) => e.key === state.selectedKey);
    const next = order[Math.max(0, Math.min(order.length - 1, at + delta))];
    if (next) select(next.key);
  }

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (target instanceof HTMLSelectElement || (target instanceof HTMLInputElement && target.type !== "range")) return;
    if (target instanceof HTMLButtonElement && (event.key === " " || event.key === "Enter")) return; // native click
    const handled = {
      ArrowLeft: () => { pause(); setStep(state.step - 1); },
      ArrowRight: () => { pause(); setStep(state.step + 1); },
      " ": () => togglePlay(),
      Home: () => { pause(); setStep(0); },
      End: () => { pause(); setStep(state.detail ? state.detail.steps : 0); },
      ArrowUp: () => moveSelection(-1),
      ArrowDown: () => moveSelection(1),
    }[event.key];
    if (!handled) return;
    event.preventDefault();
    handled();
  });

  document.addEventListener("DOMContentLoaded", () => {
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.addEventListener("click", () => {
        const key = th.dataset.sort;
        state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
        renderTable();
      });
    }
    pollLoop();
  });

  // A small read-only handle for debugging from the console.
  window.gymRecordingViewer = { state, decodeArray, halfToFloat, parseManifest };
})();
