// md.js renders the Markdown a model writes (fenced code blocks, headings,
// lists, quotes, paragraphs; inline code, bold, italics, links) as DOM
// nodes. It never parses HTML: every piece of text becomes a text node, so
// a reply cannot inject markup or script, and a link keeps only an http(s)
// or mailto address. Replies stream in, so the text may end mid-block: an
// unclosed code fence runs to the end, and stray markers stay as text.

// render replaces el's children with the rendered text.
export function render(el, text) {
  const frag = document.createDocumentFragment();
  for (const block of blocks(text)) frag.append(block);
  el.replaceChildren(frag);
}

function node(tag, className, children = []) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  e.append(...children);
  return e;
}

const fence = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
const heading = /^(#{1,6})\s+(.*)$/;
const bullet = /^(\s*)[-*+]\s+(.*)$/;
const numbered = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const quote = /^>\s?(.*)$/;
const rule = /^\s*([-*_])(\s*\1){2,}\s*$/;

// blocks splits text into block elements.
function blocks(text) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let para = [];
  const endPara = () => {
    if (para.length) out.push(node("p", "", inline(para.join("\n"))));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if ((m = fence.exec(line))) {
      endPara();
      const code = [];
      for (i++; i < lines.length && !(fence.test(lines[i]) && lines[i].trim().startsWith(m[1])); i++) code.push(lines[i]);
      out.push(codeBlock(code.join("\n"), m[2]));
    } else if ((m = heading.exec(line))) {
      endPara();
      out.push(node(`h${Math.min(6, m[1].length + 2)}`, "", inline(m[2])));
    } else if (rule.test(line)) {
      endPara();
      out.push(node("hr"));
    } else if (bullet.test(line) || numbered.test(line)) {
      endPara();
      const items = [];
      const ordered = !bullet.test(line);
      const start = ordered ? parseInt(numbered.exec(line)[2], 10) : 1;
      for (; i < lines.length; i++) {
        const b = ordered ? numbered.exec(lines[i]) : bullet.exec(lines[i]);
        if (b) items.push(b[ordered ? 3 : 2]);
        else if (items.length && /^\s{2,}\S/.test(lines[i])) items[items.length - 1] += "\n" + lines[i].trim();
        else break;
      }
      i--;
      const list = node(ordered ? "ol" : "ul", "", items.map((t) => node("li", "", inline(t))));
      if (ordered && start !== 1) list.start = start;
      out.push(list);
    } else if (quote.test(line)) {
      endPara();
      const q = [];
      for (; i < lines.length && quote.test(lines[i]); i++) q.push(quote.exec(lines[i])[1]);
      i--;
      out.push(node("blockquote", "", blocks(q.join("\n"))));
    } else if (line.trim() === "") {
      endPara();
    } else {
      para.push(line);
    }
  }
  endPara();
  return out;
}

function codeBlock(code, lang) {
  const c = node("code", lang ? `language-${lang}` : "", [code]);
  const pre = node("pre", "code", [c]);
  if (lang) pre.dataset.lang = lang;
  return pre;
}

// inline renders a span of text: `code`, **bold**, *italic* or _italic_,
// [text](url), and line breaks.
function inline(text) {
  const out = [];
  const re = /`([^`\n]+)`|\*\*([^*\n]+?)\*\*|__([^_\n]+?)__|\*([^*\s][^*\n]*?)\*|(?<![\w])_([^_\s][^_\n]*?)_(?![\w])|\[([^\]\n]+)\]\(([^)\s]+)\)|\n/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] !== undefined) out.push(node("code", "", [m[1]]));
    else if (m[2] !== undefined || m[3] !== undefined) out.push(node("strong", "", inline(m[2] ?? m[3])));
    else if (m[4] !== undefined || m[5] !== undefined) out.push(node("em", "", inline(m[4] ?? m[5])));
    else if (m[6] !== undefined) out.push(link(m[6], m[7]));
    else out.push(document.createElement("br"));
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function link(text, href) {
  let url = null;
  try {
    url = new URL(href);
  } catch {}
  if (!url || !["http:", "https:", "mailto:"].includes(url.protocol)) return `[${text}](${href})`;
  const a = node("a", "", inline(text));
  a.href = url.href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  return a;
}
